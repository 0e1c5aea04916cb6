"""The GPU device resources controller: each Node's koordinator.sh/gpu-core, gpu-memory,
gpu-memory-ratio and koordinator.sh/gpu from its Device, as Koordinator's gpudeviceresource
plugin of the noderesource controller publishes them (only healthy GPUs count).

One key per node, looked at again when the Node or its Device changes. The rule is
koordapi.device.gpu_node_resources; this module reads the caches and, when the Node's status
differs (by value: the server stores quantities in their canonical form), sends one merge patch
to its status: the values, or null for each (removing them) when the node has no Device or no
healthy GPU. A Node the manager never gave GPU resources and that has no Device gets no write
at all.
"""

from __future__ import annotations

import logging
from typing import Any

from lightkube.resources.core_v1 import Node

from koordapi.device import GPU_NODE_RESOURCES, gpu_node_resources
from koordapi.errors import QuantityError
from koordapi.quantity import parse_quantity
from koordkube.client import KubeApi
from koordkube.errors import NotFound
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics

log = logging.getLogger(__name__)

NAME = "gpudeviceresource"


def device_resources_patch(
    node: dict[str, Any], device: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The status merge patch that makes ``node`` carry what ``device`` offers; None when it
    already does."""
    wanted = gpu_node_resources(device) or {}
    status = node.get("status") or {}
    current = [status.get(section) or {} for section in ("allocatable", "capacity")]
    if all(same_quantity(c.get(n), wanted.get(n)) for c in current for n in GPU_NODE_RESOURCES):
        return None
    entries = {name: wanted.get(name) for name in GPU_NODE_RESOURCES}
    return {"status": {"allocatable": entries, "capacity": dict(entries)}}


def same_quantity(stored: Any, wanted: str | None) -> bool:
    """Whether the Node already holds ``wanted``, by value: the API server stores quantities
    in their canonical form (ten GPUs' "1000" gpu-core reads back as "1k"), so comparing the
    text would write the same values again on every look at the node."""
    if stored is None or wanted is None:
        return stored is None and wanted is None
    try:
        return parse_quantity(stored) == parse_quantity(wanted)
    except QuantityError:  # not a quantity on the node: write ours
        return False


class DeviceResourceController:
    NAME = NAME

    def __init__(self, api: KubeApi, state: ClusterState, metrics: ManagerMetrics) -> None:
        self.api, self.state, self.metrics = api, state, metrics

    async def reconcile(self, name: str) -> float | None:
        node = self.state.nodes.get(name)
        if node is None:
            return None
        patch = device_resources_patch(node, self.state.devices.get(name))
        if patch is None:
            self.metrics.reconciles.labels(NAME, "unchanged").inc()
            return None
        try:
            await self.api.patch(Node, name, patch, subresource="status")
        except NotFound:  # deleted meanwhile
            return None
        self.metrics.reconciles.labels(NAME, "written").inc()
        wrote = {k: v for k, v in patch["status"]["allocatable"].items() if v is not None}
        log.info("node %s: GPU resources %s", name, wrote or "removed (no healthy GPU)")
        return None
