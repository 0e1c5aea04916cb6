"""The Device model: entries with Koordinator's field names, the unchanged check, condition
times, and koord-manager's GPU resources from a Device (GPUDeviceResource)."""

from __future__ import annotations

from typing import Any

from koordapi import keys
from koordapi.device import (
    LABEL_GPU_DRIVER_VERSION,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    GPUInfo,
    RDMAInfo,
    build_device,
    carry_transition_times,
    gpu_labels,
    gpu_model,
    gpu_node_resources,
    same_report,
)

H100 = GPUInfo(
    uuid="GPU-1",
    minor=1,
    memory_total=80 << 30,
    bus_id="0000:4d:00.0",
    numa_node=0,
    pcie_id="pci0000:4a",
)
LOST = GPUInfo(
    uuid="GPU-0",
    minor=0,
    memory_total=8000,
    bus_id="0000:58:00.0",
    numa_node=1,
    pcie_id="pci0000:54",
    healthy=False,
    reason="Xid44",
    message="Xid error detected on device, error code: 44",
)
NIC = RDMAInfo(
    bus_id="0000:3b:00.0",
    minor=0,
    healthy=True,
    numa_node=0,
    pcie_id="pci0000:3a",
    vfs=("0000:3b:00.3", "0000:3b:00.2"),
)


def test_the_device_has_koordinators_field_names_and_order() -> None:
    device = build_device("n1", "uid-1", [H100, LOST], [NIC], gpu_labels("A100", "470"))
    assert device["apiVersion"] == "scheduling.koordinator.sh/v1alpha1"
    assert device["kind"] == "Device"
    meta = device["metadata"]
    assert meta["name"] == "n1"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "n1",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {
        LABEL_GPU_VENDOR: "nvidia",
        LABEL_GPU_MODEL: "A100",
        LABEL_GPU_DRIVER_VERSION: "470",
    }
    gpu0, gpu1, rdma = device["spec"]["devices"]  # by type, then minor
    assert gpu1 == {
        "type": "gpu",
        "id": "GPU-1",
        "minor": 1,
        "health": True,
        "resources": {
            keys.GPU_CORE: "100",
            keys.GPU_MEMORY: "80Gi",
            keys.GPU_MEMORY_RATIO: "100",
        },
        "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:4a", "busID": "0000:4d:00.0"},
    }
    assert gpu0["health"] is False
    assert gpu0["resources"][keys.GPU_MEMORY] == "8000"
    assert gpu0["conditions"] == [
        {
            "type": "Healthy",
            "status": "False",
            "reason": "Xid44",
            "message": "Xid error detected on device, error code: 44",
        }
    ]
    assert rdma == {
        "type": "rdma",
        "id": "0000:3b:00.0",
        "minor": 0,
        "health": True,
        "resources": {keys.RDMA: "100"},
        "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
        "vfGroups": [
            {
                "vfs": [
                    {"minor": -1, "busID": "0000:3b:00.2"},
                    {"minor": -1, "busID": "0000:3b:00.3"},
                ]
            }
        ],
    }


def test_a_gpu_without_numa_pcie_or_bus_has_no_topology() -> None:
    gpu = GPUInfo(uuid="GPU-x", minor=0, memory_total=1 << 30, bus_id="0000:01:00.0")
    (entry,) = build_device("n1", "", [gpu], [])["spec"]["devices"]
    assert "topology" not in entry
    assert "ownerReferences" not in build_device("n1", "", [gpu], [])["metadata"]


def test_gpu_model_label_follows_koordinators_rule() -> None:
    assert gpu_model(["NVIDIA A100 SXM4 80GB"] * 2) == "A100-SXM4-80GB"
    assert gpu_model(["Tesla P100-PCIE-16GB"]) == "Tesla-P100-PCIE-16GB"
    assert gpu_model(["GeForce RTX 2080 Ti"]) == "GeForce-RTX-2080-Ti"
    assert gpu_model(["Tesla T4", "Tesla P40"]) == ""  # mixed models: no label
    assert gpu_model(["Tesla T4", ""]) == ""
    assert gpu_labels("", "") == {LABEL_GPU_VENDOR: "nvidia"}


