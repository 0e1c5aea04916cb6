"""The unit tests' FakeKubeAPI against the real API server: one scenario (tests/kubescenario.py)
of the kinds and verbs the product uses, run through the product's KubeApi as the cluster's
admin and on the fake in this process, must observe the same; and the real observations must
be those kept in tests/kubescenario.json, which the unit tests hold the fake to.

koord-manager and koord-descheduler are scaled to zero meanwhile: their controllers would write
the scenario's objects too (a NodeMetric with no Node of its name is deleted, a Node gets batch
resources, a PodMigrationJob is arbitrated), and only the API server's answers are compared.
The API server is restarted once, on an etcd compacted past resourceVersion 1, for the watch
from a version it no longer keeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from koordkube.client import KubeApi, build_client
from tests import kubescenario
from tests.cluster.cluster import Cluster
from tests.cluster.conftest import LOG_KEEP_DIR
from tests.cluster.helm import NAMESPACE
from tests.e2e.harness import paths

QUIET = ("koord-manager", "koord-descheduler")
"""The Deployments whose controllers write what the scenario writes."""


def pods_of(cluster: Cluster, deployment: dict[str, Any]) -> list[Any]:
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={quote(selector)}"
    return list(cluster.get(path)["items"])


@pytest.fixture
def controllers_quiet(cluster: Cluster) -> Iterator[None]:
    """koord-manager and koord-descheduler scaled to zero, and back afterwards."""
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    patch = "application/merge-patch+json"
    deployments: dict[str, dict[str, Any]] = {n: cluster.get(f"{apps}/{n}") for n in QUIET}

    def scale(name: str, replicas: int) -> None:
        cluster.api("PATCH", f"{apps}/{name}/scale", {"spec": {"replicas": replicas}}, patch)

    def none_left(deployment: dict[str, Any]) -> Callable[[], bool]:
        return lambda: not pods_of(cluster, deployment)

    def available(name: str, replicas: int) -> Callable[[], bool]:
        return lambda: cluster.get(f"{apps}/{name}")["status"].get("availableReplicas") == replicas

    try:
        for name in QUIET:
            scale(name, 0)
        for name, deployment in deployments.items():
            cluster.wait_for(f"no {name} pod left", none_left(deployment), 120)
        yield
    finally:
        for name, deployment in deployments.items():
            scale(name, deployment["spec"]["replicas"])
        for name, deployment in deployments.items():
            wanted = deployment["spec"]["replicas"]
            cluster.wait_for(f"{name} available again", available(name, wanted), timeout=180)


def on_cluster(
    cluster: Cluster, steps: Callable[[KubeApi], Awaitable[list[kubescenario.Observation]]]
) -> list[kubescenario.Observation]:
    """``steps`` as the cluster's admin, from inside its network namespace."""

    async def run() -> list[kubescenario.Observation]:
        client = build_client(cluster.admin_kubeconfig)
        try:
            return await steps(KubeApi(client))
        finally:
            await client.close()

    return cluster.in_netns(lambda: asyncio.run(run()))


def test_the_fake_answers_the_scenario_as_the_real_api_server(
    cluster: Cluster, controllers_quiet: None
) -> None:
    start = time.monotonic()
    real = on_cluster(cluster, kubescenario.scenario)
    took = time.monotonic() - start
    # The watch cache serves any version since the API server started, compacted in etcd or
    # not: resourceVersion 1 is too old once it restarts on an etcd compacted past it.
    cluster.compact_etcd()
    cluster.restart_apiserver()
    real += on_cluster(cluster, kubescenario.too_old_watch)
    kept = LOG_KEEP_DIR / paths.CONTAINERD_VERSION / "kubescenario-real.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(kubescenario.dump(real))
    fake = kubescenario.observe_fake()
    differences = kubescenario.differences(real, fake)
    assert not differences, "the fake differs from the real server:\n" + "\n".join(differences)
    recorded = kubescenario.differences(real, kubescenario.real_observations())
    assert not recorded, f"{kubescenario.REAL_OBSERVATIONS.name} is out of date ({kept}):\n" + (
        "\n".join(recorded)
    )
    # what the scenario made is gone again (the namespace once its contents are)
    cluster.wait_for(
        "the scenario's namespace deleted",
        lambda: (
            kubescenario.NAMESPACE
            not in {n["metadata"]["name"] for n in cluster.get("/api/v1/namespaces")["items"]}
        ),
        timeout=60,
    )
    nodes = {n["metadata"]["name"] for n in cluster.get("/api/v1/nodes")["items"]}
    assert kubescenario.NODE not in nodes
    assert took < 60, took
