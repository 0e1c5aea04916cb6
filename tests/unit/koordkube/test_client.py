"""The client: building it from configs, dict calls, and the retrying write helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme
from lightkube.resources.core_v1 import ConfigMap, Node, Pod

from koordkube import client as kc
from koordkube import errors
from koordkube.resources import NodeSLO
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import node, run, write_kubeconfig

NO_WAIT = kc.Backoff(initial=0.0, cap=0.0, jitter=0.0)


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def configmap(data: dict[str, str] | None = None, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "cfg", "namespace": "ns", **meta}}
    if data is not None:
        obj["data"] = data
    return obj


def test_build_client_reads_a_kubeconfig_file(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig")
    client = kc.build_client(path)
    assert client.config.cluster.server == "https://10.0.0.1:6443"
    assert client._client._field_manager == "koord-manager"


def test_build_client_uses_the_service_account_in_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("koordinator-system")
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    client = kc.build_client(service_account_dir=tmp_path)
    assert client.config.cluster.server == "https://10.96.0.1:443"
    assert client.namespace == "koordinator-system"
    assert client.config.user is not None
    assert client.config.user.token_file == str(tmp_path / "token")


def test_namespaced_kinds_need_a_namespace_for_single_objects() -> None:
    kube = FakeKubeAPI().kube_api()
    with pytest.raises(ValueError, match="namespaced"):
        run(kube.get(Pod, "p"))
    assert kc._path(Pod, listing=True) == "api/v1/pods"
    assert kc._path(Node, name="n1", subresource="status") == "api/v1/nodes/n1/status"
    assert kc._path(Node.Status, name="n1") == "api/v1/nodes/n1/status"
    assert kc._path(NodeSLO, name="n1") == "apis/slo.koordinator.sh/v1alpha1/nodeslos/n1"


def test_backoff_doubles_up_to_the_cap_and_jitters_upwards() -> None:
    backoff = kc.Backoff(initial=1.0, factor=2.0, cap=5.0, jitter=0.5)
    assert [backoff.delay(n, lambda: 0.0) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert backoff.delay(0, lambda: 1.0) == 1.5
    assert backoff.delay(10, lambda: 1.0) == 7.5  # jitter after the cap, as k8s wait.Backoff


def test_update_with_retry_rereads_after_each_conflict() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(ConfigMap, configmap({"n": "0"}))
        fake.fail("update", r"/configmaps/cfg$", 409, times=2)
        seen: list[str] = []

        def bump(obj: dict[str, Any]) -> dict[str, Any]:
            seen.append(obj["metadata"]["resourceVersion"])
            obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
            return obj

        sleeps = Sleeps()
        stored = await kc.update_with_retry(
            lambda: kube.get(ConfigMap, "cfg", namespace="ns"),
            bump,
            lambda obj: kube.replace(ConfigMap, obj),
            sleep=sleeps,
        )
        assert stored["data"] == {"n": "1"}  # each attempt mutated a fresh read
        assert len(seen) == 3 and len(fake.calls("get")) == 3
        assert len(sleeps.delays) == 2 and sleeps.delays[0] < sleeps.delays[1] <= 2.0 * 1.2

    run(scenario())


def test_update_with_retry_lands_after_a_real_concurrent_write() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(ConfigMap, configmap({"a": "1"}))
        calls = 0

        async def racing_get() -> dict[str, Any]:
            nonlocal calls
            calls += 1
            obj = await kube.get(ConfigMap, "cfg", namespace="ns")
            if calls == 1:  # someone else writes between our read and our write
                fake.seed(
                    {**configmap({"a": "1", "other": "x"}), "apiVersion": "v1", "kind": "ConfigMap"}
                )
            return obj

        def add(obj: dict[str, Any]) -> dict[str, Any]:
            obj["data"]["mine"] = "y"
            return obj

        stored = await kc.update_with_retry(
            racing_get, add, lambda obj: kube.replace(ConfigMap, obj), backoff=NO_WAIT
        )
        assert stored["data"] == {"a": "1", "other": "x", "mine": "y"}
        assert [c.verb for c in fake.calls()][1:] == ["get", "update", "get", "update"]

    run(scenario())


def test_update_with_retry_gives_up_with_a_clear_error() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(ConfigMap, configmap({}))
        fake.fail("update", r"/configmaps/cfg$", 500, times=10)
        with pytest.raises(kc.RetryError, match=r"update cfg: gave up after 3 attempts") as exc:
            await kc.update_with_retry(
                lambda: kube.get(ConfigMap, "cfg", namespace="ns"),
                lambda obj: {**obj, "data": {"x": "1"}},
                lambda obj: kube.replace(ConfigMap, obj),
                attempts=3,
                what="update cfg",
                sleep=Sleeps(),
            )
        assert isinstance(exc.value.__cause__, errors.ServerError)
        assert len(fake.calls("update")) == 3

    run(scenario())


def test_update_with_retry_does_not_retry_other_errors_or_write_without_changes() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        with pytest.raises(errors.NotFound):
            await kc.update_with_retry(
                lambda: kube.get(ConfigMap, "cfg", namespace="ns"),
                lambda obj: obj,
                lambda obj: kube.replace(ConfigMap, obj),
                sleep=Sleeps(),
            )
        assert len(fake.calls("get")) == 1
        await kube.create(ConfigMap, configmap({}))
        unchanged = await kc.update_with_retry(
            lambda: kube.get(ConfigMap, "cfg", namespace="ns"),
            lambda obj: None,
            lambda obj: kube.replace(ConfigMap, obj),
        )
        assert unchanged["metadata"]["name"] == "cfg" and fake.calls("update") == []

    run(scenario())


def test_update_with_retry_honours_the_servers_retry_after() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(ConfigMap, configmap({}))
        fake.fail("get", r"/configmaps/cfg$", 429, retry_after=4)
        sleeps = Sleeps()
        await kc.update_with_retry(
            lambda: kube.get(ConfigMap, "cfg", namespace="ns"),
            lambda obj: {**obj, "data": {"x": "1"}},
            lambda obj: kube.replace(ConfigMap, obj),
            sleep=sleeps,
        )
        assert sleeps.delays == [4.0]

    run(scenario())


def test_create_or_update_creates_updates_and_leaves_matching_objects_alone() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        desired = configmap({"k": "v"}, labels={"app": "koord"})
        stored, outcome = await kc.create_or_update(kube, ConfigMap, desired)
        assert outcome == "created" and stored["data"] == {"k": "v"}
        fake.seed(
            {
                **configmap({"k": "old"}, labels={"app": "koord", "team": "x"}),
                "apiVersion": "v1",
                "kind": "ConfigMap",
            }
        )
        stored, outcome = await kc.create_or_update(kube, ConfigMap, desired)
        assert outcome == "updated" and stored["data"] == {"k": "v"}
        assert stored["metadata"]["labels"] == {"app": "koord", "team": "x"}  # others kept
        version = stored["metadata"]["resourceVersion"]
        stored, outcome = await kc.create_or_update(kube, ConfigMap, desired)
        assert outcome == "unchanged" and stored["metadata"]["resourceVersion"] == version
        assert len(fake.calls("update")) == 1

    run(scenario())


def test_create_or_update_retries_the_update_on_conflict() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = fake.kube_api()
        await kube.create(NodeSLO, {"metadata": {"name": "n1"}, "spec": {"a": 1}})
        fake.fail("update", r"/nodeslos/n1$", 409)
        stored, outcome = await kc.create_or_update(
            kube, NodeSLO, {"metadata": {"name": "n1"}, "spec": {"a": 2}}, sleep=Sleeps()
        )
        assert outcome == "updated" and stored["spec"] == {"a": 2}
        assert len(fake.calls("update")) == 2

    run(scenario())


def test_every_request_is_told_to_the_observer_by_verb_resource_and_code() -> None:
    seen: list[tuple[str, str, str, float]] = []
    ticks = iter(float(n) for n in range(100))  # each request takes 1 s on this clock

    async def scenario() -> None:
        fake = FakeKubeAPI()
        kube = kc.KubeApi(
            fake.client(), observe=lambda *call: seen.append(call), clock=lambda: next(ticks)
        )
        await kube.create(Node, node("n1"))
        await kube.get(Node, "n1")
        await kube.list(Pod, namespace="default")
        await kube.patch(Node, "n1", {"status": {"capacity": {"cpu": "4"}}}, subresource="status")
        await kube.replace(Node.Status, await kube.get(Node, "n1"))
        await kube.create(Pod, {"metadata": {"name": "p", "namespace": "ns"}})
        await kube.create_subresource(
            Pod, "p", "eviction", {"apiVersion": "policy/v1", "kind": "Eviction"}, namespace="ns"
        )
        fake.fail("get", "/nodes/n1$", 429)
        with pytest.raises(errors.Throttled):
            await kube.get(Node, "n1")
        fake.disconnect("delete", "/nodes/n1$")
        with pytest.raises(errors.TransportError):
            await kube.delete(Node, "n1")
        await kube.delete(Node, "n1")
        stream = kube.watch(Node, resource_version="1", allow_bookmarks=False)
        try:
            assert (await anext(stream))[0] == "MODIFIED"  # the status patch
        finally:
            await stream.aclose()

    run(scenario())
    assert [call[:3] for call in seen] == [
        ("create", "nodes", "201"),
        ("get", "nodes", "200"),
        ("list", "pods", "200"),
        ("patch", "nodes/status", "200"),
        ("get", "nodes", "200"),
        ("update", "nodes/status", "200"),
        ("create", "pods", "201"),
        ("create", "pods/eviction", "201"),
        ("get", "nodes", "429"),
        ("delete", "nodes", "error"),  # no response came
        ("delete", "nodes", "200"),
        ("watch", "nodes", "200"),
    ]
    assert {call[3] for call in seen} == {1.0}


def test_no_observer_no_clock_reads() -> None:
    def clock() -> float:
        raise AssertionError("the clock is read only for an observer")

    async def scenario() -> None:
        kube = kc.KubeApi(FakeKubeAPI().client(), clock=clock)
        assert (await kube.create(Node, node("n1")))["metadata"]["name"] == "n1"

    run(scenario())
