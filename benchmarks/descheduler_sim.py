"""Cluster simulator for koord-descheduler's decisions. Prints one JSON object; nothing is
asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/descheduler_sim.py [--nodes 1000] [--pods 20000]

The cluster is the scheduler benchmark's (benchmarks/scheduler_sim.py: nodes of 32-96 CPUs
starting at 5-75 % cpu, 1 % stale and 1 % without a NodeMetric; BE, LS and LSR pods), with
the pods placed uniformly at random among the nodes their requests fit, as a cluster looks
when load changed after placement, so that some nodes run hot. Pods belong to ReplicaSets of
ten (controller references, all Ready) and use 60-100 % of their LoadAware estimate, drawn
per pod.

Every ``--interval`` simulated seconds koordlets report (NodeMetric: the node's base usage
plus its pods' real usage) and one descheduling cycle runs what koord-descheduler runs:
LowNodeLoad's round (descheduler.lownodeload.balance: with --args, by default high
thresholds cpu 65 % / memory 95 %, low 45 % / 60 %, and Koordinator's anomaly condition of 5
consecutive abnormal rounds), a PodMigrationJob (EvictDirectly) per chosen pod, one
arbitration round over them (descheduler.migration.arbitration: Koordinator's default limits,
2 per node), and for each job that passes the objectLimiters' check
(descheduler.migration.objectlimit: by default one eviction per ReplicaSet every five
minutes; a job held there is dropped, the pod may be chosen again next cycle), the eviction
and the ReplicaSet's new pod placed by the scheduler extender (filter, prioritize, the best
score) among the nodes it fits.

Timing covers the descheduler's decisions only: building its view of the nodes and pods
(node_info, pod_view), balance and arbitrate; not the simulated reports, evictions or the
rescheduling. Figures: per cycle, hot nodes (real cpu usage above the high threshold, among
nodes that report), pods chosen, migrated and held back by arbitration, and the decision
time; and the cpu utilisation spread before and after.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import scheduler_sim
from descheduler.anomaly import LowNodeLoadState
from descheduler.args import EvictorArgs, LowNodeLoadArgs
from descheduler.cluster import node_info
from descheduler.lownodeload import balance
from descheduler.migration.arbitration import arbitrate
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import Mode, PodMigrationJob, new_pod_migration_job
from descheduler.migration.objectlimit import ObjectLimiters
from descheduler.migration.view import ClusterView, PodView, pod_view, workload_view
from scheduler import loadaware
from scheduler.extender import StaticClusterView, filter, prioritize

DEFAULT_ARGS: dict[str, Any] = {
    "lowThresholds": {"cpu": 45, "memory": 60},
    "highThresholds": {"cpu": 65, "memory": 95},
}
REPLICAS = 10  # pods per ReplicaSet


@dataclass
class Sim:
    """The cluster as it evolves: where each pod runs, and what each pod really uses."""

    cluster: scheduler_sim.Cluster
    pods: dict[str, dict[str, Any]]  # name → pod (spec.nodeName set)
    usage: dict[str, tuple[int, int]]  # name → real (milli-cpu, memory bytes)
    free: dict[str, dict[str, int]] = field(default_factory=dict)  # node → requests left
    now: float = 0.0  # simulated seconds: the object limiters' clock

    def on_node(self) -> dict[str, list[dict[str, Any]]]:
        by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in self.pods.values():
            by_node[pod["spec"]["nodeName"]].append(pod)
        return by_node

    def node_cpu_shares(self) -> dict[str, float]:
        """Real cpu usage over capacity, for the nodes that report."""
        used = {n.name: float(n.base_cpu) for n in self.cluster.sim if n.reports}
        for name, pod in self.pods.items():
            node = pod["spec"]["nodeName"]
            if node in used:
                used[node] += self.usage[name][0]
        cpus = {n.name: n.cpus for n in self.cluster.sim}
        return {node: cpu / (cpus[node] * 1000) for node, cpu in used.items()}

    def metrics(self, now: float) -> list[dict[str, Any]]:
        """Every reporting node's NodeMetric at ``now`` (the node's base usage as its system
        usage); the others keep the generated one."""
        by_node = self.on_node()
        reported = []
        for node in self.cluster.sim:
            if not node.reports:
                continue
            cpu, memory, pods = node.base_cpu, node.base_memory, []
            for pod in by_node.get(node.name, []):
                name = pod["metadata"]["name"]
                c, m = self.usage[name]
                cpu, memory = cpu + c, memory + m
                pods.append((f"{pod['metadata']['namespace']}/{name}", c, m))
            metric = scheduler_sim.node_metric(node.name, cpu, memory, now, pods)
            # what no pod accounts for, as koordlet reports it: LowNodeLoad adds it to the pods'
            system = {"cpu": f"{node.base_cpu}m", "memory": str(node.base_memory)}
            metric["status"]["nodeMetric"]["systemUsage"] = {"resources": system}
            reported.append(metric)
        stale = {n.name for n in self.cluster.sim if not n.reports}
        kept = [m for m in self.cluster.node_metrics if m["metadata"]["name"] in stale]
        return reported + kept

    def fits(self, node: str, requests: Mapping[str, int]) -> bool:
        left = self.free[node]
        return all(left.get(k, 0) >= v for k, v in requests.items() if v)

    def move(self, name: str, node: str) -> None:
        pod = self.pods[name]
        requests = scheduler_sim.pod_requests(pod)
        old = self.free[pod["spec"]["nodeName"]]
        for key, amount in requests.items():
            old[key] = old.get(key, 0) + amount
            self.free[node][key] = self.free[node].get(key, 0) - amount
        pod["spec"]["nodeName"] = node


def build(nodes: int, pods: int, seed: int) -> Sim:
    cluster = scheduler_sim.generate_cluster(nodes, seed)
    generated = scheduler_sim.generate_pods(pods, seed)
    placements = scheduler_sim.random_placement(cluster, generated, seed)
    rng = random.Random(seed + 4)  # noqa: S311 - test data, not secrets
    args = loadaware.LoadAwareArgs()
    placed: dict[str, dict[str, Any]] = {}
    usage: dict[str, tuple[int, int]] = {}
    for index, pod in enumerate(p for p in generated if p["metadata"]["name"] in placements):
        name = pod["metadata"]["name"]
        owner = f"rs-{index // REPLICAS:05d}"
        reference: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner}
        reference |= {"uid": f"uid-{owner}", "controller": True}
        pod["metadata"]["ownerReferences"] = [reference]
        pod["metadata"]["creationTimestamp"] = scheduler_sim.rfc3339(scheduler_sim.T0 - 3600)
        pod["spec"]["nodeName"] = placements[name]
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        share = rng.uniform(0.6, 1.0)
        cpu, memory = loadaware.estimate_pod(pod, args)
        usage[name] = (int(cpu * share), int(memory * share))
        placed[name] = pod
    sim = Sim(cluster, placed, usage)
    sim.free = {n.name: dict(n.allocatable) for n in cluster.sim}
    for pod in placed.values():
        for key, amount in scheduler_sim.pod_requests(pod).items():
            node = sim.free[pod["spec"]["nodeName"]]
            node[key] = node.get(key, 0) - amount
    return sim


@dataclass
class Cycle:
    hot_nodes: int
    chosen: int = 0
    migrated: int = 0
    held_back: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    unplaced: int = 0
    decide_s: float = 0.0


def reschedule(
    sim: Sim, name: str, view: StaticClusterView, now: float, rng: random.Random
) -> str | None:
    """The ReplicaSet's new pod, placed by the extender among the nodes it fits (its old node
    excluded, as the evicted pod's resources are still counted there for a while)."""
    pod = sim.pods[name]
    old = pod["spec"]["nodeName"]
    requests = scheduler_sim.pod_requests(pod)
    candidates = [n for n in sim.free if n != old and sim.fits(n, requests)]
    if not candidates:
        return None
    candidates, _ = scheduler_sim.sample_feasible(candidates, len(sim.free), rng.randrange(1000))
    args = scheduler_sim.extender_args(pod, candidates, None)
    feasible = filter(args, view, now)["NodeNames"] or []
    if not feasible:
        return None
    best = str(feasible[0])
    if len(feasible) > 1:
        scored = prioritize(scheduler_sim.extender_args(pod, feasible, None), view, now)
        top = max(s["Score"] for s in scored)
        best = str(rng.choice([s["Host"] for s in scored if s["Score"] == top]))
    view.bind(pod, best, at=now)
    return best


