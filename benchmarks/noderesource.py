"""Cost of the NodeResource decisions for a whole cluster: ``calculate`` plus ``need_sync`` for
every node, the work of one full reconcile pass. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/noderesource.py [--nodes 5000] [--pods 100]

Each node has 64 cores / 256 GiB and ``--pods`` pods: 60 % prod (two containers), 10 % mid,
30 % BE, with a NodeMetric reporting every pod but the last two (just scheduled) and one
dangling pod. Usages differ per pod, as real reports do, so no quantity repeats across pods
except the requests. Object building is not timed; the per-node strategy (strategy_for_node)
is timed apart. ``full_pass_s`` reads every pod afresh; the ``memo_*`` figures pass a PodMemo
as a controller would, so unchanged pods (same uid and resourceVersion) are read once.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import sys
import time
from typing import Any

from manager.colocation import ColocationStrategy, parse_colocation_config, strategy_for_node
from manager.noderesource import calculate, need_sync
from manager.noderesource.pods import PodMemo

NOW = 1_790_000_000.0
UPDATED = datetime.datetime.fromtimestamp(NOW - 60, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
CONFIG = parse_colocation_config(
    json.dumps(
        {
            "enable": True,
            "memoryCalculatePolicy": "maxUsageRequest",
            "nodeConfigs": [
                {
                    "name": "big",
                    "nodeSelector": {"matchLabels": {"pool": "big"}},
                    "midUnallocatedPercent": 20,
                }
            ],
        }
    )
)


def build_node(
    index: int, pod_count: int, rng: random.Random
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    name = f"node-{index:05d}"
    node = {
        "metadata": {
            "name": name,
            "labels": {"pool": "big" if index % 2 else "small"},
            "annotations": {"node.koordinator.sh/cpu-normalization-ratio": "1.1"},
        },
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi", "kubernetes.io/batch-cpu": "20000"},
            "allocatable": {"cpu": "63", "memory": "250Gi", "kubernetes.io/batch-cpu": "20000"},
        },
    }
    pods: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    for i in range(pod_count):
        kind = i % 10
        pod_name = f"pod-{index}-{i}"
        if kind < 6:
            labels = {"app": "web"}
            spec: dict[str, Any] = {
                "priority": 9500,
                "containers": [
                    {
                        "name": "app",
                        "resources": {
                            "requests": {"cpu": "500m", "memory": "1Gi"},
                            "limits": {"cpu": "1", "memory": "2Gi"},
                        },
                    },
                    {
                        "name": "proxy",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    },
                ],
            }
            qos_class, priority = "Burstable", "koord-prod"
        elif kind < 7:
            labels = {"koordinator.sh/priority-class": "koord-mid"}
            spec = {
                "containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}
                ]
            }
            qos_class, priority = "Burstable", "koord-mid"
        else:
            labels = {"koordinator.sh/qosClass": "BE"}
            spec = {
                "priority": 5000,
                "containers": [
                    {
                        "name": "job",
                        "resources": {
                            "requests": {
                                "kubernetes.io/batch-cpu": "1000",
                                "kubernetes.io/batch-memory": "2Gi",
                            }
                        },
                    }
                ],
            }
            qos_class, priority = "BestEffort", "koord-batch"
        pods.append(
            {
                "metadata": {
                    "namespace": "bench",
                    "name": pod_name,
                    "uid": f"uid-{index}-{i}",
                    "resourceVersion": str(1000 + i),
                    "labels": labels,
                },
                "spec": {"nodeName": name, **spec},
                "status": {"phase": "Running", "qosClass": qos_class},
            }
        )
        if i < pod_count - 2:
            metrics.append(
                {
                    "namespace": "bench",
                    "name": pod_name,
                    "priority": priority,
                    "qos": "BE" if priority == "koord-batch" else "LS",
                    "podUsage": {
                        "resources": {
                            "cpu": f"{rng.randint(10, 900)}m",
                            "memory": str(rng.randint(50, 1500) << 20),
                        }
                    },
                }
            )
    metrics.append(
        {
            "namespace": "bench",
            "name": "gone",
            "priority": "koord-prod",
            "podUsage": {"resources": {"cpu": "120m", "memory": "300000000"}},
        }
    )
    node_metric = {
        "metadata": {"name": name},
        "status": {
            "updateTime": UPDATED,
            "nodeMetric": {
                "nodeUsage": {
                    "resources": {
                        "cpu": f"{rng.randint(5000, 40000)}m",
                        "memory": str(rng.randint(40, 200) << 30),
                    }
                },
                "systemUsage": {"resources": {"cpu": "1500m", "memory": str(3 << 30)}},
            },
            "podsMetric": metrics,
            "prodReclaimableMetric": {"resource": {"resources": {"cpu": "6", "memory": "20Gi"}}},
        },
    }
    return node, node_metric, pods


def full_pass(
    cluster: list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]],
    strategies: list[ColocationStrategy],
    memo: PodMemo | None,
) -> tuple[float, int]:
    """Seconds for calculate + need_sync over every node, and how many nodes need a write."""
    start = time.perf_counter()
    writes = 0
    for (node, node_metric, pods), strategy in zip(cluster, strategies, strict=True):
        result = calculate(node, node_metric, pods, strategy, NOW, memo=memo)
        write, _ = need_sync(node, result, NOW - 100, NOW, strategy)
        writes += write
    return time.perf_counter() - start, writes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rng = random.Random(42)  # noqa: S311 - test data, not secrets
    cluster = [build_node(i, args.pods, rng) for i in range(args.nodes)]
    start = time.perf_counter()
    strategies = [strategy_for_node(CONFIG, node) for node, _, _ in cluster]
    strategy_seconds = time.perf_counter() - start
    cold = [full_pass(cluster, strategies, None)[0] for _ in range(args.repeats)]
    memo = PodMemo()
    first, writes = full_pass(cluster, strategies, memo)  # fills the memo
    warm = [full_pass(cluster, strategies, memo)[0] for _ in range(args.repeats)]
    cold_s, warm_s = statistics.median(cold), statistics.median(warm)
    json.dump(
        {
            "nodes": args.nodes,
            "pods_per_node": args.pods,
            "full_pass_s": round(cold_s, 3),
            "per_node_us": round(cold_s / args.nodes * 1e6, 1),
            "memo_first_pass_s": round(first, 3),
            "memo_warm_pass_s": round(warm_s, 3),
            "memo_warm_per_node_us": round(warm_s / args.nodes * 1e6, 1),
            "strategy_for_node_pass_s": round(strategy_seconds, 3),
            "nodes_to_write": writes,
        },
        sys.stdout,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
