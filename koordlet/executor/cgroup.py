"""cgroup resources as Koordinator names them, and where each lives on cgroup v1 and v2.

A resource keeps its v1 file name as its name ("cpu.shares"); on v2 it is written to the v2
file with the value converted (shares → cpu.weight, -1 → "max"). Each resource has a validator:
a value outside the kernel's range is refused before any write. Values are compared by meaning
(CPU sets as sets, "max" as -1), so writing what is already there is a no-op.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from koordapi.cgroup import shares_to_weight
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError

V1_UNLIMITED_FLOOR = 1 << 62  # v1 reports "no limit" as the largest page-aligned int64
READ_SIZE = 1 << 16


def read_file(path: str | Path) -> str:
    """A whole (small) kernel file with os-level calls: the collectors and the QoS manager read
    thousands of them a second. Raises OSError (FileNotFoundError when absent)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, READ_SIZE)
        if len(data) == READ_SIZE:  # rare: a file larger than one read
            chunks = [data]
            while chunk := os.read(fd, READ_SIZE):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode(errors="replace")


def write_file(path: str, value: str) -> None:
    """One write(2) of the whole value, as cgroup files want."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)  # truncating is a no-op on cgroupfs
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


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


def leaves_root(cgroup: str) -> bool:
    """Whether a cgroup path (from the runtime, so not to be trusted) climbs out of the
    hierarchy root: a ".." component. cgroupfs has no symbolic links, so nothing else can."""
    # the substring test first: every write of the executor asks, and almost none has ".."
    return ".." in cgroup and ".." in cgroup.split("/")


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
        rel = cgroup.strip("/")
        if version == 2:
            return None if self.v2_file is None else f"{root}/{rel}/{self.v2_file}"
        return f"{root}/{self.subsystem}/{rel}/{self.v1_file or self.name}"

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


def v2_root(root: Path) -> Path | None:
    """The cgroup v2 hierarchy: ``root`` on a v2 host, ``root/unified`` on a hybrid one."""
    if detect_version(root) == 2:
        return root
    unified = root / "unified"
    return unified if (unified / "cgroup.controllers").exists() else None


def detect_version(root: Path) -> int:
    """2 for a unified hierarchy at ``root``, else 1 (v1 or hybrid)."""
    return 2 if (root / "cgroup.controllers").exists() else 1
