"""The error tree at the Kubernetes boundary: KubeApi raises one type per answer, once, from
lightkube's or httpx2's error (on the fake API server and on hand-made HTTP answers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

import httpx2
import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.resources.core_v1 import ConfigMap, Node

from koordkube import errors
from koordkube.client import KubeApi
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import node, run


def kube_answering(answer: Callable[[httpx2.Request], httpx2.Response]) -> KubeApi:
    """A KubeApi whose every request ``answer`` answers (httpx2's MockTransport)."""
    config = KubeConfig.from_one(cluster=Cluster(server="http://kube.invalid"), user=User())
    client = AsyncClient(config, transport=httpx2.MockTransport(answer), trust_env=False)
    return KubeApi(client)


def status(code: int, message: str, reason: str | None = None, **details: object) -> bytes:
    body: dict[str, object] = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
    body |= {"message": message, "code": code}
    if reason is not None:
        body["reason"] = reason
    if details:
        body["details"] = details
    return json.dumps(body).encode()


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("code", "kind", "reason"),
    [
        pytest.param(400, errors.KubeError, "BadRequest", id="400-plain"),
        pytest.param(401, errors.Unauthorized, "Unauthorized", id="401-unauthorized"),
        pytest.param(403, errors.Forbidden, "Forbidden", id="403-forbidden"),
        pytest.param(404, errors.NotFound, "NotFound", id="404-not-found"),
        pytest.param(405, errors.KubeError, "MethodNotAllowed", id="405-plain"),
        pytest.param(409, errors.Conflict, "Conflict", id="409-conflict"),
        pytest.param(410, errors.Gone, "Expired", id="410-gone"),
        pytest.param(418, errors.KubeError, "Unknown", id="418-unusual-plain"),
        pytest.param(422, errors.Invalid, "Invalid", id="422-invalid"),
        pytest.param(429, errors.Throttled, "TooManyRequests", id="429-throttled"),
        pytest.param(500, errors.ServerError, "InternalError", id="500-server"),
        pytest.param(503, errors.ServerError, "ServiceUnavailable", id="503-server"),
        pytest.param(504, errors.ServerError, "Timeout", id="504-server"),
        pytest.param(599, errors.ServerError, "Unknown", id="599-unusual-server"),
    ],
)
def test_each_status_becomes_its_type_from_lightkubes_error(
    code: int, kind: type[errors.KubeError], reason: str
) -> None:
    async def scenario() -> errors.KubeError:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        fake.fail("patch", r"/nodes/n1/status$", code, message=f"injected {code}")
        with pytest.raises(errors.KubeError) as exc:
            await fake.kube_api().patch(Node, "n1", {"status": {}}, subresource="status")
        return exc.value

    err = run(scenario())
    assert type(err) is kind
    assert (err.code, err.reason, err.message, str(err)) == (
        code,
        reason,
        f"injected {code}",
        f"injected {code}",
    )
    assert (err.verb, err.resource) == ("patch", "nodes/status")
    assert isinstance(err.__cause__, ApiError)  # the original, with the server's answer
    assert err.__cause__.response.status_code == code
    assert err.retry_after is None  # none asked for
    assert isinstance(err, errors.RETRYABLE) == (code == 429 or code >= 500)


def test_already_exists_and_conflict_are_siblings_not_one_another() -> None:
    async def scenario() -> tuple[errors.KubeError, errors.KubeError]:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        first = await kube.create(ConfigMap, {"metadata": {"name": "c", "namespace": "ns"}})
        with pytest.raises(errors.AlreadyExists) as exists:
            await kube.create(ConfigMap, {"metadata": {"name": "c", "namespace": "ns"}})
        await kube.replace(ConfigMap, {**first, "data": {"a": "1"}})
        with pytest.raises(errors.Conflict) as stale:
            await kube.replace(ConfigMap, {**first, "data": {"a": "2"}})
        return exists.value, stale.value

    exists, stale = run(scenario())
    assert (exists.code, exists.reason) == (409, "AlreadyExists")
    assert exists.message == 'configmaps "c" already exists'
    assert (stale.code, stale.reason) == (409, "Conflict")
    assert not isinstance(exists, errors.Conflict) and not isinstance(stale, errors.AlreadyExists)
    assert (exists.verb, stale.verb) == ("create", "update")


def test_throttling_carries_the_servers_retry_after() -> None:
    async def scenario() -> errors.KubeError:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        fake.fail("get", r"/nodes/n1$", 429, retry_after=7)
        with pytest.raises(errors.Throttled) as exc:
            await fake.kube_api().get(Node, "n1")
        return exc.value

    err = run(scenario())
    assert err.retry_after == 7.0 and err.code == 429 and isinstance(err, errors.RETRYABLE)


def test_a_lost_connection_is_a_transport_error_with_no_code() -> None:
    async def scenario() -> errors.KubeError:
        fake = FakeKubeAPI()
        fake.disconnect("delete", r"/nodes/n1$")
        with pytest.raises(errors.TransportError) as exc:
            await fake.kube_api().delete(Node, "n1")
        return exc.value

    err = run(scenario())
    assert err.code is None and err.reason == "" and err.retry_after is None
    assert str(err) == "ConnectError: injected by FakeKubeAPI"
    assert (err.verb, err.resource) == ("delete", "nodes")
    assert isinstance(err.__cause__, httpx2.ConnectError)
    assert isinstance(err, errors.RETRYABLE)


