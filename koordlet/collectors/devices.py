"""The node's device inventory for the Device object: GPUs through NVML, RDMA NICs from sysfs.

GPUs, device by device (NVML index): UUID, minor number, total memory, name
(``nvmlDeviceGetName``), PCI bus id (``nvmlDeviceGetPciInfo``: ``busIdLegacy``, lower case,
which is how sysfs names the function), NUMA node (sysfs ``bus/pci/devices/<bus>/numa_node``
as Koordinator reads it, -1 there counting as node 0; ``nvmlDeviceGetNumaNodeId`` when sysfs
has no entry), the PCIe root complex (``pciDDDD:BB`` in the path the sysfs link resolves to),
and health by Koordinator's rule (``GPUHealth``): a GPU is unhealthy once NVML reported a
critical Xid error on it other than the application errors 13, 31, 43, 45 and 68, once it
disappeared from NVML after such an event, or when it cannot register for Xid events at all
(``DeviceHealthCheckNotSupported``). As in Koordinator an unhealthy GPU stays unhealthy until
koordlet restarts. Plus the model (all GPUs alike) and the driver version for the labels.

RDMA, as Koordinator's RDMA collector picks NICs: each PCI function of the network class
(0x02) that is not an SR-IOV VF and has an RDMA device (``class/infiniband/<ibdev>/device``):
id and bus id its PCI address, minor the N of its first ``mlx*_N`` ibdev (a NIC whose ibdevs
are not so named is left out), healthy when every port of that ibdev is ACTIVE, NUMA node and
PCIe root as for GPUs, and its VFs when ``sriov_numvfs`` is above 0.

Not here: MIG, other vendors' accelerators (XPU device-info files), FPGAs, and writes of any
kind. NVML missing, failing to initialize or reporting no GPU: ``gpus`` is empty and ``reason``
says why; nothing raises.

Usage::

    inventory = DeviceInventory(Path("/sys"))
    found = inventory.read()      # Inventory(gpus=[GPUInfo...], nics=[RDMAInfo...], reason="")
    inventory.close()
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from koordapi.device import GPUInfo, RDMAInfo, gpu_model
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.gpu import NVML, init_nvml, load_nvml
from koordlet.collectors.rdma import REAL_SYS, rdma_devices

log = logging.getLogger(__name__)

EVENT_TYPE_XID_CRITICAL_ERROR = 0x8  # pynvml's nvmlEventTypeXidCriticalError
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})  # the GPU itself is still fine
NOT_SUPPORTED = "DeviceHealthCheckNotSupported"
NET_CLASS = 0x02
_PCIE_ROOT = re.compile(r"pci\d{4}:[0-9a-fA-F]{2}")
_MLX_MINOR = re.compile(r"^mlx\d+_(\d+)\Z")


class PciInfo(Protocol):
    """pynvml's nvmlPciInfo_t; its char arrays read as str."""

    @property
    def busIdLegacy(self) -> str: ...
    @property
    def busId(self) -> str: ...


class EventData(Protocol):
    """pynvml's c_nvmlEventData_t."""

    @property
    def device(self) -> object: ...
    @property
    def eventType(self) -> int: ...
    @property
    def eventData(self) -> int: ...


class DeviceNVML(NVML, Protocol):
    """The pynvml calls the inventory makes beyond the collector's."""

    @property
    def NVMLError_Timeout(self) -> type[Exception]: ...
    @property
    def NVMLError_NotSupported(self) -> type[Exception]: ...

    def nvmlDeviceGetPciInfo(self, handle: object) -> PciInfo: ...
    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int: ...
    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: str) -> object: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlEventSetCreate(self) -> object: ...
    def nvmlDeviceRegisterEvents(
        self, handle: object, eventTypes: int, eventSet: object
    ) -> None: ...
    def nvmlEventSetWait(self, eventSet: object, timeoutms: int) -> EventData: ...
    def nvmlEventSetFree(self, eventSet: object) -> None: ...


def bus_id_of(pci: PciInfo) -> str:
    """The sysfs form of NVML's bus id: "00000000:3B:00.0" → "0000:3b:00.0"."""
    text = (pci.busIdLegacy or pci.busId).strip().lower()
    domain, sep, rest = text.partition(":")
    if sep and len(domain) > 4:
        text = f"{domain[-4:]}:{rest}"
    return text


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def pci_numa_node(sys_root: Path, bus_id: str) -> int | None:
    """The NUMA node sysfs gives a PCI function (-1, no NUMA, as node 0); None: no entry."""
    text = _read(sys_root / "bus" / "pci" / "devices" / bus_id / "numa_node")
    if not text.lstrip("-").isdigit():
        return None
    return max(int(text), 0)


