"""The Kubernetes Eviction API: how koordlet evicts when it runs in a cluster.

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1 Eviction whose delete
options carry the pod's UID as a precondition, so a pod that was replaced under the same name
is never evicted by mistake. The API server answers 201 (eviction started), 429 (a
PodDisruptionBudget forbids it now: try later), 404 (the pod is gone) or 409 (the UID
precondition failed: it is a different pod now).
"""

from __future__ import annotations

import enum
from typing import Any

from koordlet.kubeclient import KubeClient, KubeCredentials, KubeError


class EvictionResult(enum.StrEnum):
    STARTED = "started"
    BLOCKED = "blocked"  # 429: a disruption budget says no, for now
    GONE = "gone"  # 404 or 409: nothing (or a different pod) to evict
    FAILED = "failed"


def eviction_request(namespace: str, name: str, uid: str) -> tuple[str, dict[str, Any]]:
    """(path, body) of a policy/v1 Eviction of that pod, only if it still has ``uid``."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"preconditions": {"uid": uid}},
    }
    return f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body


def eviction_refused(status: int | None, message: str) -> tuple[EvictionResult, str] | None:
    """What a refusal means: 429 a disruption budget, 404/409 gone (or another pod); None
    for any other error (a failure)."""
    if status == 429:
        return EvictionResult.BLOCKED, message
    if status in (404, 409):
        return EvictionResult.GONE, message
    return None


class EvictionAPI:
    def __init__(self, credentials: KubeCredentials, *, timeout: float = 10.0) -> None:
        self.client = KubeClient(credentials, timeout=timeout)

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        """Ask for the pod's eviction; (result, the server's message)."""
        path, body = eviction_request(namespace, name, uid)
        try:
            self.client.request("POST", path, body)
        except KubeError as err:
            return eviction_refused(err.status, err.message) or (EvictionResult.FAILED, str(err))
        return EvictionResult.STARTED, "accepted"
