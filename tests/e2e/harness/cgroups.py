"""Read pods' and containers' effective cgroup values, and remove the cgroups tests created.

Works on cgroup v1 (one hierarchy per controller, as on these machines, with the controller-less
v2 tree at ``unified/``) and on cgroup v2 (one tree). The root is a constructor argument so unit
tests run on a fake tree of plain files.

Paths are cgroup paths relative to a hierarchy root, as the kubelet's cgroup driver lays them
out (tests/e2e/harness/kubelet.py): ``/kubepods/burstable/pod<uid>`` for a pod and
``<pod>/<container id>`` for a container with cgroupfs; slices and ``cri-containerd-<id>.scope``
with systemd.

Usage::

    reader = CgroupReader()
    values = reader.values(f"{pod.cgroup_dir}/{container_id}")
    assert values.cpu_quota == 50000
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

CGROUP_ROOT = Path("/sys/fs/cgroup")
UNLIMITED = -1

# v1 kernels report "no memory limit" as the largest page-aligned signed 64-bit value.
_V1_MEMORY_UNLIMITED_MIN = 1 << 62


@dataclass(frozen=True)
class CgroupValues:
    """Effective values of one cgroup; None where the file does not exist.

    Quota and memory limit use -1 for "unlimited" on both versions. On v2, ``cpu_shares`` is
    None and ``cpu_weight`` holds cpu.weight; on v1, ``cpu_weight`` is derived from cpu.shares
    with runc's conversion, so tests can compare either.
    """

    cpu_shares: int | None
    cpu_weight: int | None
    cpu_quota: int | None
    cpu_period: int | None
    cpu_burst_us: int | None
    cpu_idle: int | None
    cpuset_cpus: str | None
    cpuset_mems: str | None
    memory_limit: int | None
    memory_high: int | None = None  # v2 only (memory.high); -1 when "max"

    @property
    def cpu_share(self) -> CpuShare:
        """The CPU weight as the kernel holds it: cpu.shares on v1, cpu.weight on v2."""
        if self.cpu_shares is not None:
            return CpuShare("cpu.shares", self.cpu_shares)
        return CpuShare("cpu.weight", self.cpu_weight)


class CpuShare(NamedTuple):
    """A CPU weight and the file it is in, so that a v1 and a v2 value never compare equal."""

    file: str
    value: int | None


def shares_to_weight(shares: int) -> int:
    """runc's cpu.shares (2..262144) to cpu.weight (1..10000) conversion."""
    if shares == 0:
        return 0
    return 1 + ((shares - 2) * 9999) // 262142


def parse_cpu_max(text: str) -> tuple[int, int]:
    """cgroup v2 ``cpu.max`` ("max 100000" or "50000 100000") to (quota or -1, period)."""
    parts = text.split()
    if len(parts) != 2:
        raise ValueError(f"malformed cpu.max: {text!r}")
    quota = UNLIMITED if parts[0] == "max" else int(parts[0])
    return quota, int(parts[1])


def parse_memory_limit(text: str, version: int) -> int:
    """memory.limit_in_bytes (v1) or memory.max (v2) to bytes, or -1 when unlimited."""
    text = text.strip()
    if text == "max":
        return UNLIMITED
    value = int(text)
    if version == 1 and value >= _V1_MEMORY_UNLIMITED_MIN:
        return UNLIMITED
    return value


def allowed_cpus(count: int) -> str:
    """The first ``count`` CPUs this process may run on, as a cpuset list ("0" or "0,1")."""
    return ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:count])


