"""What the predictor reads of a pod, from koordlet's pod store.

Koordinator reads the Pod object; here the runtime's view (NRI) plus, in cluster mode, the
kubelet's pod list (``PodSpecFacts``: requests, creation time, deletion). Without a spec
(standalone mode) the cpu request is the one the containers' cpu.shares encode (the kubelet
writes ``request * 1024 / 1000``), the memory request is unknown (0) and the creation time is
when the predictor first saw the pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordlet.states.pods import KnownPod

MIN_SHARES = 2  # the kubelet's cpu.shares for a container without a cpu request


@dataclass(frozen=True)
class PodFacts:
    uid: str
    key: str  # namespace/name, for logs
    priority_class: str  # Koordinator's name ("koord-prod"), "" for none
    cpu_request: int  # milli-cores
    memory_request: int  # bytes
    created: float | None  # unix seconds; None: not known (standalone)
    terminating: bool  # deleted or finished (Succeeded/Failed)


def shares_request(known: KnownPod) -> int:
    """The containers' cpu requests as their cpu.shares say (milli-cores)."""
    total = 0
    for container in known.containers.values():
        shares = container.resources.cpu_shares
        if shares is not None and shares > MIN_SHARES:
            total += shares * 1000 // 1024
    return total


def pod_facts(known: KnownPod) -> PodFacts:
    request = known.request
    spec = request.spec
    return PodFacts(
        uid=request.uid,
        key=f"{request.namespace}/{request.name}",
        priority_class=request.priority_class.name,
        cpu_request=spec.cpu_request if spec is not None else shares_request(known),
        memory_request=spec.memory_request if spec is not None else 0,
        created=spec.created if spec is not None else None,
        terminating=spec.terminating if spec is not None else False,
    )
