"""The evictor's backends: StopContainers through a CRI runtime, and the Eviction API backend
(its answers from koordkube's EvictionAPI, on the fake API server from a strategy's worker
thread, and where its client comes from)."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme

from koordapi.errors import ModelError
from koordkube.eviction import EvictionAPI, EvictionResult
from koordlet.cluster import build_eviction_api
from koordlet.eviction.backends import EvictByAPI, StopContainers
from koordlet.eviction.cri import CRIError, CRIRuntime
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerResources
from tests.fakekube import FakeKubeAPI
from tests.unit.koordlet.qosmanager.fakes import known_pod


def pod(name: str, uid: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
    }


def test_the_backend_answers_started_blocked_and_gone() -> None:
    async def scenario() -> list[tuple[bool, str]]:
        fake = FakeKubeAPI()
        fake.seed(pod("a", "uid-a"), pod("b", "uid-b"), pod("c", "an-older-c"))
        fake.blocked_evictions.add("default/b")
        fake.eviction_retry_seconds = 0.05  # c's refusal, without the real server's 10 s
        eviction = EvictionAPI(fake.kube_api())
        eviction.bind(asyncio.get_running_loop())
        backend = EvictByAPI(eviction)
        answers = [await asyncio.to_thread(backend, known_pod(name), "because") for name in "abc"]
        assert fake.get("Pod", "a") is None
        assert fake.get("Pod", "b") is not None and fake.get("Pod", "c") is not None
        return answers

    (a, b, c) = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert a == (True, "eviction started: accepted")
    assert b[0] is False and b[1].startswith("blocked by a disruption budget: Cannot evict")
    assert c[0] is True and c[1].startswith("eviction gone: Operation cannot be fulfilled")


def test_cluster_mode_evicts_through_its_client() -> None:
    kube = FakeKubeAPI().kube_api()
    assert build_eviction_api(kube).api is kube


def test_only_evict_by_api_needs_in_cluster_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ModelError, match="--only-evict-by-api needs in-cluster"):
        build_eviction_api(None)


# -- standalone with --only-evict-by-api: the service account over HTTPS -----------------------


class APIServer:
    """An HTTPS server posing as the API server: answers every POST with 201, records it."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen.append(
                    (self.path, dict(self.headers.items()), json.loads(self.rfile.read(length)))
                )
                reply = b'{"kind": "Status", "status": "Success"}'
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, APIServer]]:
    ca = trustme.CA()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(tls)
    server = APIServer(tls)
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("sa-token\n")
    (folder / "namespace").write_text("koordinator-system\n")
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    try:
        yield folder, server
    finally:
        server.close()


def test_only_evict_by_api_evicts_with_the_service_account(
    service_account: tuple[Path, APIServer],
) -> None:
    folder, server = service_account

    async def scenario() -> tuple[bool, str]:
        eviction = build_eviction_api(None, service_account_dir=folder)
        eviction.bind(asyncio.get_running_loop())
        try:
            return await asyncio.to_thread(EvictByAPI(eviction), known_pod("p"), "because")
        finally:
            await eviction.api.client.close()

    assert asyncio.run(asyncio.wait_for(scenario(), 10)) == (True, "eviction started: accepted")
    ((path, headers, body),) = server.seen
    assert path == "/api/v1/namespaces/default/pods/p/eviction?fieldManager=koordlet"
    assert headers["Authorization"] == "Bearer sa-token"
    assert body["deleteOptions"] == {"preconditions": {"uid": "uid-p"}}


# -- backends ---------------------------------------------------------------------------------


class FakeRuntime(CRIRuntime):
    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        super().__init__(Path("/nonexistent/cri.sock"))
        self.failing = failing
        self.stopped: list[tuple[str, int]] = []

    def stop_container(self, container_id: str, timeout: int = 0) -> None:
        self.stopped.append((container_id, timeout))
        if container_id in self.failing:
            raise CRIError(f"StopContainer {container_id}: StatusCode.UNAVAILABLE: down")


def two_containers(name: str) -> KnownPod:
    return known_pod(
        name, containers={"main": ContainerResources(), "sidecar": ContainerResources()}
    )


def test_stop_containers_kills_every_container_at_once() -> None:
    runtime = FakeRuntime()

    ok, detail = StopContainers(runtime)(two_containers("p"), "because")

    assert ok
    assert runtime.stopped == [("p-c0", 0), ("p-c1", 0)]
    assert detail == "stopped 2 containers through CRI"


def test_stop_containers_reports_a_failed_stop_but_tries_them_all() -> None:
    runtime = FakeRuntime(failing=frozenset({"p-c0"}))

    ok, detail = StopContainers(runtime)(two_containers("p"), "because")

    assert not ok
    assert [cid for cid, _ in runtime.stopped] == ["p-c0", "p-c1"]
    assert "p-c0" in detail and "UNAVAILABLE" in detail


def test_stop_containers_of_a_pod_without_containers_fails() -> None:
    known = known_pod("p")
    known.containers.clear()
    runtime = FakeRuntime()

    ok, detail = StopContainers(runtime)(known, "because")

    assert not ok
    assert detail == "no running container"
    assert runtime.stopped == []


class FakeAPI(EvictionAPI):
    def __init__(self, result: EvictionResult, detail: str) -> None:
        super().__init__(FakeKubeAPI().kube_api())
        self.result = result
        self.detail = detail
        self.asked: list[tuple[str, str, str]] = []

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        self.asked.append((namespace, name, uid))
        return self.result, self.detail


@pytest.mark.parametrize(
    ("result", "ok", "text"),
    [
        pytest.param(EvictionResult.STARTED, True, "eviction started: HTTP 201", id="started"),
        pytest.param(EvictionResult.GONE, True, "eviction gone: HTTP 201", id="gone"),
        pytest.param(
            EvictionResult.BLOCKED, False, "blocked by a disruption budget: HTTP 201", id="blocked"
        ),
        pytest.param(EvictionResult.FAILED, False, "HTTP 201", id="failed"),
    ],
)
def test_evict_by_api_maps_the_result(result: EvictionResult, ok: bool, text: str) -> None:
    api = FakeAPI(result, "HTTP 201")

    assert EvictByAPI(api)(known_pod("p"), "because") == (ok, text)
    assert api.asked == [("default", "p", "uid-p")]
