"""Cost of the extender's ElasticQuota decision (scheduler.quota.QuotaAdmission) in a busy
cluster. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/quota_admission.py [--quotas 200] [--pods 20000]

A two-level tree: ``--quotas`` leaf quotas under a tenth as many parents, on ``--nodes`` nodes
of 64 cores; ``--pods`` pods spread over the leaves, four in five bound. Timed:

* ``load_s``: feeding every node, quota and pod event to a fresh QuotaAdmission (what the
  informers' first lists do);
* ``decision_after_change_ms``: one pod event (a pending pod bound) then the decision for the
  next pending pod: the tree is rebuilt, what each filter call costs while kube-scheduler
  binds pods one after another;
* ``decision_cached_us``: the decision again with nothing changed (the tree kept).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from koordapi.quota import model
from scheduler.quota import QuotaAdmission


def quota(name: str, parent: str, cpu: int, *, is_parent: bool = False) -> dict[str, Any]:
    labels = {model.LABEL_PARENT: parent} if parent else {}
    if is_parent:
        labels[model.LABEL_IS_PARENT] = "true"
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "min": {"cpu": f"{cpu // 3}m", "memory": f"{cpu // 3}Mi"},
            "max": {"cpu": f"{cpu}m", "memory": f"{cpu}Mi"},
        },
    }


def pod(name: str, quota_name: str, cpu: int, node: str | None) -> dict[str, Any]:
    requests = {"cpu": f"{cpu}m", "memory": f"{cpu}Mi"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {model.LABEL_QUOTA_NAME: quota_name},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--quotas", type=int, default=200)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    rng = random.Random(17)  # noqa: S311 - test data, not secrets
    nodes = [
        {
            "metadata": {"name": f"node-{i}"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi"}},
        }
        for i in range(args.nodes)
    ]
    parents = max(1, args.quotas // 10)
    quotas = [quota(f"p-{i}", "", 900_000, is_parent=True) for i in range(parents)]
    quotas += [quota(f"q-{i}", f"p-{i % parents}", 97_300) for i in range(args.quotas)]
    pods = [
        pod(
            f"pod-{i}",
            f"q-{rng.randrange(args.quotas)}",
            rng.randrange(100, 2_000),
            f"node-{rng.randrange(args.nodes)}" if rng.random() < 0.8 else None,
        )
        for i in range(args.pods)
    ]

    start = time.perf_counter()
    admission = QuotaAdmission()
    for node in nodes:
        admission.on_node("ADDED", node)
    for obj in quotas:
        admission.on_quota("ADDED", obj)
    for p in pods:
        admission.on_pod("ADDED", p, f"default/{p['metadata']['name']}")
    load = time.perf_counter() - start

    pending = [p for p in pods if not p["spec"].get("nodeName")]
    after_change, cached, refused = [], [], 0
    for i in range(min(args.rounds, len(pending) - 1)):
        bound = pending[i]
        placed = {**bound, "spec": {**bound["spec"], "nodeName": "node-0"}}
        following = pending[i + 1]
        start = time.perf_counter()
        admission.on_pod("MODIFIED", placed, f"default/{bound['metadata']['name']}")
        refused += admission.reason(following) is not None
        after_change.append(time.perf_counter() - start)
        start = time.perf_counter()
        admission.reason(following)
        cached.append(time.perf_counter() - start)
    print(
        json.dumps(
            {
                "quotas": args.quotas + parents,
                "pods": args.pods,
                "nodes": args.nodes,
                "load_s": round(load, 3),
                "decision_after_change_ms": {
                    "p50": round(statistics.median(after_change) * 1e3, 3),
                    "max": round(max(after_change) * 1e3, 3),
                },
                "decision_cached_us": round(statistics.median(cached) * 1e6, 1),
                "refused": refused,
                "rounds": len(after_change),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
