"""koordlet's answers to containerd right after a Synchronize of thousands of pods.

The whole koordlet runs in this process on a fake cgroup v1 tree (a folder per pod, half of the
pods BE with batch resources, so the reconcile pass that follows the Synchronize writes to every
one of them); ``nri_plugin.testing.FakeRuntime`` plays containerd from a thread of its own with
its own event loop, as containerd is another process. Right after the Synchronize, the runtime
sends RunPodSandbox and then CreateContainer every 20 ms for ``--seconds``; each reply is timed
from the runtime's side. A probe on koordlet's event loop measures its lag (how late a 1 ms
sleep wakes) over the same window. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/nri_sync_burst.py [--pods 5000] [--seconds 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from koordlet.config import Config
from koordlet.daemon import Koordlet
from nri_plugin import api
from nri_plugin.testing import FakeRuntime
from tests.unit.koordlet.test_whole_koordlet import node_of_pods, standalone_config


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {"n": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 3)}


async def burst(
    config: Config,
    synced: tuple[list[api.PodSandbox], list[api.Container]],
    late: tuple[api.PodSandbox, api.Container],
    seconds: float,
    *,
    result: dict[str, Any],
    window: threading.Event,
) -> None:
    """containerd's side: wait for the Synchronize, then RunPodSandbox and the burst of
    CreateContainer, timed; the burst window is when the lag probe counts."""
    pods, containers = synced
    late_pod, late_container = late
    runtime = FakeRuntime(pods=pods, containers=containers, nri_version="v0.9.0")
    await runtime.listen(config.nri_socket)
    try:
        started = time.perf_counter()
        session = await runtime.next_session(timeout=120)
        result["synchronize_s"] = round(time.perf_counter() - started, 3)
        window.set()
        started = time.perf_counter()
        await session.state_change(api.RUN_POD_SANDBOX, late_pod)
        result["first_reply_ms"] = round(1000 * (time.perf_counter() - started), 3)
        replies = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            reply = await session.create_container(late_pod, late_container)
            replies.append(1000 * (time.perf_counter() - started))
            result["shares"] = reply.adjust.linux.resources.cpu.shares.value
            await asyncio.sleep(0.02)
        result["create_container_ms"] = percentiles(replies)
    finally:
        window.clear()
        await runtime.close()
        os.kill(os.getpid(), signal.SIGTERM)  # koordlet's own handler: a clean stop


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nri-sync-burst-"))
    # the last one is created after the Synchronize
    pods, containers = node_of_pods(tmp / "cgroup", args.pods + 1)
    late_pod, late_container = pods.pop(), containers.pop()
    config = standalone_config(tmp)
    daemon = Koordlet(config)
    result: dict[str, Any] = {"benchmark": "nri_sync_burst", "pods": args.pods}
    window = threading.Event()  # set while the runtime sends its burst
    lag_ms: list[float] = []

    def run_containerd() -> None:
        try:
            asyncio.run(
                burst(
                    config,
                    (pods, containers),
                    (late_pod, late_container),
                    args.seconds,
                    result=result,
                    window=window,
                )
            )
        except Exception as err:  # printed with the result
            result["error"] = repr(err)
            os.kill(os.getpid(), signal.SIGTERM)

    async def koordlet() -> None:
        async def probe() -> None:
            while True:
                started = time.perf_counter()
                await asyncio.sleep(0.001)
                if window.is_set():
                    lag_ms.append(1000 * (time.perf_counter() - started) - 1.0)

        probing = asyncio.create_task(probe())
        await daemon.run()
        probing.cancel()

    threading.Thread(target=run_containerd, name="fake-containerd", daemon=True).start()
    asyncio.run(koordlet())
    result["loop_lag_ms"] = percentiles(lag_ms)
    result["overruns"] = daemon.stub.overruns if daemon.stub is not None else None
    print(json.dumps(result))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
