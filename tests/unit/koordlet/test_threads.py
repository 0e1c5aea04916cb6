"""A cancelled task whose work is in a worker thread is done only once that work has returned:
koordlet closes what the threads use right after its tasks are done."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from koordlet.collectors.base import CollectorRunner
from koordlet.metriccache import MetricCache
from koordlet.threads import in_thread


class HeldCollector:
    """A collector whose pass waits inside until released, then notes that it returned."""

    name = "HeldForTest"
    interval = 60.0

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.released = threading.Event()
        self.returned = False

    def collect(self, now: float) -> list[object]:
        self.inside.set()
        self.released.wait(30)
        self.returned = True
        return []


async def cancelled_while_inside(task: asyncio.Future[Any], held: HeldCollector) -> None:
    """Cancel ``task``, twice, while ``held`` is inside its pass; it must not be done before the
    pass returns, however often the event loop turns."""
    assert await asyncio.to_thread(held.inside.wait, 30)
    for _ in range(2):  # cluster.cancel_and_wait cancels again while a task is not done
        task.cancel()
        for _ in range(20):  # the turns a cancellation takes to reach a task that does not wait
            await asyncio.sleep(0)
        assert not task.done()
    assert not held.returned
    held.released.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert held.returned


def test_a_cancelled_call_raises_only_after_its_thread_returned() -> None:
    held = HeldCollector()

    async def main() -> None:
        task = asyncio.create_task(in_thread(held.collect, 0.0))
        await cancelled_while_inside(task, held)

    asyncio.run(main())


def test_a_cancelled_collector_runner_is_done_only_once_its_pass_returned() -> None:
    """The daemon closes the collectors (the network collector's netlink socket) once the
    runner is done: a pass still in its thread would reopen the socket and leak it."""
    held = HeldCollector()
    runner = CollectorRunner([held], MetricCache())  # type: ignore[list-item]

    async def main() -> None:
        await cancelled_while_inside(asyncio.create_task(runner.run()), held)

    asyncio.run(main())
