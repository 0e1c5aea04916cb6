"""Cycles per instruction of each container, from hardware counters in cgroup mode.

One pass opens, for every container cgroup and every online CPU, a ``cycles`` and an
``instructions`` counter with perf_event_open(2) in cgroup mode (PERF_FLAG_PID_CGROUP: the
"pid" is an fd of the container's perf_event cgroup directory, and the event counts only
while that cgroup's tasks run on that CPU). The counters run for ``window`` seconds, are read
with PERF_FORMAT_TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING, scaled for multiplexing and summed
over CPUs, then closed. Samples: ``container_cpi{pod_uid, container_id, cpi_field}`` with
cpi_field ``cycles``, ``instructions`` and ``cpi`` (cycles / instructions, only when some
instructions retired).

The system call goes through ctypes; the arithmetic (``scaled``, ``cpi_of``) is pure. A host
without hardware counters (most VMs: perf_event_open fails with ENOENT or EOPNOTSUPP), or
where the daemon may not use them, makes the collector unavailable; that is probed once on a
counter of this process before any cgroup is opened. Pods are not measured, only containers.
Enabled by the CPICollector gate. A pass blocks for ``window`` seconds (the runner calls it
in a thread) and holds 2 * CPUs descriptors per container meanwhile.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.cgroupfs.readers import MISSING, UNREADABLE, CgroupFS, Skip, read_text
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.targets import NO_CGROUP_DIR, Target, targets
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

GATE = "CPICollector"
PERF_OPEN_FAILED = "perf-open-failed"
PERF_READ_FAILED = "perf-read-failed"

# <linux/perf_event.h>
PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

EVENTS = {"cycles": PERF_COUNT_HW_CPU_CYCLES, "instructions": PERF_COUNT_HW_INSTRUCTIONS}

# errno values meaning "this host has no such counters": no point trying again.
_NO_COUNTERS = {errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.ENOSYS}
_NOT_PERMITTED = {errno.EACCES, errno.EPERM}

# perf_event_open's number per architecture (it has no libc wrapper).
_SYSCALL_NUMBERS = {
    "x86_64": 298,
    "aarch64": 241,
    "riscv64": 241,
    "loongarch64": 241,
    "ppc64le": 319,
    "ppc64": 319,
    "s390x": 331,
    "i686": 336,
    "i386": 336,
    "armv7l": 364,
}

_READING = struct.Struct("=QQQ")  # value, time_enabled, time_running


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr up to config1 (PERF_ATTR_SIZE_VER0, 64 bytes): all we set."""

    _fields_ = (
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),  # bit field: disabled, inherit, pinned, ... (all 0)
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    )


# (event config, pid or cgroup fd, cpu, flags) → fd; raises OSError like the system call.
PerfOpen = Callable[[int, int, int, int], int]


