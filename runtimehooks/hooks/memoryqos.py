"""MemoryQOS: memory.min / memory.low / memory.high per container and pod, at creation.

Koordinator computes these only in its periodic CgroupReconcile; we also deliver them with the
container (NRI's ``unified`` map on cgroup v2; on cgroup v1 only Anolis kernels have the files,
and koordlet writes them). The reconciler keeps them true afterwards.

Formulas (Koordinator's CgroupReconcile): min = request * minLimitPercent / 100; low = request *
lowLimitPercent / 100, raised to min when it is set (above 0); high = "max" when
throttlingPercent is 0, else floor((request + (limit - request) * throttling / 100) / page) *
page, at least min, where the limit is the container's memory limit (batch-memory for BE pods)
or the node's allocatable memory. The request is the batch-memory request for pods labelled
BE, and the spec's memory request for the others (Koordinator's rule). The runtime is not told
the spec's requests: in cluster mode they come from the kubelet's pod list (so a pod created
before the next list gets 0 at creation, and the reconciler sets its values from the request
within one pass after the list); standalone koordlet never knows them and uses 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from koordapi import annotation, features, keys
from koordapi.nodeslo import default_spec
from koordapi.qos import KubeQoS, QoSClass
from runtimehooks.hooks.batchresource import extended_resources
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import RESOURCE_STAGES, ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules

PAGE_SIZE = 4096
MAX = -1  # memory.high "max"


def config(pod: PodRequest, rules: Rules) -> Mapping[str, int] | None:
    """The pod's effective MemoryQOS fields, or None when memory QoS is off for it."""
    qos = pod.qos_with_default
    if qos is QoSClass.LSE:
        qos = QoSClass.LSR
    node_cfg = rules.slo.memory_qos(qos)
    text = pod.annotations.get(keys.ANNOTATION_MEMORY_QOS)
    if text is None:
        return node_cfg.values if node_cfg.enable else None
    pod_cfg = annotation.parse_pod_memory_qos(text)
    if pod_cfg.policy == "none":
        return None
    if pod_cfg.policy == "auto":
        defaults = default_spec()["resourceQOSStrategy"]
        section = {
            QoSClass.LSR: "lsrClass",
            QoSClass.LS: "lsClass",
            QoSClass.BE: "beClass",
            QoSClass.SYSTEM: "systemClass",
        }[qos]
        base = {k: v for k, v in defaults[section]["memoryQOS"].items() if k != "enable"}
    elif node_cfg.enable:
        base = dict(node_cfg.values)
    else:
        return None
    return {**base, **pod_cfg.fields}


def memory_request(pod: PodRequest, container_name: str | None) -> int:
    """The memory request of one container (or the pod: Kubernetes' effective request), as
    Koordinator takes it: batch-memory for pods labelled BE, the spec's memory request for the
    others where the spec is known (cluster mode), else 0 (see the module docstring)."""
    if pod.qos is not QoSClass.BE:
        if pod.spec is None:
            return 0
        if container_name is None:
            return pod.spec.memory_request
        return pod.spec.container_memory_requests.get(container_name, 0)
    spec = extended_resources(pod) or {}
    names = spec.keys() if container_name is None else [container_name]
    total = 0
    for name in names:
        res = spec.get(name)
        if res is not None and res.requests.get(keys.BATCH_MEMORY) is not None:
            total += math.ceil(res.requests[keys.BATCH_MEMORY])
    return total


def memory_limit(req: ContainerRequest, rules: Rules) -> int:
    """The container's memory limit (batch-memory for BE pods), else the node's allocatable."""
    if req.pod.qos is QoSClass.BE:
        res = (extended_resources(req.pod) or {}).get(req.name)
        batch = res.limits.get(keys.BATCH_MEMORY) if res is not None else None
        limit = 0 if batch is None else math.ceil(batch)
    else:
        limit = req.resources.memory_limit or 0
    return limit if limit > 0 else rules.node.allocatable_memory


def _low(request: int, cfg: Mapping[str, int], memory_min: int) -> int:
    """memory.low; Koordinator raises a set (non-zero) low to memory.min, and keeps 0 as 0."""
    low = request * cfg.get("lowLimitPercent", 0) // 100
    return memory_min if 0 < low < memory_min else low


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    cfg = config(req.pod, rules)
    return None if cfg is None else container_values(req, rules, cfg)


def container_values(req: ContainerRequest, rules: Rules, cfg: Mapping[str, int]) -> ContainerPatch:
    """min, low and high of one container under ``cfg`` (CgroupReconcile calls this too)."""
    request = memory_request(req.pod, req.name)
    memory_min = request * cfg.get("minLimitPercent", 0) // 100
    memory_low = _low(request, cfg, memory_min)
    throttling = cfg.get("throttlingPercent", 0)
    if throttling == 0:
        memory_high = MAX
    else:
        limit = memory_limit(req, rules)
        high = request + (limit - request) * throttling // 100
        memory_high = max(high // PAGE_SIZE * PAGE_SIZE, memory_min)
    return ContainerPatch(memory_min=memory_min, memory_low=memory_low, memory_high=memory_high)


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    cfg = config(req, rules)
    return None if cfg is None else pod_values(req, cfg)


def pod_values(req: PodRequest, cfg: Mapping[str, int]) -> PodPatch:
    """min and low of the pod under ``cfg`` (CgroupReconcile calls this too)."""
    request = memory_request(req, None)
    memory_min = request * cfg.get("minLimitPercent", 0) // 100
    return PodPatch(memory_min=memory_min, memory_low=_low(request, cfg, memory_min))


def kube_qos_sums(pod_mins: Mapping[KubeQoS, int]) -> dict[KubeQoS, int]:
    """QoS directories hold the sum of their pods; the kubepods root holds all three."""
    sums = dict(pod_mins)
    sums[KubeQoS.GUARANTEED] = sum(pod_mins.values())
    return sums


HOOK = Hook(
    name="MemoryQOS",
    gate=features.MEMORY_QOS,
    stages=RESOURCE_STAGES,
    pod=pod,
    container=container,
)
