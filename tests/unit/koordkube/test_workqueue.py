"""The work queue hands each key out once at a time and brings failed keys back later."""

from __future__ import annotations

import asyncio

import pytest

from koordkube.workqueue import QueueShutDown, WorkQueue, run_worker
from tests.unit.koordkube.fakes import eventually, run


async def next_key(queue: WorkQueue, timeout: float = 0.5) -> str | None:
    try:
        return await asyncio.wait_for(queue.get(), timeout)
    except TimeoutError:
        return None


def test_a_key_added_while_queued_is_merged() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for key in ("a", "b", "a", "a", "c", "b"):
            queue.add(key)
        assert len(queue) == 3
        assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]
        assert await next_key(queue, 0.02) is None

    run(scenario())


def test_a_key_added_while_processing_comes_back_once_after_done() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add("a")
        key = await queue.get()
        queue.add("a")
        queue.add("a")
        assert len(queue) == 0  # not handed out to a second worker meanwhile
        assert await next_key(queue, 0.02) is None
        queue.done(key)
        assert await next_key(queue) == "a"
        queue.done("a")
        assert await next_key(queue, 0.02) is None

    run(scenario())


def test_failed_keys_back_off_exponentially_per_key_until_forgotten() -> None:
    async def scenario() -> None:
        queue = WorkQueue(base_delay=0.02, max_delay=0.08)
        loop = asyncio.get_running_loop()
        waits = []
        for _ in range(5):
            start = loop.time()
            queue.add_rate_limited("a")
            assert await next_key(queue) == "a"
            waits.append(loop.time() - start)
            queue.done("a")
        assert queue.num_requeues("a") == 5
        for got, want in zip(waits, [0.02, 0.04, 0.08, 0.08, 0.08], strict=True):
            assert want <= got < want + 0.05
        queue.add_rate_limited("b")  # another key starts at the base delay
        start = loop.time()
        assert await next_key(queue) == "b"
        assert loop.time() - start < 0.05
        queue.forget("a")
        assert queue.num_requeues("a") == 0

    run(scenario())


def test_add_after_keeps_the_earliest_time_and_zero_adds_now() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        loop = asyncio.get_running_loop()
        start = loop.time()
        queue.add_after("a", 0.3)
        queue.add_after("a", 0.05)  # earlier: wins
        queue.add_after("a", 1.0)  # later: ignored
        assert await next_key(queue) == "a"
        assert loop.time() - start < 0.25
        queue.done("a")
        queue.add_after("b", 0)
        assert len(queue) == 1

    run(scenario())


def test_shut_down_drains_then_stops_getters_and_refuses_new_keys() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        waiting = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        queue.add("a")
        assert await waiting == "a"
        queue.add("b")
        queue.add_after("c", 0.01)
        idle = asyncio.create_task(next_key(queue))
        assert await idle == "b"
        blocked = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        queue.shut_down()
        with pytest.raises(QueueShutDown):
            await blocked
        queue.add("d")
        # a timer due after "c"'s: the loop runs due timers in order, so once it fires, "c"'s
        # would have fired before it had shut_down not cancelled it
        passed = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.02, passed.set_result, None)
        await passed
        assert queue.shutting_down and len(queue) == 0

    run(scenario())


def test_a_cancelled_getter_does_not_swallow_a_key() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        first = asyncio.create_task(queue.get())
        second = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        queue.add("a")  # wakes the first getter...
        first.cancel()  # ...which is cancelled before it runs
        assert await asyncio.wait_for(second, 0.5) == "a"

    run(scenario())


def test_run_worker_retries_failures_and_honours_requeue_after() -> None:
    async def scenario() -> None:
        queue = WorkQueue(base_delay=0.001)
        calls: list[str] = []

        async def reconcile(key: str) -> float | None:
            calls.append(key)
            if key == "flaky" and calls.count("flaky") < 3:
                raise RuntimeError("transient")
            if key == "again" and calls.count("again") == 1:
                return 0.01
            return None

        worker = asyncio.create_task(run_worker(queue, reconcile))
        queue.add("flaky")
        queue.add("again")
        await eventually(lambda: calls.count("flaky") == 3 and calls.count("again") == 2)
        assert queue.num_requeues("flaky") == 0  # forgotten after it succeeded
        queue.shut_down()
        await asyncio.wait_for(worker, 1)

    run(scenario())
