"""CPUNormalization: scale LS pods' CFS quota by the node's CPU normalization ratio.

On a node whose CPUs are faster than the cluster's reference (ratio > 1), a CPU limit buys
less time: quota' = ceil(quota / ratio). It applies to "cpu-share" pods (LS, or no QoS label
without pinned CPUs) and needs the quota the kubelet asked for.
"""

from __future__ import annotations

import math

from koordapi import annotation, features, keys
from koordapi.qos import QoSClass
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import RESOURCE_STAGES, ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules


def applies(pod: PodRequest) -> bool:
    """LS pods, and pods without a QoS label unless they have pinned CPUs."""
    if pod.qos is QoSClass.LS:
        return True
    if pod.qos is not QoSClass.NONE:
        return False
    text = pod.annotations.get(keys.ANNOTATION_RESOURCE_STATUS)
    return text is None or not annotation.parse_resource_status(text).cpuset


def scaled(quota: int | None, rules: Rules) -> int | None:
    ratio = rules.node.cpu_normalization_ratio
    if quota is None or ratio is None or ratio < 0:
        return None  # no ratio, or -1: the rule is off and nothing is written
    return math.ceil(quota / ratio) if ratio > 1.0 and quota > 0 else quota


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    if not applies(req):
        return None
    quota = scaled(req.cpu_quota, rules)
    return None if quota is None else PodPatch(cpu_cfs_quota_us=quota)


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    if not applies(req.pod):
        return None
    quota = scaled(req.resources.cpu_quota, rules)
    return None if quota is None else ContainerPatch(cpu_cfs_quota_us=quota)


HOOK = Hook(
    name="CPUNormalization",
    gate=features.CPU_NORMALIZATION,
    stages=RESOURCE_STAGES,
    pod=pod,
    container=container,
)
