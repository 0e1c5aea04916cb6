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
from manager.metrics import FAILED, ManagerMetrics, status
from manager.nodeslo import needs_update, node_slo_object
from manager.sloconfig import (
    CPU_BURST_CONFIG,
    HOST_APPLICATION_CONFIG,
    RESOURCE_QOS_CONFIG,
    RESOURCE_THRESHOLD_CONFIG,
    SYSTEM_CONFIG,
    parse_slo_config,
    render_node_slo,
)

log = logging.getLogger(__name__)

REASON_INVALID_CONFIG = "InvalidSLOConfig"
# Koordinator's slo_controller_nodeslo_spec_parse_count reasons, by the key each one parses.
SPEC_PARSE_REASONS = {
    RESOURCE_THRESHOLD_CONFIG: "getResourceThresholdSpec",
    RESOURCE_QOS_CONFIG: "getResourceQOSSpec",
    CPU_BURST_CONFIG: "getCPUBurstConfigSpec",
    SYSTEM_CONFIG: "getSystemConfigSpec",
    HOST_APPLICATION_CONFIG: "getHostApplicationConfig",
}


async def _written(
    count: Any, api: KubeApi, res: Any, desired: dict[str, Any], *, kind: str, exists: bool
) -> str:
    """create_or_update, counted in Koordinator's {create,update}<kind> reasons."""
    reason = f"{'update' if exists else 'create'}{kind}"
    try:
        _, outcome = await create_or_update(api, res, desired)
    except Exception:
        count.labels(FAILED, reason).inc()
        raise
    count.labels(status(True), f"{'create' if outcome == 'created' else 'update'}{kind}").inc()
    return outcome


async def _deleted(count: Any, api: KubeApi, res: Any, name: str, kind: str) -> None:
    try:
        await _delete(api, res, name)
    except Exception:
        count.labels(FAILED, f"delete{kind}").inc()
        raise
    count.labels(status(True), f"delete{kind}").inc()


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
        count = self.metrics.nodeslo_reconcile_count
        if node is None:
            if existing is not None:
                await _deleted(count, self.api, NodeSLO, name, "NodeSLO")
                self.metrics.reconciles.labels(self.NAME, "deleted").inc()
            return None
        data = self.state.slo_config_data() or {}
        failed = parse_slo_config(data).errors
        for key, reason in SPEC_PARSE_REASONS.items():
            self.metrics.nodeslo_spec_parse_count.labels(status(key not in failed), reason).inc()
        rendered = render_node_slo(data, node, (existing or {}).get("spec"))
        config_map = self.state.config_map()
        for warning in rendered.warnings:
            if config_map is not None:
                await self.events.warn(config_map, REASON_INVALID_CONFIG, warning)
        desired = node_slo_object(node, rendered)
        if existing is not None and not needs_update(existing, desired):
            self.metrics.reconciles.labels(self.NAME, "unchanged").inc()
            return None
        outcome = await _written(
            count, self.api, NodeSLO, desired, kind="NodeSLO", exists=existing is not None
        )
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
        count = self.metrics.nodemetric_reconcile_count
        if node is None:
            if existing is not None:
                await _deleted(count, self.api, NodeMetric, name, "NodeMetric")
                self.metrics.reconciles.labels(self.NAME, "deleted").inc()
            return None
        # A ConfigMap that fails to parse leaves the last good config in force (state.py).
        config = self.state.colocation()
        strategy = ColocationStrategy() if config is None else strategy_for_node(config, node)
        policy = collect_policy(strategy)
        # a colocation-config that does not parse leaves the last good one in force
        self.metrics.nodemetric_spec_parse_count.labels(
            status(not self.state.colocation_error), "getNodeMetricCollectPolicy"
        ).inc()
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
        outcome = await _written(
            count, self.api, NodeMetric, desired, kind="NodeMetric", exists=existing is not None
        )
        self.metrics.reconciles.labels(self.NAME, outcome).inc()
        return None


async def _delete(api: KubeApi, res: Any, name: str) -> None:
    with contextlib.suppress(NotFound):  # already gone
        await api.delete(res, name)
