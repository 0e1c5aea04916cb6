"""The RDMA collector and the hook's device inventory, on a fake sysfs laid out like the kernel's.

The tree has relative symlinks where the kernel has them: class/infiniband/<ibdev> and
class/infiniband_verbs/uverbsN point into the PCI device folder under devices/, their ``device``
links point back to the PCI function, bus/pci/devices/<bdf> points to the same folder, and a
PF's virtfnN / a VF's physfn link the SR-IOV functions. class/infiniband_verbs also holds the
plain file abi_version.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from koordapi import keys
from koordlet.collectors.base import Collector, CollectorUnavailable
from koordlet.collectors.rdma import (
    RDMACollector,
    RDMADevice,
    RDMAPort,
    pyverbs_lister,
    rdma_cm_device,
    rdma_devices,
    rdma_verbs_devices,
)
from runtimehooks.hooks import rdma as rdma_hook
from runtimehooks.patch import ContainerPatch, Device
from runtimehooks.request import ContainerRequest, PodRequest, Stage
from runtimehooks.rules import NodeState, Rules

ROOT_PORT = "pci0000:3a/0000:3a:00.0"
PF0, PF1, VF0 = "0000:3b:00.0", "0000:3b:00.1", "0000:3b:00.2"
NOW = 1000.0
NULL = Path("/dev/null").stat()  # a character device every machine has: 1:3 on Linux


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


class FakeSysfs:
    def __init__(self, root: Path) -> None:
        self.sys = root / "sys"
        self.dev = root / "dev"
        write(self.sys / "class/infiniband_verbs/abi_version", "6")
        self.dev.mkdir(parents=True)

    def pci_dir(self, address: str) -> Path:
        return self.sys / "devices" / ROOT_PORT / address

    def function(self, address: str, *, numa: int = 0, netdev: str | None = None) -> None:
        d = self.pci_dir(address)
        write(d / "vendor", "0x15b3")
        write(d / "device", "0x1017" if address != VF0 else "0x1018")
        write(d / "class", "0x020000")
        write(d / "numa_node", str(numa))
        if netdev:
            write(d / "net" / netdev / "ifindex", "4")
        link(self.sys / "bus/pci/devices" / address, f"../../../devices/{ROOT_PORT}/{address}")

    def sriov(self, pf: str, *vfs: str) -> None:
        write(self.pci_dir(pf) / "sriov_numvfs", str(len(vfs)))
        for n, vf in enumerate(vfs):
            link(self.pci_dir(pf) / f"virtfn{n}", f"../{vf}")
            link(self.pci_dir(vf) / "physfn", f"../{pf}")

    def ibdev(self, address: str, name: str, guid: str, layer: str = "InfiniBand") -> None:
        d = self.pci_dir(address) / "infiniband" / name
        write(d / "node_guid", guid)
        write(d / "ports/1/state", "4: ACTIVE")
        write(d / "ports/1/phys_state", "5: LinkUp")
        write(d / "ports/1/link_layer", layer)
        write(d / "ports/1/rate", "100 Gb/sec (4X EDR)")
        link(d / "device", f"../../../{address}")
        link(
            self.sys / "class/infiniband" / name,
            f"../../devices/{ROOT_PORT}/{address}/infiniband/{name}",
        )

    def uverbs(self, address: str, n: int, ibdev: str, minor: int) -> None:
        d = self.pci_dir(address) / "infiniband_verbs" / f"uverbs{n}"
        write(d / "ibdev", ibdev)
        write(d / "dev", f"231:{minor}")
        link(d / "device", f"../../../{address}")
        link(
            self.sys / "class/infiniband_verbs" / f"uverbs{n}",
            f"../../devices/{ROOT_PORT}/{address}/infiniband_verbs/uverbs{n}",
        )


@pytest.fixture
def node(tmp_path: Path) -> FakeSysfs:
    """Two ConnectX PFs; the first has SR-IOV on with one VF (its own ibdev and uverbs)."""
    fs = FakeSysfs(tmp_path)
    fs.function(PF0, netdev="ens1f0")
    fs.function(PF1, numa=1, netdev="ens1f1")
    fs.function(VF0, netdev="ens1f0v0")
    fs.sriov(PF0, VF0)
    fs.ibdev(PF0, "mlx5_0", "ec0d:9a03:0078:1234")
    fs.ibdev(PF1, "mlx5_1", "ec0d:9a03:0078:1235", layer="Ethernet")
    fs.ibdev(VF0, "mlx5_2", "0000:0000:0000:0000")
    fs.uverbs(PF0, 0, "mlx5_0", 192)
    fs.uverbs(PF1, 1, "mlx5_1", 193)
    fs.uverbs(VF0, 2, "mlx5_2", 194)
    return fs


def test_the_inventory_reads_pci_function_ports_sriov_and_uverbs(node: FakeSysfs) -> None:
    devices = rdma_devices(node.sys)

    port = RDMAPort(1, "ACTIVE", "InfiniBand", "100 Gb/sec (4X EDR)")
    assert devices[0] == RDMADevice(
        name="mlx5_0",
        pci_address=PF0,
        node_guid="ec0d:9a03:0078:1234",
        ports=(port,),
        uverbs="uverbs0",
        netdevs=("ens1f0",),
        numa_node=0,
        vendor="0x15b3",
        device="0x1017",
        physfn=None,
        vfs=(VF0,),
    )
    assert [(d.name, d.pci_address, d.numa_node, d.is_vf) for d in devices] == [
        ("mlx5_0", PF0, 0, False),
        ("mlx5_1", PF1, 1, False),
        ("mlx5_2", VF0, 0, True),
    ]
    assert devices[1].ports[0].link_layer == "Ethernet"
    assert devices[2].physfn == PF0


def test_virtual_functions_are_listed_in_virtfn_order(node: FakeSysfs) -> None:
    extra = [f"0000:3b:0{i}.{j}" for i in (1, 2) for j in range(6)][:11]
    for address in extra:
        node.function(address)
    # virtfn0 is VF0 already; virtfn1..virtfn11 follow, and virtfn10 sorts after virtfn9.
    for n, vf in enumerate(extra, start=1):
        link(node.pci_dir(PF0) / f"virtfn{n}", f"../{vf}")

    assert rdma_devices(node.sys)[0].vfs == (VF0, *extra)


def test_verbs_devices_map_each_pci_function_to_its_uverbs_with_sysfs_numbers(
    node: FakeSysfs,
) -> None:
    assert rdma_verbs_devices(node.sys, node.dev) == {
        PF0: (Device("/dev/infiniband/uverbs0", "c", 231, 192, 0o666),),
        PF1: (Device("/dev/infiniband/uverbs1", "c", 231, 193, 0o666),),
        VF0: (Device("/dev/infiniband/uverbs2", "c", 231, 194, 0o666),),
    }


def test_verbs_device_numbers_come_from_the_device_node_when_it_exists(node: FakeSysfs) -> None:
    # A stand-in character device: the node's stat wins over sysfs, as in Koordinator's hook.
    link(node.dev / "infiniband/uverbs1", "/dev/null")

    found = rdma_verbs_devices(node.sys, node.dev)

    assert found[PF1] == (
        Device("/dev/infiniband/uverbs1", "c", os.major(NULL.st_rdev), os.minor(NULL.st_rdev)),
    )
    assert found[PF0][0].major == 231


def test_a_function_with_two_verbs_devices_lists_both_in_order(node: FakeSysfs) -> None:
    node.ibdev(PF1, "mlx5_bond_0", "ec0d:9a03:0078:1299")
    node.uverbs(PF1, 10, "mlx5_bond_0", 202)

    assert [d.path for d in rdma_verbs_devices(node.sys, node.dev)[PF1]] == [
        "/dev/infiniband/uverbs1",
        "/dev/infiniband/uverbs10",
    ]


def test_a_software_rdma_device_has_no_pci_function_and_no_hook_entry(node: FakeSysfs) -> None:
    rxe = node.sys / "devices/virtual/infiniband/rxe0"
    write(rxe / "node_guid", "5054:00ff:fe12:3456")
    write(rxe / "ports/1/state", "4: ACTIVE")
    write(rxe / "ports/1/link_layer", "Ethernet")
    link(node.sys / "class/infiniband/rxe0", "../../devices/virtual/infiniband/rxe0")
    uverbs = node.sys / "devices/virtual/infiniband_verbs/uverbs3"
    write(uverbs / "ibdev", "rxe0")
    write(uverbs / "dev", "231:195")
    link(
        node.sys / "class/infiniband_verbs/uverbs3",
        "../../devices/virtual/infiniband_verbs/uverbs3",
    )

    rxe0 = next(d for d in rdma_devices(node.sys) if d.name == "rxe0")

    assert (rxe0.pci_address, rxe0.uverbs, rxe0.netdevs, rxe0.vfs) == (None, "uverbs3", (), ())
    assert set(rdma_verbs_devices(node.sys, node.dev)) == {PF0, PF1, VF0}


def test_rdma_cm_is_the_stat_of_its_device_node(tmp_path: Path) -> None:
    assert rdma_cm_device(tmp_path) is None
    write(tmp_path / "infiniband/rdma_cm", "")  # a regular file is not a device
    assert rdma_cm_device(tmp_path) is None

    (tmp_path / "infiniband/rdma_cm").unlink()
    link(tmp_path / "infiniband/rdma_cm", "/dev/null")

    device = rdma_cm_device(tmp_path)
    assert device == Device(
        "/dev/infiniband/rdma_cm", "c", os.major(NULL.st_rdev), os.minor(NULL.st_rdev), 0o666
    )
    assert stat.S_ISCHR(NULL.st_mode)


def test_the_collector_counts_physical_functions_and_keeps_the_hook_inventory(
    node: FakeSysfs,
) -> None:
    link(node.dev / "infiniband/rdma_cm", "/dev/null")
    collector = RDMACollector(node.sys, node.dev)
    as_collector: Collector = collector

    samples = as_collector.collect(NOW)

    assert [(s.name, dict(s.labels), s.ts, s.value) for s in samples] == [
        ("node_rdma_devices", {}, NOW, 2.0)
    ]
    assert [d.name for d in collector.devices] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert set(collector.verbs_devices) == {PF0, PF1, VF0}
    assert collector.rdma_cm is not None
    assert (collector.interval, collector.feature_gate, collector.verbs) == (
        60.0,
        "RDMADevices",
        None,
    )


def test_the_inventory_feeds_the_rdma_device_inject_hook(node: FakeSysfs) -> None:
    link(node.dev / "infiniband/rdma_cm", "/dev/null")
    collector = RDMACollector(node.sys, node.dev)
    collector.collect(NOW)
    rules = Rules(node=NodeState(rdma_verbs=collector.verbs_devices, rdma_cm=collector.rdma_cm))
    allocated = {"rdma": [{"id": PF0, "extension": {"vfs": [{"busID": VF0}]}}]}
    pod = PodRequest(
        uid="u1", annotations={keys.ANNOTATION_DEVICE_ALLOCATED: json.dumps(allocated)}
    )

    patch = rdma_hook.container(ContainerRequest(pod, "c"), rules, Stage.PRE_CREATE_CONTAINER)

    assert collector.rdma_cm is not None
    assert patch == ContainerPatch(
        devices=(collector.rdma_cm, Device("/dev/infiniband/uverbs2", "c", 231, 194))
    )


def test_no_rdma_device_turns_the_collector_off(tmp_path: Path) -> None:
    FakeSysfs(tmp_path)
    with pytest.raises(CollectorUnavailable, match="no RDMA devices"):
        RDMACollector(tmp_path / "sys", tmp_path / "dev").collect(NOW)
    with pytest.raises(CollectorUnavailable, match="no RDMA devices"):
        RDMACollector(tmp_path / "absent", tmp_path / "dev").collect(NOW)


def test_devices_gone_after_being_seen_report_zero_instead_of_turning_off(
    node: FakeSysfs,
) -> None:
    collector = RDMACollector(node.sys, node.dev)
    collector.collect(NOW)
    for entry in (node.sys / "class/infiniband").iterdir():
        entry.unlink()  # the driver is being reloaded
    for entry in (node.sys / "class/infiniband_verbs").glob("uverbs*"):
        entry.unlink()

    samples = collector.collect(NOW + 60)

    assert [s.value for s in samples] == [0.0]
    assert (collector.devices, collector.verbs_devices) == ((), {})


@dataclass
class VerbsDev:
    """pyverbs.device.Device as get_device_list builds it: name bytes, guid a host-order int."""

    name: bytes
    guid: int
    node_type: int = 1  # CA
    transport_type: int = 0  # IB


class PyverbsRDMAError(Exception):
    pass


def test_pyverbs_names_the_devices_and_sysfs_describes_them(node: FakeSysfs) -> None:
    # mlx5_2 has no user-space provider, so libibverbs does not list it.
    listed = [VerbsDev(b"mlx5_0", 0xEC0D9A0300781234), VerbsDev(b"mlx5_1", 0xEC0D9A0300781235)]

    devices = rdma_devices(node.sys, lambda: listed)

    assert [(d.name, d.node_guid, d.pci_address) for d in devices] == [
        ("mlx5_0", "ec0d:9a03:0078:1234", PF0),
        ("mlx5_1", "ec0d:9a03:0078:1235", PF1),
    ]


def test_a_failing_pyverbs_falls_back_to_sysfs(
    node: FakeSysfs, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> list[VerbsDev]:
        raise PyverbsRDMAError("Failed to get devices list")

    collector = RDMACollector(node.sys, node.dev, verbs=broken)

    assert collector.collect(NOW)[0].value == 2.0
    assert len(collector.devices) == 3
    assert "Failed to get devices list" in caplog.text


def test_pyverbs_is_optional_and_used_only_for_the_real_sysfs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pyverbs", None)
    assert pyverbs_lister() is None
    assert RDMACollector().verbs is None

    package = types.ModuleType("pyverbs")
    device = types.ModuleType("pyverbs.device")

    def get_device_list() -> list[VerbsDev]:
        return []

    device.get_device_list = get_device_list  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyverbs", package)
    monkeypatch.setitem(sys.modules, "pyverbs.device", device)

    assert pyverbs_lister() is get_device_list
    assert RDMACollector().verbs is get_device_list
    assert RDMACollector(tmp_path).verbs is None  # libibverbs would describe /sys, not this


def test_a_uverbs_entry_without_a_device_link_is_found_through_its_ibdev(node: FakeSysfs) -> None:
    (node.pci_dir(PF1) / "infiniband_verbs/uverbs1/device").unlink()

    assert rdma_verbs_devices(node.sys, node.dev)[PF1] == (
        Device("/dev/infiniband/uverbs1", "c", 231, 193),
    )


def test_ports_are_listed_in_number_order(node: FakeSysfs) -> None:
    ports = node.pci_dir(PF1) / "infiniband/mlx5_1/ports"
    for n in (2, 10):
        write(ports / str(n) / "state", "1: DOWN")

    assert [(p.number, p.state) for p in rdma_devices(node.sys)[1].ports] == [
        (1, "ACTIVE"),
        (2, "DOWN"),
        (10, "DOWN"),
    ]
