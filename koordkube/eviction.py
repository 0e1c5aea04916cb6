"""The Kubernetes Eviction API: how koordlet evicts a pod when an API server decides.

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1 Eviction whose delete
options carry the pod's UID as a precondition, so a pod that was replaced under the same name
is never evicted by mistake. The API server answers 201 (eviction started), 429 (a
PodDisruptionBudget forbids it now: try later), 404 (the pod is gone) or 409 (the UID
precondition failed: it is a different pod now).

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

import httpx2
from lightkube import ApiError
from lightkube.resources.core_v1 import Pod

from koordkube.client import KubeApi, status_code


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


def eviction_refused(status: int | None, message: str) -> tuple[EvictionResult, str] | None:
    """What a refusal means: 429 a disruption budget, 404/409 gone (or another pod); None
    for any other error (a failure)."""
    if status == 429:
        return EvictionResult.BLOCKED, message
    if status in (404, 409):
        return EvictionResult.GONE, message
    return None


def _failure(err: Exception) -> tuple[int | None, str]:
    """(HTTP status or None, the server's message or what went wrong) of a failed call."""
    code = status_code(err)
    if code is None:
        if isinstance(err, httpx2.TransportError):
            return None, f"API server unreachable: {err}"
        return None, f"unexpected answer: {err!r}"  # a reply that is not JSON, say
    message = ""
    if isinstance(err, ApiError) and err.status is not None:
        message = err.status.message or err.status.reason or ""
    elif isinstance(err, httpx2.HTTPStatusError):  # no Status body: a proxy's page, say
        message = err.response.reason_phrase
    return code, message


class EvictionAPI:
    """Evictions through a ``KubeApi``; ``bind(loop)`` (the loop the client runs on) before
    the first ``evict`` from another thread."""

    def __init__(self, api: KubeApi, *, timeout: float = 10.0) -> None:
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
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return EvictionResult.FAILED, f"no answer within {self.timeout}s"

    async def evict_async(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        body = eviction_body(namespace, name, uid)
        try:
            await self.api.create_subresource(Pod, name, "eviction", body, namespace=namespace)
        except Exception as err:  # ApiError, httpx2's transport and status errors
            code, message = _failure(err)
            if code is None:
                return EvictionResult.FAILED, message
            refused = eviction_refused(code, message)
            return refused or (EvictionResult.FAILED, f"HTTP {code}: {message}")
        return EvictionResult.STARTED, "accepted"
