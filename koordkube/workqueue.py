"""A deduplicating work queue of object keys, client-go's ``workqueue`` for one event loop.

A key is in at most one of three places: waiting in the queue, being processed, or both
"processing" and "dirty" (added again meanwhile). Adding a waiting key does nothing, so a
burst of events for one object costs one reconcile; a key added while it is processed is
queued again when ``done`` is called, so the reconciler never runs twice at once for one
object and never misses the last change. Failed keys come back after a per-key exponential
delay (``add_rate_limited``) until ``forget`` resets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class QueueShutDown(Exception):
    """``get`` on a queue that is shut down and drained."""


class WorkQueue:
    """Keys in, keys out, each at most once at a time::

        queue = WorkQueue()
        queue.add("node-1")
        key = await queue.get()
        try:
            await reconcile(key)
            queue.forget(key)
        except Exception:
            queue.add_rate_limited(key)
        finally:
            queue.done(key)

    ``base_delay``/``max_delay`` are client-go's per-item limiter defaults (5 ms doubling to
    1000 s).
    """

    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay, self.max_delay = base_delay, max_delay
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()  # queued, or added again while processing
        self._processing: set[str] = set()
        self._failures: dict[str, int] = {}
        self._delayed: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those being processed or delayed)."""
        return len(self._queue)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def add(self, key: str) -> None:
        """Queue ``key`` unless it is already waiting; after ``done`` if it is processing."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        self._wake_one()

    def add_after(self, key: str, seconds: float) -> None:
        """Add ``key`` in ``seconds``; an earlier pending time for the same key wins."""
        if self._shutting_down:
            return
        if seconds <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready = loop.time() + seconds
        pending = self._delayed.get(key)
        if pending is not None:
            if pending[0] <= ready:
                return
            pending[1].cancel()
        self._delayed[key] = (ready, loop.call_at(ready, self._fire, key))

    def add_rate_limited(self, key: str) -> None:
        """Add ``key`` after its backoff: ``base_delay * 2**failures``, capped."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        self.add_after(key, min(self.max_delay, self.base_delay * 2**failures))

    def forget(self, key: str) -> None:
        """Reset ``key``'s failure count (call after it was processed successfully)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> str:
        """Wait for a key and mark it processing; raise QueueShutDown once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif self._queue:
                    self._wake_one()  # the wake-up was meant for us: pass it on
                raise
        key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: str) -> None:
        """Finish processing ``key``; queue it again if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one()

    def shut_down(self) -> None:
        """Stop accepting keys and drop delayed ones; ``get`` drains what is queued, then raises."""
        self._shutting_down = True
        for _, handle in self._delayed.values():
            handle.cancel()
        self._delayed.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _fire(self, key: str) -> None:
        self._delayed.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


Reconcile = Callable[[str], Awaitable[float | None]]
"""Process one key; return seconds after which to look again, or None."""


async def run_worker(queue: WorkQueue, reconcile: Reconcile) -> None:
    """Hand keys to ``reconcile`` until the queue shuts down.

    A raised exception is logged and the key comes back rate-limited; success forgets the
    key's failures and honours a returned requeue delay.
    """
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        try:
            requeue_after = await reconcile(key)
        except Exception:
            log.exception("reconciling %s failed, retry %d", key, queue.num_requeues(key) + 1)
            queue.add_rate_limited(key)
        else:
            queue.forget(key)
            if requeue_after is not None:
                queue.add_after(key, requeue_after)
        finally:
            queue.done(key)
