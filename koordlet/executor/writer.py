"""The only writer of cgroup files: validated, write-if-different, leveled, every write reported.

Usage::

    executor = Executor(Path("/sys/fs/cgroup"))
    results = executor.apply([CgroupWrite("kubepods/besteffort/podX", "cpu.shares", 512)])
    results = executor.apply_leveled([[pod_writes], [container_writes]])

With ``force_update_seconds`` (Koordinator's ``--resource-force-update-seconds``) a value this
executor wrote or found in place is trusted for that long by writes that ask for it
(``cacheable=True``, Koordinator's ``Update(cacheable, ...)``): writing it again is "unchanged"
without reading the file. The QoS manager, which re-asserts every value every second, asks for
it, so a value changed behind koordlet's back is put back within that window; the NRI path and
the reconciler read the file every time. koordlet has one executor, so one cache: a value the
reconciler wrote is trusted by the QoS manager too.

Every write gets a result: applied, unchanged (the file already had the value), invalid (the
validator refused it; nothing written), gone (the cgroup does not exist), unsupported (the
file does not exist on this kernel) or failed (the kernel refused it). A leveled batch first
loosens values top-down (quota and memory protections up, cpusets to the union), then writes
the exact values bottom-up, so a parent is never tighter than a child during a change. On
v1 with swap accounting a memory limit takes ``memory.memsw.limit_in_bytes`` along (see
``_write_v1_memory_limit``): the kernel refuses a limit above it.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from koordapi.cpuset import format_cpuset
from koordlet.cgroupfs.hierarchy import leaves_root, read_file
from koordlet.cgroupfs.resources import V1_UNLIMITED_FLOOR, CgroupReader, Resource, lookup

log = logging.getLogger(__name__)


def write_file(path: str, value: str) -> None:
    """One write(2) of the whole value, as cgroup files want."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)  # truncating is a no-op on cgroupfs
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


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

MEMORY_LIMIT = "memory.limit_in_bytes"
MEMSW_LIMIT = "memory.memsw.limit_in_bytes"  # v1 with swap accounting: memory + swap

# Resources whose looser value is safe to write first in a leveled batch.
_LOOSER = {"cpu.cfs_quota_us", "memory.min", "memory.low", "memory.high", "cpuset.cpus"}


