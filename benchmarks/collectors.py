"""Cost of one collection cycle as containers grow (fake cgroup trees), and metric-cache query
latency over 5-minute windows. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/collectors.py
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from koordapi import keys
from koordlet.collectors.base import Collector, CollectorRunner, Derived
from koordlet.collectors.be import BECollector
from koordlet.collectors.node import NodeCollector
from koordlet.collectors.pods import PodCollector
from koordlet.collectors.system import SystemCollector
from koordlet.metriccache import MetricCache, Sample
from koordlet.states.pods import PodStore
from nri_plugin import api

# A v1 memory.stat with the 42 lines a 6.1 kernel writes (the collector needs 5 of them).
_LOCAL_KEYS = (
    "cache", "rss", "rss_huge", "shmem", "mapped_file", "dirty", "writeback",
    "workingset_refault_anon", "workingset_refault_file", "swap", "swapcached", "pgpgin",
    "pgpgout", "pgfault", "pgmajfault", "inactive_anon", "active_anon", "inactive_file",
    "active_file", "unevictable",
)  # fmt: skip
_VALUES = {
    "inactive_anon": 1 << 20,
    "active_anon": 8 << 20,
    "unevictable": 0,
    "active_file": 2 << 20,
    "inactive_file": 1 << 20,
}
MEMORY_STAT = "\n".join(
    [f"{k} {_VALUES.get(k, 4096)}" for k in _LOCAL_KEYS]
    + [
        "hierarchical_memory_limit 9223372036854771712",
        "hierarchical_memsw_limit 9223372036854771712",
    ]
    + [f"total_{k} {_VALUES.get(k, 4096)}" for k in _LOCAL_KEYS]
)


def fake_node(root: Path, containers: int) -> PodStore:
    """A v1 tree with ``containers`` pods of one container each, half LS, half BE."""
    pods = PodStore()
    for i in range(containers):
        qos = "besteffort" if i % 2 else "burstable"
        pod_dir = f"kubepods/{qos}/pod{i:08d}"
        for cg in (pod_dir, f"{pod_dir}/c{i}"):
            for sub, files in (
                ("cpuacct", {"cpuacct.usage": str(10**9 * i)}),
                ("cpu", {"cpu.stat": "nr_periods 10\nnr_throttled 1\nthrottled_time 5"}),
                ("memory", {"memory.stat": MEMORY_STAT}),
            ):
                folder = root / "cgroup" / sub / cg
                folder.mkdir(parents=True, exist_ok=True)
                for name, text in files.items():
                    (folder / name).write_text(text + "\n")
        pod = api.PodSandbox(id=f"p{i}", name=f"pod-{i}", uid=f"{i:08d}", namespace="bench")
        pod.labels[keys.LABEL_QOS_CLASS] = "BE" if i % 2 else "LS"
        pod.linux.cgroup_parent = "/" + pod_dir
        container = api.Container(id=f"c{i}", pod_sandbox_id=f"p{i}", name="app")
        container.linux.cgroups_path = f"/{pod_dir}/c{i}"
        pods.put_container(pod, container)
    for sub in ("cpuacct", "cpu", "memory", "cpuset"):
        (root / "cgroup" / sub / "kubepods" / "besteffort").mkdir(parents=True, exist_ok=True)
    (root / "cgroup" / "cpuset" / "kubepods" / "besteffort" / "cpuset.cpus").write_text("0-1\n")
    return pods


def cycle_cost(containers: int, cycles: int) -> float:
    """Milliseconds per cycle of the 1-second collectors (node, pods, BE, system) + storing."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pods = fake_node(root, containers)
        cache = MetricCache()
        collectors: list[Collector | Derived] = [
            NodeCollector(),  # the real /proc: the node's own part is the same for any count
            PodCollector(pods.snapshot, root / "cgroup", cgroup_version=1),
            BECollector(pods.snapshot, root / "cgroup", cgroup_version=1),
            SystemCollector(),
        ]
        runner = CollectorRunner(collectors, cache)
        runner.run_pass(collectors)  # first pass: baselines for the rates
        start = time.perf_counter()
        for _ in range(cycles):
            runner.run_pass(collectors)
        elapsed = time.perf_counter() - start
        for name, health in runner.health.items():
            if health.errors:
                raise RuntimeError(f"collector {name} failed: {health.last_error}")
        return elapsed / cycles * 1000


def query_latency(pods: int, minutes: int, queries: int) -> dict[str, float]:
    cache = MetricCache()
    now = time.time()
    for start in range(0, minutes * 60, 60):  # a minute per batch
        cache.append(
            Sample(name, {"pod_uid": str(p)}, now - minutes * 60 + start + s, float(s % 7))
            for p in range(pods)
            for name in ("pod_cpu_usage", "pod_memory_usage")
            for s in range(60)
        )
    samples = []
    for _ in range(queries):
        uid = str(random.randrange(pods))  # noqa: S311 - choosing series, not secrets
        t0 = time.perf_counter()
        agg = cache.aggregate("pod_cpu_usage", {"pod_uid": uid}, now - 300, now)
        samples.append((time.perf_counter() - t0) * 1000)
        assert agg is not None and agg.count >= 299
    samples.sort()
    return {
        "rows": pods * 2 * minutes * 60,
        "p50_ms": round(samples[len(samples) // 2], 3),
        "p99_ms": round(samples[int(len(samples) * 0.99)], 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    result: dict[str, object] = {"benchmark": "collectors"}
    result["cycle_ms"] = {str(n): round(cycle_cost(n, args.cycles), 2) for n in (10, 100, 1000)}
    result["query_5m_window"] = query_latency(pods=200, minutes=30, queries=2000)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
