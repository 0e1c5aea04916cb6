"""EvictionAPI against a local HTTP server posing as the API server; in-cluster credentials."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from koordlet.executor.kubeapi import EvictionAPI, EvictionResult
from koordlet.kubeclient import KubeCredentials


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAPIServer:
    port: int = 0
    status: int = 201
    reply: bytes = b"{}"
    seen: list[Seen] = field(default_factory=list)

    def answer(self, status: int, message: str | None = None) -> None:
        self.status = status
        self.reply = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
            if message is not None
            else {"kind": "Eviction"}
        ).encode()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def api_server() -> Iterator[FakeAPIServer]:
    fake = FakeAPIServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            fake.seen.append(Seen("POST", self.path, dict(self.headers.items()), body))
            self.send_response(fake.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(fake.reply)))
            self.end_headers()
            self.wfile.write(fake.reply)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(5)


TOKEN = "t0k"


def client(fake: FakeAPIServer, *, with_token: bool = True) -> EvictionAPI:
    credentials = KubeCredentials(server=fake.url, token=TOKEN if with_token else "")
    return EvictionAPI(credentials, timeout=5)


def test_eviction_posts_a_policy_v1_eviction_with_the_uid_precondition(
    api_server: FakeAPIServer,
) -> None:
    api_server.answer(201)

    result, detail = client(api_server).evict("team-a", "web-0", "8d5e-uid")

    assert (result, detail) == (EvictionResult.STARTED, "accepted")
    (seen,) = api_server.seen
    assert seen.method == "POST"
    assert seen.path == "/api/v1/namespaces/team-a/pods/web-0/eviction"
    assert seen.headers["Authorization"] == "Bearer t0k"
    assert seen.headers["Content-Type"] == "application/json"
    assert seen.body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "team-a"},
        "deleteOptions": {"preconditions": {"uid": "8d5e-uid"}},
    }


def test_no_token_no_authorization_header(api_server: FakeAPIServer) -> None:
    api_server.answer(201)

    client(api_server, with_token=False).evict("ns", "p", "u")

    assert "Authorization" not in api_server.seen[0].headers


@pytest.mark.parametrize(
    ("status", "message", "result", "detail"),
    [
        pytest.param(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            EvictionResult.BLOCKED,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            id="429-blocked",
        ),
        pytest.param(
            404, 'pods "p" not found', EvictionResult.GONE, 'pods "p" not found', id="404-gone"
        ),
        pytest.param(
            409,
            "Precondition failed: UID in precondition: u, UID in object meta: other",
            EvictionResult.GONE,
            "Precondition failed: UID in precondition: u, UID in object meta: other",
            id="409-gone",
        ),
        pytest.param(
            500, "etcd is sad", EvictionResult.FAILED, "HTTP 500: etcd is sad", id="500-failed"
        ),
        pytest.param(403, "forbidden", EvictionResult.FAILED, "HTTP 403: forbidden", id="403"),
    ],
)
def test_status_codes_map_to_results(
    api_server: FakeAPIServer,
    status: int,
    message: str,
    result: EvictionResult,
    detail: str,
) -> None:
    api_server.answer(status, message)

    assert client(api_server).evict("ns", "p", "u") == (result, detail)


@pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b'"just a string"', b""])
def test_an_error_without_a_status_body_still_fails_cleanly(
    api_server: FakeAPIServer, body: bytes
) -> None:
    api_server.status = 502
    api_server.reply = body

    result, detail = client(api_server).evict("ns", "p", "u")

    assert result is EvictionResult.FAILED
    assert detail.startswith("HTTP 502")


def test_an_unreachable_server_is_a_failure() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = EvictionAPI(KubeCredentials(server=f"http://127.0.0.1:{port}"), timeout=2)

    result, detail = api.evict("ns", "p", "u")

    assert result is EvictionResult.FAILED
    assert detail.startswith("API server unreachable")


def test_https_credentials_without_a_ca_file_use_the_system_roots() -> None:
    # No CA file must not crash at start (it once looked for a file named "None").
    api = EvictionAPI(KubeCredentials(server="https://127.0.0.1:1", token="t"), timeout=2)

    result, detail = api.evict("ns", "p", "u")

    assert result is EvictionResult.FAILED
    assert detail.startswith("API server unreachable")


# -- in-cluster credentials -------------------------------------------------------------------


def account(tmp_path: Path, *, ca: bool = True) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("sa-token\n")
    if ca:
        (folder / "ca.crt").write_text("not a real certificate\n")
    return folder


def test_in_cluster_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")

    credentials = KubeCredentials.in_cluster(folder)

    assert credentials == KubeCredentials("https://10.96.0.1:6443", "sa-token", folder / "ca.crt")


def test_in_cluster_brackets_ipv6_and_defaults_the_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path, ca=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)

    credentials = KubeCredentials.in_cluster(folder)

    assert credentials == KubeCredentials("https://[fd00::1]:443", "sa-token", None)
    assert credentials is not None
    EvictionAPI(credentials)  # no CA file: the default roots, not a crash


def test_outside_a_cluster_there_are_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert KubeCredentials.in_cluster(folder) is None

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert KubeCredentials.in_cluster(tmp_path / "missing") is None
