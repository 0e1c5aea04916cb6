"""CRI container-creation latency on the private containerd: the baseline NRI plugins add to.

Each trial runs a pod sandbox, then times CreateContainer and StartContainer through CRI, then
removes the pod. The figures are what the NRI plugin's cost is compared against (a plugin sits
inside CreateContainer). Prints one JSON line; nothing is asserted.

    make setup && PYTHONPATH=. .venv/bin/python benchmarks/cri_create.py -n 50
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.node import Node


def summary(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "min": round(ordered[0], 2),
        "median": round(statistics.median(ordered), 2),
        "p90": round(p90, 2),
        "max": round(ordered[-1], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--trials", type=int, default=30)
    args = parser.parse_args()
    node = Node.start()
    create_ms: list[float] = []
    start_ms: list[float] = []
    try:
        for _ in range(args.trials):
            pod_id = node.run_pod(PodSpec.new(qos="burstable"))
            t0 = time.perf_counter()
            cid = node.create_container(pod_id, ContainerSpec("bench", cpu_shares=512))
            t1 = time.perf_counter()
            node.cri.start_container(cid)
            t2 = time.perf_counter()
            node.remove_pod(pod_id)
            create_ms.append((t1 - t0) * 1000)
            start_ms.append((t2 - t1) * 1000)
    finally:
        problems = node.teardown()
    print(
        json.dumps(
            {
                "benchmark": "cri_create",
                "nri_plugins": 0,
                "trials": args.trials,
                "create_container_ms": summary(create_ms),
                "start_container_ms": summary(start_ms),
                "teardown_problems": problems,
            }
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
