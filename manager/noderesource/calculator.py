"""One node's managed extended resources: the amounts to publish, or which keys to remove and
why, each with an explanation that repeats every number it used.

Order of decisions (Koordinator's NodeResource reconciler):

1. ``enable`` false for the node → remove all four keys (reason ``DisableInConfig``).
2. No usable capacity on the Node → remove all four keys.
3. NodeMetric missing, unreadable (a malformed or negative quantity), without
   ``status.updateTime``, older than ``degradeTimeMinutes``, or without a system usage →
   remove batch and mid keys ("degraded"). Koordinator takes a missing system usage as 0; we
   degrade instead, since the usage formulas are only as good as that number.
4. Otherwise compute batch (batch.py) and mid (mid.py); batch CPU is then multiplied by the
   CPU normalization ratio when it is > 1 (rounded up to a whole number), recorded in
   ``originExtendedAllocatable``, and reduced by third-party batch allocations (floor 0). An
   unreadable third-party annotation removes the batch keys: publishing batch capacity that
   another scheduler may already hold would overcommit the node.

Explanations state CPU amounts in cores and memory as exact binary quantities; the number
after the resource name is the quantity written (milli-cores for the CPU keys), e.g.
"kubernetes.io/batch-cpu 37000 = capacity 100 - margin 40 (60% reclaim) - system 3 (max of
usage 3, reserved 2) - HP used 20 (usage policy)".
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi import keys
from koordapi.errors import ModelError
from koordapi.nodemetric import MetricError, MetricView, read_node_metric
from koordapi.quantity import format_binary
from manager.colocation import ColocationStrategy
from manager.noderesource.adjustments import (
    ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE,
    normalization_ratio,
    normalize,
    origin_annotation,
    third_party_batch,
)
from manager.noderesource.amounts import Amount
from manager.noderesource.batch import batch_amounts
from manager.noderesource.mid import mid_amounts
from manager.noderesource.node import NodeError, read_node
from manager.noderesource.pods import PodMemo, read_pods

BATCH_RESOURCES = (keys.BATCH_CPU, keys.BATCH_MEMORY)
MID_RESOURCES = (keys.MID_CPU, keys.MID_MEMORY)
MANAGED_RESOURCES = BATCH_RESOURCES + MID_RESOURCES
CPU_RESOURCES = (keys.BATCH_CPU, keys.MID_CPU)  # values are milli-cores, written as integers
REASON_DISABLED = "DisableInConfig"


@dataclass(frozen=True)
class ResourceOutcome:
    """One managed resource: its new value (milli-cores for the CPU keys, bytes for memory),
    or None to remove the key; and how that was decided."""

    name: str
    value: int | None
    explanation: str

    @property
    def quantity(self) -> str | None:
        """The value as the quantity string to write ("37000", "98Gi")."""
        if self.value is None:
            return None
        return str(self.value) if self.name in CPU_RESOURCES else format_binary(self.value)


@dataclass(frozen=True)
class NodeResourceResult:
    resources: Mapping[str, ResourceOutcome]  # every managed resource, in MANAGED_RESOURCES order
    annotations: Mapping[str, str] = field(default_factory=dict)  # node annotations to set
    reason: str = ""  # why keys are removed ("" when everything was computed)
    notes: tuple[str, ...] = ()  # inputs that were ignored or skipped, and why

    @property
    def quantities(self) -> dict[str, str | None]:
        """Resource name → quantity to write, or None to remove the key."""
        return {name: outcome.quantity for name, outcome in self.resources.items()}


def _removed(names: Iterable[str], reason: str) -> dict[str, ResourceOutcome]:
    return {name: ResourceOutcome(name, None, f"{name} removed: {reason}") for name in names}


def _written(name: str, amount: Amount) -> ResourceOutcome:
    quantity = ResourceOutcome(name, amount.value, "").quantity
    return ResourceOutcome(name, amount.value, f"{name} {quantity} = {amount.expression}")


def _staleness(metric: MetricView, strategy: ColocationStrategy, now: float) -> str:
    """Why the metric is too old or incomplete to compute from; "" when it is fine."""
    if metric.update_time is None:
        return "NodeMetric has no status.updateTime"
    age = now - metric.update_time
    if age > strategy.degrade_time_minutes * 60:
        stamp = datetime.datetime.fromtimestamp(metric.update_time, datetime.UTC)
        return (
            f"NodeMetric updated {age:.0f}s ago ({stamp:%Y-%m-%dT%H:%M:%SZ}),"
            f" more than degradeTimeMinutes {strategy.degrade_time_minutes}"
        )
    if metric.system_usage is None:
        return "NodeMetric has no nodeMetric.systemUsage cpu and memory"
    return ""


def calculate(
    node: Mapping[str, Any],
    node_metric: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    strategy: ColocationStrategy,
    now: float,
    *,
    memo: PodMemo | None = None,
) -> NodeResourceResult:
    """The managed resources of ``node`` (Node dict) from its NodeMetric dict (None when there
    is none) and the pods bound to it, under ``strategy`` (strategy_for_node), at ``now``
    (seconds since the epoch). ``memo`` lets a controller skip re-reading unchanged pods."""
    notes: list[str] = []
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    zero_origin = {ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE: origin_annotation(annotations, 0, 0)}
    if not strategy.enable:
        reason = f"{REASON_DISABLED}: colocation is disabled for this node"
        return NodeResourceResult(_removed(MANAGED_RESOURCES, reason), zero_origin, reason)
    try:
        view = read_node(node, notes)
    except NodeError as err:
        reason = f"node unusable: {err}"
        return NodeResourceResult(
            _removed(MANAGED_RESOURCES, reason), zero_origin, reason, tuple(notes)
        )

    reason = ""
    metric: MetricView | None = None
    if node_metric is None:
        reason = "NodeMetric not found"
    else:
        try:
            metric = read_node_metric(node_metric)
            reason = _staleness(metric, strategy, now)
        except MetricError as err:
            reason = f"invalid NodeMetric: {err}"
    if reason or metric is None:
        reason = f"degraded: {reason}"
        return NodeResourceResult(
            _removed(MANAGED_RESOURCES, reason), zero_origin, reason, tuple(notes)
        )

    pod_views = read_pods(pods, notes, memo)
    batch_cpu, batch_memory = batch_amounts(view, metric, pod_views, strategy)
    ratio = normalization_ratio(view.annotations, notes)
    if ratio is not None and batch_cpu.value:
        amplified = normalize(batch_cpu.value, ratio)
        batch_cpu = Amount(
            amplified,
            f"{batch_cpu.value} * cpu-normalization ratio {ratio},"
            f" where {batch_cpu.value} = {batch_cpu.expression}",
        )
    origin = {
        ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE: origin_annotation(
            annotations, batch_cpu.value, batch_memory.value
        )
    }
    resources: dict[str, ResourceOutcome] = {}
    try:
        third_party = third_party_batch(view.annotations)
    except ModelError as err:
        reason = f"unreadable third-party allocations: {err}"
        resources.update(_removed(BATCH_RESOURCES, reason))
    else:
        if third_party is not None:
            batch_cpu = _subtract(batch_cpu, third_party[0], str)
            batch_memory = _subtract(batch_memory, third_party[1], format_binary)
        resources[keys.BATCH_CPU] = _written(keys.BATCH_CPU, batch_cpu)
        resources[keys.BATCH_MEMORY] = _written(keys.BATCH_MEMORY, batch_memory)
    mid_cpu, mid_memory = mid_amounts(view, metric, pod_views, strategy)
    resources[keys.MID_CPU] = _written(keys.MID_CPU, mid_cpu)
    resources[keys.MID_MEMORY] = _written(keys.MID_MEMORY, mid_memory)
    return NodeResourceResult(resources, origin, reason, tuple(notes))


def _subtract(amount: Amount, taken: int, fmt: Callable[[int], str]) -> Amount:
    if not taken:
        return amount
    value = max(amount.value - taken, 0)
    return Amount(
        value,
        f"max(0, {fmt(amount.value)} - third-party batch allocations {fmt(taken)}),"
        f" where {fmt(amount.value)} = {amount.expression}",
    )
