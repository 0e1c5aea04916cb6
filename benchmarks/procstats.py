"""What the koordlet benchmarks read of a process from outside: CPU time and RSS from /proc,
the QoS strategies' mean time from koordlet's metrics, a py-spy recording; and the percentiles
they print. Light on imports: koordlet_scaling.py's child, which runs koordlet and is measured,
imports it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def strategy_times(metrics_text: str) -> dict[str, float]:
    """Mean milliseconds per run of each QoS manager strategy, from koordlet's histogram in
    its metrics exposition."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    name = "koordlet_qos_strategy_duration_seconds"
    for line in metrics_text.splitlines():
        for suffix, into in (("_sum{", sums), ("_count{", counts)):
            if line.startswith(name + suffix):
                strategy = line.split('strategy="', 1)[1].split('"', 1)[0]
                into[strategy] = float(line.rsplit(" ", 1)[1])
    return {k: round(1000 * sums[k] / counts[k], 2) for k in sums if counts.get(k)}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def record_flame(pid: int, out: Path, seconds: int = 20) -> None:
    """py-spy on ``pid``: an SVG flame graph, or its raw collapsed stacks when ``out`` does
    not end in .svg."""
    spy = Path(sys.executable).parent / "py-spy"
    fmt = "flamegraph" if out.suffix == ".svg" else "raw"
    subprocess.run(
        [str(spy), "record", "--pid", str(pid), "--duration", str(seconds), "--rate", "200",
         "--format", fmt, "--output", str(out), "--nonblocking"],
        check=True, capture_output=True,
    )  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(values: list[float], digits: int = 3) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": round(min(values), digits),
        "p50": round(percentile(values, 0.5), digits),
        "p90": round(percentile(values, 0.9), digits),
        "p99": round(percentile(values, 0.99), digits),
        "max": round(max(values), digits),
    }
