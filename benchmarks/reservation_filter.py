"""What Reservations add to the extender's filter: one call over every node, in a cluster
without reservations and in the same cluster with one on each of ``--reserved`` nodes. Prints
one JSON line with the ratios; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/reservation_filter.py [--nodes 1000] \
        [--reserved 1000] [--pods-per-node 20] [--rounds 30]

Nodes of 64 cores with ``--pods-per-node`` bound pods each (NodeMetrics fresh, LoadAware on);
the reservations hold 4 cores each for pods labelled app=web. Timed, the median of
``--rounds`` calls with the NodeNames form (nodeCacheCapable), a DecisionCache kept as the
server keeps one:

* ``plain_ms``: a non-owner pod, no reservation in the cluster (the fast path);
* ``held_ms``: the same pod with the reservations (each reserved node's holds counted);
* ``owner_ms``: an owner pod with the reservations (kept to the reserved nodes);
* ``held_ratio`` and ``owner_ratio``: each over ``plain_ms``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Collection, Sequence
from typing import Any

from koordapi.reservation.model import Reservation
from scheduler import extender
from scheduler.extender import DecisionCache, StaticClusterView

NOW = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"  # NOW, as the NodeMetrics' updateTime


class ReservedView(StaticClusterView):
    def __init__(self, reservations: Sequence[Reservation], **kw: Any) -> None:
        super().__init__(**kw)
        self._on: dict[str, list[Reservation]] = {}
        for r in reservations:
            self._on.setdefault(r.node_name, []).append(r)

    def reservation_nodes(self) -> Collection[str]:
        return self._on.keys()

    def reservations_on(self, name: str) -> Sequence[Reservation]:
        return self._on.get(name, [])


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
    }


def metric(name: str) -> dict[str, Any]:
    usage = {"resources": {"cpu": "9", "memory": "40Gi"}}
    return {
        "metadata": {"name": name},
        "status": {"updateTime": STAMP, "nodeMetric": {"nodeUsage": usage}},
    }


def pod(name: str, node_name: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    requests = {"cpu": "1300m", "memory": "3Gi"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def reservation(i: int, node_name: str) -> Reservation:
    requests = {"cpu": "4", "memory": "8Gi"}
    return Reservation.from_dict(
        {
            "metadata": {"name": f"r-{i}", "uid": f"uid-r-{i}", "creationTimestamp": STAMP},
            "spec": {
                "template": {"spec": {"containers": [{"resources": {"requests": requests}}]}},
                "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
                "ttl": "0",
            },
            "status": {"phase": "Available", "nodeName": node_name, "allocatable": requests},
        }
    )


def timed(args: dict[str, Any], view: StaticClusterView, rounds: int) -> float:
    cache = DecisionCache()
    extender.filter(args, view, NOW, cache=cache)  # warm, as a running server is
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        extender.filter(args, view, NOW, cache=cache)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--reserved", type=int, default=1000)
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    names = [f"node-{i}" for i in range(args.nodes)]
    kw: dict[str, Any] = {
        "nodes": [node(n) for n in names],
        "node_metrics": [metric(n) for n in names],
        "pods": [pod(f"p-{n}-{j}", n) for n in names for j in range(args.pods_per_node)],
    }
    plain = ReservedView([], **kw)
    held = ReservedView([reservation(i, names[i]) for i in range(args.reserved)], **kw)
    other = {"Pod": pod("batch-1", None), "NodeNames": names}
    owner = {"Pod": pod("web-1", None, {"app": "web"}), "NodeNames": names}
    plain_ms = timed(other, plain, args.rounds)
    held_ms = timed(other, held, args.rounds)
    owner_ms = timed(owner, held, args.rounds)
    result = {
        "nodes": args.nodes,
        "reserved": args.reserved,
        "pods_per_node": args.pods_per_node,
        "plain_ms": round(plain_ms, 2),
        "held_ms": round(held_ms, 2),
        "owner_ms": round(owner_ms, 2),
        "held_ratio": round(held_ms / plain_ms, 1),
        "owner_ratio": round(owner_ms / plain_ms, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
