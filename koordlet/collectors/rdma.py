"""RDMA devices on this node: an inventory from sysfs (names via pyverbs where installed).

For each RDMA device (``<sys>/class/infiniband/<ibdev>``) the inventory records its PCI function
(the ``device`` link), node GUID, ports (state, link layer, rate), the network interfaces of that
function, its NUMA node, SR-IOV (the ``virtfn*`` links of a physical function, the ``physfn``
link of a virtual one) and the user verbs device that belongs to it
(``<sys>/class/infiniband_verbs/uverbsN``: ``ibdev`` names the device, ``dev`` is major:minor).

The RDMA device-inject hook needs, per PCI function, the ``/dev/infiniband/uverbsN`` character
devices to add to a container, plus ``/dev/infiniband/rdma_cm``: ``rdma_verbs_devices`` and
``rdma_cm_device`` build those (``runtimehooks.patch.Device``) for the node state.

Not here: opening devices, counters (port_xmit_data and the like), RDMA namespaces or cgroups,
and any write. pyverbs (rdma-core's binding: the ``rdma`` extra, or Debian's python3-pyverbs)
is optional. libibverbs reads the real /sys, so it is consulted only when ``sys_root`` is /sys;
everywhere else, and when it is missing or fails, the names come from sysfs.

Usage::

    collector = RDMACollector(Path("/sys"), Path("/dev"))
    collector.collect(time.time())     # [node_rdma_devices]; CollectorUnavailable if none
    collector.devices                  # (RDMADevice(name="mlx5_0", pci_address=...), ...)
    rdma_verbs_devices(Path("/sys"), Path("/dev"))  # {"0000:3b:00.0": (Device(...),), ...}
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol, cast

from koordlet.collectors.base import CollectorUnavailable
from koordlet.metriccache import Sample
from runtimehooks.patch import Device

log = logging.getLogger(__name__)

REAL_SYS = Path("/sys")
INFINIBAND_DEV = "/dev/infiniband"  # where the container sees the devices, whatever dev_root is
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_UVERBS = re.compile(r"^uverbs(\d+)\Z")
_VIRTFN = re.compile(r"^virtfn(\d+)\Z")


class VerbsDevice(Protocol):
    """pyverbs.device.Device as get_device_list returns it: name is bytes, guid a host int."""

    @property
    def name(self) -> bytes | str: ...
    @property
    def guid(self) -> int: ...


VerbsLister = Callable[[], Sequence[VerbsDevice]]


def pyverbs_lister() -> VerbsLister | None:
    """pyverbs.device.get_device_list, or None when pyverbs is not installed."""
    try:
        # By name at run time: the binding is optional and ships no type information.
        module = importlib.import_module("pyverbs.device")
    except ImportError:
        return None
    return cast(VerbsLister, module.get_device_list)


@dataclass(frozen=True)
class RDMAPort:
    number: int
    state: str  # "ACTIVE", "DOWN", ... (the name part of "4: ACTIVE")
    link_layer: str  # "InfiniBand" or "Ethernet" (RoCE)
    rate: str  # "100 Gb/sec (4X EDR)"


@dataclass(frozen=True)
class RDMADevice:
    name: str  # the ibdev: mlx5_0
    pci_address: str | None  # 0000:3b:00.0; None for a software device (rxe, siw)
    node_guid: str  # "ec0d:9a03:0078:1234"
    ports: tuple[RDMAPort, ...] = ()
    uverbs: str | None = None  # "uverbs0": the user verbs device of this ibdev
    netdevs: tuple[str, ...] = ()  # the interfaces of the same PCI function
    numa_node: int = -1  # -1: unknown or no NUMA
    vendor: str = ""  # PCI ids: "0x15b3"
    device: str = ""  # "0x1017"
    physfn: str | None = None  # the physical function, when this is an SR-IOV VF
    vfs: tuple[str, ...] = ()  # the VFs' PCI addresses, when this is a PF with SR-IOV on

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _pci_address(link: Path) -> str | None:
    """The PCI address a sysfs ``device`` link points to, None if it is not a PCI function."""
    try:
        name = link.resolve(strict=True).name
    except OSError:
        return None
    return name if PCI_ADDRESS.match(name) else None


def _ports(ib_dir: Path) -> tuple[RDMAPort, ...]:
    ports = []
    numbered = [p for p in _children(ib_dir / "ports") if p.name.isdigit()]
    for port in sorted(numbered, key=lambda p: int(p.name)):
        state = _read(port / "state")  # "4: ACTIVE"
        ports.append(
            RDMAPort(
                number=int(port.name),
                state=state.partition(":")[2].strip() or state,
                link_layer=_read(port / "link_layer"),
                rate=_read(port / "rate"),
            )
        )
    return tuple(ports)


def _children(path: Path) -> list[Path]:
    try:
        return list(path.iterdir())
    except OSError:
        return []


def _vfs(pci_dir: Path) -> tuple[str, ...]:
    found = []
    for link in _children(pci_dir):
        match = _VIRTFN.match(link.name)
        address = _pci_address(link) if match else None
        if match and address:
            found.append((int(match.group(1)), address))
    return tuple(address for _, address in sorted(found))


def _uverbs_by_ibdev(sys_root: Path) -> dict[str, str]:
    """ibdev name → its uverbsN, from <sys>/class/infiniband_verbs/uverbsN/ibdev."""
    out = {}
    for entry in _children(sys_root / "class" / "infiniband_verbs"):
        if _UVERBS.match(entry.name):  # the folder also holds abi_version, a plain file
            ibdev = _read(entry / "ibdev")
            if ibdev:
                out[ibdev] = entry.name
    return out


def _format_guid(guid: int) -> str:
    text = f"{guid:016x}"
    return ":".join(text[i : i + 4] for i in range(0, 16, 4))


def _verbs_names(verbs: VerbsLister) -> dict[str, str] | None:
    """ibdev name → node GUID from libibverbs, None if it fails (then sysfs decides)."""
    try:
        devices = verbs()
    except Exception as err:  # pyverbs raises PyverbsRDMAError, ctypes-level errors vary
        log.warning("pyverbs could not list RDMA devices, using sysfs: %s", err)
        return None
    out = {}
    for dev in devices:
        name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
        out[name] = _format_guid(dev.guid)
    return out


def rdma_devices(sys_root: Path = REAL_SYS, verbs: VerbsLister | None = None) -> list[RDMADevice]:
    """The RDMA devices of this node, sorted by name.

    With ``verbs`` (pyverbs' get_device_list) the device names are those libibverbs can open,
    i.e. with a user-space provider; sysfs fills in everything else.
    """
    names = {d.name: "" for d in _children(sys_root / "class" / "infiniband")}
    if verbs is not None:
        listed = _verbs_names(verbs)
        if listed is not None:
            names = listed
    uverbs = _uverbs_by_ibdev(sys_root)
    return [_device(sys_root, name, names[name], uverbs.get(name)) for name in sorted(names)]


def _device(sys_root: Path, name: str, guid: str, uverbs: str | None) -> RDMADevice:
    ib_dir = sys_root / "class" / "infiniband" / name
    guid = guid or _read(ib_dir / "node_guid")
    address = _pci_address(ib_dir / "device")
    if address is None:
        return RDMADevice(name, None, guid, _ports(ib_dir), uverbs)
    pci_dir = sys_root / "bus" / "pci" / "devices" / address
    numa = _read(pci_dir / "numa_node")
    return RDMADevice(
        name=name,
        pci_address=address,
        node_guid=guid,
        ports=_ports(ib_dir),
        uverbs=uverbs,
        netdevs=tuple(sorted(p.name for p in _children(pci_dir / "net"))),
        numa_node=int(numa) if numa.lstrip("-").isdigit() else -1,
        vendor=_read(pci_dir / "vendor"),
        device=_read(pci_dir / "device"),
        physfn=_pci_address(pci_dir / "physfn"),
        vfs=_vfs(pci_dir),
    )


def _char_device(path: Path) -> tuple[int, int] | None:
    """(major, minor) of a character device node, None if absent or something else."""
    try:
        st = path.stat()  # follows links: /dev/infiniband entries may be symlinks
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev)


def _dev_numbers(text: str) -> tuple[int, int] | None:
    major, sep, minor = text.partition(":")
    if not (sep and major.isdigit() and minor.isdigit()):
        return None
    return int(major), int(minor)


def rdma_verbs_devices(
    sys_root: Path = REAL_SYS, dev_root: Path = Path("/dev")
) -> dict[str, tuple[Device, ...]]:
    """PCI address → the /dev/infiniband/uverbsN devices of that function (VFs included).

    The numbers come from a stat of <dev_root>/infiniband/uverbsN, as Koordinator's hook does;
    when koordlet cannot see that node (no host /dev mounted) the kernel's own numbers in sysfs
    (uverbsN/dev) serve, since the runtime creates the node in the container from them anyway.
    """
    found: dict[str, list[tuple[int, Device]]] = {}
    for entry in _children(sys_root / "class" / "infiniband_verbs"):
        match = _UVERBS.match(entry.name)
        if not match:
            continue
        address = _pci_address(entry / "device")
        if address is None:
            ibdev = _read(entry / "ibdev")
            address = _pci_address(sys_root / "class" / "infiniband" / ibdev / "device")
        numbers = _char_device(dev_root / "infiniband" / entry.name) or _dev_numbers(
            _read(entry / "dev")
        )
        if address is None or numbers is None:
            continue  # a software device (no PCI function) or an unreadable entry
        device = Device(f"{INFINIBAND_DEV}/{entry.name}", "c", *numbers, 0o666)
        found.setdefault(address, []).append((int(match.group(1)), device))
    return {address: tuple(d for _, d in sorted(devs)) for address, devs in sorted(found.items())}


def rdma_cm_device(dev_root: Path = Path("/dev")) -> Device | None:
    """/dev/infiniband/rdma_cm as the hook adds it, None when this node has no such device."""
    numbers = _char_device(dev_root / "infiniband" / "rdma_cm")
    return None if numbers is None else Device(f"{INFINIBAND_DEV}/rdma_cm", "c", *numbers, 0o666)


class RDMACollector:
    """See the module docstring; the inventory of the last pass is in ``devices``,
    ``verbs_devices`` and ``rdma_cm`` (for the node state the RDMA hook reads).

    ``verbs``: a pyverbs-like lister; by default pyverbs when importable and ``sys_root`` is
    the real /sys, else sysfs alone.
    """

    name = "rdma"
    feature_gate: ClassVar[str] = "RDMADevices"

    def __init__(
        self,
        sys_root: Path = REAL_SYS,
        dev_root: Path = Path("/dev"),
        *,
        verbs: VerbsLister | None = None,
        interval: float = 60.0,
    ) -> None:
        self.sys_root = sys_root
        self.dev_root = dev_root
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        if verbs is None and sys_root == REAL_SYS:
            verbs = pyverbs_lister()
        self.verbs = verbs
        self.devices: tuple[RDMADevice, ...] = ()
        self.verbs_devices: dict[str, tuple[Device, ...]] = {}
        self.rdma_cm: Device | None = None
        self._seen_any = False

    def collect(self, now: float) -> list[Sample]:
        devices = tuple(rdma_devices(self.sys_root, self.verbs))
        if not devices and not self._seen_any:
            raise CollectorUnavailable("no RDMA devices")
        # Once devices were seen, none now is a driver reload in progress, not a node without
        # RDMA: keep running (and report 0) so the inventory comes back with the driver.
        self._seen_any = True
        self.devices = devices
        self.verbs_devices = rdma_verbs_devices(self.sys_root, self.dev_root)
        self.rdma_cm = rdma_cm_device(self.dev_root)
        physical = sum(1 for d in devices if not d.is_vf)  # VFs are slices of their PF
        return [Sample("node_rdma_devices", {}, now, float(physical))]
