"""Evictions through the Eviction API over the cluster-mode ``KubeApi``.

The QoS manager's strategies run in worker threads and call the evictor synchronously; the
``KubeApi`` lives on the daemon's event loop. ``KubeApiEviction.evict`` hands the request to
that loop and waits for its answer (at most ``timeout`` seconds). Results are those of
``koordlet.executor.kubeapi.EvictionAPI``: 201 started, 429 blocked by a disruption budget,
404/409 gone (or a different pod now), anything else failed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

from koordlet.executor.kubeapi import (
    EvictionAPI,
    EvictionResult,
    eviction_refused,
    eviction_request,
)
from manager.kube.client import KubeApi, status_code


class KubeApiEviction(EvictionAPI):
    """``EvictionAPI`` on a ``KubeApi``; ``bind(loop)`` before the first eviction."""

    def __init__(self, api: KubeApi, *, timeout: float = 10.0) -> None:
        # No super().__init__(): this one needs no stdlib client or credentials.
        self.api = api
        self.timeout = timeout
        self.loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        if self.loop is None:
            return EvictionResult.FAILED, "the Kubernetes client is not running yet"
        future = asyncio.run_coroutine_threadsafe(self.evict_async(namespace, name, uid), self.loop)
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return EvictionResult.FAILED, f"no answer within {self.timeout}s"

    async def evict_async(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        path, body = eviction_request(namespace, name, uid)
        try:
            await self.api._call("POST", path, body=body, write=True)
        except Exception as err:
            return eviction_refused(status_code(err), str(err)) or (
                EvictionResult.FAILED,
                repr(err),
            )
        return EvictionResult.STARTED, "accepted"
