"""EvictionAPI against a local HTTP server posing as the API server and on the in-process
fake; in-cluster credentials."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.resources.core_v1 import Pod

from koordkube import errors
from koordkube.client import KubeApi, build_client, in_cluster_config
from koordkube.eviction import EVICTION_TIMEOUT, EvictionAPI, EvictionResult, eviction_body
from tests.fakekube import EVICTION_RETRY_SECONDS, FakeKubeAPI


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


def evict_through(
    config: KubeConfig, namespace: str, name: str, uid: str, *, timeout: float = 5
) -> tuple[EvictionResult, str]:
    """One eviction as koordlet's strategies ask for it: from a worker thread, through the
    client on the event loop."""

    async def scenario() -> tuple[EvictionResult, str]:
        client = AsyncClient(config, timeout=httpx2.Timeout(timeout), trust_env=False)
        api = EvictionAPI(KubeApi(client), timeout=timeout)
        api.bind(asyncio.get_running_loop())
        try:
            return await asyncio.to_thread(api.evict, namespace, name, uid)
        finally:
            await client.close()

    return asyncio.run(scenario())


def config_for(server: str, token: str | None = TOKEN) -> KubeConfig:
    return KubeConfig.from_one(cluster=Cluster(server=server), user=User(token=token))


class Client:
    """The Eviction API client on the fake HTTP server."""

    def __init__(self, fake: FakeAPIServer, *, with_token: bool = True) -> None:
        self.config = config_for(fake.url, TOKEN if with_token else None)

    def evict(self, namespace: str, name: str, uid: str) -> tuple[EvictionResult, str]:
        return evict_through(self.config, namespace, name, uid)


def client(fake: FakeAPIServer, *, with_token: bool = True) -> Client:
    return Client(fake, with_token=with_token)


def test_eviction_posts_a_policy_v1_eviction_with_the_uid_precondition(
    api_server: FakeAPIServer,
) -> None:
    api_server.answer(201)

    result, detail = client(api_server).evict("team-a", "web-0", "8d5e-uid")

    assert (result, detail) == (EvictionResult.STARTED, "accepted")
    (seen,) = api_server.seen
    assert seen.method == "POST"
    assert seen.path.split("?")[0] == "/api/v1/namespaces/team-a/pods/web-0/eviction"
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


def test_an_answer_that_is_not_json_is_a_failure(api_server: FakeAPIServer) -> None:
    api_server.status = 201
    api_server.reply = b"<html>a proxy's page</html>"

    result, detail = client(api_server).evict("ns", "p", "u")

    assert result is EvictionResult.FAILED
    assert detail.startswith("unexpected answer")


def test_an_unreachable_server_is_a_failure() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = config_for(f"http://127.0.0.1:{port}", None)

    result, detail = evict_through(config, "ns", "p", "u", timeout=2)

    assert result is EvictionResult.FAILED
    assert detail.startswith("API server unreachable")


def test_https_credentials_without_a_ca_file_use_the_system_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No CA file must not crash at start (it once looked for a file named "None").
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "1")
    config = in_cluster_config(account(tmp_path, ca=False))
    assert config is not None

    result, detail = evict_through(config, "ns", "p", "u", timeout=2)

    assert result is EvictionResult.FAILED
    assert detail.startswith("API server unreachable")


# -- on the in-process fake API server --------------------------------------------------------


def a_pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "jobs"}}


def test_eviction_outcomes_started_blocked_and_gone() -> None:
    async def scenario() -> list[tuple[EvictionResult, str]]:
        fake = FakeKubeAPI()
        fake.seed(a_pod("a"), a_pod("b"), a_pod("c"))
        uids = {n: fake.get("Pod", n, "jobs")["metadata"]["uid"] for n in "abc"}  # type: ignore[index]
        fake.blocked_evictions.add("jobs/b")
        fake.eviction_retry_seconds = 0.05  # c's refusal, without the real server's 10 s
        eviction = EvictionAPI(fake.kube_api())
        eviction.bind(asyncio.get_running_loop())
        # The QoS manager calls from a worker thread while the loop serves the client.
        results = [
            await asyncio.to_thread(eviction.evict, "jobs", "a", uids["a"]),
            await asyncio.to_thread(eviction.evict, "jobs", "b", uids["b"]),
            await asyncio.to_thread(eviction.evict, "jobs", "c", "another-pods-uid"),
            await asyncio.to_thread(eviction.evict, "jobs", "gone", "x"),
        ]
        assert fake.get("Pod", "a", "jobs") is None  # evicted
        assert fake.get("Pod", "b", "jobs") is not None  # the budget held it
        assert fake.get("Pod", "c", "jobs") is not None  # a different pod by that name
        (first, *_) = fake.calls("create", r"/pods/a/eviction$")
        assert first.body["deleteOptions"] == {"preconditions": {"uid": uids["a"]}}
        return results

    results = asyncio.run(scenario())
    assert [r for r, _ in results] == [
        EvictionResult.STARTED,
        EvictionResult.BLOCKED,
        EvictionResult.GONE,
        EvictionResult.GONE,
    ]
    assert "disruption budget" in results[1][1]


def test_a_replaced_pod_reads_as_gone_though_the_server_answers_after_the_clients_timeout() -> None:
    """A real API server retries an eviction whose UID precondition fails for about ten
    seconds before it answers 409 (fakekube.EVICTION_RETRY_SECONDS, from the cluster tier):
    longer than a client's usual timeout. The eviction waits for the answer. Scaled down
    here: a client that gives up after 0.2 s, an answer after 0.5 s."""

    async def scenario() -> tuple[type[Exception], tuple[EvictionResult, str]]:
        fake = FakeKubeAPI()
        fake.seed(a_pod("c"))
        fake.eviction_retry_seconds = 0.5
        kube = KubeApi(fake.client(timeout=0.2))
        body = eviction_body("jobs", "c", "another-pods-uid")
        with pytest.raises(errors.TransportError) as plain:  # the client's own timeout
            await kube.create_subresource(Pod, "c", "eviction", body, namespace="jobs")
        outcome = await EvictionAPI(kube, timeout=2).evict_async("jobs", "c", "another-pods-uid")
        return type(plain.value), outcome

    plain, (result, detail) = asyncio.run(scenario())
    assert plain is errors.TransportError
    assert result is EvictionResult.GONE, detail
    assert "does not match the UID in record" in detail
    # the product's wait outlasts the real server's retries, with room to spare
    assert EVICTION_TIMEOUT > 2 * EVICTION_RETRY_SECONDS


def test_a_server_error_on_the_fake_is_a_failure_with_its_status() -> None:
    async def scenario() -> tuple[EvictionResult, str]:
        fake = FakeKubeAPI()
        fake.seed(a_pod("a"))
        fake.fail("create", r"/pods/a/eviction$", 503, message="etcd is sad")
        return await EvictionAPI(fake.kube_api()).evict_async("jobs", "a", "u")

    assert asyncio.run(scenario()) == (EvictionResult.FAILED, "HTTP 503: etcd is sad")


def test_without_a_running_client_an_eviction_fails_cleanly() -> None:
    eviction = EvictionAPI(FakeKubeAPI().kube_api())
    result, why = eviction.evict("jobs", "a", "u")
    assert result is EvictionResult.FAILED and "not running" in why


# -- in-cluster credentials -------------------------------------------------------------------


def account(tmp_path: Path, *, ca: bool = True) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("sa-token\n")
    if ca:
        (folder / "ca.crt").write_text("not a real certificate\n")
        (folder / "namespace").write_text("koordinator-system\n")
    return folder


def test_in_cluster_reads_the_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")

    config = in_cluster_config(folder)

    single = config.get() if config is not None else None
    assert single is not None
    cluster, user = single.cluster, single.user
    assert (cluster.server, cluster.certificate_auth) == (
        "https://10.96.0.1:6443",
        str(folder / "ca.crt"),
    )
    assert user is not None
    assert (user.token, user.token_file) == ("sa-token", str(folder / "token"))
    assert single.namespace == "koordinator-system"


def test_in_cluster_brackets_ipv6_and_defaults_the_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path, ca=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)

    config = in_cluster_config(folder)

    single = config.get() if config is not None else None
    assert single is not None
    cluster = single.cluster
    assert (cluster.server, cluster.certificate_auth) == ("https://[fd00::1]:443", None)
    assert single.namespace == "default"  # no namespace file
    build_client(service_account_dir=folder)  # no CA file: the default roots, not a crash


def test_outside_a_cluster_there_are_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = account(tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert in_cluster_config(folder) is None

    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    assert in_cluster_config(tmp_path / "missing") is None
