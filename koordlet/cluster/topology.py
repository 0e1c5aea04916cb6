"""This node's CPU topology on its Node, where koord-scheduler's extender binds CPUs from it.

koordlet reads the topology from sysfs (states.topology); in cluster mode it keeps the Node
annotation ``node.koordinator.sh/cpu-topology`` (Koordinator's key and JSON: ``{"detail":
[{"id", "core", "socket", "node"}, ...]}``) equal to it. The annotation is checked against the
watched Node on every interval and written (a merge patch of metadata only) when it differs or
was removed; a failed write is logged once and tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import json
import logging

from lightkube.resources.core_v1 import Node

from koordapi import keys
from koordkube.client import KubeApi
from koordkube.informer import Informer
from koordlet.states.topology import Topology

log = logging.getLogger(__name__)

CHECK_SECONDS = 60.0


def cpu_topology_annotation(topology: Topology) -> str | None:
    """The annotation's value; None when sysfs did not say which core each CPU is on."""
    if not topology.processors:
        return None
    detail = [
        {"id": p.cpu, "core": p.core, "socket": p.socket, "node": p.node}
        for p in sorted(topology.processors, key=lambda p: p.cpu)
    ]
    return json.dumps({"detail": detail}, separators=(",", ":"))


class TopologyPublisher:
    def __init__(
        self,
        api: KubeApi,
        node_name: str,
        value: str,
        nodes: Informer,
        *,
        interval: float = CHECK_SECONDS,
    ) -> None:
        self.api, self.node_name, self.value, self.nodes = api, node_name, value, nodes
        self.interval = interval
        self.writes = 0
        self._failing = False

    async def publish_once(self) -> bool:
        """Write the annotation if the watched Node lacks it; True when written."""
        node = self.nodes.get(self.node_name)
        if node is None:
            return False
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if annotations.get(keys.ANNOTATION_CPU_TOPOLOGY) == self.value:
            return False
        patch = {"metadata": {"annotations": {keys.ANNOTATION_CPU_TOPOLOGY: self.value}}}
        try:
            await self.api.patch(Node, self.node_name, patch)
        except Exception as err:  # retried at the next interval
            if not self._failing:
                log.warning("cannot annotate node %s with its topology: %s", self.node_name, err)
            self._failing = True
            return False
        if self._failing:
            log.info("node %s annotated with its CPU topology again", self.node_name)
        self._failing = False
        self.writes += 1
        return True

    async def run(self) -> None:
        await self.nodes.wait_synced()
        while True:
            await self.publish_once()
            await asyncio.sleep(self.interval)
