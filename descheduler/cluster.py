"""The cluster as LowNodeLoad sees it: PodInfo, NodeMetricData and NodeInfo, and the
adapters that build them from Kubernetes JSON (pod_info, raw_allocatable, node_metric_data,
node_info) through koordapi's pod and NodeMetric models.

It follows what Koordinator v1.8.0 reads of pods and nodes: the pod facts that
pkg/descheduler/evictions/evictions.go filters on and pkg/descheduler/utils/sorter/pod.go
orders by (GetEvictionCost, Kubernetes' GetDeletionCostFromPodAnnotations), what NodeFit reads
(requests, tolerations, required node affinity, taints, status.allocatable: see
descheduler.nodefit), the raw allocatable (GetNodeRawAllocatableFromNode) and the NodeMetric
usage that pkg/descheduler/framework/plugins/loadaware/low_node_load.go reads.

Amounts are integers: ``cpu`` in milli-cores, every other resource in whole units (bytes for
memory), ``pods`` a count.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from descheduler.nodefit import (
    NodeSelectorTerm,
    Taint,
    Toleration,
    node_taints,
    pod_requests,
    pod_tolerations,
    required_node_affinity,
)
from koordapi import keys, qos
from koordapi.errors import ModelError
from koordapi.nodemetric import MetricError, read_node_metric
from koordapi.pod import (
    kube_qos,
    priority_class_with_default,
    qos_class_with_default,
    spec_priority,
)
from koordapi.quantity import resource_value

ANNOTATION_MIRROR_POD = "kubernetes.io/config.mirror"
ANNOTATION_CONFIG_SOURCE = "kubernetes.io/config.source"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"

_INT32_MAX = 2**31 - 1
_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True)
class PodInfo:
    """What LowNodeLoad reads of one pod. The defaults describe an ordinary Deployment pod:
    owned by a ReplicaSet, Burstable, LS, koord-prod. ``pod_info`` builds one from JSON."""

    namespace: str
    name: str
    priority_class: qos.PriorityClass = qos.PROD  # with Koordinator's default
    priority: int | None = None  # spec.priority
    qos_class: qos.QoSClass = qos.QoSClass.LS  # with Koordinator's default
    kube_qos: qos.KubeQoS = qos.KubeQoS.BURSTABLE
    owner_kinds: tuple[str, ...] = ("ReplicaSet",)
    labels: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)  # spec.nodeSelector
    mirror: bool = False
    static: bool = False
    terminating: bool = False
    failed: bool = False  # status.phase Failed
    local_storage: bool = False  # an emptyDir or hostPath volume
    pvc: bool = False
    deletion_cost: int = 0
    eviction_cost: int = 0
    created: float | None = None  # creationTimestamp, seconds since the epoch
    # what NodeFit reads: the requests of every resource named (PodRequests), the
    # tolerations, and the required node affinity's terms (None: the pod requires none)
    requests: Mapping[str, int] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def prod(self) -> bool:
        return self.priority_class.name == qos.PROD.name


@dataclass(frozen=True)
class NodeMetricData:
    """The parts of a NodeMetric the plugin reads; usage by resource name."""

    update_time: float | None  # None: never reported, which counts as expired
    system_usage: Mapping[str, int] = field(default_factory=dict)
    pod_usage: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # by ns/name


@dataclass(frozen=True)
class NodeInfo:
    """One node: its raw allocatable, the pods assigned to it (those that hold resources: not
    Succeeded, not Failed) and its NodeMetric; its taints and status.allocatable for NodeFit."""

    name: str
    allocatable: Mapping[str, int]
    pods: tuple[PodInfo, ...] = ()
    metric: NodeMetricData | None = None  # None: no NodeMetric, or one without nodeMetric
    labels: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    note: str = ""  # why a NodeMetric was ignored
    taints: tuple[Taint, ...] = ()
    # status.allocatable, which NodeFit's requests are held against (the raw allocatable
    # above is what usage percentages are of); None: the same as ``allocatable``
    status_allocatable: Mapping[str, int] | None = None

    @cached_property
    def requested(self) -> Mapping[str, int]:
        """What the node's pods request, by resource, and their number under "pods"
        (NodeUtilization)."""
        total: dict[str, int] = {}
        for pod in self.pods:
            for name, amount in pod.requests.items():
                if name != "pods":
                    total[name] = total.get(name, 0) + amount
        total["pods"] = len(self.pods)
        return total


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


_COST = re.compile(r"-?[0-9]+\Z")


def _cost(annotations: Mapping[str, Any], key: str) -> int:
    """An int32 cost annotation; 0 when absent or malformed ("+1" and "007" are malformed),
    as Koordinator's GetEvictionCost and Kubernetes' GetDeletionCostFromPodAnnotations."""
    text = annotations.get(key)
    if not isinstance(text, str) or not _COST.match(text):
        return 0
    digits = text.lstrip("-")
    if len(digits) > 1 and digits[0] == "0" and not text.startswith("-"):
        return 0
    amount = int(text)
    return amount if -(2**31) <= amount <= _INT32_MAX else 0


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """A pod's JSON as LowNodeLoad reads it, through koordapi's pod model (priority and QoS
    classes with Koordinator's defaults). Raises ModelError for unreadable resources."""
    metadata = pod.get("metadata") or _EMPTY
    spec = pod.get("spec") or _EMPTY
    annotations = metadata.get("annotations") or _EMPTY
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, Mapping)]
    source = annotations.get(ANNOTATION_CONFIG_SOURCE)
    return PodInfo(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        priority_class=priority_class_with_default(pod),
        priority=spec_priority(pod),
        qos_class=qos_class_with_default(pod),
        kube_qos=kube_qos(pod),
        owner_kinds=tuple(
            str(ref.get("kind", ""))
            for ref in metadata.get("ownerReferences") or ()
            if isinstance(ref, Mapping)
        ),
        labels=dict(metadata.get("labels") or {}),
        node_selector=dict(spec.get("nodeSelector") or {}),
        mirror=ANNOTATION_MIRROR_POD in annotations,
        static=source is not None and source != "api",
        terminating=metadata.get("deletionTimestamp") is not None,
        failed=(pod.get("status") or _EMPTY).get("phase") == "Failed",
        local_storage=any("hostPath" in v or "emptyDir" in v for v in volumes),
        pvc=any("persistentVolumeClaim" in v for v in volumes),
        deletion_cost=_cost(annotations, ANNOTATION_DELETION_COST),
        eviction_cost=_cost(annotations, ANNOTATION_EVICTION_COST),
        created=_parse_time(metadata.get("creationTimestamp")),
        requests=pod_requests(spec),
        tolerations=pod_tolerations(spec),
        node_affinity=required_node_affinity(spec),
    )