def test_same_report_ignores_order_and_condition_times_but_not_health() -> None:
    desired = build_device("n1", "u", [H100, LOST], [NIC], gpu_labels("A100", "470"))
    stored = carry_transition_times({}, desired, "2026-01-01T00:00:00Z")
    stored["spec"]["devices"].reverse()
    stored["metadata"]["resourceVersion"] = "7"
    assert same_report(stored, desired)
    assert not same_report(stored, build_device("n1", "u", [H100], [NIC], gpu_labels("A100", "")))
    assert not same_report(stored, build_device("n1", "u", [H100, LOST], [NIC]))  # labels
    healed = GPUInfo(**{**LOST.__dict__, "healthy": True, "reason": "", "message": ""})
    assert not same_report(
        stored, build_device("n1", "u", [H100, healed], [NIC], gpu_labels("A100", "470"))
    )


def test_a_condition_keeps_its_time_while_its_status_holds() -> None:
    first = carry_transition_times({}, build_device("n1", "", [LOST], []), "T1")
    assert first["spec"]["devices"][0]["conditions"][0]["lastTransitionTime"] == "T1"
    again = carry_transition_times(first, build_device("n1", "", [LOST], []), "T2")
    assert again["spec"]["devices"][0]["conditions"][0]["lastTransitionTime"] == "T1"


def _gpu(memory: int, *, health: bool = True, core: int = 100) -> dict[str, Any]:
    return {
        "type": "gpu",
        "health": health,
        "resources": {
            keys.GPU_CORE: str(core),
            keys.GPU_MEMORY: str(memory),
            keys.GPU_MEMORY_RATIO: "100",
        },
    }


def test_node_gpu_resources_sum_the_healthy_gpus() -> None:
    # Koordinator's plugin_test: two healthy GPUs of 8000 and 10000 bytes.
    device: dict[str, Any] = {
        "metadata": {"name": "n1"},
        "spec": {"devices": [_gpu(8000), _gpu(10000)]},
    }
    assert gpu_node_resources(device) == {
        keys.GPU: "200",
        keys.GPU_CORE: "200",
        keys.GPU_MEMORY: "18000",
        keys.GPU_MEMORY_RATIO: "200",
    }
    assert gpu_node_resources(device, gpu_shared=True)[keys.GPU_SHARED] == "200"  # type: ignore[index]
    # Koordinator's plugin_test: 160 gpu-core in all.
    device["spec"]["devices"] = [_gpu(8000, core=60), _gpu(10000), _gpu(1 << 30, health=False)]
    resources = gpu_node_resources(device)
    assert resources is not None
    assert (resources[keys.GPU], resources[keys.GPU_CORE], resources[keys.GPU_MEMORY]) == (
        "160",
        "160",
        "18000",
    )


def test_no_device_or_no_healthy_gpu_resets_and_other_vendors_get_no_koordinator_gpu() -> None:
    assert gpu_node_resources(None) is None
    rdma_only = {"spec": {"devices": [{"type": "rdma", "health": True, "resources": {}}]}}
    assert gpu_node_resources(rdma_only) is None
    sick = {"spec": {"devices": [_gpu(8000, health=False)]}}
    assert gpu_node_resources(sick) is None
    huawei = {
        "metadata": {"labels": {LABEL_GPU_VENDOR: "huawei"}},
        "spec": {"devices": [_gpu(8000)]},
    }
    resources = gpu_node_resources(huawei)
    assert resources is not None
    assert keys.GPU not in resources
    gib = {"spec": {"devices": [_gpu(16 << 30), _gpu(16 << 30)]}}
    assert gpu_node_resources(gib)[keys.GPU_MEMORY] == "32Gi"  # type: ignore[index]
