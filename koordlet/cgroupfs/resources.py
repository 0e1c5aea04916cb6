"""cgroup resources as Koordinator names them, where each lives on cgroup v1 and v2, and
reading them back.

A resource keeps its v1 file name as its name ("cpu.shares"); on v2 it is written to the v2
file with the value converted (shares → cpu.weight, -1 → "max"). Each resource has a validator:
a value outside the kernel's range is refused before any write. Values are compared by meaning
(CPU sets as sets, "max" as -1), so writing what is already there is a no-op.

``CgroupReader`` reads these resources back under a root (the version detected once): by
meaning (``read``) or as the kernel shows them (``read_text``), plus a cgroup's children, pids
and v2 directory. The executor reads through it before each write (it is one); the status API
reads the applied values with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from koordapi.cgroup import shares_to_weight
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.cgroupfs.hierarchy import (
    cgroup_file,
    detect_version,
    leaves_root,
    read_file,
    read_procs,
    v2_root,
)

V1_UNLIMITED_FLOOR = 1 << 62  # v1 reports "no limit" as the largest page-aligned int64


def _range(lo: int | None, hi: int | None) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return f"{value!r} is not an integer"
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            return f"{number} is outside [{lo}, {hi}]"
        return None

    return check


def _quota(value: str) -> str | None:
    try:
        number = int(value)
    except ValueError:
        return f"{value!r} is not an integer"
    return None if number == -1 or number >= 1000 else f"quota {number} must be -1 or at least 1000"


def _limit(value: str) -> str | None:
    try:
        number = int(value)
    except ValueError:
        return f"{value!r} is not an integer"
    return None if number == -1 or number >= 0 else f"{number} must be -1 or not negative"


def _cpuset(value: str) -> str | None:
    try:
        parse_cpuset(value)
    except ModelError as err:
        return str(err)
    return None


def _normalize_int(text: str) -> object:
    text = text.strip()
    if text == "max":
        return -1
    first = text.split()[0] if text else text  # cpu.max: "quota period"
    if first == "max":
        return -1
    number = int(first)
    return -1 if number >= V1_UNLIMITED_FLOOR else number


def _normalize_cpuset(text: str) -> object:
    return parse_cpuset(text)


def _v2_max(value: str) -> str:
    return "max" if int(value) == -1 else value


@dataclass(frozen=True)
class Resource:
    name: str  # v1 file name
    subsystem: str  # v1 hierarchy
    v2_file: str | None  # None: no v2 counterpart
    validate: Callable[[str], str | None]
    to_v2: Callable[[str], str] = str
    normalize: Callable[[str], object] = _normalize_int
    v1_file: str | None = None  # when it differs from name

    def path(self, root: Path, version: int, cgroup: str) -> Path | None:
        found = self.file(str(root), version, cgroup)
        return None if found is None else Path(found)

    def file(self, root: str, version: int, cgroup: str) -> str | None:
        """The file's path as a string (cheaper than Path on the hot paths); None: no v2 file."""
        if version == 2:
            if self.v2_file is None:
                return None
            return cgroup_file(root, 2, self.subsystem, cgroup, self.v2_file)
        return cgroup_file(root, 1, self.subsystem, cgroup, self.v1_file or self.name)

    def wire_value(self, value: str, version: int) -> str:
        return self.to_v2(value) if version == 2 else value


