"""Cost of one run of each QoS manager strategy as pods grow (fake cgroup v1 trees, metrics
in an in-memory cache). Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/qos_strategies.py [--pods 10 100 1000]

Half the pods are LS (1-core limit, throttled), half BE; the NodeSLO turns suppress on (cpuset
policy), quota burst on (auto) and BE memory eviction on with a threshold the node is under,
so every strategy does its full computation and the steady state (nothing left to change) is
what is timed: the cost paid every second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from koordlet.executor import Executor
from koordlet.executor.resctrl import Resctrl
from koordlet.metriccache import MetricCache, Sample
from koordlet.qosmanager.audit import AuditTrail
from koordlet.qosmanager.cgreconcile import CgroupReconcile
from koordlet.qosmanager.cpuburst import CPUBurst
from koordlet.qosmanager.cpusuppress import CPUSuppress
from koordlet.qosmanager.eviction import Evictor
from koordlet.qosmanager.framework import Context, NodeResources, Strategy
from koordlet.qosmanager.memoryevict import MemoryEvict
from koordlet.qosmanager.resctrlreconcile import ResctrlReconcile
from koordlet.states.pods import KnownPod
from koordlet.states.topology import Processor, Topology
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest
from runtimehooks.rules import NodeState, Rules

CPUS = 32
SPEC = {
    "resourceUsedThresholdWithBE": {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "memoryEvictThresholdPercent": 90,
    },
    "cpuBurstStrategy": {"policy": "auto"},
    "resourceQOSStrategy": {"lsClass": {"memoryQOS": {"enable": True, "minLimitPercent": 50}}},
}
FILES = {
    "cpu": {"cpu.cfs_quota_us": "100000", "cpu.cfs_burst_us": "0", "cpu.cfs_period_us": "100000"},
    "cpuset": {"cpuset.cpus": f"0-{CPUS - 1}"},
    "memory": {"memory.min": "0", "memory.low": "0", "memory.high": "max"},
}


def fake_node(root: Path, count: int) -> list[KnownPod]:
    pods = []
    dirs = ["kubepods", "kubepods/burstable", "kubepods/besteffort"]
    for i in range(count):
        be = i % 2 == 1
        pod_dir = f"kubepods/{'besteffort' if be else 'burstable'}/pod{i:08d}"
        labels = {"koordinator.sh/qosClass": "BE" if be else "LS"}
        request = PodRequest(uid=f"{i:08d}", name=f"pod-{i}", namespace="bench", labels=labels,
                             cgroup_dir=pod_dir)  # fmt: skip
        known = KnownPod(request)
        resources = ContainerResources(cpu_shares=1024, cpu_quota=100_000, cpu_period=100_000)
        known.containers[f"c{i}"] = ContainerRequest(
            pod=request, name="app", id=f"c{i}", cgroup_dir=f"{pod_dir}/c{i}", resources=resources
        )
        pods.append(known)
        dirs += [pod_dir, f"{pod_dir}/c{i}"]
    for cg in dirs:
        for sub, files in FILES.items():
            folder = root / sub / cg
            folder.mkdir(parents=True, exist_ok=True)
            for name, text in files.items():
                (folder / name).write_text(text + "\n")
    return pods


def metrics(cache: MetricCache, pods: list[KnownPod], now: float) -> None:
    samples = [Sample("node_cpu_usage", {}, now, 12.0), Sample("node_memory_usage", {}, now, 8e9)]
    for known in pods:
        uid = known.request.uid
        samples += [
            Sample("pod_cpu_usage", {"pod_uid": uid}, now, 0.2),
            Sample("pod_memory_usage", {"pod_uid": uid}, now, 1e8),
        ]
        for cid in known.containers:
            labels = {"pod_uid": uid, "container_id": cid}
            samples += [
                Sample("container_cpu_usage", labels, now, 0.2),
                Sample("container_cpu_throttled", labels, now, 0.0),
            ]
    cache.append(samples)


def measure(count: int, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "cgroup"
        pods = fake_node(root, count)
        executor = Executor(root)
        cache = MetricCache()
        topology = Topology(
            frozenset(range(CPUS)),
            {0: frozenset(range(CPUS))},
            {0: 0},
            64 << 30,
            tuple(Processor(c, c % (CPUS // 2), 0, 0) for c in range(CPUS)),
        )
        rules = Rules(
            slo=NodeSLOSpec.parse(SPEC),
            gates=FeatureGates.parse("CgroupReconcile=true,BEMemoryEvict=true"),
            node=NodeState(cpus=topology.cpus, allocatable_memory=64 << 30),
        )
        strategies: list[Strategy] = [
            CPUSuppress(executor),
            CPUBurst(executor),
            CgroupReconcile(executor),
            ResctrlReconcile(Resctrl(Path(tmp) / "resctrl"), executor),
            MemoryEvict(Evictor(lambda known, message: (False, "benchmark"))),
        ]
        timings: dict[str, list[float]] = {s.name: [] for s in strategies}
        for run in range(repeats + 2):  # two warm-up runs reach the steady state
            now = time.time()
            metrics(cache, pods, now)
            ctx = Context(rules, list(pods), topology, NodeResources(CPUS * 1000, 64 << 30),
                          cache, AuditTrail(), now, 2.0)  # fmt: skip
            for strategy in strategies:
                start = time.perf_counter()
                strategy.run(ctx)
                if run >= 2:
                    timings[strategy.name].append(time.perf_counter() - start)
        cache.close()
    return {name: round(statistics.median(t) * 1000, 2) for name, t in timings.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    result = {f"{n}_pods_ms_per_run": measure(n, args.repeats) for n in args.pods}
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
