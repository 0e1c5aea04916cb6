"""Cost of one pass of koord-manager's gang controller (manager.controllers.gang) in a busy
cluster. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/gang_release.py [--nodes 500] [--pods 20000]

``--nodes`` nodes of 64 cores, ``--pods`` plain pods bound over them, and ``--gangs`` gangs of
``--members`` gated members each, waiting: half of the gangs fit (they are let go, their gates
removed through a stub API that answers at once), half ask more than any node has (they
wait and are told why). Timed, ``--rounds`` times each:

* ``pass_ms``: a whole pass (counting the room, the gangs' states, the packing, the patches and
  Events, PodGroup status), gates back on before each round so that every round decides the
  same;
* ``idle_pass_ms``: a pass with no gang waiting (the early return: without a gang, pod and
  node events ask for no pass at all).

The controller runs at most one pass a second, so ``pass_ms`` / 1000 is the share of a core it
takes while gangs wait.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

from koordapi.gang import spec as gang_spec
from koordapi.gang.gate import GATE
from manager.controllers.gang import GangController
from manager.metrics import ManagerMetrics


class _Informer:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects
        self.synced = asyncio.Event()
        self.synced.set()

    def keys(self) -> list[str]:
        return [str(o["metadata"]["name"]) for o in self.objects]

    def list(self) -> list[dict[str, Any]]:
        return self.objects

    def add_handler(self, handler: Any) -> None:
        pass


class _State:
    def __init__(self, nodes: list[Any], pods: list[Any]) -> None:
        self.nodes, self.pods, self.pod_groups = _Informer(nodes), _Informer(pods), _Informer([])


class _Api:
    async def patch(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {}


class _Events:
    async def warn(self, obj: Any, reason: str, message: str) -> None:
        pass


def node(i: int) -> dict[str, Any]:
    allocatable = {"cpu": "64", "memory": "256Gi", "pods": "250"}
    return {
        "metadata": {"name": f"node-{i:04d}"},
        "spec": {},
        "status": {"allocatable": allocatable},
    }


def pod(
    name: str, cpu: int, node_name: str = "", gang: tuple[str, int] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": f"{cpu}m", "memory": "1Gi"}}}
        ]
    }
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "jobs",
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": "2030-01-01T00:00:00Z",
    }
    if node_name:
        spec["nodeName"] = node_name
    if gang is not None:
        meta["annotations"] = {
            gang_spec.ANNOTATION_NAME: gang[0],
            gang_spec.ANNOTATION_MIN_AVAILABLE: str(gang[1]),
        }
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--gangs", type=int, default=40)
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)

    nodes = [node(i) for i in range(args.nodes)]
    pods = [pod(f"p-{i}", 1000, f"node-{i % args.nodes:04d}") for i in range(args.pods)]
    members = []
    for g in range(args.gangs):
        cpu = 2000 if g % 2 == 0 else 100_000  # odd gangs: larger than any node
        members += [
            pod(f"g{g}-{m}", cpu, gang=(f"gang-{g}", args.members)) for m in range(args.members)
        ]
    state = _State(nodes, pods + members)
    controller = GangController(_Api(), state, _Events(), ManagerMetrics())  # type: ignore[arg-type]

    async def timed() -> tuple[list[float], list[float]]:
        passes, idle = [], []
        for r in range(args.rounds):
            for member in members:
                member["spec"]["schedulingGates"] = [{"name": GATE}]
                controller._on_pod("MODIFIED", member)  # as the pod informer hands it over
            controller._released.clear()
            start = time.perf_counter()
            await controller.sync(1e9 + r)
            passes.append((time.perf_counter() - start) * 1e3)
        state.pods.objects = pods
        for member in members:
            controller._on_pod("DELETED", member)
        controller._released.clear()
        for r in range(args.rounds):
            start = time.perf_counter()
            await controller.sync(2e9 + r)
            idle.append((time.perf_counter() - start) * 1e3)
        return passes, idle

    passes, idle = asyncio.run(timed())
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": args.pods,
                "gangs": args.gangs,
                "members": args.members,
                "pass_ms_p50": round(statistics.median(passes), 2),
                "pass_ms_max": round(max(passes), 2),
                "idle_pass_ms_p50": round(statistics.median(idle), 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
