"""A small Kubernetes API client: credentials and JSON requests, from the standard library.

koordlet makes a handful of calls (its NodeSLO and Node, evictions), so it needs no client
library. Credentials are the in-cluster service account (``KUBERNETES_SERVICE_HOST``/``_PORT``,
the token and CA under /var/run/secrets/kubernetes.io/serviceaccount), or given explicitly.

Usage::

    client = KubeClient(KubeCredentials.in_cluster())
    node = client.request("GET", "/api/v1/nodes/node-1")     # raises KubeError
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class KubeError(OSError):
    """A request failed: ``status`` is the HTTP status, 0 when the server was not reached."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


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


class KubeClient:
    def __init__(self, credentials: KubeCredentials, *, timeout: float = 10.0) -> None:
        self.credentials = credentials
        self.timeout = timeout
        self._tls = None
        if credentials.server.startswith("https://"):
            # Without a CA file the system's trusted certificates are used.
            cafile = str(credentials.ca_file) if credentials.ca_file is not None else None
            self._tls = ssl.create_default_context(cafile=cafile)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send a JSON request; the decoded reply, or KubeError."""
        request = urllib.request.Request(  # noqa: S310 - the URL is the API server's
            self.credentials.server + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if self.credentials.token:
            request.add_header("Authorization", f"Bearer {self.credentials.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls) as reply:  # noqa: S310
                raw = reply.read()
        except urllib.error.HTTPError as err:
            raise KubeError(err.code, _message(err)) from None
        except (urllib.error.URLError, OSError) as err:
            raise KubeError(0, f"API server unreachable: {err}") from None
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            raise KubeError(200, "the reply is not JSON") from None


def _message(err: urllib.error.HTTPError) -> str:
    """The message of the Status object the API server sends with an error."""
    try:
        status = json.loads(err.read() or b"{}")
    except (ValueError, OSError):
        return err.reason or ""
    if not isinstance(status, dict):  # not a Status: a proxy's page, say
        return err.reason or ""
    return str(status.get("message") or err.reason or "")
