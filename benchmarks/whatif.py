"""The replay's cost for a day of history: ``koordctl whatif`` on a metric cache holding 24 h of
1-second samples of a node with ``--pods`` pods. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/whatif.py [--pods 20] [--hours 24] \
        [--workdir DIR] [--svg docs/whatif.svg]

The synthetic day (fixed seed, 2026-12-01 UTC): a 32-core, 128 GiB node; 70 % of the pods are
LS, with a daily curve (quiet at night, busy 09:00-18:00) and a peak of 15 minutes every 30
minutes; the BE pods use up to 12 cores of what the baseline's suppress left them; the system
about 1 core. Each pod
records CPU, memory and CPU PSI some avg10 every second; the node its CPU and memory, the
besteffort cgroup its usage, request and limit (``node_be``), the LS run-queue latency p99
every 10 s: what koordlet's collectors write, less the series the replay does not read.

The command is timed in a child process, as a user runs it: wall and CPU seconds (user +
system) and its peak RSS. The baseline is colocation at cpuReclaimThresholdPercent 60 with
suppress at 65 %; the proposal reclaims 75 % and suppresses at 70 %, with CPU and memory
eviction thresholds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from koordlet.metriccache import MetricCache, Sample

T0 = 1_796_083_200  # 2026-12-01 00:00:00 UTC
GI = 1 << 30
CORES, MEMORY = 32, 128 * GI
BASELINE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: slo-controller-config, namespace: koordinator-system}
data:
  colocation-config: '{"enable": true, "cpuReclaimThresholdPercent": 60}'
  resource-threshold-config: '{"clusterStrategy": {"enable": true,
    "cpuSuppressThresholdPercent": 65}}'
"""
PROPOSED = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: slo-controller-config, namespace: koordinator-system}
data:
  colocation-config: '{"enable": true, "cpuReclaimThresholdPercent": 75}'
  resource-threshold-config: '{"clusterStrategy": {"enable": true,
    "cpuSuppressThresholdPercent": 70, "cpuEvictThresholdPercent": 70,
    "evictEnabledPriorityThreshold": 5000, "memoryEvictThresholdPercent": 70}}'
"""


def daily(second: int) -> float:
    """0.25 at night to 1.0 in office hours, smoothly."""
    hour = (second / 3600) % 24
    return 0.25 + 0.75 * max(0.0, math.sin(math.pi * (hour - 6) / 15)) if 6 <= hour <= 21 else 0.25


def generate(path: Path, pods: int, hours: int, seed: int = 7) -> int:
    rng = random.Random(seed)  # noqa: S311 - a reproducible synthetic load, not a secret
    ls_count = max(1, round(pods * 0.7))
    labels = [{"pod_uid": f"pod-{i:02d}"} for i in range(pods)]
    psi_labels = [
        {**lab, "psi_resource_type": "cpu", "psi_precision": "avg10", "psi_degree": "some"}
        for lab in labels
    ]
    be = {"be_resource": "cpu"}
    be_usage, be_request = {**be, "be_allocation": "usage"}, {**be, "be_allocation": "request"}
    be_limit = {**be, "be_allocation": "real-limit"}
    base_cpu = [rng.uniform(0.3, 1.2) for _ in range(pods)]
    base_memory = [rng.uniform(1.5, 5.0) * GI for _ in range(pods)]
    cache = MetricCache(path, retention_seconds=1e9, max_bytes=1 << 40, flush_seconds=1e9)
    written = 0
    batch: list[Sample] = []
    for s in range(hours * 3600):
        t = T0 + s + 0.5
        peak = 1.6 if (s // 900) % 2 else 1.0
        load = daily(s) * peak
        ls_cpu = ls_memory = 0.0
        for i in range(ls_count):
            cpu = base_cpu[i] * 1.5 * load * rng.uniform(0.9, 1.1)
            memory = base_memory[i] * (0.8 + 0.3 * load)
            ls_cpu, ls_memory = ls_cpu + cpu, ls_memory + memory
            pressure = max(0.0, (load - 0.9) * 25) * rng.uniform(0.5, 1.5)
            batch += [
                Sample("pod_cpu_usage", labels[i], t, cpu),
                Sample("pod_memory_usage", labels[i], t, memory),
                Sample("pod_psi", psi_labels[i], t, pressure),
            ]
        system = 1.0 * rng.uniform(0.8, 1.2)
        # BE takes up to 12 cores of what the baseline's suppress (65 %, at least 2 CPUs) allows
        allowed = max(2.0, math.ceil(CORES * 0.65 - ls_cpu - system))
        be_total = min(12.0, allowed) * rng.uniform(0.85, 1.0)
        be_memory = 0.0
        for i in range(ls_count, pods):
            cpu = be_total / (pods - ls_count)
            memory = base_memory[i] * 1.5
            be_memory += memory
            batch += [
                Sample("pod_cpu_usage", labels[i], t, cpu),
                Sample("pod_memory_usage", labels[i], t, memory),
                Sample("pod_psi", psi_labels[i], t, 0.0),
            ]
        batch += [
            Sample("node_cpu_usage", {}, t, ls_cpu + be_total + system),
            Sample("node_memory_usage", {}, t, ls_memory + be_memory + 6 * GI),
            Sample("node_be", be_usage, t, be_total * 1000),
            Sample("node_be", be_request, t, 12000),
            Sample("node_be", be_limit, t, CORES * 1000),
        ]
        if s % 10 == 0:
            p99 = 60 + 4000 * max(0.0, load - 1.0) * rng.uniform(0.5, 1.5)
            batch.append(Sample("qos_runq_latency_p99", {"qos": "LS"}, t, p99))
        if len(batch) >= 200_000:
            written += cache.append(batch)
            batch = []
    written += cache.append(batch)
    cache.close()
    return written


def koordctl() -> list[str]:
    beside = Path(sys.executable).parent / "koordctl"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-c", "import sys; from koordctl import main; sys.exit(main())"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--workdir", type=Path, help="keep the database and files here")
    parser.add_argument("--svg", type=Path, help="copy the plot here (e.g. docs/whatif.svg)")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="whatif-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "metrics.db"
    db.unlink(missing_ok=True)
    started = time.perf_counter()
    samples = generate(db, args.pods, args.hours)
    generated = time.perf_counter() - started
    (work / "baseline.yaml").write_text(BASELINE)
    (work / "proposed.yaml").write_text(PROPOSED)
    command = [
        *koordctl(), "whatif", "--db", "metrics.db", "--since", f"{args.hours}h",
        "--capacity", f"cpu={CORES},memory={MEMORY // GI}Gi",
        "--baseline", "baseline.yaml", "--nodeslo", "proposed.yaml", "--plot", "whatif.svg",
        *[f"--be-pod=pod-{i:02d}" for i in range(max(1, round(args.pods * 0.7)), args.pods)],
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"koordctl whatif failed ({done.returncode}): {done.stderr.strip()}")
    (work / "table.txt").write_text(done.stdout)
    if args.svg:
        shutil.copyfile(work / "whatif.svg", args.svg)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(
        json.dumps(
            {
                "pods": args.pods,
                "hours": args.hours,
                "samples": samples,
                "db_mib": round(db.stat().st_size / (1 << 20), 1),
                "generate_s": round(generated, 1),
                "replay_wall_s": round(wall, 2),
                "replay_cpu_s": round(cpu, 2),
                "replay_peak_rss_mib": round(after.ru_maxrss / 1024, 1),
                "workdir": str(work),
            }
        )
    )


if __name__ == "__main__":
    main()
