"""CPICollector: the counter arithmetic on recorded readings, and the open/read/close path
with a fake perf_event_open (this VM exposes no hardware counters)."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path

import pytest

from koordlet.cgroupfs.readers import Skip
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.cpi import (
    PERF_COUNT_HW_CPU_CYCLES,
    PERF_COUNT_HW_INSTRUCTIONS,
    PERF_FLAG_FD_CLOEXEC,
    PERF_FLAG_PID_CGROUP,
    CPICollector,
    PerfEventAttr,
    Reading,
    cpi_of,
    parse_reading,
    scaled,
)
from koordlet.metriccache import Sample

from .fakes import pod, write

POD_DIR = "kubepods/burstable/poda"
C1 = f"{POD_DIR}/c1"

# Recorded per-CPU readings (value, time_enabled ns, time_running ns) of one container over
# a window. CPU 0 was multiplexed (on the PMU half of the time), CPU 1 ran throughout.
CYCLES = {0: Reading(1_200_000, 10_000_000, 5_000_000), 1: Reading(800_000, 10_000_000, 10_000_000)}
INSTRUCTIONS = {
    0: Reading(500_000, 10_000_000, 5_000_000),
    1: Reading(600_000, 10_000_000, 10_000_000),
}


def test_scaling_extrapolates_over_the_enabled_time() -> None:
    assert scaled(CYCLES[0]) == 2_400_000  # 1.2e6 * 10 ms / 5 ms
    assert scaled(CYCLES[1]) == 800_000
    assert scaled(Reading(5, 10_000_000, 0)) == 0.0  # never on the PMU: no estimate


def test_cpi_sums_scaled_counts_over_cpus() -> None:
    result = cpi_of(CYCLES.values(), INSTRUCTIONS.values())
    assert result.cycles == 3_200_000  # 2.4e6 + 0.8e6
    assert result.instructions == 1_600_000  # 1.0e6 + 0.6e6
    assert result.cpi == 2.0
    assert cpi_of([Reading(10, 1, 1)], [Reading(0, 1, 1)]).cpi is None  # nothing retired


def test_a_reading_is_three_native_u64() -> None:
    assert parse_reading(struct.pack("=QQQ", 7, 8, 9)) == Reading(7, 8, 9)
    with pytest.raises(Skip):
        parse_reading(b"\0" * 8)


def test_the_attr_struct_is_perf_attr_size_ver0() -> None:
    assert ctypes.sizeof(PerfEventAttr) == 64


@pytest.mark.parametrize("code", [errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV])
def test_no_hardware_counters_makes_the_collector_unavailable(tmp_path: Path, code: int) -> None:
    calls = []

    def no_pmu(config: int, pid: int, cpu: int, flags: int) -> int:
        calls.append((config, pid, cpu, flags))
        raise OSError(code, os.strerror(code))

    collector = CPICollector(lambda: [], tmp_path, tmp_path, perf_open=no_pmu)
    with pytest.raises(CollectorUnavailable, match="hardware perf counters are not available"):
        collector.collect(1.0)
    # Probed on this process (pid 0, any CPU), before any cgroup is touched.
    assert calls == [(PERF_COUNT_HW_CPU_CYCLES, 0, -1, PERF_FLAG_FD_CLOEXEC)]


def test_not_permitted_is_unavailable_too(tmp_path: Path) -> None:
    def denied(config: int, pid: int, cpu: int, flags: int) -> int:
        raise OSError(errno.EACCES, "Permission denied")

    with pytest.raises(CollectorUnavailable, match="not permitted"):
        CPICollector(lambda: [], tmp_path, tmp_path, perf_open=denied).collect(1.0)


class FakePMU:
    """perf_event_open that hands out pipes holding a recorded reading."""

    def __init__(self, cgroup_dirs: dict[str, dict[int, dict[int, Reading]]]) -> None:
        self.readings = cgroup_dirs  # directory → config → cpu → reading
        self.opened: list[int] = []
        self.writers: list[int] = []

    def __call__(self, config: int, pid: int, cpu: int, flags: int) -> int:
        if pid == 0:  # the probe
            return os.open(os.devnull, os.O_RDONLY)
        assert flags == PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC
        directory = str(Path(f"/proc/self/fd/{pid}").readlink())  # the cgroup directory fd
        reading = self.readings[directory][config][cpu]
        read_end, write_end = os.pipe()
        os.write(write_end, struct.pack("=QQQ", *vars(reading).values()))
        self.writers.append(write_end)
        self.opened.append(read_end)
        return read_end

    def close(self) -> None:
        for fd in self.writers:
            os.close(fd)


def still_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("layout", ["v1", "v2", "hybrid-without-perf_event"])
def test_a_window_reads_each_container_on_each_cpu(tmp_path: Path, layout: str) -> None:
    root = tmp_path / "cgroup"
    if layout == "v2":
        write(root / "cgroup.controllers", "")
        c1_dir = root / C1
    elif layout == "v1":
        (root / "cpu").mkdir(parents=True)
        c1_dir = root / "perf_event" / C1
    else:  # perf_event not mounted as v1: the controller belongs to the unified tree
        (root / "cpu").mkdir(parents=True)
        write(root / "unified" / "cgroup.controllers", "")
        c1_dir = root / "unified" / C1
    c1_dir.mkdir(parents=True)
    sys = tmp_path / "sys"
    write(sys / "devices" / "system" / "cpu" / "online", "0-1\n")
    pmu = FakePMU(
        {
            str(c1_dir): {
                PERF_COUNT_HW_CPU_CYCLES: CYCLES,
                PERF_COUNT_HW_INSTRUCTIONS: INSTRUCTIONS,
            }
        }
    )
    slept: list[float] = []
    pods = [pod("a", POD_DIR, {"c1": C1, "gone": f"{POD_DIR}/gone"})]
    collector = CPICollector(
        lambda: pods, root, sys, perf_open=pmu, sleep=slept.append, window=10.0
    )
    try:
        samples = collector.collect(60.0)
    finally:
        pmu.close()
    assert slept == [10.0]
    assert len(pmu.opened) == 4  # two events * two CPUs, for the one live container
    assert not any(still_open(fd) for fd in pmu.opened)
    assert {s.labels["cpi_field"]: s.value for s in samples} == {
        "cycles": 3_200_000,
        "instructions": 1_600_000,
        "cpi": 2.0,
    }
    assert all(isinstance(s, Sample) and s.name == "container_cpi" for s in samples)
    assert {k: v for k, v in samples[0].labels.items() if k != "cpi_field"} == {
        "pod_uid": "a",
        "container_id": "c1",
    }
    assert collector.skipped == {"missing": 1}  # the container whose cgroup is gone


def test_no_containers_means_no_window(tmp_path: Path) -> None:
    sys = tmp_path / "sys"
    write(sys / "devices" / "system" / "cpu" / "online", "0\n")
    slept: list[float] = []
    collector = CPICollector(lambda: [], tmp_path, sys, perf_open=FakePMU({}), sleep=slept.append)
    assert collector.collect(1.0) == []
    assert slept == []


def test_this_host_either_measures_or_says_why_not(tmp_path: Path) -> None:
    """The real system call, once: no hardware counters here must be CollectorUnavailable."""
    sys = tmp_path / "sys"
    write(sys / "devices" / "system" / "cpu" / "online", "0\n")
    collector = CPICollector(lambda: [], tmp_path, sys, sleep=lambda _: None)
    try:
        assert collector.collect(1.0) == []
    except CollectorUnavailable as err:
        assert "perf counters are not" in str(err)