class Executor(CgroupReader):
    """Writes cgroup files under ``root`` (v1 or v2, detected); see the module docstring. It
    reads them as ``CgroupReader`` does (``read``, ``read_text``, ``subdirs``, ``procs``)."""

    def __init__(
        self,
        root: Path,
        on_result: OnResult | None = None,
        *,
        force_update_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(root)
        self.on_result = on_result
        self.force_update_seconds = force_update_seconds
        self.clock = clock
        # (cgroup, resource) → (value by meaning, when it was last written or seen)
        self._known: dict[tuple[str, str], tuple[object, float]] = {}
        self._refused: set[str] = set()  # cgroup paths refused for leaving the root, logged once
        self._pruned = clock()

    def _fresh(self, cgroup: str, resource: str) -> tuple[object, float] | None:
        """(value, when) written or seen within the force-update window; None otherwise."""
        if self.force_update_seconds <= 0:
            return None
        hit = self._known.get((cgroup, resource))
        if hit is None or self.clock() - hit[1] >= self.force_update_seconds:
            return None
        return hit

    def fresh(self, cgroup: str, resource: str) -> tuple[object, float] | None:
        """The (value, when) a cacheable write of this file is checked against now; None
        when it would read the file. The same tuple again later means nothing wrote or saw
        the file since (a caller may keep it to skip a write that would be "unchanged")."""
        return self._fresh(cgroup, resource)

    def _trusted(self, write: CgroupWrite, wanted: object) -> bool:
        """The value was written or seen within the force-update window."""
        hit = self._fresh(write.cgroup, write.resource)
        return hit is not None and hit[0] == wanted

    def _remember(self, cgroup: str, resource: str, value: object) -> None:
        if self.force_update_seconds <= 0:
            return
        now = self.clock()
        self._known[(cgroup, resource)] = (value, now)
        if now - self._pruned > self.force_update_seconds:  # forget cgroups long gone
            self._known = {
                k: v for k, v in self._known.items() if now - v[1] < self.force_update_seconds
            }
            self._pruned = now

    def read_trusted(self, cgroup: str, resource: str) -> object | None:
        """``read``, but a value written or seen within the force-update window is given
        without reading the file again (and one read now is trusted for the window)."""
        hit = self._fresh(cgroup, resource)
        if hit is not None:
            return hit[0]
        value = self.read(cgroup, resource)
        if value is not None:
            self._remember(cgroup, resource, value)
        return value

    def path_of(self, write: CgroupWrite) -> Path | None:
        return lookup(write.resource).path(self.root, self.version, write.cgroup)

    def apply(self, writes: Iterable[CgroupWrite], *, cacheable: bool = False) -> list[WriteResult]:
        return [self._write(w, cacheable=cacheable) for w in writes]

    def apply_leveled(
        self, levels: Sequence[Sequence[CgroupWrite]], *, cacheable: bool = False
    ) -> list[WriteResult]:
        """Top-down looser values, then bottom-up exact values; a result per write, in order.

        A write whose exact value the loosening pass already put there is reported as applied
        (not unchanged): callers learn what changed without reading the files first."""
        loosened: set[CgroupWrite] = set()
        for level in levels:
            for write in level:
                looser = self._looser(write, cacheable)
                if looser is None:
                    continue
                wrote = self._write(looser, report=False).status is Status.APPLIED
                if wrote and self._same(looser, write):
                    loosened.add(write)
        results: list[WriteResult] = []
        for level in reversed(levels):
            results[:0] = [self._write(w, cacheable=cacheable) for w in level]
        return [
            replace(r, status=Status.APPLIED)
            if r.status is Status.UNCHANGED and r.write in loosened
            else r
            for r in results
        ]

    @staticmethod
    def _same(a: CgroupWrite, b: CgroupWrite) -> bool:
        if a.value == b.value:
            return True
        res = lookup(a.resource)
        try:
            return bool(res.normalize(str(a.value)) == res.normalize(str(b.value)))
        except ValueError:
            return False

    def _looser(self, write: CgroupWrite, cacheable: bool) -> CgroupWrite | None:
        if write.resource not in _LOOSER:
            return None
        res = lookup(write.resource)
        try:
            wanted = res.normalize(str(write.value))
        except ValueError:
            return None
        if cacheable and self._trusted(write, wanted):
            return None  # already in place: nothing to loosen
        current = self.read(write.cgroup, write.resource)
        if current is None:
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

    def _write(
        self, write: CgroupWrite, report: bool = True, cacheable: bool = False
    ) -> WriteResult:
        start = time.perf_counter()
        result = self._do_write(write, cacheable)
        result = WriteResult(
            result.write, result.status, result.detail, time.perf_counter() - start
        )
        if result.status in (Status.FAILED, Status.INVALID):
            log.warning("write %s: %s: %s", write, result.status, result.detail)
        if report and self.on_result is not None:
            self.on_result(result)
        return result

    def _do_write(self, write: CgroupWrite, cacheable: bool) -> WriteResult:
        try:
            res: Resource = lookup(write.resource)
        except ValueError as err:
            return WriteResult(write, Status.INVALID, str(err))
        value = str(write.value)
        problem = res.validate(value)
        if problem is not None:
            return WriteResult(write, Status.INVALID, problem)
        if leaves_root(write.cgroup):
            if write.cgroup not in self._refused:
                self._refused.add(write.cgroup)
                log.warning("refused cgroup path %r: it leaves %s", write.cgroup, self.root)
            return WriteResult(
                write, Status.INVALID, f"cgroup path {write.cgroup!r} leaves the root"
            )
        wanted = res.normalize(value)
        if cacheable and self._trusted(write, wanted):
            return WriteResult(write, Status.UNCHANGED, "written or seen recently")
        path = res.file(self._root, self.version, write.cgroup)
        if path is None:
            return WriteResult(write, Status.UNSUPPORTED, f"no {write.resource} on cgroup v2")
        try:
            current = res.normalize(read_file(path))
        except (FileNotFoundError, NotADirectoryError):
            where = Path(path)  # the rare path: Path's comfort is affordable here
            if not where.parent.is_dir():
                return WriteResult(write, Status.GONE, f"no cgroup {where.parent}")
            return WriteResult(
                write, Status.UNSUPPORTED, f"{where.name} does not exist on this kernel"
            )
        except (OSError, ValueError):
            current = None
        if current is not None and current == wanted:
            self._remember(write.cgroup, write.resource, wanted)
            return WriteResult(write, Status.UNCHANGED)
        try:
            if self.version == 1 and write.resource == MEMORY_LIMIT and isinstance(current, int):
                self._write_v1_memory_limit(path, current, wanted, value)
            else:
                write_file(path, res.wire_value(value, self.version))
        except FileNotFoundError:
            return WriteResult(write, Status.GONE, f"{path} disappeared")
        except OSError as err:
            if err.errno == errno.ENODEV:
                return WriteResult(write, Status.UNSUPPORTED, err.strerror or "no such device")
            return WriteResult(write, Status.FAILED, f"{err.strerror or err} ({path})")
        self._remember(write.cgroup, write.resource, wanted)
        return WriteResult(write, Status.APPLIED)

    @staticmethod
    def _write_v1_memory_limit(path: str, current: int, wanted: object, value: str) -> None:
        """A v1 memory limit, with ``memory.memsw.limit_in_bytes`` beside it when that is
        finite. The kernel refuses a limit above memsw and a memsw below the limit (EINVAL),
        and runtimes set memsw with the limit (the kubelet's containers get no swap: memsw ==
        limit): a raise writes memsw first, a cut writes it after, each keeping the swap the
        runtime allowed (memsw - limit). Without swap accounting there is no memsw file."""
        memsw_path = path.rsplit("/", 1)[0] + "/" + MEMSW_LIMIT
        try:
            memsw = lookup(MEMORY_LIMIT).normalize(read_file(memsw_path))
        except (OSError, ValueError):
            memsw = -1  # no swap accounting: nothing to keep in step
        if not isinstance(memsw, int) or memsw == -1 or current == -1:
            write_file(path, value)
            return
        assert isinstance(wanted, int)
        paired = -1 if wanted == -1 else wanted + max(0, memsw - current)
        paired_text = "-1" if paired == -1 or paired >= V1_UNLIMITED_FLOOR else str(paired)
        if wanted == -1 or wanted > current:
            write_file(memsw_path, paired_text)
            write_file(path, value)
            return
        write_file(path, value)
        try:
            write_file(memsw_path, paired_text)
        except OSError as err:  # the limit holds; only more swap than before stays allowed
            log.warning("%s: cannot lower it to %s: %s", memsw_path, paired_text, err)
