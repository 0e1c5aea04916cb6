"""Resctrl: a pod's own LLC ways and memory bandwidth (Intel RDT / AMD QoS).

A pod with the ``node.koordinator.sh/resctrl`` annotation gets a resctrl group named
``koordlet-<pod uid>`` with its schemata (written when the pod starts, removed with it), and its
containers the matching RDT class. The L3 mask and MBA value follow Koordinator's arithmetic.
"""

from __future__ import annotations

import re

from koordapi import annotation, features, keys
from koordapi.errors import AnnotationError, ModelError
from runtimehooks.patch import ContainerPatch, PodPatch, ResctrlGroup
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, PodRequest, Stage
from runtimehooks.rules import KernelFeatures, Rules

_UID = re.compile(r"^[0-9a-fA-F-]{1,64}\Z")  # the group name becomes a directory name


def l3_mask(cbm_mask: int, start_percent: int, end_percent: int) -> str:
    """The cache-way bit mask for [start%, end%) of the ways, in hex (Koordinator's formula)."""
    if cbm_mask <= 0:
        raise ModelError("resctrl: no L3 cbm mask")
    ways = cbm_mask.bit_length()
    if cbm_mask != (1 << ways) - 1:
        raise ModelError(f"resctrl: cbm mask {cbm_mask:#x} is not contiguous")
    if not (0 <= start_percent < end_percent <= 100):
        raise ModelError(f"resctrl: range [{start_percent}, {end_percent}] is invalid")
    start_way = -(-ways * start_percent // 100)  # integer ceil: no float rounding
    end_way = -(-ways * end_percent // 100)
    return f"{(1 << end_way) - (1 << start_way):x}"


def mba_value(percent: int, vendor: str) -> int:
    """The MB schemata value: Intel rounds up to a multiple of 10; AMD uses 2048 for 100 %."""
    if not (0 < percent <= 100):
        raise ModelError(f"resctrl: MBA percent {percent} is outside (0, 100]")
    if vendor == "amd":
        return 2048 if percent == 100 else 160 * percent // 100
    return -(-percent // 10) * 10


def schemata(config: annotation.ResctrlConfig, kernel: KernelFeatures) -> tuple[str, ...]:
    lines = []
    ids = kernel.l3_cache_ids or (0,)
    if config.llc_range or config.llc_per_cache:
        parts = []
        for cache in ids:
            start, end = config.llc_per_cache.get(cache, config.llc_range or (0, 100))
            parts.append(f"{cache}={l3_mask(kernel.l3_cbm_mask, start, end)}")
        lines.append("L3:" + ";".join(parts))
    if config.mb_percent is not None or config.mb_per_cache:
        default = config.mb_percent or 100
        parts = [
            f"{cache}={mba_value(config.mb_per_cache.get(cache, default), kernel.mba_vendor)}"
            for cache in ids
        ]
        lines.append("MB:" + ";".join(parts))
    return tuple(lines)


def closid(pod: PodRequest) -> str | None:
    """The pod's group name, when it has the annotation; its uid must be a plain uid."""
    if keys.ANNOTATION_RESCTRL not in pod.annotations:
        return None
    if not _UID.match(pod.uid):
        raise AnnotationError(keys.ANNOTATION_RESCTRL, f"pod uid {pod.uid!r} cannot name a group")
    return keys.RESCTRL_GROUP_PREFIX + pod.uid


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    if not rules.kernel.resctrl:
        return None
    name = closid(req)
    if name is None:
        return None
    if stage is Stage.PRE_REMOVE_POD_SANDBOX:
        return PodPatch(remove_resctrl=name)
    config = annotation.parse_resctrl(req.annotations[keys.ANNOTATION_RESCTRL])
    return PodPatch(resctrl=ResctrlGroup(name, schemata(config, rules.kernel)))


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    if not rules.kernel.resctrl:
        return None
    name = closid(req.pod)
    return None if name is None else ContainerPatch(rdt_class=name)


HOOK = Hook(
    name="Resctrl",
    gate=features.RESCTRL,
    stages=frozenset(
        {
            Stage.PRE_RUN_POD_SANDBOX,
            Stage.RECONCILE_POD,
            Stage.PRE_REMOVE_POD_SANDBOX,
            Stage.PRE_CREATE_CONTAINER,
        }
    ),
    pod=pod,
    container=container,
)
