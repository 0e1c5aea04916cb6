"""The extender over real HTTPS on localhost, fed by informers on the in-process fake API.

Requests are real extender JSON as kube-scheduler sends it (PascalCase) and in the lowercase
spelling of the old in-tree types; replies are checked field by field. bind is checked against
the fake API: the resource-status annotation is written before the Binding, conflicts are
retried, a failed bind frees the CPUs it had assumed; a GPU pod's device-allocated annotation
is what runtimehooks' GPUEnvInject reads.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from koordapi import keys
from runtimehooks.hooks import gpu
from runtimehooks.request import Stage
from runtimehooks.rules import Rules
from scheduler.cli import requests_exposition
from scheduler.server import ExtenderServer
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.runtimehooks.builders import container as hook_container
from tests.unit.runtimehooks.builders import pod as hook_pod
from tests.unit.scheduler.objects import (
    device,
    gpu_entry,
    gpu_pod,
    ht_topology,
    lsr_pod,
    make_metric,
    make_node,
    make_pod,
)

SERVER_NAME = "koord-scheduler.koordinator-system.svc"


def fresh(metric: dict[str, Any]) -> dict[str, Any]:
    """The NodeMetric reported just now (the builders date it from a fixed NOW)."""
    metric["status"]["updateTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", **metric}


def cluster() -> FakeKubeAPI:
    """node-1 busy (18 of 32 cores used), node-2 idle, both with a 2 x 8 x 2 CPU topology."""
    api = FakeKubeAPI()
    for name, used in (("node-1", "18"), ("node-2", "2")):
        node = make_node(name, annotations={keys.ANNOTATION_CPU_TOPOLOGY: ht_topology()})
        api.seed({"apiVersion": "v1", "kind": "Node", **node})
        api.seed(fresh(make_metric(name, cpu=used, memory="32Gi")))
    return api


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, trustme.CA]:
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("certs")
    cert = ca.issue_cert(SERVER_NAME)
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    return folder, ca


class Client:
    def __init__(self, session: aiohttp.ClientSession, base: str, context: ssl.SSLContext):
        self.session, self.base, self.context = session, base, context

    async def post(self, verb: str, body: Any) -> Any:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(
            f"{self.base}/scheduler/{verb}",
            data=data,
            headers={"Content-Type": "application/json", "Host": SERVER_NAME},
            ssl=self.context,
            server_hostname=SERVER_NAME,
        ) as reply:
            assert reply.status == 200
            return await reply.json()


@asynccontextmanager
async def serving(
    api: FakeKubeAPI, certs: tuple[Path, trustme.CA]
) -> AsyncIterator[tuple[Client, InformerClusterView]]:
    folder, ca = certs
    view = InformerClusterView(api.kube_api())
    tasks = [asyncio.create_task(i.run()) for i in view.informers]
    server = ExtenderServer(api.kube_api(), view, host="127.0.0.1", port=0, cert_dir=folder)
    await server.start()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    try:
        await eventually(view.synced)
        async with aiohttp.ClientSession() as session:
            yield Client(session, f"https://127.0.0.1:{server.port}", context), view
    finally:
        await server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def incoming(cpu: str = "2") -> dict[str, Any]:
    return make_pod("web", requests={"cpu": cpu, "memory": "1Gi"})


def spelled(args: dict[str, Any], lowercase: bool) -> dict[str, Any]:
    return {k.lower(): v for k, v in args.items()} if lowercase else args


@pytest.mark.parametrize("lowercase", [False, True], ids=["PascalCase", "lowercase"])
def test_filter_with_node_names_fails_the_busy_node_with_its_reason(
    certs: tuple[Path, trustme.CA], lowercase: bool
) -> None:
    async def scenario() -> None:
        async with serving(cluster(), certs) as (client, _):
            args = {"Pod": incoming("4"), "Nodes": None, "NodeNames": ["node-1", "node-2", "x"]}
            reply = await client.post("filter", spelled(args, lowercase))
        assert reply["NodeNames"] == ["node-2"]
        # node-1: 18 cores used + the pod's estimate 3400m (4 cores at 85 %) > 65 % of 32
        assert reply["FailedNodes"] == {
            "node-1": "node(s) cpu usage exceed threshold",
            "x": "node not found",
        }
        assert reply["Error"] == ""
        assert set(reply) >= {"NodeNames", "FailedNodes", "Error"}  # PascalCase out

    run(scenario())


def test_filter_without_the_node_cache_echoes_the_received_nodes(
    certs: tuple[Path, trustme.CA],
) -> None:
    async def scenario() -> None:
        api = cluster()
        nodes = [api.get("Node", "node-1"), api.get("Node", "node-2")]
        async with serving(api, certs) as (client, _):
            args = {"Pod": incoming("4"), "Nodes": {"metadata": {}, "items": nodes}}
            reply = await client.post("filter", args)
        assert [n["metadata"]["name"] for n in reply["Nodes"]["items"]] == ["node-2"]
        assert reply["Nodes"]["items"][0] == nodes[1]  # the object as it came
        assert "node-1" in reply["FailedNodes"]

    run(scenario())


@pytest.mark.parametrize(
    "body",
    [
        {"Pod": {}, "Nodes": {"items": []}, "NodeNames": ["node-1"]},
        {"Pod": {}},
        b"{not json",
    ],
    ids=["both", "neither", "not-json"],
)
def test_a_request_that_cannot_be_answered_gets_the_error_field(
    certs: tuple[Path, trustme.CA], body: Any
) -> None:
    async def scenario() -> None:
        async with serving(cluster(), certs) as (client, _):
            reply = await client.post("filter", body)
            scores = await client.post("prioritize", body)
            bound = await client.post("bind", body)
        assert reply["Error"]
        assert scores == []
        assert bound["Error"]

    run(scenario())


def test_prioritize_scores_the_idle_node_higher_on_the_0_to_10_scale(
    certs: tuple[Path, trustme.CA],
) -> None:
    async def scenario() -> None:
        async with serving(cluster(), certs) as (client, _):
            args = {"pod": incoming(), "nodenames": ["node-1", "node-2", "gone"]}
            reply = await client.post("prioritize", args)
        scores = {entry["Host"]: entry["Score"] for entry in reply}
        assert set(scores) == {"node-1", "node-2", "gone"}
        assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())
        assert scores["node-2"] > scores["node-1"] and scores["gone"] == 0

    run(scenario())


def test_bind_writes_the_cpuset_before_the_binding(certs: tuple[Path, trustme.CA]) -> None:
    async def scenario() -> None:
        api = cluster()
        api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=4)})
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.pod("default", "db") is not None)
            args = {"PodName": "db", "PodNamespace": "default", "PodUID": "uid-db",
                    "Node": "node-2"}  # fmt: skip
            reply = await client.post("bind", args)
        assert reply == {"Error": ""}
        pod = api.get("Pod", "db", "default")
        assert pod is not None and pod["spec"]["nodeName"] == "node-2"
        status = json.loads(pod["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_STATUS])
        assert status["cpuset"] == "0-1,16-17"  # FullPCPUs: two whole cores, one NUMA node
        writes = [(r.verb, r.path) for r in api.requests if r.verb in ("update", "create")]
        annotate = writes.index(("update", "/api/v1/namespaces/default/pods/db"))
        binding = writes.index(("create", "/api/v1/namespaces/default/pods/db/binding"))
        assert annotate < binding

    run(scenario())


def test_two_lsr_pods_bound_in_a_row_get_different_cpus(certs: tuple[Path, trustme.CA]) -> None:
    async def scenario() -> None:
        api = cluster()
        for name in ("a", "b"):
            api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod(name, cpus=4)})
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.pod("default", "b") is not None)
            replies = [
                await client.post("bind", {"PodName": n, "PodNamespace": "default",
                                           "PodUID": f"uid-{n}", "Node": "node-2"})
                for n in ("a", "b")
            ]  # fmt: skip
        assert replies == [{"Error": ""}, {"Error": ""}]
        sets = []
        for name in ("a", "b"):
            pod = api.get("Pod", name, "default")
            assert pod is not None
            sets.append(json.loads(pod["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_STATUS]))
        assert sets[0]["cpuset"] != sets[1]["cpuset"]

    run(scenario())


def test_a_conflicting_annotation_write_is_retried(certs: tuple[Path, trustme.CA]) -> None:
    async def scenario() -> None:
        api = cluster()
        api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=2)})
        api.fail("update", r"/pods/db$", 409, times=1)
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.pod("default", "db") is not None)
            args = {"PodName": "db", "PodNamespace": "default", "Node": "node-1"}
            reply = await client.post("bind", args)
        assert reply == {"Error": ""}
        assert len(api.calls("update", r"/pods/db$")) == 2
        pod = api.get("Pod", "db", "default")
        assert pod is not None and keys.ANNOTATION_RESOURCE_STATUS in pod["metadata"]["annotations"]

    run(scenario())


def test_a_failed_binding_is_reported_and_frees_the_assumed_cpus(
    certs: tuple[Path, trustme.CA],
) -> None:
    async def scenario() -> None:
        api = cluster()
        api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=2, node="node-1")})
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.pod("default", "db") is not None)
            args = {"PodName": "db", "PodNamespace": "default", "Node": "node-2"}
            reply = await client.post("bind", args)
            assert "already assigned" in reply["Error"]
            assert all(
                (p.get("metadata") or {}).get("name") != "db" for p in view.pods_on("node-2")
            )

    run(scenario())


def test_bind_of_an_unknown_pod_is_an_error_not_a_crash(certs: tuple[Path, trustme.CA]) -> None:
    async def scenario() -> None:
        async with serving(cluster(), certs) as (client, _):
            reply = await client.post(
                "bind", {"PodName": "nope", "PodNamespace": "default", "Node": "node-1"}
            )
        assert "nope" in reply["Error"]

    run(scenario())


def test_the_request_counts_are_exposed_per_verb() -> None:
    body, content_type = requests_exposition({"filter": 3, "bind": 1})
    assert content_type == "text/plain; charset=utf-8"
    assert body.decode().splitlines() == [
        "# TYPE koord_scheduler_extender_requests_total counter",
        'koord_scheduler_extender_requests_total{verb="bind"} 1',
        'koord_scheduler_extender_requests_total{verb="filter"} 3',
    ]


def test_bind_writes_the_device_allocation_gpu_env_inject_reads(
    certs: tuple[Path, trustme.CA],
) -> None:
    """A HAMi-core pod asking for half a GPU, on a HAMi-core node's one 16Gi card: the
    device-allocated annotation is written before the Binding, and GPUEnvInject turns it into
    the container's visible device, memory and SM limits. A whole card is then refused."""

    async def scenario() -> None:
        api = cluster()
        labels = {keys.LABEL_GPU_ISOLATION_PROVIDER: keys.GPU_ISOLATION_HAMI_CORE}
        api.seed({"apiVersion": "v1", "kind": "Node", **make_node("gpu", labels=labels)})
        api.seed(device("gpu", [gpu_entry(0, memory="16Gi")]))
        half = {keys.GPU_CORE: "50", keys.GPU_MEMORY_RATIO: "50"}
        api.seed({"apiVersion": "v1", "kind": "Pod", **gpu_pod(half, "ml", labels=labels)})
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.device("gpu") is not None)
            await eventually(lambda: view.pod("default", "ml") is not None)
            args = {"PodName": "ml", "PodNamespace": "default", "PodUID": "uid-ml",
                    "Node": "gpu"}  # fmt: skip
            reply = await client.post("bind", args)
            whole = {"Pod": gpu_pod({keys.NVIDIA_GPU: "1"}, "big"), "NodeNames": ["gpu"]}
            refused = await client.post("filter", whole)
        assert reply == {"Error": ""}
        assert refused["FailedNodes"] == {"gpu": "Insufficient gpu devices"}
        pod = api.get("Pod", "ml", "default")
        assert pod is not None and pod["spec"]["nodeName"] == "gpu"
        text = pod["metadata"]["annotations"][keys.ANNOTATION_DEVICE_ALLOCATED]
        assert json.loads(text) == {
            "gpu": [
                {
                    "minor": 0,
                    "resources": {
                        keys.GPU_CORE: "50",
                        keys.GPU_MEMORY: "8Gi",
                        keys.GPU_MEMORY_RATIO: "50",
                    },
                    "id": "GPU-0",
                }
            ]
        }
        writes = [(r.verb, r.path) for r in api.requests if r.verb in ("update", "create")]
        annotate = writes.index(("update", "/api/v1/namespaces/default/pods/ml"))
        binding = writes.index(("create", "/api/v1/namespaces/default/pods/ml/binding"))
        assert annotate < binding
        owner = hook_pod(labels=labels, annotations={keys.ANNOTATION_DEVICE_ALLOCATED: text})
        patch = gpu.container(hook_container(owner), Rules(), Stage.PRE_CREATE_CONTAINER)
        assert patch is not None
        assert patch.env == {
            keys.ENV_NVIDIA_VISIBLE_DEVICES: "0",
            keys.ENV_CUDA_DEVICE_MEMORY_LIMIT: str(8 << 30),
            keys.ENV_CUDA_DEVICE_SM_LIMIT: "50",
            keys.ENV_LD_PRELOAD: Rules().hami_core_library,
        }

    run(scenario())