def _resources(resource_list: Any) -> dict[str, int] | None:
    """A ResourceList as integers; None when it is not an object or an amount is malformed."""
    if not isinstance(resource_list, Mapping):
        return None
    try:
        return {str(name): resource_value(str(name), q) for name, q in resource_list.items()}
    except ModelError:
        return None


def raw_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """The node's raw (unamplified) allocatable: the whole raw-allocatable annotation when it
    parses, else status.allocatable (Koordinator's GetNodeRawAllocatableFromNode). Amounts of
    status.allocatable that do not parse count as absent."""
    annotations = (node.get("metadata") or _EMPTY).get("annotations") or _EMPTY
    text = annotations.get(keys.ANNOTATION_NODE_RAW_ALLOCATABLE)
    if isinstance(text, str):
        try:
            raw = _resources(json.loads(text))
        except ValueError:
            raw = None
        if raw is not None:
            return raw
    return status_allocatable(node)


def status_allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    """status.allocatable as integers; amounts that do not parse count as absent."""
    allocatable = (node.get("status") or _EMPTY).get("allocatable") or _EMPTY
    result = {}
    for name, amount in allocatable.items():
        try:
            result[str(name)] = resource_value(str(name), amount)
        except ModelError:
            continue
    return result


def holds_resources(pod: Mapping[str, Any]) -> bool:
    """Not Succeeded and not Failed: a pod ListPodsOnANode counts on its node."""
    return (pod.get("status") or _EMPTY).get("phase") not in ("Succeeded", "Failed")


def node_metric_data(node_metric: Mapping[str, Any]) -> NodeMetricData | None:
    """A NodeMetric object through koordapi's reader; None when it has no status.nodeMetric
    (the plugin skips such nodes). Raises MetricError for malformed quantities. Only cpu and
    memory are reported by koordlet, so only they are read; a system usage missing either
    counts as zero, as a missing quantity does upstream."""
    view = read_node_metric(node_metric)
    if (node_metric.get("status") or _EMPTY).get("nodeMetric") is None:
        return None
    system: dict[str, int] = {}
    if view.system_usage is not None:
        system = {"cpu": view.system_usage[0], "memory": view.system_usage[1]}
    pods = {}
    for key, (_, cpu, memory) in view.pods.items():
        usage = {}
        if cpu is not None:
            usage["cpu"] = cpu
        if memory is not None:
            usage["memory"] = memory
        pods[key] = usage
    return NodeMetricData(view.update_time, system, pods)


def node_info(
    node: Mapping[str, Any],
    node_metric: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
) -> NodeInfo:
    """A node, its NodeMetric (or None) and the pods assigned to it, from their JSON. Pods
    that have Succeeded or Failed are left out (they hold nothing, as ListPodsOnANode leaves
    them out). A NodeMetric that does not parse counts as none, with the reason in
    NodeInfo.note."""
    metadata = node.get("metadata") or _EMPTY
    metric, note = None, ""
    if node_metric is not None:
        try:
            metric = node_metric_data(node_metric)
        except MetricError as err:
            note = f"NodeMetric ignored: {err}"
    return NodeInfo(
        name=str(metadata.get("name", "")),
        allocatable=raw_allocatable(node),
        pods=tuple(pod_info(pod) for pod in pods if holds_resources(pod)),
        metric=metric,
        labels=dict(metadata.get("labels") or {}),
        unschedulable=(node.get("spec") or _EMPTY).get("unschedulable") is True,
        note=note,
        taints=node_taints(node),
        status_allocatable=status_allocatable(node),
    )
