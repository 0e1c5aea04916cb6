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
class CoreSchedGroup:
    """A container's core-scheduling group; disabled means cookie 0 (no isolation).

    "" is a valid group name: the default group of pods without the group label.
    """

    enabled: bool
    name: str = ""


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
    core_sched: CoreSchedGroup | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    devices: tuple[Device, ...] = ()

    def is_empty(self) -> bool:
        return self == ContainerPatch()


P = TypeVar("P", PodPatch, ContainerPatch)
EMPTY_POD = PodPatch()
EMPTY_CONTAINER = ContainerPatch()
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in (PodPatch, ContainerPatch)}


def merge(base: P, later: P | None) -> P:
    """``later`` over ``base``: set scalars replace, maps update, tuples extend."""
    if later is None:
        return base
    if base is EMPTY_POD or base is EMPTY_CONTAINER:
        return later  # the first contribution of a stage: nothing to combine
    changes: dict[str, Any] = {}
    for name in _FIELDS[type(later)]:
        value = getattr(later, name)
        if value is None:
            continue
        if isinstance(value, dict):
            if value:
                changes[name] = {**getattr(base, name), **value}
        elif isinstance(value, tuple):
            if value:
                changes[name] = getattr(base, name) + value
        else:
            changes[name] = value
    return replace(base, **changes) if changes else base
