"""The NodeResource controller: publish batch-* and mid-* on each Node from its NodeMetric.

One key per node. A node is looked at again when it, its NodeMetric, a pod on it or the
ConfigMap changes, and at least every ``RECHECK_SECONDS`` (a NodeMetric that stops changing
must still be noticed going stale). The decisions are manager.noderesource's; this module only
reads the caches, decides whether to write (need_sync) and sends one merge patch to the Node's
status, carrying the explanation of every number in an annotation that ``koordctl explain
node`` prints.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import time
from collections.abc import Callable

from lightkube.resources.core_v1 import Node

from koordapi.explanation import ANNOTATION_NODE_RESOURCE_EXPLANATION
from koordkube.client import KubeApi
from koordkube.errors import NotFound
from manager.colocation import strategy_for_node
from manager.controllers.state import ClusterState
from manager.metrics import FAILED, SUCCEEDED, ManagerMetrics, status
from manager.noderesource.calculator import CPU_RESOURCES, NodeResourceResult, calculate
from manager.noderesource.patch import status_patch
from manager.noderesource.pods import PodMemo
from manager.noderesource.smoothing import BatchSmoother
from manager.noderesource.sync import need_sync

log = logging.getLogger(__name__)

NAME = "noderesource"
RECHECK_SECONDS = 60.0
# Koordinator's NodeResource plugins that compute what calculate() computes in one pass.
BATCH_PLUGIN, MID_PLUGIN = "BatchResource", "MidResource"


def explanation(result: NodeResourceResult, why: str, now: float) -> str:
    """The annotation's JSON: when, why it was written, and one line per managed resource."""
    stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {
        "updateTime": stamp,
        "writtenBecause": why,
        "resources": {name: o.explanation for name, o in result.resources.items()},
    }
    if result.reason:
        record["reason"] = result.reason
    if result.notes:
        record["notes"] = list(result.notes)
    return json.dumps(record, sort_keys=True)


class NodeResourceController:
    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        metrics: ManagerMetrics,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.state, self.metrics, self.clock = api, state, metrics, clock
        self.last_write: dict[str, float] = {}  # node → when this manager last wrote it
        self.memo = PodMemo()
        self.smoother = BatchSmoother()

    async def reconcile(self, name: str) -> float | None:
        node = self.state.nodes.get(name)
        if node is None:
            self.last_write.pop(name, None)
            self.smoother.forget(name)
            self._forget_allocatable(name)
            self.metrics.node_resource_reconcile_count.labels(FAILED, "reconcileNodeNotFound").inc()
            return None
        config = self.state.colocation()
        if config is None:  # the ConfigMap was never read: nothing is known yet
            return None
        strategy = strategy_for_node(config, node)
        now = self.clock()
        try:
            result = calculate(
                node,
                self.state.node_metrics.get(name),
                self.state.pods_on(name),
                strategy,
                now,
                memo=self.memo,
            )
        except Exception:
            self._plugins_ran(ok=False)
            raise
        self._plugins_ran(ok=True)
        result = self.smoother.smooth(name, result, strategy.batch_smoothing_window_seconds, now)
        self._record_allocatable(name, result)
        write, why = need_sync(node, result, self.last_write.get(name), now, strategy)
        if not write:
            self.metrics.reconciles.labels(NAME, "unchanged").inc()
            return RECHECK_SECONDS
        patch = status_patch(node, result)
        annotations = patch.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[ANNOTATION_NODE_RESOURCE_EXPLANATION] = explanation(result, why, now)
        count = self.metrics.node_resource_reconcile_count
        try:
            await self.api.patch(Node, name, patch, subresource="status")
        except NotFound:  # deleted meanwhile; its delete event cleans up
            count.labels(FAILED, "updateNodeNotFound").inc()
            return None
        except Exception:
            count.labels(FAILED, "updateNodeStatus").inc()
            raise
        count.labels(SUCCEEDED, "updateNodeStatus").inc()
        self.last_write[name] = now
        self.metrics.reconciles.labels(NAME, "written").inc()
        self.metrics.node_resource_writes.inc()
        log.info(
            "node %s: wrote %s (%s)",
            name,
            ", ".join(f"{k}={v}" for k, v in result.quantities.items()),
            why,
        )
        return RECHECK_SECONDS

    # -- Koordinator's series -----------------------------------------------------------------

    def _plugins_ran(self, *, ok: bool) -> None:
        for plugin in (BATCH_PLUGIN, MID_PLUGIN):
            self.metrics.node_resource_run_plugin_status.labels(
                plugin, status(ok), "ResourceCalculate"
            ).inc()

    def _record_allocatable(self, node: str, result: NodeResourceResult) -> None:
        """What was computed for ``node``, as Koordinator's plugins record it: CPU in cores
        (unit "integer"), memory in bytes; a resource removed has no series."""
        gauge = self.metrics.node_extended_resource_allocatable_internal
        for resource, outcome in result.resources.items():
            cpu = resource in CPU_RESOURCES
            unit = "integer" if cpu else "byte"
            if outcome.value is None:
                with contextlib.suppress(KeyError):  # never recorded
                    gauge.remove(node, resource, unit)
                continue
            gauge.labels(node, resource, unit).set(outcome.value / 1000 if cpu else outcome.value)

    def _forget_allocatable(self, node: str) -> None:
        gauge = self.metrics.node_extended_resource_allocatable_internal
        for labels in [s.labels for m in gauge.collect() for s in m.samples]:
            if labels.get("node") == node:
                gauge.remove(labels["node"], labels["resource"], labels["unit"])
