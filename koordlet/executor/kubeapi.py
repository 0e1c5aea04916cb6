"""The Kubernetes Eviction API: how koordlet evicts when it runs in a cluster.

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1 Eviction whose delete
options carry the pod's UID as a precondition, so a pod that was replaced under the same name
is never evicted by mistake. The API server answers 201 (eviction started), 429 (a
PodDisruptionBudget forbids it now: try later), 404 (the pod is gone) or 409 (the UID
precondition failed: it is a different pod now).

Credentials are the in-cluster service account (``KUBERNETES_SERVICE_HOST``/``_PORT``, the
token and CA under /var/run/secrets/kubernetes.io/serviceaccount), or given explicitly.
"""

from __future__ import annotations

import enum
import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class EvictionResult(enum.StrEnum):
    STARTED = "started"
    BLOCKED = "blocked"  # 429: a disruption budget says no, for now
    GONE = "gone"  # 404 or 409: nothing (or a different pod) to evict
    FAILED = "failed"


@dataclass(frozen=True)
class KubeCredentials:
    server: str  # "https://10.0.0.1:443"
    token: str = ""
    ca_file: Path | None = None

    @classmethod
    def in_cluster(cls, account: Path = SERVICE_ACCOUNT) -> KubeCredentials | None:
        """The pod's service account, or None outside a cluster."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token_file = account / "token"
        if not host or not token_file.exists():
            return None
        host = f"[{host}]" if ":" in host else host
        ca = account / "ca.crt"
        return cls(
            f"https://{host}:{port}", token_file.read_text().strip(), ca if ca.exists() else None
        )


class EvictionAPI:
    def __init__(self, credentials: KubeCredentials, *, timeout: float = 10.0) -> None:
        self.credentials = credentials
        self.timeout = timeout
        self._tls = (
            ssl.create_default_context(
                cafile=str(credentials.ca_file) if credentials.ca_file is not None else None
            )
            if credentials.server.startswith("https://")
            else None
        )

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        """Ask for the pod's eviction; (result, the server's message)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        url = f"{self.credentials.server}/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        request = urllib.request.Request(  # noqa: S310 - the URL is the API server's
            url,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if self.credentials.token:
            request.add_header("Authorization", f"Bearer {self.credentials.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls) as reply:  # noqa: S310
                return EvictionResult.STARTED, f"HTTP {reply.status}"
        except urllib.error.HTTPError as err:
            message = _message(err)
            if err.code == 429:
                return EvictionResult.BLOCKED, message
            if err.code in (404, 409):
                return EvictionResult.GONE, message
            return EvictionResult.FAILED, f"HTTP {err.code}: {message}"
        except (urllib.error.URLError, OSError) as err:
            return EvictionResult.FAILED, f"API server unreachable: {err}"


def _message(err: urllib.error.HTTPError) -> str:
    try:
        status = json.loads(err.read() or b"{}")
    except (ValueError, OSError):
        return err.reason or ""
    if not isinstance(status, dict):  # not a Status: a proxy's page, say
        return err.reason or ""
    return str(status.get("message") or err.reason or "")
