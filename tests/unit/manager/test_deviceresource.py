"""The GPU device resources: a Node's koordinator.sh/gpu-* from koordlet's Device report, as
Koordinator's gpudeviceresource plugin publishes them (healthy GPUs only), on the fake API
server; and a cluster without the Device CRD keeps the rest of the manager working."""

from __future__ import annotations

from typing import Any

from lightkube.resources.core_v1 import Node

from koordapi import keys
from koordapi.device import GPUInfo, build_device
from manager.controllers.deviceresource import device_resources_patch
from tests.fakekube import KINDS, FakeKubeAPI
from tests.unit.koordkube.fakes import run
from tests.unit.manager.test_controllers import node_status, running, seeded, until

GI = 1 << 30


def device(*healthy: bool) -> dict[str, Any]:
    """koordlet's Device for node-1 with one 80 GiB GPU per entry of ``healthy``."""
    gpus = [
        GPUInfo(f"GPU-{i}", i, 80 * GI, healthy=ok, reason="" if ok else "Xid79")
        for i, ok in enumerate(healthy)
    ]
    return build_device("node-1", "uid-node-1", gpus, [])


def test_two_healthy_gpus_and_one_broken_give_the_healthy_ones() -> None:
    patch = device_resources_patch({"status": {}}, device(True, False, True))
    assert patch is not None
    for section in ("allocatable", "capacity"):
        entries = patch["status"][section]
        assert entries[keys.GPU_CORE] == "200"
        assert entries[keys.GPU_MEMORY_RATIO] == "200"
        assert entries[keys.GPU_MEMORY] == "160Gi"
        assert entries[keys.GPU] == "200"  # nvidia (or no vendor label): whole cards too


def test_a_node_that_already_says_so_gets_no_write_and_a_lost_gpu_removes_them() -> None:
    wanted = device_resources_patch({"status": {}}, device(True))
    assert wanted is not None
    node = {"status": wanted["status"]}
    assert device_resources_patch(node, device(True)) is None
    removed = device_resources_patch(node, device(False))
    assert removed is not None
    assert set(removed["status"]["allocatable"].values()) == {None}  # null: deleted by merge
    # no Device and no GPU resources: nothing to write
    assert device_resources_patch({"status": {"allocatable": {"cpu": "8"}}}, None) is None


def test_values_the_server_stored_in_canonical_form_need_no_second_write() -> None:
    """Ten GPUs make gpu-core 1000, which the API server stores as "1k": read back, the node
    already says so (compared as text, every look at the node wrote it again)."""

    async def scenario() -> dict[str, Any]:
        api = FakeKubeAPI()
        kube = api.kube_api()
        await kube.create(Node, {"metadata": {"name": "node-1"}})
        patch = device_resources_patch({"status": {}}, device(*[True] * 10))
        assert patch is not None and patch["status"]["allocatable"][keys.GPU_CORE] == "1000"
        return await kube.patch(Node, "node-1", patch, subresource="status")

    stored = run(scenario())
    assert stored["status"]["allocatable"][keys.GPU_CORE] == "1k"
    assert stored["status"]["capacity"][keys.GPU_MEMORY] == "800Gi"
    assert device_resources_patch(stored, device(*[True] * 10)) is None
    assert device_resources_patch(stored, device(*[True] * 9)) is not None


def test_the_manager_publishes_and_withdraws_them() -> None:
    api = seeded()
    api.seed(device(True, True))

    async def scenario() -> None:
        async with running(api, leader_elect=False):
            await until(lambda: keys.GPU_CORE in node_status(api).get("allocatable", {}))
            assert node_status(api)["capacity"][keys.GPU_MEMORY] == "160Gi"
            # batch resources are written beside them, by the other controller
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
            api.seed(device(False, False))  # both GPUs fell off the bus
            await until(lambda: keys.GPU_CORE not in node_status(api).get("allocatable", {}))
            assert keys.BATCH_CPU in node_status(api)["allocatable"]

    run(scenario())


def test_without_the_device_crd_the_manager_still_becomes_ready() -> None:
    base = seeded()
    api = FakeKubeAPI(kinds=[k for k in KINDS if k.kind != "Device"])
    api.seed(
        *(o for kind in ("Node", "NodeMetric", "Pod", "ConfigMap") for o in base.objects(kind))
    )

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            await until(manager.synced)
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
        assert api.calls(path=r"/devices$")  # it asked (404: no such kind), and goes on

    run(scenario())
