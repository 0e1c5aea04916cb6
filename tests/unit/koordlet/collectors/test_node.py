"""NodeCollector on a fake /proc and /sys: CPU from /proc/stat ticks, memory, NUMA nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.node import NodeCollector, parse_meminfo, parse_proc_stat
from koordlet.metriccache import Sample

from .fakes import write

# label user nice system idle iowait irq softirq steal guest guest_nice
STAT_1 = """cpu  100 10 50 1000 20 5 5 3 0 0
cpu0 60 5 30 500 10 3 2 1 0 0
cpu1 40 5 20 500 10 2 3 2 0 0
intr 12345 0 0
ctxt 999
btime 1700000000
"""
# +300 busy ticks in all (cpu0 +250, cpu1 +50); idle, iowait and steal grow too but do not count.
STAT_2 = """cpu  330 10 110 1900 80 10 10 9 0 0
cpu0 260 5 80 900 40 3 2 4 0 0
cpu1 70 5 30 1000 40 7 8 5 0 0
intr 23456 0 0
"""

MEMINFO = """MemTotal:       16384000 kB
MemFree:         4096000 kB
MemAvailable:    8192000 kB
Buffers:          100000 kB
Cached:          3000000 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
"""

NODE0_MEMINFO = """Node 0 MemTotal:        8192000 kB
Node 0 MemFree:         2048000 kB
Node 0 MemUsed:         6144000 kB
Node 0 Active(file):    1024000 kB
Node 0 Inactive(file):   512000 kB
Node 0 SReclaimable:     256000 kB
Node 0 HugePages_Total:     0
"""
NODE1_MEMINFO = """Node 1 MemTotal:        8192000 kB
Node 1 MemFree:         4096000 kB
Node 1 Active(file):          0 kB
Node 1 Inactive(file):        0 kB
Node 1 SReclaimable:      96000 kB
"""


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    write(proc / "stat", STAT_1)
    write(proc / "meminfo", MEMINFO)
    nodes = sys / "devices" / "system" / "node"
    write(nodes / "node0" / "cpulist", "0\n")
    write(nodes / "node0" / "meminfo", NODE0_MEMINFO)
    write(nodes / "node1" / "cpulist", "1\n")
    write(nodes / "node1" / "meminfo", NODE1_MEMINFO)
    write(nodes / "online", "0-1\n")
    return proc, sys


def by_key(samples: list[Sample]) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("numa_node_id", "")): s.value for s in samples}


def test_parsers_read_the_kernel_formats() -> None:
    total, per_cpu = parse_proc_stat(STAT_1)
    assert total == 100 + 10 + 50 + 5 + 5
    assert per_cpu == {0: 60 + 5 + 30 + 3 + 2, 1: 40 + 5 + 20 + 2 + 3}
    info = parse_meminfo(NODE0_MEMINFO)
    assert info["MemTotal"] == 8192000 * 1024
    assert info["HugePages_Total"] == 0  # a count, not kB


def test_the_first_pass_has_memory_but_no_cpu(roots: tuple[Path, Path]) -> None:
    collector = NodeCollector(*roots, clock_ticks=100)
    values = by_key(collector.collect(100.0))
    assert values == {
        ("node_memory_usage", ""): (16384000 - 8192000) * 1024,
        ("node_memory_usage_with_page_cache", ""): (16384000 - 4096000) * 1024,
        # 8192000 - (2048000 + 1024000 + 512000 + 256000) = 4352000 kB
        ("node_numa_memory_usage", "0"): 4352000 * 1024,
        # 8192000 - (4096000 + 0 + 0 + 96000) = 4000000 kB
        ("node_numa_memory_usage", "1"): 4000000 * 1024,
    }
    assert not collector.skipped


def test_two_passes_give_cores_from_tick_deltas(roots: tuple[Path, Path]) -> None:
    proc, _ = roots
    collector = NodeCollector(*roots, clock_ticks=100)
    collector.collect(100.0)
    write(proc / "stat", STAT_2)
    samples = collector.collect(102.0)
    values = by_key(samples)
    assert values[("node_cpu_usage", "")] == 1.5  # 300 ticks / 2 s / 100 Hz
    assert values[("node_numa_cpu_usage", "0")] == 1.25  # cpu0: 250 ticks
    assert values[("node_numa_cpu_usage", "1")] == 0.25  # cpu1: 50 ticks
    assert all(s.ts == 102.0 for s in samples)
    assert {s.name: s.labels for s in samples}["node_numa_cpu_usage"].keys() == {"numa_node_id"}


def test_a_node_without_numa_in_sysfs_reports_node_metrics_only(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    write(proc / "stat", STAT_1)
    write(proc / "meminfo", MEMINFO)
    collector = NodeCollector(proc, tmp_path / "sys", clock_ticks=100)
    collector.collect(100.0)
    write(proc / "stat", STAT_2)
    names = {s.name for s in collector.collect(101.0)}
    assert names == {"node_cpu_usage", "node_memory_usage", "node_memory_usage_with_page_cache"}


def test_a_tick_counter_that_went_backwards_is_skipped(roots: tuple[Path, Path]) -> None:
    proc, _ = roots
    collector = NodeCollector(*roots, clock_ticks=100)
    write(proc / "stat", STAT_2)
    collector.collect(100.0)
    write(proc / "stat", STAT_1)
    names = {s.name for s in collector.collect(101.0)}
    assert "node_cpu_usage" not in names
    assert "node_numa_cpu_usage" not in names
    assert collector.skipped["counter-reset"] == 3  # node, numa 0, numa 1
    write(proc / "stat", STAT_2)
    values = by_key(collector.collect(103.0))
    assert values[("node_cpu_usage", "")] == 1.5  # the next pass is fine again


def test_malformed_meminfo_is_skipped_and_counted(roots: tuple[Path, Path]) -> None:
    proc, _ = roots
    write(proc / "meminfo", "MemTotal: lots kB\n")
    collector = NodeCollector(*roots, clock_ticks=100)
    names = {s.name for s in collector.collect(1.0)}
    assert "node_memory_usage" not in names
    assert "node_numa_memory_usage" in names
    assert collector.skipped["malformed"] == 1
    write(proc / "meminfo", "MemTotal: 100 kB\n")  # MemAvailable missing: also malformed
    collector.collect(2.0)
    assert collector.skipped["malformed"] == 2


def test_no_proc_stat_makes_the_collector_unavailable(tmp_path: Path) -> None:
    with pytest.raises(CollectorUnavailable, match="stat"):
        NodeCollector(tmp_path, tmp_path, clock_ticks=100).collect(1.0)
