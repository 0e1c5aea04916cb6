"""Cluster simulator for the scheduler extender's decisions. Prints one JSON object; nothing
is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/scheduler_sim.py [--nodes 1000] [--pods 10000]

Nodes of 32, 64 or 96 logical CPUs (two sockets, two threads per core, 4 GiB per CPU, a
cpu-topology annotation) start with 5-75 % cpu usage in their NodeMetrics; 1 % never report
again (their NodeMetric expires) and 1 % have none. Pods arrive at ``--rate`` per simulated
second: half BE batch pods (batch-cpu, batch-memory), LS pods, some without requests, 5 %
LSR pods with whole CPUs. Each goes the way kube-scheduler takes it: its own fit check
(requests against allocatable, FitTracker) picks the candidates, then the extender's filter
→ prioritize (when more than one node passes) → the best score, ties at random →
bind_decision → the assignment recorded in the view, so later pods see earlier ones through
assigned_since_report. koordlets report every ``--report-interval`` simulated seconds,
staggered: the NodeMetric then includes the placed pods' real usage (60-100 % of their
estimate, drawn per pod).

Timing covers the decision functions only (filter, prioritize, bind_decision): not the fit
check, building requests or the simulated reports. CPU utilisation per node is summarised
before and after, both as estimated (initial usage + the placed pods' estimates) and as real
(+ their real usage), for the extender's placement and for a baseline placing each pod on a
uniformly random node among those its requests fit.

Reusable for a mode that posts to a running extender: generate_cluster and generate_pods
build the objects, extender_args the ExtenderArgs kube-scheduler sends, and simulate()
drives any Decider (LocalDecider calls the functions in-process).
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from koordapi import keys
from koordapi import pod as pod_model
from koordapi.quantity import milli_value
from scheduler import loadaware
from scheduler.extender import (
    BindPlan,
    DecisionCache,
    ExtenderConfig,
    StaticClusterView,
    bind_decision,
    filter,
    prioritize,
)

T0 = 1_790_000_000.0
GI = 1 << 30


def rfc3339(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the cluster -----------------------------------------------------------------------------


@dataclass
class SimNode:
    name: str
    cpus: int  # logical CPUs = allocatable cpu cores
    base_cpu: int  # usage of what already runs there, milli-cores
    base_memory: int  # bytes
    reports: bool  # False: its NodeMetric is stale and stays so
    allocatable: dict[str, int]  # what NodeResourcesFit compares requests with


@dataclass
class Cluster:
    nodes: list[dict[str, Any]]
    node_metrics: list[dict[str, Any]]
    sim: list[SimNode]


def cpu_topology(cpus: int) -> str:
    """Two sockets, one NUMA node each, two threads per core (siblings c and c + cpus/2)."""
    cores = cpus // 2
    per_socket = cores // 2
    detail = [
        {
            "id": t * cores + c,
            "core": c % per_socket,
            "socket": c // per_socket,
            "node": c // per_socket,
        }
        for t in range(2)
        for c in range(cores)
    ]
    return json.dumps({"detail": detail}, separators=(",", ":"))


def node_metric(
    name: str,
    cpu: int,
    memory: int,
    updated: float,
    pods: Sequence[tuple[str, int, int]] = (),
) -> dict[str, Any]:
    """A NodeMetric as koordlet writes it; ``pods`` are (namespace/name, cpu, memory)."""
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": rfc3339(updated),
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu}m", "memory": str(memory)}}},
            "podsMetric": [
                {
                    "namespace": key.split("/")[0],
                    "name": key.split("/")[1],
                    "podUsage": {"resources": {"cpu": f"{c}m", "memory": str(m)}},
                }
                for key, c, m in pods
            ],
        },
    }


def generate_cluster(count: int, seed: int, now: float = T0) -> Cluster:
    """``count`` nodes with varied usage (cpu 5-75 % of allocatable, memory 20-80 %)."""
    rng = random.Random(seed)  # noqa: S311 - test data, not secrets
    nodes, metrics, sim = [], [], []
    topologies = {cpus: cpu_topology(cpus) for cpus in (32, 64, 96)}
    for i in range(count):
        name = f"node-{i:05d}"
        cpus = rng.choice((32, 64, 64, 96))
        memory = cpus * 4 * GI
        base_cpu = int(cpus * 1000 * rng.uniform(0.05, 0.75))
        base_memory = int(memory * rng.uniform(0.2, 0.8))
        kind = rng.random()
        reports = kind >= 0.01
        # what koord-manager would publish for batch pods, fixed here: half the cpu, 40 %
        # of the memory
        batch_cpu, batch_memory = cpus * 500, memory * 2 // 5
        allocatable = {
            "cpu": cpus * 1000,
            "memory": memory,
            keys.BATCH_CPU: batch_cpu,
            keys.BATCH_MEMORY: batch_memory,
        }
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "uid": f"uid-{name}",
                    "resourceVersion": "1",
                    "labels": {"kubernetes.io/hostname": name},
                    "annotations": {keys.ANNOTATION_CPU_TOPOLOGY: topologies[cpus]},
                },
                "status": {
                    "allocatable": {
                        "cpu": str(cpus),
                        "memory": str(memory),
                        "pods": "250",
                        keys.BATCH_CPU: str(batch_cpu),
                        keys.BATCH_MEMORY: str(batch_memory),
                    },
                    "capacity": {"cpu": str(cpus), "memory": str(memory), "pods": "250"},
                },
            }
        )
        if kind >= 0.02 or not reports:  # 1 % stale (reported 300 s ago), 1 % none at all
            updated = now - (300 if not reports else rng.uniform(5, 60))
            metrics.append(node_metric(name, base_cpu, base_memory, updated))
        sim.append(
            SimNode(name, cpus, base_cpu, base_memory, reports and kind >= 0.02, allocatable)
        )
    return Cluster(nodes, metrics, sim)


def generate_pods(count: int, seed: int) -> list[dict[str, Any]]:
    """50 % BE batch, 38 % LS, 7 % without requests, 5 % LSR with whole CPUs."""
    rng = random.Random(seed + 1)  # noqa: S311 - test data, not secrets
    pods = []
    for i in range(count):
        kind = rng.random()
        labels: dict[str, str] = {}
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        priority = 9500
        if kind < 0.50:
            labels[keys.LABEL_QOS_CLASS] = "BE"
            priority = 5500
            requests = {
                keys.BATCH_CPU: str(rng.choice((250, 500, 1000, 2000))),
                keys.BATCH_MEMORY: f"{rng.choice((1, 2, 4))}Gi",
            }
            limits = dict(requests)
        elif kind < 0.88:
            labels[keys.LABEL_QOS_CLASS] = "LS"
            cpu = rng.choice(("100m", "250m", "500m", "1", "2"))
            requests = {"cpu": cpu, "memory": f"{rng.choice((512, 1024, 2048, 4096))}Mi"}
            limits = {"cpu": str(2 * milli_value(cpu) // 1000 or 1), "memory": "8Gi"}
        elif kind < 0.95:
            labels[keys.LABEL_QOS_CLASS] = "LS"
        else:
            labels[keys.LABEL_QOS_CLASS] = "LSR"
            cpus = rng.choice((2, 4, 8))
            requests = {"cpu": str(cpus), "memory": f"{4 * cpus}Gi"}
            limits = dict(requests)
        resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"pod-{i:06d}",
                    "namespace": "sim",
                    "uid": f"uid-pod-{i:06d}",
                    "resourceVersion": "1",
                    "labels": labels,
                    "annotations": {},
                },
                "spec": {
                    "schedulerName": "default-scheduler",
                    "priority": priority,
                    "containers": [{"name": "main", "image": "app", "resources": resources}],
                },
                "status": {"phase": "Pending"},
            }
        )
    return pods


def extender_args(
    pod: Mapping[str, Any],
    node_names: Sequence[str],
    nodes: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """ExtenderArgs as kube-scheduler sends them: NodeNames (nodeCacheCapable) unless the
    Node objects are given."""
    if nodes is None:
        return {"Pod": pod, "Nodes": None, "NodeNames": list(node_names)}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}


# -- deciding --------------------------------------------------------------------------------


class Decider(Protocol):
    """The three extender calls; an HTTP client posting the same JSON fits here too."""

    def filter(self, args: dict[str, Any], now: float) -> dict[str, Any]: ...

    def prioritize(self, args: dict[str, Any], now: float) -> list[dict[str, Any]]: ...

    def bind(self, pod: Mapping[str, Any], node: str, now: float) -> BindPlan: ...


@dataclass
class LocalDecider:
    view: StaticClusterView
    config: ExtenderConfig = field(default_factory=ExtenderConfig)
    cache: DecisionCache = field(default_factory=DecisionCache)

    def filter(self, args: dict[str, Any], now: float) -> dict[str, Any]:
        return filter(args, self.view, now, config=self.config, cache=self.cache)

    def prioritize(self, args: dict[str, Any], now: float) -> list[dict[str, Any]]:
        return prioritize(args, self.view, now, config=self.config, cache=self.cache)

    def bind(self, pod: Mapping[str, Any], node: str, now: float) -> BindPlan:
        return bind_decision(pod, node, self.view, config=self.config, cache=self.cache)


FIT_RESOURCES = ("cpu", "memory", keys.BATCH_CPU, keys.BATCH_MEMORY)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    spec = pod.get("spec") or {}
    cpu, memory = pod_model.pod_requests(spec)
    batch_cpu, batch_memory = pod_model.pod_requests(spec, (keys.BATCH_CPU, keys.BATCH_MEMORY))
    amounts = dict(zip(FIT_RESOURCES, (cpu, memory, batch_cpu, batch_memory), strict=True))
    return {name: amount for name, amount in amounts.items() if amount}


class FitTracker:
    """kube-scheduler's own filter reduced to NodeResourcesFit (requests against
    allocatable): it decides which nodes the extender is asked about. Without it a node with
    no NodeMetric, which LoadAware lets through, would take pods without end."""

    def __init__(self, nodes: Sequence[SimNode]) -> None:
        self.names = [n.name for n in nodes]
        self.free = {r: {n.name: n.allocatable[r] for n in nodes} for r in FIT_RESOURCES}

    def feasible(self, requests: Mapping[str, int]) -> list[str]:
        names = self.names
        for resource, amount in requests.items():
            free = self.free[resource]
            names = [n for n in names if free[n] >= amount]
        return names

    def place(self, name: str, requests: Mapping[str, int]) -> None:
        for resource, amount in requests.items():
            self.free[resource][name] -= amount


def nodes_to_find(all_nodes: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind with the adaptive percentageOfNodesToScore:
    it stops looking after this many feasible nodes (50 % - 1 % per 125 nodes, at least 5 %,
    at least 100 nodes), and only those reach the extender."""
    if all_nodes < 100:
        return all_nodes
    percentage = max(5, 50 - all_nodes // 125)
    return max(100, all_nodes * percentage // 100)


def sample_feasible(feasible: list[str], all_nodes: int, start: int) -> tuple[list[str], int]:
    """The feasible nodes kube-scheduler would pass on, searching from ``start`` round-robin;
    and where the next search starts."""
    wanted = nodes_to_find(all_nodes)
    if len(feasible) <= wanted:
        return feasible, start
    offset = start % len(feasible)
    picked = (feasible[offset:] + feasible[:offset])[:wanted]
    return picked, start + wanted


@dataclass
class Outcome:
    placements: dict[str, str] = field(default_factory=dict)  # pod name → node
    cpusets: dict[str, str] = field(default_factory=dict)  # pod name → CPUs pinned
    unschedulable: int = 0  # no node passed the fit check and the extender's filter
    bind_errors: int = 0
    pinned: int = 0
    filter_s: list[float] = field(default_factory=list)
    prioritize_s: list[float] = field(default_factory=list)
    bind_s: list[float] = field(default_factory=list)
    decide_s: float = 0.0
    wall_s: float = 0.0


def simulate(
    cluster: Cluster,
    pods: Sequence[dict[str, Any]],
    *,
    seed: int,
    rate: float,
    report_interval: float,
    usage_share: Mapping[str, float],
    node_cache_capable: bool = True,
    decider: Callable[[StaticClusterView], Decider] = LocalDecider,
    sample: bool = True,
) -> Outcome:
    """Place the pods through the extender, kube-scheduler's way; ``usage_share`` is what a
    pod really uses, as a share of its estimate (what koordlet then reports). ``decider``
    makes the Decider from the simulation's view (which records bindings and reports)."""
    view = StaticClusterView(cluster.nodes, cluster.node_metrics)
    extender = decider(view)
    fit = FitTracker(cluster.sim)
    rng = random.Random(seed + 2)  # noqa: S311 - test data, not secrets
    by_name = {n.name: n for n in cluster.sim}
    node_objects = {n["metadata"]["name"]: n for n in cluster.nodes}
    # koordlet reports, staggered: (next report time, node)
    reports = [(T0 + rng.uniform(0, report_interval), n.name) for n in cluster.sim if n.reports]
    heapq.heapify(reports)
    out = Outcome()
    now = T0
    start = 0  # kube-scheduler's round-robin start of the node search
    started = time.perf_counter()
    for pod in pods:
        now += 1 / rate
        while reports and reports[0][0] <= now:
            at, name = heapq.heappop(reports)
            _report(view, by_name[name], at, usage_share)
            heapq.heappush(reports, (at + report_interval, name))
        requests = pod_requests(pod)
        candidates = fit.feasible(requests)
        if sample:
            candidates, start = sample_feasible(candidates, len(cluster.sim), start)
        sent = None if node_cache_capable else node_objects
        best, plan = _schedule_one(
            extender, pod, candidates, node_objects=sent, now=now, rng=rng, out=out
        )
        if best is None or plan is None:
            continue
        if plan.error:
            out.bind_errors += 1
            continue
        if plan.cpuset:
            out.pinned += 1
            out.cpusets[pod["metadata"]["name"]] = plan.cpuset
        view.bind(pod, best, at=now, annotations=plan.annotations)
        fit.place(best, requests)
        out.placements[pod["metadata"]["name"]] = best
    out.wall_s = time.perf_counter() - started
    return out


def _schedule_one(
    decider: Decider,
    pod: dict[str, Any],
    candidates: list[str],
    *,
    node_objects: Mapping[str, Mapping[str, Any]] | None,
    now: float,
    rng: random.Random,
    out: Outcome,
) -> tuple[str | None, BindPlan | None]:
    """filter → prioritize → the best (ties at random) → bind_decision, timed into ``out``."""

    def args_for(names: list[str]) -> dict[str, Any]:
        sent = None if node_objects is None else [node_objects[n] for n in names]
        return extender_args(pod, names, sent)

    args = args_for(candidates)
    t0 = time.perf_counter()
    result = decider.filter(args, now)
    t1 = time.perf_counter()
    out.filter_s.append(t1 - t0)
    filter_s = t1 - t0
    if node_objects is None:
        feasible = result["NodeNames"] or []
    else:
        feasible = [n["metadata"]["name"] for n in (result["Nodes"] or {}).get("items", [])]
    if not feasible:
        out.unschedulable += 1
        out.decide_s += filter_s
        return None, None
    best = feasible[0]
    prioritize_s = 0.0
    if len(feasible) > 1:  # kube-scheduler skips prioritize for a single feasible node
        args = args_for(feasible)
        t1 = time.perf_counter()
        scored = decider.prioritize(args, now)
        prioritize_s = time.perf_counter() - t1
        top = max(s["Score"] for s in scored)
        best = rng.choice([s["Host"] for s in scored if s["Score"] == top])
    t2 = time.perf_counter()
    plan = decider.bind(pod, best, now)
    bind_s = time.perf_counter() - t2
    out.prioritize_s.append(prioritize_s)
    out.bind_s.append(bind_s)
    out.decide_s += filter_s + prioritize_s + bind_s
    return best, plan


def random_placement(
    cluster: Cluster, pods: Sequence[Mapping[str, Any]], seed: int
) -> dict[str, str]:
    """The baseline: each pod on a uniformly random node among those its requests fit."""
    fit = FitTracker(cluster.sim)
    rng = random.Random(seed + 3)  # noqa: S311 - test data, not secrets
    placements = {}
    for pod in pods:
        requests = pod_requests(pod)
        candidates = fit.feasible(requests)
        if candidates:
            node = rng.choice(candidates)
            fit.place(node, requests)
            placements[pod["metadata"]["name"]] = node
    return placements


def _report(
    view: StaticClusterView, node: SimNode, at: float, usage_share: Mapping[str, float]
) -> None:
    """koordlet's report: the node's base usage plus what its placed pods really use."""
    cpu, memory = node.base_cpu, node.base_memory
    pods = []
    args = loadaware.LoadAwareArgs()
    for pod in view.pods_on(node.name):
        meta = pod["metadata"]
        share = usage_share.get(meta["name"], 1.0)
        c, m = loadaware.estimate_pod(pod, args)
        c, m = int(c * share), int(m * share)
        cpu, memory = cpu + c, memory + m
        pods.append((f"{meta['namespace']}/{meta['name']}", c, m))
    view.put_node_metric(node_metric(node.name, cpu, memory, at, pods))


# -- figures ---------------------------------------------------------------------------------


def utilisation(
    cluster: Cluster,
    pods: Sequence[Mapping[str, Any]],
    placements: Mapping[str, str],
    usage_share: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """CPU utilisation per node, summarised: the initial usage plus the placed pods'
    estimates, or, with ``usage_share``, their real usage (what koordlet would report)."""
    args = loadaware.LoadAwareArgs()
    used = {n.name: float(n.base_cpu) for n in cluster.sim}
    for pod in pods:
        name = pod["metadata"]["name"]
        node = placements.get(name)
        if node is not None:
            share = 1.0 if usage_share is None else usage_share[name]
            used[node] += loadaware.estimate_pod(pod, args)[0] * share
    shares = [used[n.name] / (n.cpus * 1000) for n in cluster.sim]
    return {
        "mean": round(statistics.fmean(shares), 4),
        "stdev": round(statistics.pstdev(shares), 4),
        "max": round(max(shares), 4),
        "nodes_over_65_percent": sum(s > 0.65 for s in shares),
        "nodes_over_100_percent": sum(s > 1.0 for s in shares),
    }


def percentile_ms(samples: Sequence[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=100.0, help="pods per simulated second")
    parser.add_argument("--report-interval", type=float, default=60.0)
    parser.add_argument(
        "--full-nodes", action="store_true", help="send Node objects (nodeCacheCapable off)"
    )
    parser.add_argument(
        "--all-nodes",
        action="store_true",
        help="send every feasible node (kube-scheduler sends a sample: percentageOfNodesToScore)",
    )
    opts = parser.parse_args(argv)
    cluster = generate_cluster(opts.nodes, opts.seed)
    pods = generate_pods(opts.pods, opts.seed)
    rng = random.Random(opts.seed + 4)  # noqa: S311 - test data, not secrets
    usage_share = {p["metadata"]["name"]: rng.uniform(0.6, 1.0) for p in pods}
    out = simulate(
        cluster,
        pods,
        seed=opts.seed,
        rate=opts.rate,
        report_interval=opts.report_interval,
        usage_share=usage_share,
        node_cache_capable=not opts.full_nodes,
        sample=not opts.all_nodes,
    )
    random_placements = random_placement(cluster, pods, opts.seed)
    figures = {
        "nodes": opts.nodes,
        "pods": opts.pods,
        "node_cache_capable": not opts.full_nodes,
        "nodes_per_request": len(cluster.sim) if opts.all_nodes else nodes_to_find(opts.nodes),
        "placed": len(out.placements),
        "unschedulable": out.unschedulable,
        "random_placed": len(random_placements),
        "bind_errors": out.bind_errors,
        "lsr_pods_pinned": out.pinned,
        "decisions_per_s": round(opts.pods / out.decide_s, 1),
        "wall_pods_per_s": round(opts.pods / out.wall_s, 1),
        "filter_ms": {
            "p50": percentile_ms(out.filter_s, 0.5),
            "p99": percentile_ms(out.filter_s, 0.99),
        },
        "prioritize_ms": {
            "p50": percentile_ms(out.prioritize_s, 0.5),
            "p99": percentile_ms(out.prioritize_s, 0.99),
        },
        "bind_decision_ms": {
            "p50": percentile_ms(out.bind_s, 0.5),
            "p99": percentile_ms(out.bind_s, 0.99),
        },
        "cpu_utilisation_estimated": {
            "before": utilisation(cluster, pods, {}),
            "extender": utilisation(cluster, pods, out.placements),
            "random": utilisation(cluster, pods, random_placements),
        },
        "cpu_utilisation_real": {
            "extender": utilisation(cluster, pods, out.placements, usage_share),
            "random": utilisation(cluster, pods, random_placements, usage_share),
        },
    }
    json.dump(figures, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
