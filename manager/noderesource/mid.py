"""Mid resources (kubernetes.io/mid-cpu, mid-memory): what prod pods hold but do not use.

Static mode (``midReclaimMode: static``), per resource:
    min(capacity * midStatic*ReservedPercent, capacity * mid*ThresholdPercent)

Dynamic mode (the default):
    min(max(min(prodReclaimable, capacity - node usage), 0) + unallocated * midUnallocatedPercent,
        capacity * mid*ThresholdPercent)
    unallocated = max(capacity - max(reserved, system usage + host applications above mid)
                      - requests of Running/Pending pods not mid/batch/free, 0)

``prodReclaimable`` is koordlet's prediction in NodeMetric; without it the reclaimable part is
0 (the keys stay, with 0). Without a node usage the node counts as fully used (unused 0), so
the amount stays strict rather than guessed. Percent products truncate like Koordinator's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from koordapi import qos
from koordapi.nodemetric import MetricView, host_apps_above
from koordapi.quantity import Pair
from manager.colocation import MID_RECLAIM_MODE_STATIC, ColocationStrategy
from manager.noderesource.amounts import Amount, cores, percent_of, size
from manager.noderesource.node import NodeView
from manager.noderesource.pods import PRIORITY_BATCH, PRIORITY_FREE, PRIORITY_MID, PodView

_NOT_PROD = (PRIORITY_MID, PRIORITY_BATCH, PRIORITY_FREE)


def _static(
    capacity: int, reserved_pct: int, threshold_pct: int, fmt: Callable[[int], str]
) -> Amount:
    reserved = percent_of(capacity, reserved_pct)
    threshold = percent_of(capacity, threshold_pct)
    return Amount(
        min(reserved, threshold),
        f"min(capacity {fmt(capacity)} * {reserved_pct}% static reserve = {fmt(reserved)},"
        f" capacity {fmt(capacity)} * {threshold_pct}% threshold = {fmt(threshold)})",
    )


def prod_requests(pods: Sequence[PodView]) -> Pair:
    cpu = memory = 0
    for _, priority, _, pod_cpu, pod_memory in pods:
        if priority not in _NOT_PROD:
            cpu += pod_cpu
            memory += pod_memory
    return cpu, memory


def _dynamic(
    i: int,
    *,
    node: NodeView,
    metric: MetricView,
    prod_requested: Pair,
    system_usage: Pair,
    unallocated_pct: int,
    threshold_pct: int,
    fmt: Callable[[int], str],
) -> Amount:
    capacity = node.capacity[i]
    if metric.prod_reclaimable is None:
        reclaimable, reclaimable_text = 0, "prodReclaimable 0 (not reported)"
    else:
        reclaimable = metric.prod_reclaimable[i]
        reclaimable_text = f"prodReclaimable {fmt(reclaimable)}"
    if metric.node_usage is None:
        unused, unused_text = 0, "node unused 0 (no node usage reported)"
    else:
        unused = capacity - metric.node_usage[i]
        unused_text = f"node unused {fmt(unused)}"
    floor = max(node.reserved[i], system_usage[i])
    unallocated = max(capacity - floor - prod_requested[i], 0)
    extra = percent_of(unallocated, unallocated_pct)
    threshold = percent_of(capacity, threshold_pct)
    value = min(max(min(reclaimable, unused), 0) + extra, threshold)
    return Amount(
        value,
        f"min(max(min({reclaimable_text}, {unused_text}), 0)"
        f" + unallocated {fmt(unallocated)} * {unallocated_pct}% = {fmt(extra)},"
        f" capacity {fmt(capacity)} * {threshold_pct}% threshold = {fmt(threshold)});"
        f" unallocated = max(capacity {fmt(capacity)} - max(reserved {fmt(node.reserved[i])},"
        f" system {fmt(system_usage[i])}) - prod requests {fmt(prod_requested[i])}, 0)",
    )


def mid_amounts(
    node: NodeView, metric: MetricView, pods: Sequence[PodView], strategy: ColocationStrategy
) -> tuple[Amount, Amount]:
    """(mid CPU in milli-cores, mid memory in bytes) with their arithmetic."""
    cpu_cap, memory_cap = node.capacity
    if strategy.mid_reclaim_mode == MID_RECLAIM_MODE_STATIC:
        return (
            _static(
                cpu_cap,
                strategy.mid_static_cpu_reserved_percent,
                strategy.mid_cpu_threshold_percent,
                cores,
            ),
            _static(
                memory_cap,
                strategy.mid_static_memory_reserved_percent,
                strategy.mid_memory_threshold_percent,
                size,
            ),
        )
    requested = prod_requests(pods)
    usage = metric.system_usage or (0, 0)
    host = host_apps_above(metric, qos.MID)
    system_usage = (usage[0] + host[0], usage[1] + host[1])
    return (
        _dynamic(
            0,
            node=node,
            metric=metric,
            prod_requested=requested,
            system_usage=system_usage,
            unallocated_pct=strategy.mid_unallocated_percent,
            threshold_pct=strategy.mid_cpu_threshold_percent,
            fmt=cores,
        ),
        _dynamic(
            1,
            node=node,
            metric=metric,
            prod_requested=requested,
            system_usage=system_usage,
            unallocated_pct=strategy.mid_unallocated_percent,
            threshold_pct=strategy.mid_memory_threshold_percent,
            fmt=size,
        ),
    )