def cycle(
    sim: Sim,
    now: float,
    *,
    args: LowNodeLoadArgs,
    state: LowNodeLoadState,
    migration: MigrationControllerArgs,
    limits: ObjectLimiters,
    rng: random.Random,
) -> Cycle:
    """One descheduling cycle at ``now``; ``limits`` takes its time from ``sim.now``."""
    sim.now = now
    high = args.node_pools[0].high_thresholds.get("cpu", 100) / 100
    shares = sim.node_cpu_shares()
    out = Cycle(hot_nodes=sum(share > high for share in shares.values()))
    metrics = sim.metrics(now)
    metric_of = {m["metadata"]["name"]: m for m in metrics}
    started = time.perf_counter()
    by_node = sim.on_node()
    infos = []
    for node in sim.cluster.nodes:
        name = node["metadata"]["name"]
        infos.append(node_info(node, metric_of.get(name), by_node.get(name, [])))
    result = balance(args, infos, state, now, EvictorArgs())
    victims = result.victims()
    views = [pod_view(pod) for pod in sim.pods.values()]
    owners: dict[str, list[PodView]] = defaultdict(list)
    for one in views:
        if one.owner is not None:
            owners[one.owner.uid].append(one)
    workloads = {uid: workload_view(len(pods), pods) for uid, pods in owners.items()}
    cluster_view = ClusterView.of(views, workloads)
    jobs = []
    for index, (_, victim) in enumerate(victims):
        job = new_pod_migration_job(
            sim.pods[victim.pod.split("/", 1)[1]],
            name=f"pmj-{index}",
            mode=Mode.EVICT_DIRECTLY,
            ttl=migration.default_job_ttl,
            reason=victim.reason,
            trigger="LowNodeLoad",
        )
        job["metadata"]["creationTimestamp"] = scheduler_sim.rfc3339(now)
        jobs.append(PodMigrationJob.from_dict(job))
    decisions = arbitrate(jobs, [], cluster_view, migration, now=now)
    out.decide_s = time.perf_counter() - started
    out.chosen = len(victims)
    for decision in decisions.decisions:
        if decision.outcome.value == "Waiting":
            out.held_back[decision.reason] += 1
        elif decision.outcome.value == "Failed":
            out.failed[decision.reason] += 1
    view = StaticClusterView(sim.cluster.nodes, metrics)
    for pod in sim.pods.values():
        view.add_pod(pod, assigned_at=now - 600)  # placed long before the reports
    by_name = {one.name: one for one in views}

    def expected_replicas(uid: str) -> int | None:
        return workloads[uid].expected_replicas if uid in workloads else None

    for passed in decisions.passed:
        assert passed.pod_ref is not None
        victim_view = by_name[passed.pod_ref.name]
        limited = limits.exceeded(victim_view)
        if limited is not None:
            out.held_back[f"ObjectLimiter:{limited[0]}"] += 1
            continue
        target = reschedule(sim, passed.pod_ref.name, view, now, rng)
        if target is None:
            out.unplaced += 1
            continue
        sim.move(passed.pod_ref.name, target)
        limits.track(victim_view, expected_replicas, migration.max_migrating_per_workload)
        out.migrated += 1
    return out