def pcie_root(sys_root: Path, bus_id: str) -> str:
    """The PCIe root complex ("pci0000:3a") in the path of a PCI function's sysfs folder."""
    try:
        resolved = (sys_root / "bus" / "pci" / "devices" / bus_id).resolve(strict=True)
    except OSError:
        return ""
    found = _PCIE_ROOT.search(str(resolved))
    return found.group(0) if found else ""


@dataclass
class GPUHealth:
    """Koordinator's GPU health rule, fed by NVML's Xid events; see the module docstring."""

    unhealthy: dict[str, tuple[str, str]] = field(default_factory=dict)  # bus id → reason, msg
    event_set: object | None = None
    bus_ids: tuple[str, ...] = ()

    def start(self, nvml: DeviceNVML, bus_ids: Sequence[str]) -> None:
        """Register every GPU for critical Xid events (NVML must be initialized)."""
        self.bus_ids = tuple(bus_ids)
        try:
            self.event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as err:
            log.warning("no GPU health check: cannot create an NVML event set: %s", err)
            return
        for bus_id in self.bus_ids:
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
                nvml.nvmlDeviceRegisterEvents(handle, EVENT_TYPE_XID_CRITICAL_ERROR, self.event_set)
            except nvml.NVMLError_NotSupported:
                self._mark(bus_id, NOT_SUPPORTED, "device does not support health checking")
            except nvml.NVMLError as err:
                log.warning("GPU %s not registered for Xid events: %s", bus_id, err)

    def poll(self, nvml: DeviceNVML, timeout_ms: int = 0) -> int:
        """Take every pending event (waiting up to ``timeout_ms`` for the first); the count."""
        if self.event_set is None:
            return 0
        seen = 0
        while True:
            try:
                event = nvml.nvmlEventSetWait(self.event_set, timeout_ms)
            except nvml.NVMLError_Timeout:
                return seen
            except nvml.NVMLError as err:
                log.warning("waiting for NVML events failed: %s", err)
                return seen
            seen += 1
            timeout_ms = 0
            self.observe(nvml, event)

    def observe(self, nvml: DeviceNVML, event: EventData) -> None:
        if event.eventType != EVENT_TYPE_XID_CRITICAL_ERROR:
            return
        xid = int(event.eventData)
        if xid in APPLICATION_XIDS:
            return
        message = f"Xid error detected on device, error code: {xid}"
        try:
            bus_id = bus_id_of(nvml.nvmlDeviceGetPciInfo(event.device))
            uuid = nvml.nvmlDeviceGetUUID(event.device)
        except nvml.NVMLError as err:
            log.warning("Xid %d on a GPU NVML cannot describe: %s", xid, err)
            return
        for known in self.bus_ids:
            if not uuid or known == bus_id:  # no UUID: the event concerns every GPU
                self._mark(known, f"Xid{xid}", message)
            try:
                nvml.nvmlDeviceGetHandleByPciBusId(known)
            except nvml.NVMLError as err:
                self._mark(known, f"Xid{xid}", f"failed to get device, error: {err}")

    def _mark(self, bus_id: str, reason: str, message: str) -> None:
        if bus_id not in self.unhealthy:
            log.warning("GPU %s is unhealthy: %s", bus_id, message)
            self.unhealthy[bus_id] = (reason, message)

    def stop(self, nvml: DeviceNVML) -> None:
        if self.event_set is not None:
            try:
                nvml.nvmlEventSetFree(self.event_set)
            except nvml.NVMLError as err:
                log.warning("nvmlEventSetFree failed: %s", err)
            self.event_set = None


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[GPUInfo, ...] = ()
    nics: tuple[RDMAInfo, ...] = ()
    gpu_reason: str = ""  # why there are no GPUs, when there are none
    model: str = ""
    driver_version: str = ""


def _gpu(nvml: DeviceNVML, index: int, sys_root: Path, health: GPUHealth) -> GPUInfo:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    bus_id = bus_id_of(nvml.nvmlDeviceGetPciInfo(handle))
    numa = pci_numa_node(sys_root, bus_id)
    if numa is None:
        try:
            numa = nvml.nvmlDeviceGetNumaNodeId(handle)
        except nvml.NVMLError:
            numa = -1
    reason, message = health.unhealthy.get(bus_id, ("", ""))
    return GPUInfo(
        uuid=nvml.nvmlDeviceGetUUID(handle),
        minor=nvml.nvmlDeviceGetMinorNumber(handle),
        memory_total=nvml.nvmlDeviceGetMemoryInfo(handle).total,
        bus_id=bus_id,
        numa_node=numa,
        pcie_id=pcie_root(sys_root, bus_id),
        name=nvml.nvmlDeviceGetName(handle),
        healthy=not reason,
        reason=reason,
        message=message,
    )


