"""koordlet_apiserver_request_duration_seconds: koordlet's API requests, on the fake API server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lightkube.resources.core_v1 import Node

from koordkube.client import KubeApi
from koordkube.errors import ServerError, TransportError
from koordlet.cluster import build_api
from koordlet.metrics import KoordletMetrics
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import write_kubeconfig


def api_sample(
    metrics: KoordletMetrics, suffix: str, verb: str, resource: str, code: str, **extra: str
) -> float | None:
    labels = {"node": "n1", "verb": verb, "resource": resource, "code": code, **extra}
    return metrics.registry.get_sample_value(
        f"koordlet_apiserver_request_duration_seconds{suffix}", labels
    )


def test_api_requests_are_counted_by_verb_resource_and_code() -> None:
    metrics = KoordletMetrics("n1")
    fake = FakeKubeAPI()
    ticks = iter([1.0, 1.002, 2.0, 2.3, 3.0, 3.0, 4.0, 9.0])  # 2 ms, 300 ms, 0 s, 5 s
    kube = KubeApi(fake.client(), observe=metrics.observe_apiserver, clock=lambda: next(ticks))

    async def scenario() -> None:
        fake.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        await kube.get(Node, "n1")
        await kube.patch(
            Node, "n1", {"status": {"allocatable": {"cpu": "4"}}}, subresource="status"
        )
        fake.fail("patch", "/nodes/n1/status$", 500)
        with pytest.raises(ServerError):
            await kube.patch(Node, "n1", {"status": {}}, subresource="status")
        fake.disconnect("get", "/nodes/n1$")
        with pytest.raises(TransportError):
            await kube.get(Node, "n1")

    asyncio.run(scenario())
    assert api_sample(metrics, "_count", "get", "nodes", "200") == 1
    assert api_sample(metrics, "_bucket", "get", "nodes", "200", le="0.001") == 0
    assert api_sample(metrics, "_bucket", "get", "nodes", "200", le="0.004") == 1
    assert api_sample(metrics, "_count", "patch", "nodes/status", "200") == 1
    assert api_sample(metrics, "_sum", "patch", "nodes/status", "200") == pytest.approx(0.3)
    assert api_sample(metrics, "_count", "patch", "nodes/status", "500") == 1
    assert api_sample(metrics, "_count", "get", "nodes", "error") == 1
    assert api_sample(metrics, "_bucket", "get", "nodes", "error", le="4.096") == 0
    assert api_sample(metrics, "_bucket", "get", "nodes", "error", le="+Inf") == 1


def test_build_api_hands_the_observer_to_the_client(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig")
    metrics = KoordletMetrics("n1")
    kube = build_api(config, observe=metrics.observe_apiserver)
    assert kube.observe == metrics.observe_apiserver
    assert build_api(config).observe is None
