"""Koordinator's Device (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, one per node,
named after it): what koordlet reports of a node's GPUs and RDMA NICs, and what koord-manager
reads back to set the Node's GPU resources.

The builders here are pure: koordlet's inventory (``koordlet.collectors.devices``) fills
``GPUInfo`` and ``RDMAInfo``, ``build_device`` turns them into the object as JSON with
Koordinator's field names (``spec.devices[]``: ``type``, ``id``, ``minor``, ``health``,
``resources``, ``topology`` ``{socketID, nodeID, pcieID, busID}``, ``vfGroups``,
``conditions``), and ``gpu_node_resources`` is koord-manager's GPUDeviceResource rule.

Usage::

    device = build_device("node-1", "uid-1", gpus, nics, gpu_labels("NVIDIA A100 80GB", "535"))
    gpu_node_resources(device)   # {"koordinator.sh/gpu": "200", ...}, or None: reset them
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from koordapi import keys
from koordapi.errors import QuantityError
from koordapi.quantity import format_binary, format_quantity, parse_quantity

API_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "Device"

TYPE_GPU = "gpu"
TYPE_RDMA = "rdma"
TYPE_FPGA = "fpga"

CONDITION_HEALTHY = "Healthy"

LABEL_GPU_VENDOR = f"{keys.NODE_DOMAIN}/gpu-vendor"
LABEL_GPU_MODEL = f"{keys.NODE_DOMAIN}/gpu-model"
LABEL_GPU_DRIVER_VERSION = f"{keys.NODE_DOMAIN}/gpu-driver-version"
GPU_VENDOR_NVIDIA = "nvidia"
GPU_LABELS = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)

# Each whole device is 100 units of core (and of memory ratio, and of RDMA).
FULL = 100

# The Node resources koord-manager's GPUDeviceResource plugin owns (set or reset); the Huawei
# NPU ones are in Koordinator's list too, and are only ever reset here.
GPU_NODE_RESOURCES = (
    keys.GPU,
    keys.GPU_CORE,
    "huawei.com/npu-core",
    "huawei.com/npu-cpu",
    "huawei.com/npu-dvpp",
    keys.GPU_MEMORY,
    keys.GPU_MEMORY_RATIO,
    keys.GPU_SHARED,
)


@dataclass(frozen=True)
class GPUInfo:
    """One GPU as koordlet finds it (NVML, sysfs) and judges its health."""

    uuid: str
    minor: int
    memory_total: int  # bytes
    bus_id: str = ""  # "0000:3b:00.0", lower case, as sysfs names the function
    numa_node: int = -1  # -1: unknown
    pcie_id: str = ""  # the PCIe root complex: "pci0000:3a"
    name: str = ""
    healthy: bool = True
    reason: str = ""  # when unhealthy: "Xid79", "DeviceHealthCheckNotSupported", ...
    message: str = ""


@dataclass(frozen=True)
class RDMAInfo:
    """One RDMA NIC (a PCI physical function with an RDMA device)."""

    bus_id: str  # its PCI address, also the Device entry's id
    minor: int  # N of its first ibdev mlx*_N
    healthy: bool  # every port ACTIVE
    numa_node: int = -1
    pcie_id: str = ""
    vfs: tuple[str, ...] = ()  # the VFs' PCI addresses when SR-IOV is configured
    ibdevs: tuple[str, ...] = ()


def gpu_model(names: Sequence[str]) -> str:
    """Koordinator's gpu-model label: the one model of every GPU without the "NVIDIA " prefix
    and with blanks as dashes ("NVIDIA A100 SXM4 80GB" → "A100-SXM4-80GB"); "" when the GPUs
    are not all the same model or one has no name."""
    if not names or any(not n for n in names) or len(set(names)) != 1:
        return ""
    return names[0].removeprefix("NVIDIA ").replace(" ", "-")


def gpu_labels(model: str, driver_version: str) -> dict[str, str]:
    """The Device labels of a node with NVIDIA GPUs (model and driver when known)."""
    labels = {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}
    if model:
        labels[LABEL_GPU_MODEL] = model
    if driver_version:
        labels[LABEL_GPU_DRIVER_VERSION] = driver_version
    return labels


def _topology(numa_node: int, pcie_id: str, bus_id: str) -> dict[str, Any]:
    return {"socketID": -1, "nodeID": numa_node, "pcieID": pcie_id, "busID": bus_id}


def gpu_entry(gpu: GPUInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": TYPE_GPU,
        "id": gpu.uuid,
        "minor": gpu.minor,
        "health": gpu.healthy,
        "resources": {
            keys.GPU_CORE: str(FULL),
            keys.GPU_MEMORY: format_binary(gpu.memory_total),
            keys.GPU_MEMORY_RATIO: str(FULL),
        },
    }
    # Koordinator leaves the topology out unless all three are known.
    if gpu.numa_node >= 0 and gpu.pcie_id and gpu.bus_id:
        entry["topology"] = _topology(gpu.numa_node, gpu.pcie_id, gpu.bus_id)
    if not gpu.healthy:  # a healthy GPU carries no condition, as in Koordinator
        entry["conditions"] = [
            {
                "type": CONDITION_HEALTHY,
                "status": "False",
                "reason": gpu.reason or "Unknown",
                "message": gpu.message or "device is unhealthy",
            }
        ]
    return entry


def rdma_entry(nic: RDMAInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": TYPE_RDMA,
        "id": nic.bus_id,
        "minor": nic.minor,
        "health": nic.healthy,
        "resources": {keys.RDMA: str(FULL)},
        "topology": _topology(nic.numa_node, nic.pcie_id, nic.bus_id),
    }
    if nic.vfs:
        entry["vfGroups"] = [{"vfs": [{"minor": -1, "busID": vf} for vf in sorted(nic.vfs)]}]
    return entry


def sort_devices(devices: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """By type, then minor (Koordinator's order before it compares or writes)."""
    return sorted(
        (dict(d) for d in devices), key=lambda d: (str(d.get("type", "")), d.get("minor", 0))
    )


def build_device(
    node_name: str,
    node_uid: str,
    gpus: Iterable[GPUInfo],
    nics: Iterable[RDMAInfo],
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Device object for a node: owned by its Node (controller, blocking deletion)."""
    metadata: dict[str, Any] = {"name": node_name}
    if node_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if labels:
        metadata["labels"] = dict(labels)
    entries = [gpu_entry(g) for g in gpus] + [rdma_entry(n) for n in nics]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {"devices": sort_devices(entries)},
    }


def _without_times(devices: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in sort_devices(devices):
        conditions = d.get("conditions")
        if conditions:
            d["conditions"] = sorted(
                ({k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions),
                key=lambda c: str(c.get("type", "")),
            )
        else:
            d.pop("conditions", None)
        out.append(d)
    return out


def same_report(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """True when the stored Device already says what ``desired`` says: the same devices (in
    any order, condition times aside), labels and annotations."""
    cur_meta, want_meta = current.get("metadata") or {}, desired.get("metadata") or {}
    for key in ("labels", "annotations"):
        if (cur_meta.get(key) or {}) != (want_meta.get(key) or {}):
            return False
    cur = (current.get("spec") or {}).get("devices") or []
    want = (desired.get("spec") or {}).get("devices") or []
    return _without_times(cur) == _without_times(want)


def carry_transition_times(
    current: Mapping[str, Any], desired: Mapping[str, Any], now: str
) -> dict[str, Any]:
    """``desired`` with each condition's lastTransitionTime: the stored one when the status of
    that condition (same device id, same type) did not change, else ``now``."""
    old: dict[tuple[str, str], Mapping[str, Any]] = {}
    for d in (current.get("spec") or {}).get("devices") or []:
        for c in d.get("conditions") or []:
            old[(str(d.get("id", "")), str(c.get("type", "")))] = c
    out = dict(desired)
    devices = []
    for d in (desired.get("spec") or {}).get("devices") or []:
        entry = dict(d)
        if entry.get("conditions"):
            conditions = []
            for c in entry["conditions"]:
                cond = dict(c)
                before = old.get((str(entry.get("id", "")), str(cond.get("type", ""))))
                same = before is not None and before.get("status") == cond.get("status")
                stored = before.get("lastTransitionTime") if before is not None else None
                cond["lastTransitionTime"] = stored if same and stored else now
                conditions.append(cond)
            entry["conditions"] = conditions
        devices.append(entry)
    out["spec"] = {**(desired.get("spec") or {}), "devices": devices}
    return out


def gpu_node_resources(
    device: Mapping[str, Any] | None, *, gpu_shared: bool = False
) -> dict[str, str] | None:
    """koord-manager's GPUDeviceResource rule: the Node's GPU resources from its Device.

    The sum of the resources of the healthy GPUs, plus ``koordinator.sh/gpu`` (the sum of
    their gpu-core) when the vendor label is nvidia or absent, plus ``koordinator.sh/gpu.shared``
    (100 per healthy GPU) with the EnableSyncGPUSharedResource gate. None when there is no
    Device or no healthy GPU in it: then the Node's ``GPU_NODE_RESOURCES`` are removed.
    Quantities that do not parse are skipped.
    """
    if device is None:
        return None
    totals: dict[str, Decimal] = {}
    healthy = 0
    for d in (device.get("spec") or {}).get("devices") or []:
        if d.get("type") != TYPE_GPU or d.get("health") is not True:
            continue
        healthy += 1
        for name, quantity in (d.get("resources") or {}).items():
            try:
                amount = parse_quantity(quantity)
            except QuantityError:
                continue
            totals[name] = totals.get(name, Decimal(0)) + amount
    if not healthy:
        return None
    vendor = ((device.get("metadata") or {}).get("labels") or {}).get(LABEL_GPU_VENDOR, "")
    if vendor in ("", GPU_VENDOR_NVIDIA):
        totals[keys.GPU] = totals.get(keys.GPU_CORE, Decimal(0))
    if gpu_shared:
        totals[keys.GPU_SHARED] = Decimal(healthy * FULL)
    return {name: _format(name, amount) for name, amount in sorted(totals.items())}


def _format(name: str, amount: Decimal) -> str:
    if name == keys.GPU_MEMORY and amount == amount.to_integral_value():
        return format_binary(int(amount))
    return format_quantity(amount)