RESOURCES = {
    r.name: r
    for r in (
        Resource(
            "cpu.shares",
            "cpu",
            "cpu.weight",
            _range(2, 262144),
            lambda v: str(shares_to_weight(int(v))),
        ),
        Resource("cpu.cfs_quota_us", "cpu", "cpu.max", _quota, _v2_max),
        # v2 keeps the period in cpu.max, after the quota: no file of its own there
        Resource("cpu.cfs_period_us", "cpu", None, _range(1000, 1_000_000)),
        Resource("cpu.cfs_burst_us", "cpu", "cpu.max.burst", _range(0, 100_000_000)),
        Resource("cpu.bvt_warp_ns", "cpu", "cpu.bvt_warp_ns", _range(-1, 2)),
        Resource("cpu.idle", "cpu", "cpu.idle", _range(0, 1)),
        Resource("cpuset.cpus", "cpuset", "cpuset.cpus", _cpuset, normalize=_normalize_cpuset),
        Resource("cpuset.mems", "cpuset", "cpuset.mems", _cpuset, normalize=_normalize_cpuset),
        Resource("memory.limit_in_bytes", "memory", "memory.max", _limit, _v2_max),
        Resource("memory.min", "memory", "memory.min", _range(0, None)),
        Resource("memory.low", "memory", "memory.low", _range(0, None)),
        Resource("memory.high", "memory", "memory.high", _limit, _v2_max),
        Resource("net_cls.classid", "net_cls", None, _range(0, (1 << 32) - 1)),
        # Memory QoS extras of Anolis kernels (v1 and v2); mainline has only memory.oom.group,
        # on v2. Where a file is missing the write reports "unsupported".
        Resource("memory.wmark_ratio", "memory", "memory.wmark_ratio", _range(0, 100)),
        Resource(
            "memory.wmark_scale_factor", "memory", "memory.wmark_scale_factor", _range(1, 1000)
        ),
        Resource("memory.wmark_min_adj", "memory", "memory.wmark_min_adj", _range(-25, 50)),
        Resource("memory.priority", "memory", "memory.priority", _range(0, 12)),
        Resource("memory.use_priority_oom", "memory", "memory.use_priority_oom", _range(0, 1)),
        Resource("memory.oom.group", "memory", "memory.oom.group", _range(0, 1)),
    )
}


def lookup(name: str) -> Resource:
    try:
        return RESOURCES[name]
    except KeyError:
        raise ValueError(f"unknown cgroup resource {name!r}") from None


class CgroupReader:
    """Reads the resources of the table back under ``root`` (v1 or v2, detected once)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root = str(root).rstrip("/") or "/"
        self.version = detect_version(root)

    def _file(self, cgroup: str, resource: str) -> str | None:
        res = lookup(resource)
        return None if leaves_root(cgroup) else res.file(self._root, self.version, cgroup)

    def read(self, cgroup: str, resource: str) -> object | None:
        """The current value by meaning (-1 for unlimited, a set for cpusets), None if absent."""
        path = self._file(cgroup, resource)
        if path is None:
            return None
        try:
            return lookup(resource).normalize(read_file(path))
        except (OSError, ValueError):
            return None

    def read_text(self, cgroup: str, resource: str) -> str | None:
        """The file's text as the kernel shows it (the v2 file on v2: ``cpu.weight``, ``cpu.max``
        "quota period", ``memory.max``), None if absent, unreadable or the path leaves the root."""
        path = self._file(cgroup, resource)
        if path is None:
            return None
        try:
            return read_file(path)
        except OSError:
            return None

    def v2_dir(self, cgroup: str) -> Path | None:
        """The cgroup's directory in the v2 hierarchy (``unified/`` on a hybrid host), if any."""
        base = None if leaves_root(cgroup) else v2_root(self.root)
        folder = None if base is None else base / cgroup.strip("/")
        return folder if folder is not None and folder.is_dir() else None

    def subdirs(self, cgroup: str, resource: str) -> list[str]:
        """Child cgroups of ``cgroup`` in ``resource``'s hierarchy, as cgroup paths ([] if gone)."""
        path = self._file(cgroup, resource)
        if path is None:
            return []
        base = cgroup.strip("/")
        try:
            # scandir's d_type says "directory" without a stat of every file in the cgroup
            with os.scandir(path.rsplit("/", 1)[0]) as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            return []
        return [f"{base}/{name}" for name in names]

    def procs(self, cgroup: str) -> list[int]:
        """Pids in ``cgroup`` (its cgroup.procs; the cpu hierarchy on v1), [] if it is gone."""
        return read_procs(self._root, self.version, cgroup)
