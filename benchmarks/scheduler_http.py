"""koord-scheduler's extender over HTTPS: the simulator's pods through the real server.

The same cluster and pod stream as benchmarks/scheduler_sim.py; filter and prioritize go as
extender JSON over keep-alive HTTPS (nodeCacheCapable) to an ExtenderServer on localhost that
answers from the simulation's view, as kube-scheduler calls it; the bind decision is taken in
process (a real bind also writes to the API server, which is not what is measured here).
Prints one JSON line with pods/s; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/scheduler_http.py [--nodes 1000] [--pods 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, cast

import trustme

from benchmarks.scheduler_sim import (
    LocalDecider,
    generate_cluster,
    generate_pods,
    nodes_to_find,
    percentile_ms,
    simulate,
)
from scheduler.extender import StaticClusterView
from scheduler.server import ExtenderServer

NAME = "koord-scheduler.koordinator-system.svc"


class HttpDecider(LocalDecider):
    """filter and prioritize over HTTPS; bind decided in process."""

    connection: http.client.HTTPSConnection
    clock: dict[str, float]  # the simulated time the server answers at

    def _post(self, verb: str, args: dict[str, Any], now: float) -> Any:
        self.clock["now"] = now
        body = json.dumps(args)
        self.connection.request(
            "POST", f"/scheduler/{verb}", body, {"Content-Type": "application/json"}
        )
        reply = self.connection.getresponse()
        return json.loads(reply.read())

    def filter(self, args: dict[str, Any], now: float) -> dict[str, Any]:
        return dict(self._post("filter", args, now))

    def prioritize(self, args: dict[str, Any], now: float) -> list[dict[str, Any]]:
        return list(self._post("prioritize", args, now))


def serve(
    view: StaticClusterView, folder: Path, ready: threading.Event, box: dict[str, Any]
) -> None:
    """The server in its own thread and event loop, answering at the simulation's time."""

    async def main() -> None:
        server = ExtenderServer(
            cast(Any, None),
            cast(Any, view),
            host="127.0.0.1",
            port=0,
            cert_dir=folder,
            clock=lambda: box["now"],
        )
        await server.start()
        box["port"], box["loop"] = server.port, asyncio.get_running_loop()
        box["stop"] = asyncio.Event()
        ready.set()
        await box["stop"].wait()
        await server.stop()

    asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--all-nodes",
        action="store_true",
        help="send every feasible node (kube-scheduler sends a sample: percentageOfNodesToScore)",
    )
    opts = parser.parse_args(argv)
    # Client and server threads hand the GIL to each other on every request: switch fast.
    sys.setswitchinterval(0.0005)
    ca = trustme.CA()
    folder = Path(tempfile.mkdtemp(prefix="koord-sched-bench-"))
    cert = ca.issue_cert(NAME, "127.0.0.1")  # the client dials the address
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    context = ssl.create_default_context()
    ca.configure_trust(context)
    cluster = generate_cluster(opts.nodes, opts.seed)
    pods = generate_pods(opts.pods, opts.seed)
    rng = random.Random(opts.seed + 4)  # noqa: S311 - test data, not secrets
    usage_share = {p["metadata"]["name"]: rng.uniform(0.6, 1.0) for p in pods}
    box: dict[str, Any] = {"now": 0.0}

    def decider(view: StaticClusterView) -> HttpDecider:
        ready = threading.Event()
        threading.Thread(target=serve, args=(view, folder, ready, box), daemon=True).start()
        ready.wait(30)
        made = HttpDecider(view)
        made.clock = box
        made.connection = http.client.HTTPSConnection(
            "127.0.0.1", box["port"], context=context, timeout=30
        )
        return made

    started = time.perf_counter()
    out = simulate(
        cluster,
        pods,
        seed=opts.seed,
        rate=100.0,
        report_interval=60.0,
        usage_share=usage_share,
        decider=decider,
        sample=not opts.all_nodes,
    )
    wall = time.perf_counter() - started
    box["loop"].call_soon_threadsafe(box["stop"].set)
    figures = {
        "nodes": opts.nodes,
        "pods": opts.pods,
        "transport": "https keep-alive, nodeCacheCapable",
        "nodes_per_request": opts.nodes if opts.all_nodes else nodes_to_find(opts.nodes),
        "placed": len(out.placements),
        "bind_errors": out.bind_errors,
        "pods_per_s": round(opts.pods / out.decide_s, 1),
        "wall_pods_per_s": round(opts.pods / wall, 1),
        "filter_ms": {
            "p50": percentile_ms(out.filter_s, 0.5),
            "p99": percentile_ms(out.filter_s, 0.99),
        },
        "prioritize_ms": {
            "p50": percentile_ms(out.prioritize_s, 0.5),
            "p99": percentile_ms(out.prioritize_s, 0.99),
        },
    }
    json.dump(figures, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
