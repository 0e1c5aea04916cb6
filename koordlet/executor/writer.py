"""The only writer of cgroup files: validated, write-if-different, leveled, every write reported.

Usage::

    executor = Executor(Path("/sys/fs/cgroup"))
    results = executor.apply([CgroupWrite("kubepods/besteffort/podX", "cpu.shares", 512)])
    results = executor.apply_leveled([[pod_writes], [container_writes]])

Every write gets a result: applied, unchanged (the file already had the value), invalid (the
validator refused it; nothing written), gone (the cgroup does not exist), unsupported (the
file does not exist on this kernel) or failed (the kernel refused it). A leveled batch first
loosens values top-down (quota and memory protections up, cpusets to the union), then writes
the exact values bottom-up, so a parent is never tighter than a child during a change.
"""

from __future__ import annotations

import enum
import errno
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from koordapi.cpuset import format_cpuset
from koordlet.executor.cgroup import Resource, detect_version, lookup

log = logging.getLogger(__name__)


class Status(enum.StrEnum):
    APPLIED = "applied"
    UNCHANGED = "unchanged"
    INVALID = "invalid"
    GONE = "gone"
    UNSUPPORTED = "unsupported"
    FAILED = "failed"


@dataclass(frozen=True)
class CgroupWrite:
    cgroup: str  # relative to the hierarchy root: "kubepods/besteffort/pod<uid>"
    resource: str  # Koordinator's (v1) name: "cpu.shares", "cpu.cfs_quota_us", ...
    value: str | int

    def __str__(self) -> str:
        return f"{self.cgroup}/{self.resource}={self.value}"


@dataclass(frozen=True)
class WriteResult:
    write: CgroupWrite
    status: Status
    detail: str = ""
    seconds: float = 0.0


OnResult = Callable[[WriteResult], None]

# Resources whose looser value is safe to write first in a leveled batch.
_LOOSER = {"cpu.cfs_quota_us", "memory.min", "memory.low", "memory.high", "cpuset.cpus"}


class Executor:
    """Writes cgroup files under ``root`` (v1 or v2, detected); see the module docstring."""

    def __init__(self, root: Path, on_result: OnResult | None = None) -> None:
        self.root = root
        self.version = detect_version(root)
        self.on_result = on_result

    def path_of(self, write: CgroupWrite) -> Path | None:
        return lookup(write.resource).path(self.root, self.version, write.cgroup)

    def read(self, cgroup: str, resource: str) -> object | None:
        """The current value by meaning (-1 for unlimited, a set for cpusets), None if absent."""
        res = lookup(resource)
        path = res.path(self.root, self.version, cgroup)
        if path is None:
            return None
        try:
            return res.normalize(path.read_text())
        except (OSError, ValueError):
            return None

    def v2_dir(self, cgroup: str) -> Path | None:
        """The cgroup's directory in the v2 hierarchy (``unified/`` on a hybrid host), if any."""
        base = self.root if self.version == 2 else self.root / "unified"
        folder = base / cgroup.strip("/")
        return folder if folder.is_dir() else None

    def subdirs(self, cgroup: str, resource: str) -> list[str]:
        """Child cgroups of ``cgroup`` in ``resource``'s hierarchy, as cgroup paths ([] if gone)."""
        path = lookup(resource).path(self.root, self.version, cgroup)
        if path is None:
            return []
        try:
            children = sorted(e.name for e in path.parent.iterdir() if e.is_dir())
        except OSError:
            return []
        return [f"{cgroup.strip('/')}/{name}" for name in children]

    def procs(self, cgroup: str) -> list[int]:
        """Pids in ``cgroup`` (its cgroup.procs; the cpu hierarchy on v1), [] if it is gone."""
        base = self.root if self.version == 2 else self.root / "cpu"
        try:
            return [int(p) for p in (base / cgroup.strip("/") / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def apply(self, writes: Iterable[CgroupWrite]) -> list[WriteResult]:
        return [self._write(w) for w in writes]

    def apply_leveled(self, levels: Sequence[Sequence[CgroupWrite]]) -> list[WriteResult]:
        """Top-down looser values, then bottom-up exact values; results of the exact pass."""
        for level in levels:
            for write in level:
                looser = self._looser(write)
                if looser is not None:
                    self._write(looser, report=False)
        results: list[WriteResult] = []
        for level in reversed(levels):
            results[:0] = [self._write(w) for w in level]
        return results

    def _looser(self, write: CgroupWrite) -> CgroupWrite | None:
        if write.resource not in _LOOSER:
            return None
        current = self.read(write.cgroup, write.resource)
        if current is None:
            return None
        res = lookup(write.resource)
        try:
            wanted = res.normalize(str(write.value))
        except ValueError:
            return None
        if write.resource == "cpuset.cpus":
            assert isinstance(current, frozenset) and isinstance(wanted, frozenset)
            if wanted <= current:
                return None
            return CgroupWrite(write.cgroup, write.resource, format_cpuset(current | wanted))
        assert isinstance(current, int) and isinstance(wanted, int)
        if current == -1 or (wanted != -1 and wanted <= current):
            return None  # already at least as loose
        return write

    def _write(self, write: CgroupWrite, report: bool = True) -> WriteResult:
        start = time.perf_counter()
        result = self._do_write(write)
        result = WriteResult(
            result.write, result.status, result.detail, time.perf_counter() - start
        )
        if result.status in (Status.FAILED, Status.INVALID):
            log.warning("write %s: %s: %s", write, result.status, result.detail)
        if report and self.on_result is not None:
            self.on_result(result)
        return result

    def _do_write(self, write: CgroupWrite) -> WriteResult:
        try:
            res: Resource = lookup(write.resource)
        except ValueError as err:
            return WriteResult(write, Status.INVALID, str(err))
        value = str(write.value)
        problem = res.validate(value)
        if problem is not None:
            return WriteResult(write, Status.INVALID, problem)
        path = res.path(self.root, self.version, write.cgroup)
        if path is None:
            return WriteResult(write, Status.UNSUPPORTED, f"no {write.resource} on cgroup v2")
        if not path.parent.is_dir():
            return WriteResult(write, Status.GONE, f"no cgroup {path.parent}")
        try:
            current = res.normalize(path.read_text())
        except FileNotFoundError:
            return WriteResult(
                write, Status.UNSUPPORTED, f"{path.name} does not exist on this kernel"
            )
        except (OSError, ValueError):
            current = None
        if current is not None and current == res.normalize(value):
            return WriteResult(write, Status.UNCHANGED)
        try:
            with path.open("w") as f:  # one write(2) of the whole value, as the kernel wants
                f.write(res.wire_value(value, self.version))
        except FileNotFoundError:
            return WriteResult(write, Status.GONE, f"{path} disappeared")
        except OSError as err:
            if err.errno == errno.ENODEV:
                return WriteResult(write, Status.UNSUPPORTED, err.strerror or "no such device")
            return WriteResult(write, Status.FAILED, f"{err.strerror or err} ({path})")
        return WriteResult(write, Status.APPLIED)