class CgroupReader:
    """Reads cgroup files under ``root``; see the module docstring."""

    def __init__(self, root: Path = CGROUP_ROOT) -> None:
        self.root = root

    @property
    def version(self) -> int:
        return 2 if (self.root / "cgroup.controllers").exists() else 1

    def _file(self, controller: str, cgroup: str, name: str) -> Path:
        rel = cgroup.strip("/")
        if self.version == 2:
            return self.root / rel / name
        return self.root / controller / rel / name

    def _read(self, controller: str, cgroup: str, name: str) -> str | None:
        try:
            return self._file(controller, cgroup, name).read_text().strip()
        except FileNotFoundError:
            return None

    def _read_int(self, controller: str, cgroup: str, name: str) -> int | None:
        text = self._read(controller, cgroup, name)
        return None if text is None else int(text)

    def values(self, cgroup: str) -> CgroupValues:
        """The effective values of ``cgroup``; raises FileNotFoundError if it does not exist."""
        if not self.exists(cgroup):
            raise FileNotFoundError(errno.ENOENT, "no such cgroup", cgroup)
        if self.version == 2:
            return self._values_v2(cgroup)
        shares = self._read_int("cpu", cgroup, "cpu.shares")
        memory = self._read("memory", cgroup, "memory.limit_in_bytes")
        return CgroupValues(
            cpu_shares=shares,
            cpu_weight=None if shares is None else shares_to_weight(shares),
            cpu_quota=self._read_int("cpu", cgroup, "cpu.cfs_quota_us"),
            cpu_period=self._read_int("cpu", cgroup, "cpu.cfs_period_us"),
            cpu_burst_us=self._read_int("cpu", cgroup, "cpu.cfs_burst_us"),
            cpu_idle=self._read_int("cpu", cgroup, "cpu.idle"),
            cpuset_cpus=self._read("cpuset", cgroup, "cpuset.cpus"),
            cpuset_mems=self._read("cpuset", cgroup, "cpuset.mems"),
            memory_limit=None if memory is None else parse_memory_limit(memory, 1),
        )

    def _values_v2(self, cgroup: str) -> CgroupValues:
        cpu_max = self._read("", cgroup, "cpu.max")
        quota, period = parse_cpu_max(cpu_max) if cpu_max is not None else (None, None)
        memory = self._read("", cgroup, "memory.max")
        high = self._read("", cgroup, "memory.high")
        return CgroupValues(
            cpu_shares=None,
            cpu_weight=self._read_int("", cgroup, "cpu.weight"),
            cpu_quota=quota,
            cpu_period=period,
            cpu_burst_us=self._read_int("", cgroup, "cpu.max.burst"),
            cpu_idle=self._read_int("", cgroup, "cpu.idle"),
            # cpuset.cpus is empty when unset in v2; the effective set is what applies.
            cpuset_cpus=self._read("", cgroup, "cpuset.cpus.effective"),
            cpuset_mems=self._read("", cgroup, "cpuset.mems.effective"),
            memory_limit=None if memory is None else parse_memory_limit(memory, 2),
            memory_high=None if high is None else parse_memory_limit(high, 2),
        )

    def cpu_share(self, shares: int) -> CpuShare:
        """``shares`` (the CRI and NRI unit) as the kernel holds it here (v2: runc's weight)."""
        if self.version == 2:
            return CpuShare("cpu.weight", shares_to_weight(shares))
        return CpuShare("cpu.shares", shares)

    def write_cpu_share(self, cgroup: str, shares: int) -> None:
        """Change a test's own cgroup's CPU weight behind everyone's back (as an operator might)."""
        file, value = self.cpu_share(shares)
        self._file("cpu", cgroup, file).write_text(str(value))

    def write_cpu_quota(self, cgroup: str, quota: int) -> None:
        """Change a test's own cgroup's CFS quota (v2: cpu.max, keeping its period)."""
        name = "cpu.max" if self.version == 2 else "cpu.cfs_quota_us"
        self._file("cpu", cgroup, name).write_text(str(quota))

    def memory_swap_limit(self, cgroup: str) -> int | None:
        """v1's memory.memsw.limit_in_bytes (-1: none); None on v2 or without swap accounting."""
        if self.version == 2:
            return None
        text = self._read("memory", cgroup, "memory.memsw.limit_in_bytes")
        return None if text is None else parse_memory_limit(text, 1)

    def hierarchies(self) -> list[Path]:
        """Every mounted hierarchy root: the v1 controllers plus ``unified``, or the v2 root."""
        if self.version == 2:
            return [self.root]
        found: dict[Path, Path] = {}
        for child in sorted(self.root.iterdir()):
            if child.is_dir() and (child / "cgroup.procs").exists():
                found.setdefault(child.resolve(), child)  # cpu -> cpu,cpuacct: one entry
        return list(found.values())

    def exists(self, cgroup: str) -> bool:
        rel = cgroup.strip("/")
        return any((h / rel).is_dir() for h in self.hierarchies())

    def procs(self, cgroup: str) -> set[int]:
        """Pids in ``cgroup`` and below, over every hierarchy."""
        rel = cgroup.strip("/")
        pids: set[int] = set()
        for hierarchy in self.hierarchies():
            top = hierarchy / rel
            if not top.is_dir():
                continue
            for folder, _dirs, _files in os.walk(top):
                try:
                    text = (Path(folder) / "cgroup.procs").read_text()
                except OSError:
                    continue
                pids.update(int(p) for p in text.split())
        return pids

    def remove(self, cgroup: str) -> list[str]:
        """rmdir ``cgroup`` and every cgroup below it, deepest first, in every hierarchy.

        Only directories are removed (cgroupfs has no regular files to delete); a cgroup that
        still holds processes stays and is reported. Returns the problems, empty on success.
        """
        rel = cgroup.strip("/")
        problems = []
        for hierarchy in self.hierarchies():
            top = hierarchy / rel
            if not top.is_dir():
                continue
            for folder, _dirs, _files in os.walk(top, topdown=False):
                try:
                    Path(folder).rmdir()
                except FileNotFoundError:
                    pass
                except OSError as err:
                    problems.append(f"cannot remove {folder}: {err.strerror}")
        return problems


class CgroupJanitor:
    """Removes the cgroups a test session created and nothing else.

    It notes which kubelet-layout parents (``/kubepods``, its QoS children, or their systemd
    slices) existed in which hierarchy before the session, removes each pod cgroup it is told
    about, and at the end removes the parents it found missing at the start, if they are empty.
    With the systemd driver, systemd removes the cgroups of the slices it stops, and what is
    left here is only what it did not.
    """

    def __init__(self, reader: CgroupReader, parents: list[str] | None = None) -> None:
        self.reader = reader
        # children before their parents
        self.parents = parents or ["/kubepods/burstable", "/kubepods/besteffort", "/kubepods"]
        self.preexisting = {f for f in self._parent_folders() if f.is_dir()}
        self.pods: list[str] = []

    def _parent_folders(self) -> list[Path]:
        """Every hierarchy's copy of each parent, children before their parents."""
        return [h / p.strip("/") for p in self.parents for h in self.reader.hierarchies()]

    def track(self, cgroup: str) -> None:
        if not any(cgroup.startswith(p + "/") for p in self.parents):
            raise ValueError(f"refusing to track {cgroup!r}: not under a kubelet pod parent")
        if cgroup not in self.pods:
            self.pods.append(cgroup)

    def cleanup(self) -> list[str]:
        problems = []
        for pod in self.pods:
            problems += self.reader.remove(pod)
        for folder in self._parent_folders():
            if folder in self.preexisting:
                continue
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError as err:
                problems.append(f"cannot remove {folder}: {err.strerror}")
        return problems

    def leftovers(self) -> list[str]:
        """Pod cgroups under the session's parents that still exist in any hierarchy."""
        return [p for p in self.pods if self.reader.exists(p)]