def test_a_timeout_without_a_message_is_named_by_its_kind() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("", request=request)

    with pytest.raises(errors.TransportError, match=r"^ReadTimeout$") as exc:
        run(kube_answering(answer).get(Node, "n1"))
    assert isinstance(exc.value.__cause__, httpx2.ReadTimeout)


def test_an_error_without_a_status_body_is_typed_by_the_http_status() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        headers = {"Content-Type": "text/html", "Retry-After": "3"}
        return httpx2.Response(502, headers=headers, content=b"<html>bad gateway</html>")

    with pytest.raises(errors.ServerError) as exc:
        run(kube_answering(answer).get(Node, "n1"))
    err = exc.value
    assert (err.code, err.reason, err.message, err.retry_after) == (502, "", "Bad Gateway", 3.0)
    cause = err.__cause__
    assert isinstance(cause, httpx2.HTTPStatusError) and not isinstance(cause, ApiError)


def test_a_status_body_without_code_or_reason_takes_the_http_status() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        body = {"kind": "Status", "status": "Failure", "message": "no such pod"}
        return httpx2.Response(404, headers=JSON, content=json.dumps(body).encode())

    with pytest.raises(errors.NotFound) as exc:
        run(kube_answering(answer).get(Node, "n1"))
    assert (exc.value.code, exc.value.reason, exc.value.message) == (404, "", "no such pod")


def test_a_409_with_an_unknown_reason_is_a_conflict_and_an_unusual_code_is_plain() -> None:
    answers = iter(
        [
            httpx2.Response(409, headers=JSON, content=status(409, "odd", "SomethingNew")),
            httpx2.Response(299, headers=JSON, content=b"not json"),
            httpx2.Response(600, headers=JSON, content=status(600, "from the future")),
        ]
    )
    kube = kube_answering(lambda request: next(answers))

    with pytest.raises(errors.Conflict) as conflict:
        run(kube.get(Node, "n1"))
    assert conflict.value.reason == "SomethingNew"
    with pytest.raises(errors.KubeError) as unreadable:  # a 2xx answer that is not JSON
        run(kube.get(Node, "n1"))
    assert type(unreadable.value) is errors.KubeError and unreadable.value.code == 299
    assert isinstance(unreadable.value.__cause__, ValueError)
    assert "not JSON" in unreadable.value.message
    # 600 is no HTTP status at all: no subclass claims it, and it is no server error to retry.
    with pytest.raises(errors.KubeError) as future:
        run(kube.get(Node, "n1"))
    assert type(future.value) is errors.KubeError and future.value.code == 600


def test_a_watch_error_event_an_error_answer_and_a_dropped_stream_are_typed() -> None:
    async def drain(kube: KubeApi, resource_version: str | None = None) -> None:
        stream = kube.watch(Node, resource_version=resource_version)
        async with contextlib.aclosing(stream):
            async for _ in stream:
                pass

    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"), node("n2"))
        fake.compact()
        kube = fake.kube_api()
        with pytest.raises(errors.Gone) as gone:  # the fake ends the stream with ERROR 410
            await drain(kube, resource_version="1")
        assert (gone.value.code, gone.value.reason) == (410, "Expired")
        assert (gone.value.verb, gone.value.resource) == ("watch", "nodes")
        assert isinstance(gone.value.__cause__, ApiError)

        fake.fail("watch", r"/nodes$", 403, message="watch forbidden")
        with pytest.raises(errors.Forbidden, match="watch forbidden"):
            await drain(kube)

        task = asyncio.create_task(drain(kube))
        await asyncio.sleep(0.02)
        fake.close_watches(error=True)
        with pytest.raises(errors.TransportError) as dropped:
            await task
        assert isinstance(dropped.value.__cause__, httpx2.ReadError)

    run(scenario())


@pytest.mark.parametrize(
    ("code", "reason", "kind"),
    [
        pytest.param(None, "", errors.KubeError, id="no-code"),
        pytest.param(200, "", errors.KubeError, id="200"),
        pytest.param(409, "AlreadyExists", errors.AlreadyExists, id="409-already-exists"),
        pytest.param(409, "", errors.Conflict, id="409-no-reason"),
        pytest.param(410, "Gone", errors.Gone, id="410-gone-reason"),
        pytest.param(499, "", errors.KubeError, id="499"),
        pytest.param(500, "", errors.ServerError, id="500"),
        pytest.param(600, "", errors.KubeError, id="600"),
    ],
)
def test_for_status_picks_the_class(
    code: int | None, reason: str, kind: type[errors.KubeError]
) -> None:
    assert errors.for_status(code, reason) is kind


def test_every_error_is_a_kube_error_and_only_the_transient_ones_are_retryable() -> None:
    leaves = [
        errors.NotFound,
        errors.AlreadyExists,
        errors.Conflict,
        errors.Gone,
        errors.Invalid,
        errors.Unauthorized,
        errors.Forbidden,
        errors.Throttled,
        errors.ServerError,
        errors.TransportError,
    ]
    assert all(issubclass(kind, errors.KubeError) for kind in leaves)
    assert set(errors.RETRYABLE) == {errors.Throttled, errors.ServerError, errors.TransportError}
    err = errors.NotFound('nodes "n1" not found', code=404, reason="NotFound", verb="get")
    assert str(err) == 'nodes "n1" not found' and err.resource == "" and err.retry_after is None
