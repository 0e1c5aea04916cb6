"""koord-manager's controllers end to end against the in-process fake API server.

The node and its NodeMetric are the base case of test_noderesource.py: with colocation
on, the manager publishes batch-cpu 37000 and batch-memory 98Gi, explains them, writes the
node's NodeSLO and NodeMetric spec, and reacts to ConfigMap changes, invalid keys included.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from koordapi import keys
from koordapi.explanation import ANNOTATION_NODE_RESOURCE_EXPLANATION, render_node_explanation
from manager.app import Manager, ManagerOptions
from manager.controllers.nodeslo import go_duration
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.manager.test_noderesource import hp_pods, make_metric, make_node

NS = "koordinator-system"


def config_map(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {key: json.dumps(value) for key, value in data.items()},
    }


def seeded(colocation: dict[str, Any] | None = None, **more: Any) -> FakeKubeAPI:
    """The base node with fresh metrics and its pods, and the ConfigMap."""
    api = FakeKubeAPI()
    node = {"apiVersion": "v1", "kind": "Node", **make_node()}
    node["metadata"]["uid"] = "uid-node-1"
    metric = make_metric()
    metric["status"]["updateTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    pods = []
    for pod in hp_pods():
        pod["spec"]["nodeName"] = "node-1"
        pods.append({"apiVersion": "v1", "kind": "Pod", **pod})
    data: dict[str, Any] = {"colocation-config": colocation or {"enable": True}, **more}
    api.seed(
        node,
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", **metric},
        *pods,
        config_map(data),
    )
    return api


@asynccontextmanager
async def running(api: FakeKubeAPI, **options: Any) -> AsyncIterator[Manager]:
    settings = ManagerOptions(webhook_port=None, metrics_addr="", **options)
    manager = Manager(api.kube_api(), settings)
    task = asyncio.create_task(manager.run())
    try:
        yield manager
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


STATUS_PATH = r"/api/v1/nodes/node-1/status"
LEASE_PATH = r"/leases/"


def node_status(api: FakeKubeAPI) -> dict[str, Any]:
    return dict((api.get("Node", "node-1") or {}).get("status") or {})


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    await eventually(check, timeout)


def test_batch_resources_are_published_with_their_explanation() -> None:
    api = seeded()

    async def scenario() -> None:
        async with running(api, leader_elect=False):
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
        status = node_status(api)
        for section in ("allocatable", "capacity"):
            # the 37000 milli-cores written, as the API server stores them
            assert status[section][keys.BATCH_CPU] == "37k"
            assert status[section][keys.BATCH_MEMORY] == "98Gi"
        node = api.get("Node", "node-1")
        assert node is not None
        why = json.loads(node["metadata"]["annotations"][ANNOTATION_NODE_RESOURCE_EXPLANATION])
        assert why["resources"][keys.BATCH_CPU].startswith(
            f"{keys.BATCH_CPU} 37000 = capacity 100 - margin 40 (60% reclaim)"
        )
        assert "not written by this manager" in why["writtenBecause"]
        # What `koordctl explain node node-1` prints from that node.
        shown = render_node_explanation(node).splitlines()
        assert shown[0] == "node node-1"
        assert f"  {keys.BATCH_CPU}: 37k" in shown  # as the node holds it
        assert any(line.startswith(f"  {keys.BATCH_MEMORY} 98Gi = ") for line in shown)

    run(scenario())


def test_nodeslo_and_nodemetric_spec_are_written_for_the_node() -> None:
    api = seeded(
        {"enable": True, "metricReportIntervalSeconds": 30},
        **{"resource-threshold-config": {"clusterStrategy": {"enable": True}}},
    )

    async def scenario() -> None:
        async with running(api, leader_elect=False):
            await until(lambda: api.get("NodeSLO", "node-1") is not None)
            await until(lambda: ((api.get("NodeMetric", "node-1") or {}).get("spec") or {}) != {})
        slo = api.get("NodeSLO", "node-1")
        assert slo is not None
        threshold = slo["spec"]["resourceUsedThresholdWithBE"]
        assert threshold["enable"] is True and threshold["cpuSuppressThresholdPercent"] == 65
        assert slo["metadata"]["ownerReferences"][0]["uid"] == "uid-node-1"
        metric = api.get("NodeMetric", "node-1")
        assert metric is not None
        policy = metric["spec"]["metricCollectPolicy"]
        assert policy["reportIntervalSeconds"] == 30
        assert policy["nodeAggregatePolicy"]["durations"] == ["5m0s", "10m0s", "30m0s"]
        assert metric["status"]["nodeMetric"]["systemUsage"]  # koordlet's status untouched

    run(scenario())


async def edit_config(api: FakeKubeAPI, data: dict[str, str]) -> None:
    current = api.get("ConfigMap", "slo-controller-config", NS)
    assert current is not None
    current["data"] = data
    await api.kube_api().replace(_config_map_res(), current)


def _config_map_res() -> Any:
    from lightkube.resources.core_v1 import ConfigMap  # noqa: PLC0415

    return ConfigMap


def warnings_posted(api: FakeKubeAPI) -> list[str]:
    return [
        e["message"] for e in api.objects("Event", NS) if e.get("type") == "Warning"
    ]  # fmt: skip


def test_configmap_changes_reach_every_node_and_invalid_keys_keep_the_last_good() -> None:
    api = seeded()

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
            # A broken colocation-config keeps the last good config: batch stays.
            before = len(api.calls("patch", STATUS_PATH))
            await edit_config(api, {"colocation-config": "{not json"})
            await until(lambda: manager.state.colocation_error != "")
            assert node_status(api)["allocatable"][keys.BATCH_CPU] == "37k"
            # A broken NodeSLO key: a Warning event on the ConfigMap, the NodeSLO keeps it.
            await edit_config(
                api,
                {
                    "colocation-config": json.dumps({"enable": True}),
                    "cpu-burst-config": "{broken",
                },
            )
            await until(lambda: any("cpu-burst-config" in m for m in warnings_posted(api)))
            # every status write since the broken text (its reconcile came before this one's)
            # kept batch-cpu
            for patch in api.calls("patch", STATUS_PATH)[before:]:
                allocatable = (patch.body or {}).get("status", {}).get("allocatable")
                assert allocatable is None or allocatable.get(keys.BATCH_CPU) is not None
            # Colocation off for the cluster: the keys are removed, not zeroed.
            await edit_config(api, {"colocation-config": json.dumps({"enable": False})})
            await until(lambda: keys.BATCH_CPU not in node_status(api).get("allocatable", {}))
        status = node_status(api)
        assert keys.BATCH_MEMORY not in status["capacity"]
        node = api.get("Node", "node-1")
        assert node is not None
        why = json.loads(node["metadata"]["annotations"][ANNOTATION_NODE_RESOURCE_EXPLANATION])
        assert "DisableInConfig" in why["reason"]

    run(scenario())


def test_a_deleted_node_takes_its_nodeslo_and_nodemetric_along() -> None:
    api = seeded()

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            await until(lambda: api.get("NodeSLO", "node-1") is not None)
            from lightkube.resources.core_v1 import Node  # noqa: PLC0415

            await manager.api.delete(Node, "node-1")
            await until(lambda: api.get("NodeSLO", "node-1") is None)
            await until(lambda: api.get("NodeMetric", "node-1") is None)

    run(scenario())


def test_only_the_lease_holder_writes() -> None:
    api = seeded()

    async def scenario() -> None:
        fast = {"leader_elect": True}
        async with running(api, **fast) as first:
            await until(first.leading.is_set, 10)
            async with running(api, **fast) as second:
                await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
                # the second one has tried for the Lease, more than once, and lost
                tried = len(api.calls(path=LEASE_PATH))
                await until(lambda: len(api.calls(path=LEASE_PATH)) >= tried + 2, 10)
                assert first.leading.is_set() and not second.leading.is_set()
                writes = api.calls("patch", STATUS_PATH)
                assert writes  # the leader wrote

    run(scenario(), timeout=30)


def test_go_durations_are_canonical() -> None:
    cases = {"5m": "5m0s", "300s": "5m0s", "1h": "1h0m0s", "90s": "1m30s", "45s": "45s"}
    assert {k: go_duration(k) for k in cases} == cases


def test_sync_period_resyncs_every_informer_and_the_probe_address_answers() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def scenario() -> tuple[set[float | None], int, bytes]:
        async with running(
            seeded(), sync_period=7.5, health_probe_addr=f"127.0.0.1:{port}"
        ) as manager:
            periods = {i.resync_period for i in manager.state.informers}
            await eventually(manager.synced)
            url = f"http://127.0.0.1:{port}/readyz"
            with await asyncio.to_thread(urllib.request.urlopen, url, None, 5) as response:
                return periods, response.status, response.read()

    periods, status, body = run(scenario())
    assert periods == {7.5}
    assert status == 200 and body.strip()


def test_a_smoothing_window_holds_back_a_rise_of_batch_resources() -> None:
    api = seeded(colocation={"enable": True, "batchResourceSmoothingWindowSeconds": 3600})

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
            assert node_status(api)["allocatable"][keys.BATCH_CPU] == "37k"
            # 70 % reclaimable instead of 60 %: 10 more cores of batch-cpu, computed and held back
            raised = {"enable": True, "batchResourceSmoothingWindowSeconds": 3600}
            raised["cpuReclaimThresholdPercent"] = 70
            await edit_config(api, {"colocation-config": json.dumps(raised)})
            smoother = manager.node_resource.smoother
            await until(lambda: 47000 in smoother.values("node-1", keys.BATCH_CPU))
            # one more pass, awaited to its end: a write of 47000 ("47k") would be seen below
            await manager.node_resource.reconcile("node-1")
            assert node_status(api)["allocatable"][keys.BATCH_CPU] == "37k"

    run(scenario())
