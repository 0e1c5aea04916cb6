"""The evictor's backends: how a victim is actually made to go.

A backend is called with the pod and the reason and answers (done, detail). ``StopContainers``
stops (kills) every container of the pod through the runtime's CRI socket (``cri.CRIRuntime``):
standalone koordlet's way, Koordinator's default (``--only-evict-by-api`` false).
``EvictByAPI`` asks the API server through the Eviction API, which honours
PodDisruptionBudgets: cluster mode's way, and standalone's with ``--only-evict-by-api``. The
request goes through ``koordkube.eviction.EvictionAPI`` (201 started, 429 blocked by a
disruption budget, 404/409 gone or a different pod now, anything else failed); this module
turns its result into the backend's (done, detail). koordkube (and the Kubernetes client it
brings) is imported only when an Eviction API backend evicts, never by standalone koordlet.

Which pods go, in which order and how many is the QoS manager's (``koordlet.qosmanager
.eviction``); these backends only carry it out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from koordlet.eviction.cri import CRIError, CRIRuntime
from koordlet.states.pods import KnownPod

if TYPE_CHECKING:
    from koordkube.eviction import EvictionAPI


class EvictionBackend(Protocol):
    def __call__(self, known: KnownPod, message: str) -> tuple[bool, str]: ...


class StopContainers:
    """Standalone eviction: stop (kill) every container of the pod through CRI."""

    def __init__(self, runtime: CRIRuntime) -> None:
        self.runtime = runtime

    def __call__(self, known: KnownPod, message: str) -> tuple[bool, str]:
        if not known.containers:
            return False, "no running container"
        problems = []
        for cid in list(known.containers):
            try:
                self.runtime.stop_container(cid, timeout=0)
            except CRIError as err:
                problems.append(str(err))
        if problems:
            return False, "; ".join(problems)
        return True, f"stopped {len(known.containers)} containers through CRI"


class EvictByAPI:
    """Cluster eviction through the Eviction API (PodDisruptionBudgets apply)."""

    def __init__(self, api: EvictionAPI) -> None:
        self.api = api

    def __call__(self, known: KnownPod, message: str) -> tuple[bool, str]:
        from koordkube.eviction import EvictionResult  # noqa: PLC0415 - loaded with self.api

        pod = known.request
        result, detail = self.api.evict(pod.namespace, pod.name, pod.uid)
        if result is EvictionResult.BLOCKED:
            return False, f"blocked by a disruption budget: {detail}"
        if result is EvictionResult.FAILED:
            return False, detail
        return True, f"eviction {result.value}: {detail}"
