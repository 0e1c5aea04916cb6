"""What the hooks answer: sparse patches, where None means "no opinion".

Hooks of a stage run in name order and a later hook's value replaces an earlier one's, as in
Koordinator (BatchResource computes a quota; CPUSetAllocator, running after it, unsets it for
pinned pods). ``merge`` implements exactly that; lists and maps are combined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar


@dataclass(frozen=True)
class Mount:
    destination: str
    source: str
    type: str = "bind"
    options: tuple[str, ...] = ("rbind", "rw")


@dataclass(frozen=True)
class Device:
    path: str
    type: str  # "c" or "b"
    major: int
    minor: int
    file_mode: int = 0o666


@dataclass(frozen=True)
class ResctrlGroup:
    """A resctrl control group: its name (closid) and its schemata lines."""

    closid: str
    schemata: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodPatch:
    """Values for the pod's own cgroup, which koordlet writes itself (NRI cannot)."""

    cpu_bvt_warp_ns: int | None = None
    cpu_idle: int | None = None
    cpu_shares: int | None = None
    cpu_cfs_quota_us: int | None = None
    memory_limit: int | None = None
    memory_min: int | None = None
    memory_low: int | None = None
    net_cls_classid: int | None = None
    resctrl: ResctrlGroup | None = None
    remove_resctrl: str | None = None  # closid of a group to delete


@dataclass(frozen=True)
class ContainerPatch:
    """Values for a container: NRI adjustment or update, or direct writes when reconciling."""

    cpuset_cpus: str | None = None
    cpu_cfs_quota_us: int | None = None
    cpu_shares: int | None = None
    memory_limit: int | None = None
    rdt_class: str | None = None
    memory_min: int | None = None
    memory_low: int | None = None
    memory_high: int | None = None  # -1: "max"
    oom_score_adj: int | None = None
    core_sched_group: str | None = None  # core-scheduling cookie group; "" disables
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[Device, ...] = ()

    def is_empty(self) -> bool:
        return self == ContainerPatch()


P = TypeVar("P", PodPatch, ContainerPatch)


def merge(base: P, later: P | None) -> P:
    """``later`` over ``base``: set scalars replace, maps update, tuples extend."""
    if later is None:
        return base
    changes: dict[str, Any] = {}
    for f in fields(later):
        value = getattr(later, f.name)
        if value is None:
            continue
        old = getattr(base, f.name)
        if isinstance(value, Mapping):
            if value:
                changes[f.name] = {**old, **value}
        elif isinstance(value, tuple) and not isinstance(value, ResctrlGroup):
            if value:
                changes[f.name] = old + value
        else:
            changes[f.name] = value
    return replace(base, **changes)
