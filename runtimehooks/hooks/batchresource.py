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
from koordapi.cgroup import (
    MAX_CFS_QUOTA_US,
    MAX_INT64,
    MIN_MEMORY_LIMIT,
    UNLIMITED,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from koordapi.errors import AnnotationError
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


def _checked(quota: int, memory: int) -> tuple[int, int]:
    """(quota, memory limit) if the kernel can take them, else AnnotationError: the hook then
    fails alone (counted) and the container starts with the other hooks' values."""
    key = keys.ANNOTATION_EXTENDED_RESOURCE_SPEC
    problem = None
    if quota > MAX_CFS_QUOTA_US:
        problem = f"gives a CFS quota of {quota} µs, more than the kernel's {MAX_CFS_QUOTA_US}"
    elif memory > MAX_INT64:
        problem = f"memory limit of {memory} bytes is past int64"
    elif 0 < memory < MIN_MEMORY_LIMIT:
        problem = (
            f"memory limit of {memory} bytes is below {MIN_MEMORY_LIMIT >> 20} MiB: "
            "the container could not start"
        )
    if problem is not None:
        raise AnnotationError(key, f"batch resources: {problem}")
    return quota, memory


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
    quota, memory = _checked(quota, memory)
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
    quota = milli_cpu_to_quota(_amount(resources.limits, keys.BATCH_CPU))
    memory_limit = _amount(resources.limits, keys.BATCH_MEMORY)
    quota, memory_limit = _checked(quota, memory_limit if memory_limit > 0 else UNLIMITED)
    return ContainerPatch(
        cpu_shares=milli_cpu_to_shares(_amount(resources.requests, keys.BATCH_CPU)),
        cpu_cfs_quota_us=_scaled_quota(quota, rules),
        memory_limit=memory_limit,
    )


HOOK = Hook(
    name="BatchResource",
    gate=features.BATCH_RESOURCE,
    stages=RESOURCE_STAGES,
    pod=pod,
    container=container,
)
