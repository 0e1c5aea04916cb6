"""Building blocks for QoS manager tests: pods, a metric cache with samples, a context."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from koordapi import keys
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordlet.metriccache import MetricCache, Sample
from koordlet.qosmanager.audit import AuditTrail
from koordlet.qosmanager.framework import Context, NodeResources
from koordlet.states.pods import KnownPod
from koordlet.states.topology import Processor, Topology
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest, PodSpecFacts
from runtimehooks.rules import KernelFeatures, NodeState, Rules

NOW = 1_000_000.0

QOS_PARENT = {
    "Guaranteed": "kubepods",
    "Burstable": "kubepods/burstable",
    "BestEffort": "kubepods/besteffort",
}


def known_pod(
    name: str,
    *,
    qos: str | None = None,
    kube: str = "Burstable",
    uid: str | None = None,
    containers: Mapping[str, ContainerResources] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    batch: Mapping[str, Mapping[str, Any]] | None = None,
    spec: PodSpecFacts | None = None,
) -> KnownPod:
    """A pod in the kubelet's cgroupfs layout with containers named as given.

    ``batch`` sets the extended-resource-spec annotation:
    {"main": {"requests": {"kubernetes.io/batch-memory": "1Gi"}, "limits": {...}}}.
    """
    uid = uid or f"uid-{name}"
    all_labels = dict(labels or {})
    if qos is not None:
        all_labels[keys.LABEL_QOS_CLASS] = qos
    notes = dict(annotations or {})
    if batch is not None:
        notes[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps({"containers": batch})
    pod_dir = f"{QOS_PARENT[kube]}/pod{uid}"
    request = PodRequest(
        uid=uid,
        name=name,
        namespace="default",
        labels=all_labels,
        annotations=notes,
        cgroup_dir=pod_dir,
        spec=spec,
    )
    known = KnownPod(request)
    for index, (cname, resources) in enumerate(
        (containers or {"main": ContainerResources()}).items()
    ):
        cid = f"{name}-c{index}"
        known.containers[cid] = ContainerRequest(
            pod=request, name=cname, id=cid, cgroup_dir=f"{pod_dir}/{cid}", resources=resources
        )
    return known


def topology(cpus: int = 8, memory: int = 16 << 30) -> Topology:
    """One NUMA node, one socket, one thread per core."""
    ids = frozenset(range(cpus))
    return Topology(
        ids, {0: ids}, {0: 0}, memory, tuple(Processor(c, c, 0, 0) for c in range(cpus))
    )


def rules(
    spec: Mapping[str, Any] | None = None,
    gates: str = "",
    node: NodeState | None = None,
    kernel: KernelFeatures | None = None,
) -> Rules:
    return Rules(
        slo=NodeSLOSpec.parse(spec or {}),
        gates=FeatureGates.parse(gates),
        node=node or NodeState(),
        kernel=kernel or KernelFeatures(),
    )


def samples(
    cache: MetricCache, values: Mapping[str, float], ts: float = NOW, **labels: str
) -> None:
    """Store one sample per metric name with the given labels."""
    cache.append(Sample(name, dict(labels), ts, v) for name, v in values.items())


def context(
    *,
    pods: list[KnownPod] | None = None,
    spec: Mapping[str, Any] | None = None,
    cache: MetricCache | None = None,
    topo: Topology | None = None,
    allocatable: Mapping[str, int] | None = None,
    rules_: Rules | None = None,
    now: float = NOW,
    audit: AuditTrail | None = None,
) -> Context:
    topo = topo or topology()
    return Context(
        rules=rules_ or rules(spec),
        pods=pods or [],
        topology=topo,
        node=NodeResources(len(topo.cpus) * 1000, topo.memory_bytes, dict(allocatable or {})),
        cache=cache or MetricCache(),
        audit=audit or AuditTrail(),
        now=now,
        max_age=2.0,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class Backend:
    """An eviction backend that records (pod key, message) and refuses the pods named (by
    name or namespace/name) in ``refuse``."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str]] = []

    def __call__(self, known: KnownPod, message: str) -> tuple[bool, str]:
        self.calls.append((known.request.key, message))
        if known.request.name in self.refuse or known.request.key in self.refuse:
            return False, "runtime said no"
        return True, "containers stopped"

    @property
    def victims(self) -> list[str]:
        return [key.split("/", 1)[1] for key, _ in self.calls]
