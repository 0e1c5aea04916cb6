"""FakeKubeAPI answers like the real API server: versions, conflicts, status, patches, watches."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from lightkube import ApiError
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import ConfigMap, Node, Pod
from lightkube.types import PatchType

from koordkube import errors
from koordkube.client import KubeApi
from koordkube.resources import NodeMetric
from tests.fakekube import FakeKubeAPI, canonical_quantity
from tests.unit.koordkube.fakes import node, pod, run


def api_error(exc: pytest.ExceptionInfo[errors.KubeError]) -> dict[str, Any]:
    """The Status the fake answered with, from the lightkube error KubeApi raised from."""
    cause = exc.value.__cause__
    assert isinstance(cause, ApiError)
    body: dict[str, Any] = cause.response.json()
    return body


async def collect(
    kube: KubeApi, res: Any, n: int, timeout: float = 1.0, **kwargs: Any
) -> list[tuple[str, dict[str, Any]]]:
    """Read ``n`` events (or until the stream ends or times out)."""
    events: list[tuple[str, dict[str, Any]]] = []
    stream = kube.watch(res, **kwargs)
    async with contextlib.aclosing(stream):
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                async for event in stream:
                    events.append(event)
                    if len(events) == n:
                        break
    return events


def test_create_fills_metadata_and_a_second_create_is_already_exists() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        created = await kube.create(Node, node("n1"))
        meta = created["metadata"]
        assert meta["resourceVersion"] == "1" and meta["uid"] and meta["creationTimestamp"]
        with pytest.raises(errors.KubeError) as exc:
            await kube.create(Node, node("n1"))
        assert api_error(exc) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'nodes "n1" already exists',
            "reason": "AlreadyExists",
            "details": {"name": "n1", "kind": "nodes"},
            "code": 409,
        }
        assert exc.value.code == 409 and isinstance(exc.value, errors.AlreadyExists)

    run(scenario())


def test_not_found_names_the_resource_with_its_group() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        with pytest.raises(errors.KubeError) as exc:
            await kube.get(NodeMetric, "n1")
        body = api_error(exc)
        assert body["code"] == 404 and body["reason"] == "NotFound"
        assert body["message"] == 'nodemetrics.slo.koordinator.sh "n1" not found'
        assert body["details"] == {
            "name": "n1",
            "group": "slo.koordinator.sh",
            "kind": "nodemetrics",
        }

    run(scenario())


def test_an_unknown_path_is_a_404_status() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        response = await fake.kube_api()._http.get("apis/apps/v1/deployments")
        assert response.status_code == 404
        assert response.json()["message"] == "the server could not find the requested resource"

    run(scenario())


def test_resource_versions_increase_globally_across_kinds() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        a = await kube.create(Node, node("n1"))
        b = await kube.create(ConfigMap, {"metadata": {"name": "c", "namespace": "ns"}})
        c = await kube.create(Node, node("n2"))
        versions = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
        assert versions == sorted(versions) and len(set(versions)) == 3
        assert (await kube.list(Node)).resource_version == str(versions[-1])

    run(scenario())


def test_a_stale_update_is_a_conflict_and_a_fresh_one_lands() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        first = await kube.create(ConfigMap, {"metadata": {"name": "c", "namespace": "ns"}})
        second = await kube.replace(ConfigMap, {**first, "data": {"a": "1"}})
        assert int(second["metadata"]["resourceVersion"]) > int(
            first["metadata"]["resourceVersion"]
        )
        with pytest.raises(errors.KubeError) as exc:
            await kube.replace(ConfigMap, {**first, "data": {"a": "2"}})
        body = api_error(exc)
        assert body["code"] == 409 and body["reason"] == "Conflict"
        assert body["message"].startswith('Operation cannot be fulfilled on configmaps "c"')
        # Without a resourceVersion the update is unconditional, as for most built-in kinds.
        unconditional = {**second, "metadata": {"name": "c", "namespace": "ns"}, "data": {"b": "1"}}
        assert (await kube.replace(ConfigMap, unconditional))["data"] == {"b": "1"}

    run(scenario())


def test_a_no_op_update_keeps_the_resource_version() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        created = await kube.create(ConfigMap, {"metadata": {"name": "c", "namespace": "ns"}})
        again = await kube.replace(ConfigMap, created)
        assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    run(scenario())


def test_the_main_resource_ignores_status_and_the_status_subresource_only_changes_status() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        created = await kube.create(
            Node, node("n1", spec={"podCIDR": "10.0.0.0/24"}, status={"allocatable": {"cpu": "4"}})
        )
        assert created["status"] == {"allocatable": {"cpu": "4"}}  # nodes keep status on create
        main = await kube.replace(
            Node, {**created, "spec": {"unschedulable": True}, "status": {"allocatable": {}}}
        )
        assert main["spec"] == {"unschedulable": True}
        assert main["status"] == {"allocatable": {"cpu": "4"}}
        status = await kube.replace(
            Node,
            {**main, "spec": {}, "status": {"allocatable": {"cpu": "8"}}},
            subresource="status",
        )
        assert status["spec"] == {"unschedulable": True}
        assert status["status"] == {"allocatable": {"cpu": "8"}}
        patched = await kube.patch(
            Node,
            "n1",
            {"status": {"allocatable": {"kubernetes.io/batch-cpu": "2000"}}, "spec": {"x": 1}},
            subresource="status",
        )
        # stored in the canonical form, as the real server does ("2000" → "2k")
        assert patched["status"]["allocatable"] == {"cpu": "8", "kubernetes.io/batch-cpu": "2k"}
        assert patched["spec"] == {"unschedulable": True}
        assert fake.calls("update", r"/nodes/n1/status$")[0].body["status"] == {
            "allocatable": {"cpu": "8"}
        }

    run(scenario())


def test_custom_resources_drop_status_on_create_and_count_spec_generations() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        metric = {"metadata": {"name": "n1"}, "spec": {"a": 1}, "status": {"b": 2}}
        created = await kube.create(NodeMetric, metric)
        assert "status" not in created and created["metadata"]["generation"] == 1
        assert (
            created["apiVersion"] == "slo.koordinator.sh/v1alpha1"
            and created["kind"] == "NodeMetric"
        )
        status = await kube.patch(NodeMetric, "n1", {"status": {"b": 3}}, subresource="status")
        assert status["status"] == {"b": 3} and status["metadata"]["generation"] == 1
        spec = await kube.patch(NodeMetric, "n1", {"spec": {"a": 2}})
        assert spec["metadata"]["generation"] == 2

    run(scenario())


def test_pods_start_pending() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        created = await kube.create(Pod, pod("p", status={"phase": "Running"}))
        assert created["status"] == {"phase": "Pending"}

    run(scenario())


def test_merge_and_json_patches_and_a_stale_version_in_a_patch() -> None:
    async def scenario() -> None:
        kube = FakeKubeAPI().kube_api()
        created = await kube.create(
            ConfigMap,
            {"metadata": {"name": "c", "namespace": "ns", "labels": {"a": "1", "b": "2"}}},
        )
        merged = await kube.patch(
            ConfigMap, "c", {"metadata": {"labels": {"a": None, "c": "3"}}}, namespace="ns"
        )
        assert merged["metadata"]["labels"] == {"b": "2", "c": "3"}
        patched = await kube.patch(
            ConfigMap,
            "c",
            [
                {"op": "test", "path": "/metadata/labels/b", "value": "2"},
                {"op": "add", "path": "/data", "value": {"k": "v"}},
                {"op": "replace", "path": "/metadata/labels/b", "value": "9"},
                {"op": "remove", "path": "/metadata/labels/c"},
            ],
            namespace="ns",
            patch_type=PatchType.JSON,
        )
        assert patched["data"] == {"k": "v"} and patched["metadata"]["labels"] == {"b": "9"}
        with pytest.raises(errors.KubeError) as exc:
            await kube.patch(
                ConfigMap,
                "c",
                [{"op": "test", "path": "/data/k", "value": "other"}],
                namespace="ns",
                patch_type=PatchType.JSON,
            )
        assert api_error(exc)["code"] == 422
        stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
        with pytest.raises(errors.KubeError) as exc:
            await kube.patch(ConfigMap, "c", stale, namespace="ns")
        assert api_error(exc)["reason"] == "Conflict"
        with pytest.raises(errors.KubeError) as exc:
            await kube.patch(ConfigMap, "c", {}, namespace="ns", patch_type=PatchType.APPLY)
        assert api_error(exc)["code"] == 415

    run(scenario())


def test_list_filters_by_label_and_field_selectors() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(
            pod(
                "a",
                node_name="n1",
                metadata={"name": "a", "namespace": "x", "labels": {"app": "web"}},
            ),
            pod(
                "b",
                node_name="n2",
                metadata={"name": "b", "namespace": "x", "labels": {"app": "db"}},
            ),
            pod("c", namespace="y"),
        )
        kube = fake.kube_api()

        async def names(**kwargs: Any) -> list[str]:
            return [p["metadata"]["name"] for p in (await kube.list(Pod, **kwargs)).items]

        assert await names() == ["a", "b", "c"]
        assert await names(namespace="x") == ["a", "b"]
        assert await names(fields="spec.nodeName=n1") == ["a"]
        assert await names(fields="spec.nodeName=") == ["c"]  # unscheduled pods
        assert await names(fields="spec.nodeName!=n1,metadata.namespace=x") == ["b"]
        assert await names(labels="app in (web, db)") == ["a", "b"]
        assert await names(labels="app notin (web)") == ["b", "c"]
        assert await names(labels="!app") == ["c"]
        assert await names(labels="app,app!=db") == ["a"]
        response = await kube._http.get("api/v1/pods")
        assert "kind" not in response.json()["items"][0]  # built-in list items lack type meta
        assert (await kube.list(Pod)).items[0]["kind"] == "Pod"  # KubeApi fills it in
        with pytest.raises(errors.KubeError) as exc:
            await names(labels="app in web")
        assert api_error(exc)["code"] == 400

    run(scenario())


def test_delete_returns_the_object_and_then_it_is_gone() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(Lease, {"metadata": {"name": "l", "namespace": "ns"}, "spec": {}})
        await kube.delete(Lease, "l", namespace="ns")
        assert fake.get("Lease", "l", "ns") is None
        with pytest.raises(errors.KubeError) as exc:
            await kube.delete(Lease, "l", namespace="ns")
        assert api_error(exc)["code"] == 404

    run(scenario())


def test_watch_replays_history_after_a_version_and_follows_selectors() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        [first] = fake.seed(node("n1", {"pool": "a"}))
        fake.seed(node("n2", {"pool": "b"}))
        fake.seed(node("n1", {"pool": "b"}))  # leaves the pool=a selection
        fake.remove("Node", "n2")
        kube = fake.kube_api()
        version = first["metadata"]["resourceVersion"]
        every = await collect(kube, Node, 3, resource_version=version)
        assert [(t, o["metadata"]["name"]) for t, o in every] == [
            ("ADDED", "n2"),
            ("MODIFIED", "n1"),
            ("DELETED", "n2"),
        ]
        pool_b = await collect(kube, Node, 3, resource_version=version, labels="pool=b")
        assert [(t, o["metadata"]["name"]) for t, o in pool_b] == [
            ("ADDED", "n2"),
            ("ADDED", "n1"),  # entered the selection
            ("DELETED", "n2"),
        ]
        pool_a = await collect(kube, Node, 1, resource_version=version, labels="pool=a")
        assert [(t, o["metadata"]["name"]) for t, o in pool_a] == [("DELETED", "n1")]
        deleted = every[2][1]
        assert int(deleted["metadata"]["resourceVersion"]) == fake.resource_version

    run(scenario())


def test_watch_without_a_version_starts_with_the_current_objects_then_streams() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        kube = fake.kube_api()

        async def later() -> None:
            await asyncio.sleep(0.02)
            await kube.create(Node, node("n2"))

        task = asyncio.create_task(later())
        events = await collect(kube, Node, 2)
        await task
        assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "n1"), ("ADDED", "n2")]
        assert fake.watch_count == 0  # closing the stream unregisters the watch

    run(scenario())


def test_bookmarks_are_sent_only_to_watches_that_ask() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        [n1] = fake.seed(node("n1"))
        kube = fake.kube_api()
        version = n1["metadata"]["resourceVersion"]
        with_bookmarks = asyncio.create_task(collect(kube, Node, 1, resource_version=version))
        without = asyncio.create_task(
            collect(kube, Node, 1, timeout=0.2, resource_version=version, allow_bookmarks=False)
        )
        await asyncio.sleep(0.05)
        fake.seed(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
        )
        fake.bookmark()
        assert await with_bookmarks == [
            (
                "BOOKMARK",
                {"apiVersion": "v1", "kind": "Node", "metadata": {"resourceVersion": "2"}},
            )
        ]
        assert await without == []
        assert fake.calls("watch")[0].params["allowWatchBookmarks"] == "true"

    run(scenario())


def test_a_watch_from_before_the_compaction_point_is_expired() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"), node("n2"), node("n3"))
        fake.compact()
        with pytest.raises(errors.KubeError) as exc:
            await collect(fake.kube_api(), Node, 1, resource_version="1")
        assert isinstance(exc.value, errors.Gone) and exc.value.code == 410
        assert exc.value.reason == "Expired"
        assert exc.value.message == "too old resource version: 1 (3)"
        assert await collect(fake.kube_api(), Node, 1, timeout=0.1, resource_version="3") == []

    run(scenario())


def test_a_watch_ends_at_its_timeout_seconds_and_can_be_dropped() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await collect(kube, Node, 1, timeout=3, timeout_seconds=1) == []
        assert 0.9 < loop.time() - start < 2
        task = asyncio.create_task(collect(kube, Node, 1, timeout=3))
        await asyncio.sleep(0.02)
        fake.close_watches(error=True)
        with pytest.raises(errors.TransportError, match="ReadError"):
            await task

    run(scenario())


def test_injected_failures_and_recorded_requests() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        fake.fail("create", r"/nodes$", 503, times=1, retry_after=2)
        with pytest.raises(errors.KubeError) as exc:
            await kube.create(Node, node("n1"))
        assert isinstance(exc.value, errors.ServerError) and exc.value.code == 503
        assert exc.value.retry_after == 2.0
        await kube.create(Node, node("n1"))  # only once
        fake.disconnect("get", r"/nodes/n1$")
        with pytest.raises(errors.TransportError, match="ConnectError"):
            await kube.get(Node, "n1")
        assert [(r.method, r.verb, r.path) for r in fake.requests] == [
            ("POST", "create", "/api/v1/nodes"),
            ("POST", "create", "/api/v1/nodes"),
            ("GET", "get", "/api/v1/nodes/n1"),
        ]
        assert fake.requests[1].params == {"fieldManager": "koord-manager"}
        assert fake.requests[1].body["metadata"] == {"name": "n1"}
        assert fake.requests[1].content_type == "application/json"

    run(scenario())


def test_lightkube_typed_calls_work_against_the_fake() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        client = fake.client()
        created = await client.create(Node(metadata=ObjectMeta(name="n1", labels={"a": "b"})))
        assert created.metadata is not None and created.metadata.resourceVersion == "1"
        listed = [n.metadata.name async for n in client.list(Node) if n.metadata is not None]
        assert listed == ["n1"]
        await client.patch(Node, "n1", {"metadata": {"labels": {"c": "d"}}})  # strategic = merge
        assert fake.get("Node", "n1")["metadata"]["labels"] == {"a": "b", "c": "d"}  # type: ignore[index]
        with pytest.raises(ApiError) as lightkube_exc:  # lightkube's own calls: its own error
            await client.get(Pod, "missing", namespace="default")
        assert lightkube_exc.value.status.code == 404
        await client.aclose()

    run(scenario())


def test_malformed_writes_get_the_real_status_codes() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        generated = await kube.create(Pod, {"metadata": {"generateName": "w-", "namespace": "ns"}})
        assert generated["metadata"]["name"].startswith("w-")
        cases = [
            (kube.create(Pod, pod("p"), namespace="other"), 400),
            (kube.create(Node, {"metadata": {}}), 422),
            (
                kube.create(Node, {"apiVersion": "v2", "kind": "Node", "metadata": {"name": "x"}}),
                400,
            ),
            (kube._call("POST", "api/v1/nodes/n1", body={}, verb="create", resource="nodes"), 405),
            (
                kube._call(
                    "PUT", "api/v1/nodes/n1/scale", body={}, verb="update", resource="nodes/scale"
                ),
                404,
            ),
        ]
        for call, code in cases:
            with pytest.raises(errors.KubeError) as exc:
                await call
            assert exc.value.code == code, exc.value.message
        await kube.create(Node, node("n1"))
        with pytest.raises(errors.KubeError) as exc:
            await kube._call(
                "PUT", "api/v1/nodes/n1", body=node("n2"), verb="update", resource="nodes"
            )
        assert exc.value.message == (
            "the name of the object (n2) does not match the name on the URL (n1)"
        )

    run(scenario())


def test_json_patch_moves_and_copies_and_indexes_lists() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(NodeMetric, {"metadata": {"name": "n1"}, "spec": {"a": [1, 3], "b": 1}})
        patched = await kube.patch(
            NodeMetric,
            "n1",
            [
                {"op": "add", "path": "/spec/a/1", "value": 2},
                {"op": "add", "path": "/spec/a/-", "value": 4},
                {"op": "copy", "from": "/spec/a", "path": "/spec/c"},
                {"op": "move", "from": "/spec/b", "path": "/spec/d~1e"},
                {"op": "remove", "path": "/spec/c/0"},
            ],
            patch_type=PatchType.JSON,
        )
        assert patched["spec"] == {"a": [1, 2, 3, 4], "c": [2, 3, 4], "d/e": 1}
        with pytest.raises(errors.KubeError) as exc:
            await kube.patch(
                NodeMetric,
                "n1",
                [{"op": "remove", "path": "/spec/missing"}],
                patch_type=PatchType.JSON,
            )
        assert isinstance(exc.value, errors.Invalid) and exc.value.code == 422

    run(scenario())


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        pytest.param("3000m", "3", id="whole-milli"),
        pytest.param("2500m", "2500m", id="fraction-milli"),
        pytest.param("0.5", "500m", id="decimal-point"),
        pytest.param("1000", "1k", id="thousand"),
        pytest.param("37000", "37k", id="batch-milli-cores"),
        pytest.param("1500000", "1500k", id="not-a-multiple-of-three"),
        pytest.param("999", "999", id="plain"),
        pytest.param("1048576Ki", "1Gi", id="binary-up"),
        pytest.param("0.5Gi", "512Mi", id="binary-fraction"),
        pytest.param("1.5Ki", "1536", id="binary-not-whole-kibibytes"),
        pytest.param("0.5Ki", "512", id="binary-under-1024"),
        pytest.param("1.5G", "1500M", id="decimal-suffix"),
        pytest.param("1E", "1E", id="exa"),
        pytest.param("1.5e3", "1500", id="exponent-whole"),
        pytest.param("12e-3", "12e-3", id="exponent"),
        pytest.param("-1000", "-1k", id="negative"),
        pytest.param("0Gi", "0", id="zero"),
    ],
)
def test_quantities_are_stored_in_their_canonical_form(written: str, stored: str) -> None:
    assert canonical_quantity(written) == stored


def test_field_selectors_the_kind_does_not_index_are_refused_as_the_server_words_it() -> None:
    async def scenario() -> dict[str, str]:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        messages = {}
        cases: list[tuple[Any, str]] = [
            (Node, "metadata.namespace="),
            (NodeMetric, "spec.x=1"),
            (ConfigMap, "data.v=1"),
        ]
        for res, selector in cases:
            with pytest.raises(errors.KubeError) as exc:
                await kube.list(res, fields=selector)
            assert exc.value.code == 400
            messages[res.__name__] = str(exc.value)
        return messages

    assert run(scenario()) == {
        "Node": "field label not supported: metadata.namespace",
        "NodeMetric": "field label not supported: spec.x",
        "ConfigMap": '"data.v" is not a known field selector: only "metadata.name", '
        '"metadata.namespace"',
    }


def test_a_lease_micro_time_needs_six_digits_and_is_stored_in_utc() -> None:
    async def scenario() -> tuple[dict[str, Any], str]:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        spec = {"holderIdentity": "h", "renewTime": "2031-05-06T07:08:09.123456+02:00"}
        lease = {"metadata": {"name": "l", "namespace": "ns"}, "spec": spec}
        created = await kube.create(Lease, lease)
        lease["metadata"]["name"], spec["renewTime"] = "m", "2031-05-06T07:08:09Z"
        with pytest.raises(errors.KubeError) as exc:
            await kube.create(Lease, lease)
        return created["spec"], str(exc.value)

    spec, refusal = run(scenario())
    assert spec["renewTime"] == "2031-05-06T05:08:09.123456Z"
    assert refusal.endswith('cannot parse "Z" as ".000000"')
