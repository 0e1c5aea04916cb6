"""What the handler thread costs: CreateContainer round trips to an async handler (run on the
stub's event loop) and to the same handler written plain (run in the stub's handler thread,
under a real time budget), in-process against ``nri_plugin.testing.FakeRuntime``.

Both handlers answer the same adjustment at once; the difference is the hop to the handler
thread and back. Modes alternate in blocks; the first calls of each block are left out. Prints
one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/nri_handler_hop.py [--calls 2500] [--blocks 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from nri_plugin import Stub, api
from nri_plugin.testing import FakeRuntime

WARM_UP = 200


def adjustment() -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
    adjust = api.ContainerAdjustment()
    adjust.linux.resources.cpu.shares.value = 2
    return adjust, []


class OnTheLoop:
    async def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        return adjustment()


class InTheThread:
    def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        return adjustment()


async def block(plugin: object, calls: int) -> list[float]:
    folder = Path(tempfile.mkdtemp(prefix="nri-hop-"))
    runtime = FakeRuntime()
    await runtime.listen(folder / "nri.sock")
    stub = Stub(plugin, name="hop", index="10", socket_path=folder / "nri.sock")
    serving = asyncio.create_task(stub.run())
    try:
        session = await runtime.next_session()
        pod = api.PodSandbox(id="p", name="p", uid="u", namespace="bench")
        ctr = api.Container(id="c", pod_sandbox_id="p", name="c")
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            await session.create_container(pod, ctr)
            seconds.append(time.perf_counter() - started)
        return seconds[WARM_UP:]
    finally:
        stub.stop()
        await asyncio.wait_for(serving, 5)
        await runtime.close()


def percentiles_us(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        f"p{q}": round(1e6 * ordered[min(len(ordered) - 1, len(ordered) * q // 100)], 1)
        for q in (50, 90, 99)
    }


async def main(calls: int, blocks: int) -> dict[str, object]:
    modes = {"loop": OnTheLoop(), "thread": InTheThread()}
    seen: dict[str, list[float]] = {name: [] for name in modes}
    for i in range(blocks):
        for name in sorted(modes, reverse=i % 2 == 1):
            seen[name] += await block(modes[name], calls)
    result: dict[str, object] = {"benchmark": "nri_handler_hop", "calls": calls, "blocks": blocks}
    for name, values in seen.items():
        result[f"{name}_round_trip_us"] = percentiles_us(values)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2500)
    parser.add_argument("--blocks", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.calls, args.blocks))))
