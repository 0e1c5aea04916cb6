"""Node CPU and memory usage, whole-node and per NUMA node, from procfs and sysfs.

CPU: the busy ticks of /proc/stat (user + nice + system + irq + softirq: fields 1, 2, 3, 6
and 7 of a "cpu" line; idle, iowait and steal are not work done on this node's behalf, and
guest time is already inside user) over the elapsed wall time, in cores. A NUMA node's CPU
usage sums the per-CPU lines of the CPUs in its cpulist. The first pass has no CPU samples:
a rate needs two readings.

Memory: MemTotal - MemAvailable from /proc/meminfo (what the kernel could not hand out
without swapping), MemTotal - MemFree as the usage with page cache, and per NUMA node
MemTotal - (MemFree + Active(file) + Inactive(file) + SReclaimable) from nodeN/meminfo
(nodes have no MemAvailable, so reclaimable page cache and slab are subtracted instead).

Emits node_cpu_usage, node_memory_usage, node_memory_usage_with_page_cache (no labels), and
node_numa_cpu_usage, node_numa_memory_usage {numa_node_id}. GPU and other device usage is
not read here.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.cgroupfs.readers import MALFORMED, Skip, parse_int, read_text
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.rates import Counters
from koordlet.metriccache import Sample

_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq (0-based after the label)
_NODE_DIR = re.compile(r"^node(\d+)\Z")


def busy_ticks(fields: list[str], where: str) -> int:
    """Sum of the busy fields of one /proc/stat "cpu" line (without its label)."""
    if len(fields) < 7:
        raise Skip(MALFORMED, f"{where}: {len(fields)} fields, need at least 7")
    return sum(parse_int(fields[i], where) for i in _BUSY_FIELDS)


def parse_proc_stat(text: str) -> tuple[int, dict[int, int]]:
    """(busy ticks of the whole node, busy ticks by CPU id) from /proc/stat."""
    total: int | None = None
    per_cpu: dict[int, int] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        label, *fields = line.split()
        if label == "cpu":
            total = busy_ticks(fields, "/proc/stat cpu")
        elif label[3:].isdigit():
            per_cpu[int(label[3:])] = busy_ticks(fields, f"/proc/stat {label}")
    if total is None:
        raise Skip(MALFORMED, "/proc/stat has no 'cpu' line")
    return total, per_cpu


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo or nodeN/meminfo → {key: bytes} (kB values * 1024; counts as they are).

    Per-node files prefix each line with "Node N"; that prefix is dropped.
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "Node":
            parts = parts[2:]
        if len(parts) < 2 or not parts[0].endswith(":"):
            continue
        value = parse_int(parts[1], f"meminfo {parts[0]}")
        out[parts[0][:-1]] = value * 1024 if parts[2:3] == ["kB"] else value
    return out


def _need(info: dict[str, int], keys: list[str], where: str) -> list[int]:
    missing = [key for key in keys if key not in info]
    if missing:
        raise Skip(MALFORMED, f"{where}: no {', '.join(missing)}")
    return [info[key] for key in keys]


class NodeCollector:
    """See the module docstring."""

    name = "node"

    def __init__(
        self,
        proc_root: Path = Path("/proc"),
        sys_root: Path = Path("/sys"),
        *,
        interval: float = 1.0,
        clock_ticks: int | None = None,
    ) -> None:
        self.proc_root = proc_root
        self.sys_root = sys_root
        self.interval = interval
        self.clock_ticks = clock_ticks or os.sysconf("SC_CLK_TCK")  # USER_HZ, 100 nearly always
        self.skipped: Counter[str] = Counter()
        self._counters: Counters[tuple[str, int]] = Counters()

    def collect(self, now: float) -> list[Sample]:
        stat_path = self.proc_root / "stat"
        if not stat_path.exists():
            raise CollectorUnavailable(f"{stat_path} does not exist (is procfs mounted there?)")
        samples: list[Sample] = []
        per_cpu: dict[int, int] | None = None
        try:
            total, per_cpu = parse_proc_stat(read_text(stat_path))
            usage = self._cores(("node", 0), now, total)
            if usage is not None:
                samples.append(Sample("node_cpu_usage", {}, now, usage))
        except Skip as skip:
            self.skipped[skip.reason] += 1
        try:
            info = parse_meminfo(read_text(self.proc_root / "meminfo"))
            total_mem, available, free = _need(
                info, ["MemTotal", "MemAvailable", "MemFree"], "/proc/meminfo"
            )
            samples.append(Sample("node_memory_usage", {}, now, max(0, total_mem - available)))
            samples.append(
                Sample("node_memory_usage_with_page_cache", {}, now, max(0, total_mem - free))
            )
        except Skip as skip:
            self.skipped[skip.reason] += 1
        samples.extend(self._numa(now, per_cpu))
        return samples

    def _cores(self, key: tuple[str, int], now: float, ticks: int) -> float | None:
        delta = self._counters.update(key, now, ticks)
        return None if delta is None else delta.per_second(unit=self.clock_ticks)

    def _numa_nodes(self) -> dict[int, Path]:
        base = self.sys_root / "devices" / "system" / "node"
        if not base.is_dir():
            return {}  # no NUMA in sysfs (CONFIG_NUMA off): node-level metrics only
        nodes = {}
        for entry in base.iterdir():
            match = _NODE_DIR.match(entry.name)
            if match:
                nodes[int(match.group(1))] = entry
        return nodes

    def _numa(self, now: float, per_cpu: dict[int, int] | None) -> list[Sample]:
        samples: list[Sample] = []
        nodes = self._numa_nodes()
        for node_id, node_dir in sorted(nodes.items()):
            labels = {"numa_node_id": str(node_id)}
            if per_cpu is not None:
                try:
                    cpus = _cpulist(node_dir / "cpulist")
                    # Offline CPUs have no /proc/stat line; a CPU going offline shrinks the sum,
                    # which the counter rule skips once as a reset.
                    ticks = sum(per_cpu[cpu] for cpu in cpus if cpu in per_cpu)
                    usage = self._cores(("numa", node_id), now, ticks)
                    if usage is not None:
                        samples.append(Sample("node_numa_cpu_usage", labels, now, usage))
                except Skip as skip:
                    self.skipped[skip.reason] += 1
            try:
                info = parse_meminfo(read_text(node_dir / "meminfo"))
                where = f"{node_dir.name}/meminfo"
                total, free, active_file, inactive_file, reclaimable = _need(
                    info,
                    ["MemTotal", "MemFree", "Active(file)", "Inactive(file)", "SReclaimable"],
                    where,
                )
                used = total - (free + active_file + inactive_file + reclaimable)
                samples.append(Sample("node_numa_memory_usage", labels, now, max(0, used)))
            except Skip as skip:
                self.skipped[skip.reason] += 1
        self._counters.retain(lambda key: key[0] == "node" or key[1] in nodes)
        return samples


def _cpulist(path: Path) -> frozenset[int]:
    text = read_text(path)
    try:
        return parse_cpuset(text)
    except ModelError as err:
        raise Skip(MALFORMED, f"{path}: {err}") from None
