"""Batch resources (kubernetes.io/batch-cpu, batch-memory): what high-priority work leaves.

Per resource, with margin = capacity * (100 - reclaimThresholdPercent) / 100,
reserved = max(kubelet reserved, reservation annotation) and
system = max(system usage + usage of host applications ranked above batch, reserved):

* usage policy:            capacity - margin - system - HP used
* request policy (memory): capacity - margin - reserved - HP request
* maxUsageRequest policy:  capacity - margin - system - Σ max(HP used, HP request)

each floored at 0, then capped at batch*ThresholdPercent of capacity when that is set. "HP"
pods are the Running and Pending pods whose priority class is neither koord-batch nor
koord-free; batch and free pods' own usage is never subtracted (batch capacity is theirs).

How pods count:

* With a metric: usage; an LSE pod's CPU counts at its request (its cores are exclusive, so
  what it leaves idle is not reclaimable), its memory at usage.
* Without a metric (just scheduled, or koordlet has not reported it yet): its request, in
  *both* HP used and Σ max(used, request). Koordinator's node-level path leaves such pods out
  of the max(used, request) sum, which makes the maxUsageRequest policy publish capacity that
  a pod already holds; its NUMA-level path counts them, and so do we. A resource missing from
  a pod's metric counts the same way, resource by resource.
* Metrics of pods that are not (or no longer) Running/Pending in the pod list ("dangling":
  deleted, finished, or not yet in the informer) count by their reported priority: their
  usage is added to HP used and to Σ max(used, request) unless the priority is batch/free.

NUMA-level batch resources (NodeResourceTopology zones) are out of scope here: only the
node-level amounts are computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from koordapi import qos
from koordapi.nodemetric import MetricView, host_apps_above
from koordapi.quantity import Pair
from manager.colocation import POLICY_MAX_USAGE_REQUEST, POLICY_REQUEST, ColocationStrategy
from manager.noderesource.amounts import Amount, cores, percent_of, size
from manager.noderesource.node import NodeView
from manager.noderesource.pods import PRIORITY_BATCH, PRIORITY_FREE, PodView

_LOW_PRIORITIES = (PRIORITY_BATCH, PRIORITY_FREE)


class HighPriorityTally(NamedTuple):
    """Sums over high-priority pods, each (cpu milli-cores, memory bytes)."""

    request: Pair
    used: Pair
    max_used_request: Pair
    without_metric: Pair  # the part of used that is requests of pods without a metric
    dangling: Pair  # the part of used that is metrics of pods not in the pod list


def tally_high_priority(pods: Sequence[PodView], metric: MetricView) -> HighPriorityTally:
    req_c = req_m = used_c = used_m = max_c = max_m = miss_c = miss_m = 0
    dangling = dict(metric.pods)
    take = dangling.pop
    for key, priority, lse, pod_c, pod_m in pods:
        pod_metric = take(key, None)  # before the priority test: a listed pod is never dangling
        if priority in _LOW_PRIORITIES:
            continue
        req_c += pod_c
        req_m += pod_m
        if pod_metric is None:
            use_c = use_m = None
        else:
            _, use_c, use_m = pod_metric
        if use_c is None:
            used_c += pod_c
            max_c += pod_c
            miss_c += pod_c
        else:
            used_c += pod_c if lse else use_c
            max_c += pod_c if pod_c > use_c else use_c
        if use_m is None:
            used_m += pod_m
            max_m += pod_m
            miss_m += pod_m
        else:
            used_m += use_m
            max_m += pod_m if pod_m > use_m else use_m
    dang_c = dang_m = 0
    for reported, use_c, use_m in dangling.values():
        if reported in _LOW_PRIORITIES:
            continue
        dang_c += use_c or 0
        dang_m += use_m or 0
    return HighPriorityTally(
        request=(req_c, req_m),
        used=(used_c + dang_c, used_m + dang_m),
        max_used_request=(max_c + dang_c, max_m + dang_m),
        without_metric=(miss_c, miss_m),
        dangling=(dang_c, dang_m),
    )


def _hp_detail(tally: HighPriorityTally, i: int, fmt: Callable[[int], str]) -> str:
    parts = []
    if tally.without_metric[i]:
        parts.append(f"{fmt(tally.without_metric[i])} requested by pods without metrics")
    if tally.dangling[i]:
        parts.append(f"{fmt(tally.dangling[i])} used by pods not in the pod list")
    return f", incl. {' and '.join(parts)}" if parts else ""


def _one(
    i: int,
    *,
    policy: str,
    reclaim_percent: int,
    cap_percent: int | None,
    node: NodeView,
    system_usage: Pair,
    host: Pair,
    tally: HighPriorityTally,
    fmt: Callable[[int], str],
) -> Amount:
    capacity = node.capacity[i]
    margin = percent_of(capacity, 100 - reclaim_percent)
    reserved = node.reserved[i]
    system = max(system_usage[i], reserved)
    head = f"capacity {fmt(capacity)} - margin {fmt(margin)} ({reclaim_percent}% reclaim)"
    host_text = f" incl. host applications {fmt(host[i])}" if host[i] else ""
    system_text = (
        f"system {fmt(system)} (max of usage {fmt(system_usage[i])}{host_text},"
        f" reserved {fmt(reserved)})"
    )
    detail = _hp_detail(tally, i, fmt)
    if policy == POLICY_REQUEST:
        hp = tally.request[i]
        raw = capacity - margin - reserved - hp
        text = f"{head} - reserved {fmt(reserved)} - HP requests {fmt(hp)} (request policy)"
    elif policy == POLICY_MAX_USAGE_REQUEST:
        hp = tally.max_used_request[i]
        raw = capacity - margin - system - hp
        text = f"{head} - {system_text} - HP max(used, request) {fmt(hp)}{detail}"
        text += " (maxUsageRequest policy)"
    else:
        hp = tally.used[i]
        raw = capacity - margin - system - hp
        text = f"{head} - {system_text} - HP used {fmt(hp)}{detail} (usage policy)"
    value = raw
    if raw < 0:
        value = 0
        text = f"max(0, {text} = {fmt(raw)})"
    if cap_percent is not None:
        cap = percent_of(capacity, cap_percent)
        text = f"min({cap_percent}% of capacity = {fmt(cap)}, {text} = {fmt(value)})"
        value = min(value, cap)
    return Amount(value, text)


def batch_amounts(
    node: NodeView, metric: MetricView, pods: Sequence[PodView], strategy: ColocationStrategy
) -> tuple[Amount, Amount]:
    """(batch CPU in milli-cores, batch memory in bytes) with their arithmetic in cores and
    binary quantities; before CPU normalization and third-party allocations."""
    tally = tally_high_priority(pods, metric)
    usage = metric.system_usage or (0, 0)
    host = host_apps_above(metric, qos.BATCH)
    system_usage = (usage[0] + host[0], usage[1] + host[1])
    # CPU knows no request policy: anything but maxUsageRequest computes by usage
    cpu_policy = strategy.cpu_calculate_policy
    if cpu_policy == POLICY_REQUEST:
        cpu_policy = "usage"
    cpu = _one(
        0,
        policy=cpu_policy,
        reclaim_percent=strategy.cpu_reclaim_threshold_percent,
        cap_percent=strategy.batch_cpu_threshold_percent,
        fmt=cores,
        node=node,
        system_usage=system_usage,
        host=host,
        tally=tally,
    )
    memory = _one(
        1,
        policy=strategy.memory_calculate_policy,
        reclaim_percent=strategy.memory_reclaim_threshold_percent,
        cap_percent=strategy.batch_memory_threshold_percent,
        fmt=size,
        node=node,
        system_usage=system_usage,
        host=host,
        tally=tally,
    )
    return cpu, memory
