"""The node configuration of a cluster-mode koordlet, from watches instead of polls.

Two Informers, both with ``fieldSelector=metadata.name=NODE``: the NodeSLO named after this
node (rendered by koord-manager) and the Node (annotations, labels, ``status.allocatable``).
When either changes the configuration is rebuilt with ``build_node_config``, on the event loop
where the informers' caches live. It offers what the daemon uses of ``NodeConfigFile``:
``current`` (the last good configuration), ``error`` (why the newest input is not in use) and
``reload_if_changed()`` (True once after the configuration changed).

No NodeSLO for the node means Koordinator's defaults (as in Koordinator). Invalid content keeps
the last good configuration and sets ``error``; while the API server is away the informers
keep their caches, so the last good configuration stays.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from lightkube.resources.core_v1 import Node

from koordapi.errors import ModelError
from koordkube.client import KubeApi
from koordkube.informer import Informer
from koordkube.resources import NodeSLO, Object
from koordlet.cluster import cancel_and_wait
from koordlet.states.nodeconfig import NodeConfig, build_node_config

log = logging.getLogger(__name__)


class NodeConfigInformer:
    """NodeSLO and Node of ``node_name`` by watch, as one NodeConfig."""

    def __init__(
        self,
        api: KubeApi,
        node_name: str,
        *,
        slo_informer: Informer | None = None,
        node_informer: Informer | None = None,
    ) -> None:
        self.node_name = node_name
        selector = f"metadata.name={node_name}"
        self.slos = slo_informer or Informer(api, NodeSLO, fields=selector)
        self.nodes = node_informer or Informer(api, Node, fields=selector)
        self.current = NodeConfig()
        self.error: str | None = None
        self.loads = 0
        self._changed = False
        self._lock = threading.Lock()  # reload_if_changed runs in a worker thread
        self.slos.add_handler(self._on_event)
        self.nodes.add_handler(self._on_event)

    async def run(self) -> None:
        """Run both watches until cancelled."""
        tasks = [asyncio.create_task(self.slos.run()), asyncio.create_task(self.nodes.run())]
        try:
            await self.wait_synced()
            self.rebuild()
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait(*tasks)

    async def wait_synced(self) -> None:
        await self.slos.wait_synced()
        await self.nodes.wait_synced()

    def reload_if_changed(self) -> bool:
        """True once after the configuration changed (the watches rebuild it as events come)."""
        with self._lock:
            changed, self._changed = self._changed, False
        return changed

    def _on_event(self, kind: str, obj: Object) -> None:
        # The first configuration waits for both caches (``run`` builds it), so that a NodeSLO
        # does not go live with an empty allocatable before the Node is listed.
        if self.slos.synced.is_set() and self.nodes.synced.is_set():
            self.rebuild()

    def rebuild(self) -> bool:
        """Build the configuration from the caches now; True if it changed."""
        slo = self.slos.get(self.node_name) or {}
        node = self.nodes.get(self.node_name) or {}
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        try:
            config = build_node_config(
                slo.get("spec"),
                meta.get("annotations"),
                meta.get("labels"),
                status.get("allocatable"),
            )
        except ModelError as err:
            message = f"NodeSLO/Node {self.node_name}: {err}"
            if message != self.error:
                log.warning("node config not loaded, keeping the last good one: %s", message)
            self.error = message
            return False
        self.error = None
        for unknown in config.spec.unknown_keys:
            log.info("node config: ignoring unknown key %s", unknown)
        with self._lock:
            changed = config != self.current
            self.current = config
            self.loads += 1
            self._changed = self._changed or changed
        if changed:
            log.info("node config loaded from the API (NodeSLO and Node %s)", self.node_name)
        return changed