def perf_event_open(config: int, pid: int, cpu: int, flags: int) -> int:
    """perf_event_open(2) for a hardware event, counting at once, with the time totals."""
    machine = platform.machine()
    number = _SYSCALL_NUMBERS.get(machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"perf_event_open: no syscall number known for {machine}")
    attr = PerfEventAttr()
    attr.type = PERF_TYPE_HARDWARE
    attr.size = ctypes.sizeof(PerfEventAttr)
    attr.config = config
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(
        libc.syscall(
            ctypes.c_long(number),
            ctypes.byref(attr),
            ctypes.c_int(pid),
            ctypes.c_int(cpu),
            ctypes.c_int(-1),  # no group leader
            ctypes.c_ulong(flags),
        )
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return fd


@dataclass(frozen=True)
class Reading:
    """One counter read: raw count and the ns it was enabled and actually on the PMU."""

    value: int
    time_enabled: int
    time_running: int


def parse_reading(data: bytes) -> Reading:
    if len(data) != _READING.size:
        raise Skip(PERF_READ_FAILED, f"read {len(data)} bytes, expected {_READING.size}")
    return Reading(*_READING.unpack(data))


def scaled(reading: Reading) -> float:
    """The count extrapolated over the enabled time (counters are multiplexed when there
    are more events than PMU slots); 0 when it never ran (its cgroup never ran there)."""
    if reading.time_running <= 0:
        return 0.0
    return reading.value * reading.time_enabled / reading.time_running


@dataclass(frozen=True)
class CPI:
    cycles: float
    instructions: float

    @property
    def cpi(self) -> float | None:
        return self.cycles / self.instructions if self.instructions > 0 else None


def cpi_of(cycles: Iterable[Reading], instructions: Iterable[Reading]) -> CPI:
    """Per-CPU readings of one cgroup → its scaled totals."""
    return CPI(sum(scaled(r) for r in cycles), sum(scaled(r) for r in instructions))


@dataclass
class _Open:
    """The counters of one container while the window runs."""

    target: Target
    fds: dict[str, list[int]] = field(default_factory=dict)

    def close(self) -> None:
        for fds in self.fds.values():
            for fd in fds:
                os.close(fd)
        self.fds.clear()


class CPICollector:
    """See the module docstring."""

    name = "cpi"
    gate = GATE

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]],
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        sys_root: Path = Path("/sys"),
        *,
        interval: float = 60.0,
        window: float = 10.0,
        perf_open: PerfOpen = perf_event_open,
        sleep: Callable[[float], None] = time.sleep,
        cgroup_version: int | None = None,
    ) -> None:
        self.pods = pods
        self.cgroups = CgroupFS(cgroup_root, cgroup_version)
        self.sys_root = sys_root
        self.interval = interval
        self.window = window
        self.perf_open = perf_open
        self.sleep = sleep
        self.latest: list[Sample] = []  # the last pass, for koordlet_container_cpi
        self.skipped: Counter[str] = Counter()
        self._probed = False

    def _unavailable(self, err: OSError) -> CollectorUnavailable | None:
        name = errno.errorcode.get(err.errno or 0, str(err.errno))
        if err.errno in _NO_COUNTERS:
            return CollectorUnavailable(
                f"hardware perf counters are not available: {name} ({err.strerror})"
            )
        if err.errno in _NOT_PERMITTED:
            return CollectorUnavailable(
                f"hardware perf counters are not permitted: {name} ({err.strerror}); "
                "needs CAP_PERFMON or CAP_SYS_ADMIN, or a lower kernel.perf_event_paranoid"
            )
        return None

    def _probe(self) -> None:
        """One cycles counter on this process: fails the same way on a host without a PMU."""
        try:
            fd = self.perf_open(PERF_COUNT_HW_CPU_CYCLES, 0, -1, PERF_FLAG_FD_CLOEXEC)
        except OSError as err:
            unavailable = self._unavailable(err)
            if unavailable is not None:
                raise unavailable from None
            raise
        os.close(fd)
        self._probed = True

    def _online_cpus(self) -> frozenset[int]:
        path = self.sys_root / "devices" / "system" / "cpu" / "online"
        try:
            return parse_cpuset(read_text(path))
        except Skip as skip:
            raise CollectorUnavailable(f"cannot list online CPUs: {skip}") from None
        except ModelError as err:
            raise CollectorUnavailable(f"cannot list online CPUs: {err}") from None

    def collect(self, now: float) -> list[Sample]:
        if not self._probed:
            self._probe()
        cpus = sorted(self._online_cpus())
        found, without_dir = targets(self.pods())
        if without_dir:
            self.skipped[NO_CGROUP_DIR] += without_dir
        opened: list[_Open] = []
        try:
            for target in found:
                if target.level != "container":
                    continue
                counters = self._open(target, cpus)
                if counters is not None:
                    opened.append(counters)
            samples: list[Sample] = []
            if opened:
                self.sleep(self.window)
                for counters in opened:
                    samples.extend(self._read(counters, now))
            self.latest = samples
            return samples
        finally:
            for counters in opened:
                counters.close()

    def _perf_root(self) -> Path:
        """The hierarchy holding the perf_event controller: <root> on v2; on v1 its
        perf_event mount, or on a hybrid host without one the v2 tree, which then owns it."""
        root = self.cgroups.root
        if self.cgroups.version == 2:
            return root
        if (
            not (root / "perf_event").is_dir()
            and (root / "unified" / "cgroup.controllers").exists()
        ):
            return root / "unified"
        return root / "perf_event"

    def _open(self, target: Target, cpus: list[int]) -> _Open | None:
        directory = self._perf_root() / target.cgroup_dir
        try:
            cgroup_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            self.skipped[MISSING] += 1
            return None
        except OSError:
            self.skipped[UNREADABLE] += 1
            return None
        counters = _Open(target)
        try:
            for event, config in EVENTS.items():
                fds = counters.fds.setdefault(event, [])
                for cpu in cpus:
                    flags = PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC
                    fds.append(self.perf_open(config, cgroup_fd, cpu, flags))
        except OSError as err:
            counters.close()
            unavailable = self._unavailable(err)
            if unavailable is not None and err.errno != errno.ENOENT:
                raise unavailable from None
            # ENOENT here is a cgroup removed while opening; other errors (EMFILE) are
            # this container's alone.
            self.skipped[PERF_OPEN_FAILED] += 1
            return None
        finally:
            os.close(cgroup_fd)
        return counters

    def _read(self, counters: _Open, now: float) -> list[Sample]:
        readings: dict[str, list[Reading]] = {}
        try:
            for event, fds in counters.fds.items():
                readings[event] = [parse_reading(os.read(fd, _READING.size)) for fd in fds]
        except OSError:
            self.skipped[PERF_READ_FAILED] += 1
            return []
        except Skip as skip:
            self.skipped[skip.reason] += 1
            return []
        result = cpi_of(readings["cycles"], readings["instructions"])
        labels = counters.target.labels
        samples = [
            Sample("container_cpi", {**labels, "cpi_field": "cycles"}, now, result.cycles),
            Sample(
                "container_cpi", {**labels, "cpi_field": "instructions"}, now, result.instructions
            ),
        ]
        if result.cpi is not None:
            samples.append(Sample("container_cpi", {**labels, "cpi_field": "cpi"}, now, result.cpi))
        return samples
