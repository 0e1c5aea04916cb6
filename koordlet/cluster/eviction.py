"""Eviction through the Eviction API: the evictor's backend when an API server decides.

In cluster mode (and standalone with ``--only-evict-by-api``) the QoS manager's ``Evictor``
asks the API server, which honours PodDisruptionBudgets, instead of stopping containers through
CRI. The request goes through ``koordkube.eviction.EvictionAPI`` (201 started, 429 blocked by a
disruption budget, 404/409 gone or a different pod now, anything else failed); this module
turns its result into the backend's (done, detail). Imported only when it is used: it brings
the Kubernetes client with it.
"""

from __future__ import annotations

from koordkube.eviction import EvictionAPI, EvictionResult
from koordlet.states.pods import KnownPod


class EvictByAPI:
    """Cluster eviction through the Eviction API (PodDisruptionBudgets apply)."""

    def __init__(self, api: EvictionAPI) -> None:
        self.api = api

    def __call__(self, known: KnownPod, message: str) -> tuple[bool, str]:
        pod = known.request
        result, detail = self.api.evict(pod.namespace, pod.name, pod.uid)
        if result is EvictionResult.BLOCKED:
            return False, f"blocked by a disruption budget: {detail}"
        if result is EvictionResult.FAILED:
            return False, detail
        return True, f"eviction {result.value}: {detail}"
