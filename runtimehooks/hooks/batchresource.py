"""BatchResource: BE pods' CPU shares, CFS quota and memory limit from batch resources.

A BE pod asks for ``kubernetes.io/batch-cpu`` (milli-cores) and ``kubernetes.io/batch-memory``
(bytes) through the ``node.koordinator.sh/extended-resource-spec`` annotation; the kubelet knows
nothing of them, so these hooks turn them into cgroup values at pod and container level. The
quota is divided by the node's CPU normalization ratio when it is above 1, and dropped (-1)
when the NodeSLO leaves BE CPU to the besteffort directory (threshold on, policy cfsQuota).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal

from koordapi import annotation, features, keys
from koordapi.annotation import ExtendedResources
from koordapi.cgroup import UNLIMITED, milli_cpu_to_quota, milli_cpu_to_shares
from koordapi.qos import QoSClass
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import RESOURCE_STAGES, ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules


def extended_resources(pod: PodRequest) -> dict[str, ExtendedResources] | None:
    """Container name → batch resources, for BE pods that have the annotation."""
    if pod.qos is not QoSClass.BE:
        return None
    text = pod.annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    return None if text is None else annotation.parse_extended_resource_spec(text)


def _amount(values: Mapping[str, Decimal], name: str) -> int:
    value = values.get(name)
    return 0 if value is None else math.ceil(value)


def _scaled_quota(quota: int, rules: Rules) -> int:
    if not rules.slo.batch_cfs_quota_enabled():
        return UNLIMITED
    ratio = rules.node.cpu_normalization_ratio
    if ratio is not None and ratio > 1.0 and quota > 0:
        return math.ceil(quota / ratio)
    return quota


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    spec = extended_resources(req)
    if not spec:
        return None
    requests = sum(v for r in spec.values() if (v := _amount(r.requests, keys.BATCH_CPU)) > 0)
    cpu_limits = [_amount(r.limits, keys.BATCH_CPU) for r in spec.values()]
    memory_limits = [_amount(r.limits, keys.BATCH_MEMORY) for r in spec.values()]
    quota = UNLIMITED if any(v <= 0 for v in cpu_limits) else milli_cpu_to_quota(sum(cpu_limits))
    memory = UNLIMITED if any(v <= 0 for v in memory_limits) else sum(memory_limits)
    return PodPatch(
        cpu_shares=milli_cpu_to_shares(requests),
        cpu_cfs_quota_us=_scaled_quota(quota, rules),
        memory_limit=memory,
    )


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    spec = extended_resources(req.pod)
    if not spec or req.name not in spec:
        return None
    resources = spec[req.name]
    cpu_limit = _amount(resources.limits, keys.BATCH_CPU)
    memory_limit = _amount(resources.limits, keys.BATCH_MEMORY)
    return ContainerPatch(
        cpu_shares=milli_cpu_to_shares(_amount(resources.requests, keys.BATCH_CPU)),
        cpu_cfs_quota_us=_scaled_quota(milli_cpu_to_quota(cpu_limit), rules),
        memory_limit=memory_limit if memory_limit > 0 else UNLIMITED,
    )


HOOK = Hook(
    name="BatchResource",
    gate=features.BATCH_RESOURCE,
    stages=RESOURCE_STAGES,
    pod=pod,
    container=container,
)
