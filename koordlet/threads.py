"""Work in a worker thread that a cancellation cannot leave behind.

``asyncio.to_thread`` returns to a cancelled caller at once while its thread runs on. At a
stop, koordlet cancels its tasks and then closes what their threads use (the network
collector's netlink socket, the metric cache, the executor): a collector still inside its pass
would read a closed cache or open a fresh socket that nothing closes. ``in_thread`` makes the
cancellation wait for the thread's call to return, so "the tasks are done" means "their threads
are out".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in the default executor; cancelled, however often, it raises
    CancelledError only once the call has returned."""
    call = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        # A thread cannot be stopped, so cancelling again (cluster.cancel_and_wait does, every
        # 0.1 s) waits on too; what the call returned or raised no longer matters.
        while not call.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([call])
        if not call.cancelled():
            call.exception()  # retrieved: not logged as "never retrieved"
        raise