def spread(shares: Mapping[str, float]) -> dict[str, float]:
    values = list(shares.values())
    return {
        "mean": round(statistics.fmean(values), 4),
        "stdev": round(statistics.pstdev(values), 4),
        "max": round(max(values), 4),
    }


def run(
    nodes: int, pods: int, seed: int, *, cycles: int, interval: float, config: Mapping[str, Any]
) -> dict[str, Any]:
    built_at = time.perf_counter()
    sim = build(nodes, pods, seed)
    build_s = time.perf_counter() - built_at
    args = LowNodeLoadArgs.from_dict(config)
    migration = MigrationControllerArgs.from_dict({})
    state = LowNodeLoadState.for_args(args)
    limits = ObjectLimiters(migration.object_limiters, clock=lambda: sim.now)
    rng = random.Random(seed + 5)  # noqa: S311 - test data, not secrets
    before = spread(sim.node_cpu_shares())
    now = scheduler_sim.T0
    rounds: list[Cycle] = []
    for _ in range(cycles):
        now += interval
        rounds.append(
            cycle(sim, now, args=args, state=state, migration=migration, limits=limits, rng=rng)
        )
    after = spread(sim.node_cpu_shares())
    high = args.node_pools[0].high_thresholds.get("cpu", 100) / 100
    times = [r.decide_s for r in rounds]
    return {
        "nodes": nodes,
        "pods_placed": len(sim.pods),
        "cycles": cycles,
        "interval_s": interval,
        "setup_s": round(build_s, 2),
        "hot_nodes_before": rounds[0].hot_nodes,
        "hot_nodes_after": sum(s > high for s in sim.node_cpu_shares().values()),
        "pods_migrated": sum(r.migrated for r in rounds),
        "cpu_share_before": before,
        "cpu_share_after": after,
        "cycle_decision_ms": {
            "median": round(statistics.median(times) * 1000, 1),
            "max": round(max(times) * 1000, 1),
        },
        "per_cycle": [
            {
                "hot_nodes": r.hot_nodes,
                "chosen": r.chosen,
                "migrated": r.migrated,
                "held_back": dict(r.held_back),
                "failed": dict(r.failed),
                "unplaced": r.unplaced,
                "decision_ms": round(r.decide_s * 1000, 1),
            }
            for r in rounds
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--interval", type=float, default=60.0, help="simulated seconds")
    parser.add_argument(
        "--args", type=json.loads, default=DEFAULT_ARGS, help="LowNodeLoad args as JSON"
    )
    options = parser.parse_args(argv)
    report = run(
        options.nodes,
        options.pods,
        options.seed,
        cycles=options.cycles,
        interval=options.interval,
        config=options.args,
    )
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
