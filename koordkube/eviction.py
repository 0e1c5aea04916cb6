"""The Kubernetes Eviction API: how koordlet evicts a pod when an API server decides.

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1 Eviction whose delete
options carry the pod's UID as a precondition, so a pod that was replaced under the same name
is never evicted by mistake. The API server answers 201 (eviction started), 429 (a
PodDisruptionBudget forbids it now: try later), 404 (the pod is gone) or 409 (the UID
precondition failed: it is a different pod now). The 409 comes late: the server retries a
delete that conflicts for about ten seconds first (its EvictionsRetry, 20 tries 0.5 s apart),
so an eviction waits ``EVICTION_TIMEOUT``, longer than a client's usual 10 s, for its answer;
with less, a replaced pod would read as a failed eviction instead of a gone one.

``EvictionAPI`` sends it through a ``KubeApi`` on an event loop. Callers in worker threads
(koordlet's QoS strategies) use ``evict``, which hands the request to the loop given to
``bind`` and waits at most ``timeout`` seconds for the answer; coroutines use ``evict_async``.
A call is never retried here: a refused or failed eviction is reported, and the caller (the
strategy, at its next run) decides whether to ask again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
from typing import Any

from lightkube.resources.core_v1 import Pod

from koordkube import errors
from koordkube.client import KubeApi


class EvictionResult(enum.StrEnum):
    STARTED = "started"
    BLOCKED = "blocked"  # 429: a disruption budget says no, for now
    GONE = "gone"  # 404 or 409: nothing (or a different pod) to evict
    FAILED = "failed"


def eviction_body(namespace: str, name: str, uid: str) -> dict[str, Any]:
    """A policy/v1 Eviction of that pod, only if it still has ``uid``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }


EVICTION_TIMEOUT = 30.0
"""Seconds an eviction waits for the API server's answer (see the module docstring)."""


class EvictionAPI:
    """Evictions through a ``KubeApi``; ``bind(loop)`` (the loop the client runs on) before
    the first ``evict`` from another thread. ``timeout`` bounds the request and the wait for
    its answer."""

    def __init__(self, api: KubeApi, *, timeout: float = EVICTION_TIMEOUT) -> None:
        self.api = api
        self.timeout = timeout
        self.loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        """Ask for the pod's eviction from a thread other than the loop's; (result, the
        server's message)."""
        if self.loop is None or self.loop.is_closed():
            return EvictionResult.FAILED, "the Kubernetes client is not running yet"
        future = asyncio.run_coroutine_threadsafe(self.evict_async(namespace, name, uid), self.loop)
        try:  # the request gives up after ``timeout``; this wait only outlasts it
            return future.result(self.timeout + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return EvictionResult.FAILED, f"no answer within {self.timeout}s"

    async def evict_async(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        body = eviction_body(namespace, name, uid)
        try:
            await self.api.create_subresource(
                Pod, name, "eviction", body, namespace=namespace, timeout=self.timeout
            )
        except errors.Throttled as err:  # a disruption budget allows no eviction now
            return EvictionResult.BLOCKED, err.message
        except (errors.NotFound, errors.Conflict) as err:  # gone, or another pod by that name
            return EvictionResult.GONE, err.message
        except errors.TransportError as err:
            return EvictionResult.FAILED, f"API server unreachable: {err}"
        except errors.KubeError as err:
            if err.code is None or err.code < 400:  # an answer that is not the server's JSON
                return EvictionResult.FAILED, f"unexpected answer: {err}"
            return EvictionResult.FAILED, f"HTTP {err.code}: {err.message}"
        return EvictionResult.STARTED, "accepted"