def rdma_nics(sys_root: Path = REAL_SYS) -> list[RDMAInfo]:
    """The RDMA NICs Koordinator reports, sorted by minor; see the module docstring."""
    by_function: dict[str, list[str]] = {}
    ports_active: dict[str, bool] = {}
    vfs: dict[str, tuple[str, ...]] = {}
    for dev in rdma_devices(sys_root):
        if dev.pci_address is None or dev.is_vf:
            continue
        by_function.setdefault(dev.pci_address, []).append(dev.name)
        ports_active[dev.name] = bool(dev.ports) and all("ACTIVE" in p.state for p in dev.ports)
        vfs[dev.pci_address] = dev.vfs
    nics = []
    for address, names in by_function.items():
        pci_dir = sys_root / "bus" / "pci" / "devices" / address
        klass = _read(pci_dir / "class")
        try:
            if int(klass, 16) >> 16 != NET_CLASS:
                continue
        except ValueError:
            continue
        first = sorted(names)[0]  # the PF's driver loads first: the smallest ibdev name
        match = _MLX_MINOR.match(first)
        if match is None:
            log.info("RDMA device %s (%s) left out: not named mlx*_N", first, address)
            continue
        numvfs = _read(pci_dir / "sriov_numvfs")
        numa = pci_numa_node(sys_root, address)
        nics.append(
            RDMAInfo(
                bus_id=address,
                minor=int(match.group(1)),
                healthy=ports_active[first],
                numa_node=-1 if numa is None else numa,
                pcie_id=pcie_root(sys_root, address),
                vfs=vfs[address] if numvfs.isdigit() and int(numvfs) > 0 else (),
                ibdevs=tuple(sorted(names)),
            )
        )
    return sorted(nics, key=lambda n: n.minor)


class DeviceInventory:
    """Reads the inventory; keeps NVML initialized and its Xid events registered between
    reads (``close`` releases them). ``gpus=False`` / ``rdma=False`` leave a kind out."""

    def __init__(
        self,
        sys_root: Path = REAL_SYS,
        *,
        nvml: DeviceNVML | None = None,
        gpus: bool = True,
        rdma: bool = True,
    ) -> None:
        self.sys_root = sys_root
        self.want_gpus, self.want_rdma = gpus, rdma
        self.health = GPUHealth()
        self._nvml = nvml
        self._initialized = False

    def _open(self) -> DeviceNVML:
        nvml = cast(DeviceNVML, load_nvml()) if self._nvml is None else self._nvml
        self._nvml = nvml
        if not self._initialized:
            init_nvml(nvml)
            self._initialized = True
            bus_ids = []
            for index in range(nvml.nvmlDeviceGetCount()):
                try:
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    bus_ids.append(bus_id_of(nvml.nvmlDeviceGetPciInfo(handle)))
                except nvml.NVMLError as err:
                    log.warning("GPU %d has no PCI bus id: %s", index, err)
            self.health.start(nvml, bus_ids)
        return nvml

    def read(self) -> Inventory:
        gpus: list[GPUInfo] = []
        reason = "GPUs not asked for"
        model = driver = ""
        if self.want_gpus:
            try:
                nvml = self._open()
            except CollectorUnavailable as err:
                reason = str(err)
            else:
                self.health.poll(nvml)
                for index in range(nvml.nvmlDeviceGetCount()):
                    try:
                        gpus.append(_gpu(nvml, index, self.sys_root, self.health))
                    except nvml.NVMLError as err:
                        log.warning("GPU %d left out of the Device: %s", index, err)
                reason = "" if gpus else "NVML reports no GPU on this node"
                model = gpu_model([g.name for g in gpus])
                if model:  # Koordinator drops both labels when the models differ
                    try:
                        driver = nvml.nvmlSystemGetDriverVersion()
                    except nvml.NVMLError as err:
                        log.warning("no GPU driver version: %s", err)
        nics = rdma_nics(self.sys_root) if self.want_rdma else []
        return Inventory(tuple(gpus), tuple(nics), reason, model, driver)

    def close(self) -> None:
        if self._initialized and self._nvml is not None:
            self.health.stop(self._nvml)
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as err:
                log.warning("nvmlShutdown failed: %s", err)
