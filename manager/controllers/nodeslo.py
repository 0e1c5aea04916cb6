"""The NodeSLO and NodeMetric controllers: one of each per Node, named after it.

NodeSLO: the node's spec rendered from the slo-controller-config ConfigMap
(manager.sloconfig); a key that does not parse keeps its previous value and raises a Warning
event on the ConfigMap. NodeMetric: the collect policy from the node's colocation strategy;
koordlet owns its status, so only the spec is ever written. Both are deleted with their Node
(explicitly, and through an owner reference for the garbage collector).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from koordapi.duration import format_go_duration, parse_go_duration
from koordkube.client import KubeApi, create_or_update
from koordkube.errors import NotFound
from koordkube.resources import NodeMetric, NodeSLO
from manager.colocation import ColocationStrategy, strategy_for_node
from manager.controllers.events import EventRecorder
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics
from manager.nodeslo import needs_update, node_slo_object
from manager.sloconfig import render_node_slo

log = logging.getLogger(__name__)

REASON_INVALID_CONFIG = "InvalidSLOConfig"


def go_duration(text: str) -> str:
    """A duration as Go's metav1.Duration writes it: "5m" → "5m0s", "300s" → "5m0s"; text
    that is not a whole number of seconds is kept as written."""
    try:
        seconds = parse_go_duration(text)
    except ValueError:
        return text
    return format_go_duration(int(seconds)) if seconds == int(seconds) else text


def collect_policy(strategy: ColocationStrategy) -> dict[str, Any]:
    """NodeMetric spec.metricCollectPolicy from the node's colocation strategy."""
    return {
        "aggregateDurationSeconds": strategy.metric_aggregate_duration_seconds,
        "reportIntervalSeconds": strategy.metric_report_interval_seconds,
        "nodeAggregatePolicy": {
            "durations": [go_duration(d) for d in strategy.metric_aggregate_policy]
        },
        "nodeMemoryCollectPolicy": strategy.metric_memory_collect_policy,
    }


def owned_by(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = node.get("metadata") or {}
    if not meta.get("uid"):
        return []
    return [{"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}]


class NodeSLOController:
    NAME = "nodeslo"

    def __init__(
        self, api: KubeApi, state: ClusterState, events: EventRecorder, metrics: ManagerMetrics
    ) -> None:
        self.api, self.state, self.events, self.metrics = api, state, events, metrics

    async def reconcile(self, name: str) -> float | None:
        node = self.state.nodes.get(name)
        existing = self.state.node_slos.get(name)
        if node is None:
            if existing is not None:
                await _delete(self.api, NodeSLO, name)
                self.metrics.reconciles.labels(self.NAME, "deleted").inc()
            return None
        data = self.state.slo_config_data() or {}
        rendered = render_node_slo(data, node, (existing or {}).get("spec"))
        config_map = self.state.config_map()
        for warning in rendered.warnings:
            if config_map is not None:
                await self.events.warn(config_map, REASON_INVALID_CONFIG, warning)
        desired = node_slo_object(node, rendered)
        if existing is not None and not needs_update(existing, desired):
            self.metrics.reconciles.labels(self.NAME, "unchanged").inc()
            return None
        _, outcome = await create_or_update(self.api, NodeSLO, desired)
        self.metrics.reconciles.labels(self.NAME, outcome).inc()
        log.info("NodeSLO %s %s", name, outcome)
        return None


class NodeMetricController:
    NAME = "nodemetric"

    def __init__(self, api: KubeApi, state: ClusterState, metrics: ManagerMetrics) -> None:
        self.api, self.state, self.metrics = api, state, metrics

    async def reconcile(self, name: str) -> float | None:
        node = self.state.nodes.get(name)
        existing = self.state.node_metrics.get(name)
        if node is None:
            if existing is not None:
                await _delete(self.api, NodeMetric, name)
                self.metrics.reconciles.labels(self.NAME, "deleted").inc()
            return None
        # A ConfigMap that fails to parse leaves the last good config in force (state.py).
        config = self.state.colocation()
        strategy = ColocationStrategy() if config is None else strategy_for_node(config, node)
        policy = collect_policy(strategy)
        spec = {"metricCollectPolicy": policy}
        if existing is not None and existing.get("spec") == spec:
            self.metrics.reconciles.labels(self.NAME, "unchanged").inc()
            return None
        desired = {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": name, "ownerReferences": owned_by(node)},
            "spec": spec,
        }
        _, outcome = await create_or_update(self.api, NodeMetric, desired)
        self.metrics.reconciles.labels(self.NAME, outcome).inc()
        return None


async def _delete(api: KubeApi, res: Any, name: str) -> None:
    with contextlib.suppress(NotFound):  # already gone
        await api.delete(res, name)
