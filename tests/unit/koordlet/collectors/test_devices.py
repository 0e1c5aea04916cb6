"""The device inventory: GPUs through the fake NVML, RDMA NICs from the fake sysfs, and
Koordinator's GPU health rule fed by Xid events."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.collectors import devices as devices_mod
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.devices import NOT_SUPPORTED, DeviceInventory, rdma_nics
from tests.unit.koordlet.collectors.fake_nvml import (
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    FakeGPU,
    FakeNVML,
)
from tests.unit.koordlet.collectors.test_rdma import PF0, PF1, VF0, FakeSysfs, link, write

GPU_ROOT = "pci0000:4a/0000:4a:02.0"


def gpu_function(fs: FakeSysfs, address: str, numa: str) -> None:
    d = fs.sys / "devices" / GPU_ROOT / address
    write(d / "numa_node", numa)
    write(d / "class", "0x030200")
    link(fs.sys / "bus/pci/devices" / address, f"../../../devices/{GPU_ROOT}/{address}")


@pytest.fixture
def fs(tmp_path: Path) -> FakeSysfs:
    fs = FakeSysfs(tmp_path)
    gpu_function(fs, "0000:4d:00.0", "1")
    gpu_function(fs, "0000:58:00.0", "-1")  # no NUMA: node 0, as Koordinator reads it
    return fs


def two_gpus() -> FakeNVML:
    return FakeNVML(
        [
            FakeGPU(
                0, "GPU-a", name="NVIDIA H100 80GB HBM3", total=80 << 30, bus_id="0000:4d:00.0"
            ),
            FakeGPU(1, "GPU-b", name="NVIDIA H100 80GB HBM3", total=8000, bus_id="0000:58:00.0"),
        ]
    )


def test_gpus_have_bus_numa_pcie_memory_model_and_driver(fs: FakeSysfs) -> None:
    nvml = two_gpus()
    inventory = DeviceInventory(fs.sys, nvml=nvml, rdma=False)
    found = inventory.read()
    a, b = found.gpus
    assert (a.uuid, a.minor, a.memory_total, a.bus_id, a.numa_node, a.pcie_id) == (
        "GPU-a",
        0,
        80 << 30,
        "0000:4d:00.0",
        1,
        "pci0000:4a",
    )
    assert (b.bus_id, b.numa_node, b.healthy) == ("0000:58:00.0", 0, True)
    assert (found.model, found.driver_version, found.gpu_reason) == (
        "H100-80GB-HBM3",
        "570.124.06",
        "",
    )
    assert nvml.refcount == 1  # kept initialized between reads, for the Xid events
    inventory.close()
    assert nvml.refcount == 0
    assert not nvml.event_sets


def test_without_sysfs_the_numa_node_comes_from_nvml(tmp_path: Path) -> None:
    nvml = FakeNVML([FakeGPU(0, "GPU-a", numa_node=3), FakeGPU(1, "GPU-b")])
    found = DeviceInventory(tmp_path, nvml=nvml, rdma=False).read()
    assert [(g.numa_node, g.pcie_id, g.bus_id) for g in found.gpus] == [
        (3, "", "0000:3b:00.0"),
        (-1, "", "0000:3c:00.0"),  # NVML not supported either: unknown
    ]


def test_a_critical_xid_makes_a_gpu_unhealthy_for_good_application_xids_do_not(
    fs: FakeSysfs,
) -> None:
    nvml = two_gpus()
    inventory = DeviceInventory(fs.sys, nvml=nvml, rdma=False)
    inventory.read()
    for xid in (13, 31, 43, 45, 68):
        nvml.xid(0, xid)
    assert all(g.healthy for g in inventory.read().gpus)
    nvml.xid(1, 79)  # fallen off the bus
    a, b = inventory.read().gpus
    assert a.healthy
    assert (b.healthy, b.reason, b.message) == (
        False,
        "Xid79",
        "Xid error detected on device, error code: 79",
    )
    assert not inventory.read().gpus[1].healthy  # no recovery until koordlet restarts


def test_a_gpu_gone_from_nvml_after_an_xid_is_unhealthy(fs: FakeSysfs) -> None:
    nvml = two_gpus()
    inventory = DeviceInventory(fs.sys, nvml=nvml, rdma=False)
    inventory.read()
    nvml.gpus[1].errors["nvmlDeviceGetHandleByPciBusId"] = NVML_ERROR_GPU_IS_LOST
    nvml.xid(0, 48)
    a, b = inventory.read().gpus
    assert (a.reason, b.reason) == ("Xid48", "Xid48")
    assert b.message == "failed to get device, error: GPU is lost"


def test_a_gpu_that_cannot_register_for_events_is_unhealthy(fs: FakeSysfs) -> None:
    nvml = two_gpus()
    nvml.gpus[0].events_supported = False
    a, b = DeviceInventory(fs.sys, nvml=nvml, rdma=False).read().gpus
    assert (a.healthy, a.reason, b.healthy) == (False, NOT_SUPPORTED, True)


def test_no_nvml_or_no_gpus_is_a_reason_not_a_crash(
    fs: FakeSysfs, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = FakeNVML([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    found = DeviceInventory(fs.sys, nvml=failing).read()
    assert found.gpus == ()
    assert found.gpu_reason == "NVML init failed: NVML Shared Library Not Found"
    assert DeviceInventory(fs.sys, nvml=FakeNVML([])).read().gpu_reason == (
        "NVML reports no GPU on this node"
    )

    def missing() -> FakeNVML:
        raise CollectorUnavailable("pynvml not installed: pip install 'koordinator-py[gpu]'")

    monkeypatch.setattr(devices_mod, "load_nvml", missing)
    assert "pynvml not installed" in DeviceInventory(fs.sys).read().gpu_reason


def test_mixed_models_leave_out_model_and_driver(fs: FakeSysfs) -> None:
    nvml = two_gpus()
    nvml.gpus[1].name = "Tesla T4"
    found = DeviceInventory(fs.sys, nvml=nvml, rdma=False).read()
    assert (found.model, found.driver_version) == ("", "")


@pytest.fixture
def nics(fs: FakeSysfs) -> FakeSysfs:
    fs.function(PF0, netdev="ens1f0")
    fs.function(PF1, numa=1, netdev="ens1f1")
    fs.function(VF0, netdev="ens1f0v0")
    fs.sriov(PF0, VF0)
    fs.ibdev(PF0, "mlx5_0", "ec0d:9a03:0078:1234")
    fs.ibdev(PF1, "mlx5_1", "ec0d:9a03:0078:1235", layer="Ethernet")
    fs.ibdev(VF0, "mlx5_2", "0000:0000:0000:0000")
    return fs


def test_rdma_nics_are_the_physical_network_functions_with_mlx_devices(nics: FakeSysfs) -> None:
    first, second = rdma_nics(nics.sys)
    assert (first.bus_id, first.minor, first.healthy, first.numa_node, first.pcie_id) == (
        PF0,
        0,
        True,
        0,
        "pci0000:3a",
    )
    assert first.vfs == (VF0,)
    assert (second.bus_id, second.minor, second.numa_node, second.vfs) == (PF1, 1, 1, ())


def test_a_port_not_active_is_unhealthy_and_other_names_or_classes_are_left_out(
    nics: FakeSysfs,
) -> None:
    write(nics.pci_dir(PF1) / "infiniband/mlx5_1/ports/1/state", "1: DOWN")
    assert [n.healthy for n in rdma_nics(nics.sys)] == [True, False]
    write(nics.pci_dir(PF1) / "class", "0x120000")  # a processing accelerator
    assert [n.bus_id for n in rdma_nics(nics.sys)] == [PF0]
    write(nics.pci_dir(PF1) / "class", "0x020000")
    nics.function("0000:5e:00.0")
    nics.ibdev("0000:5e:00.0", "rxe_eth0", "0000:0000:0000:0001")
    assert [n.bus_id for n in rdma_nics(nics.sys)] == [PF0, PF1]  # not mlx*_N: left out
    write(nics.pci_dir(PF0) / "sriov_numvfs", "0")
    assert rdma_nics(nics.sys)[0].vfs == ()
