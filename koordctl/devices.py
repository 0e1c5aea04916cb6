"""``koordctl devices``: the GPUs and RDMA NICs of this node as koordlet reports them in its
Device object (read here, directly: NVML and sysfs; no koordlet or API server needed)."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

from koordapi.device import TYPE_GPU, build_device, gpu_labels
from koordctl.render import mib
from koordlet.collectors.devices import DeviceInventory, DeviceNVML, Inventory

HEADER = ("TYPE", "MINOR", "UUID/ID", "HEALTH", "MEMORY", "NUMA", "PCIE", "BUS")


def rows(found: Inventory) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for g in found.gpus:
        out.append(
            {
                "type": TYPE_GPU,
                "minor": g.minor,
                "id": g.uuid,
                "health": "healthy" if g.healthy else f"unhealthy ({g.reason})",
                "memory": g.memory_total,
                "numa_node": g.numa_node,
                "pcie": g.pcie_id,
                "bus_id": g.bus_id,
                "name": g.name,
            }
        )
    for n in found.nics:
        out.append(
            {
                "type": "rdma",
                "minor": n.minor,
                "id": n.bus_id,
                "health": "healthy" if n.healthy else "unhealthy (port not ACTIVE)",
                "memory": None,
                "numa_node": n.numa_node,
                "pcie": n.pcie_id,
                "bus_id": n.bus_id,
                "ibdevs": list(n.ibdevs),
                "vfs": list(n.vfs),
            }
        )
    return out


def render(found: Inventory) -> str:
    table = [HEADER]
    for r in rows(found):
        numa = r["numa_node"]
        table.append(
            (
                r["type"],
                str(r["minor"]),
                r["id"],
                r["health"],
                mib(r["memory"]),
                "-" if numa < 0 else str(numa),
                r["pcie"] or "-",
                r["bus_id"] or "-",
            )
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER))]
    text = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
    ]
    if len(table) == 1:
        text = ["no GPUs or RDMA NICs"]
    if found.gpu_reason:
        text.append(f"GPUs: none ({found.gpu_reason})")
    if found.model:
        text.append(f"GPU model {found.model}, driver {found.driver_version or '-'}")
    return "\n".join(text)


def read(sys_root: Path, nvml: DeviceNVML | None = None) -> Inventory:
    inventory = DeviceInventory(sys_root, nvml=nvml)
    try:
        return inventory.read()
    finally:
        inventory.close()


def run(args: argparse.Namespace, nvml: DeviceNVML | None = None) -> int:
    found = read(Path(args.sys_root_dir), nvml)
    if args.json:
        labels = gpu_labels(found.model, found.driver_version) if found.gpus else None
        node = args.node or socket.gethostname()
        report = {
            "devices": rows(found),
            "gpu_reason": found.gpu_reason or None,
            "device": build_device(node, "", found.gpus, found.nics, labels),
        }
        print(json.dumps(report))
    else:
        print(render(found))
    return 0
