"""``koordctl whatif``'s replay: one recorded history under one configuration (a Scenario).

Every formula is the component's own, called with the history's numbers:

* batch and mid resources: koord-manager's ``batch_amounts`` and ``mid_amounts``, every 60 s
  (the manager's sync), from averages over the strategy's ``metricAggregateDurationSeconds``
  (what koordlet's NodeMetric reports): node usage, system usage (node - pods, at least 0,
  per second), and the non-BE pods' usage as one high-priority pod (CPU: all pods minus the
  besteffort cgroup's ``node_be`` usage; memory: all pods minus those named BE). Colocation
  disabled (``enable: false``) publishes nothing: 0 here.
* BE CPU suppress: koordlet's ``SuppressInputs`` every second, then ``cpuset_count`` (cpuset
  policy) or ``next_quota`` (cfsQuota policy) from the previous step's value, so the 10 %
  growth cap and the 1 % write bypass act as they would. A second is "suppressed" when BE's
  recorded usage is above what the replayed limit allows.
* evictions every second: CPUEvict's ``node_usage_release`` on the window average, BECPUEvict's
  ``satisfaction_release`` with the replayed limit (the usage capped at it), MemoryEvict's
  ``usage_release``; each strategy rests for its cool-down after a trigger (20 s CPU, 4 s
  memory, koordlet's defaults). Triggers are counted, as if their feature gates were on:
  which pods would go depends on pods the cache does not describe.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import isnan
from typing import Any

from koordapi import keys
from koordapi.cgroup import CFS_PERIOD_US, UNLIMITED
from koordapi.nodemetric import MetricView
from koordapi.nodeslo import SUPPRESS_CFS_QUOTA
from koordapi.quantity import Pair
from koordctl.whatif_config import Scenario
from koordctl.whatif_history import History
from koordlet.qosmanager import cpuevict, memoryevict
from koordlet.qosmanager.cpusuppress import SuppressInputs, cpuset_count, next_quota
from manager.noderesource.batch import batch_amounts
from manager.noderesource.mid import mid_amounts
from manager.noderesource.node import NodeView
from manager.noderesource.pods import PRIORITY_PROD, PodView

SYNC_SECONDS = 60  # koord-manager's NodeResource resync, and koordlet's NodeMetric report
CPU_COOL_DOWN = 20  # --cpu-evict-cool-time-seconds
MEMORY_COOL_DOWN = 4  # --memory-evict-cool-time-seconds
_HP_POD = "(non-BE pods)"  # the one pod the high-priority usage is given to the formulas as


@dataclass(frozen=True)
class NodeFacts:
    """What the history does not hold: capacity, reservation, the CPU count, prod requests."""

    cpu_milli: int
    memory: int
    reserved: Pair = (0, 0)
    cpus: int = 0  # logical CPUs (cpuset policy); 0: capacity in whole cores
    prod_requests: Pair | None = None  # Σ requests of prod pods, when known

    @property
    def cpu_count(self) -> int:
        return self.cpus or max(1, self.cpu_milli // 1000)


@dataclass
class Replay:
    """One scenario's outcome: per manager step and per second."""

    scenario: Scenario
    step_times: list[float] = field(default_factory=list)
    batch_cpu: list[int] = field(default_factory=list)  # milli-cores per step
    batch_memory: list[int] = field(default_factory=list)  # bytes per step
    mid_cpu: list[int] = field(default_factory=list)
    mid_memory: list[int] = field(default_factory=list)
    be_allowed: array[float] = field(default_factory=lambda: array("d"))  # cores per second
    suppressed: array[int] = field(default_factory=lambda: array("b"))  # 1: BE used > allowed
    evictions: list[tuple[float, str]] = field(default_factory=list)  # (time, feature)


class _Prefix:
    """Sums and counts of the non-NaN values of a series, for window averages."""

    def __init__(self, values: Sequence[float]) -> None:
        self.sums = array("d", [0.0])
        self.counts = array("q", [0])
        total, count = 0.0, 0
        for value in values:
            if not isnan(value):
                total += value
                count += 1
            self.sums.append(total)
            self.counts.append(count)

    def avg(self, first: int, last: int) -> tuple[float, int]:
        """(average, count) over bins first..last inclusive (clamped); NaN without values."""
        first = max(first, 0)
        count = self.counts[last + 1] - self.counts[first]
        if count <= 0:
            return math.nan, 0
        return (self.sums[last + 1] - self.sums[first]) / count, count


def _nan0(value: float) -> float:
    return value if not isnan(value) else 0.0


@dataclass
class Inputs:
    """Per-second series derived once from the history and shared by both scenarios."""

    history: History
    system_cpu: array[float]
    system_memory: array[float]
    hp_cpu: array[float]
    hp_memory: array[float]
    prefix: dict[str, _Prefix]

    @classmethod
    def of(cls, history: History) -> Inputs:
        n = len(history)
        sys_c, sys_m, hp_c, hp_m = (array("d", [math.nan]) * n for _ in range(4))
        for i in range(n):
            node_c, node_m = history.node_cpu[i], history.node_memory[i]
            if not isnan(node_c):
                sys_c[i] = max(node_c - history.pods_cpu[i], 0.0)
                hp_c[i] = max(history.pods_cpu[i] - _nan0(history.be_cpu_usage[i]), 0.0)
            if not isnan(node_m):
                sys_m[i] = max(node_m - history.pods_memory[i], 0.0)
                hp_m[i] = max(history.pods_memory[i] - history.be_pods_memory[i], 0.0)
        prefix = {
            "node_cpu": _Prefix(history.node_cpu),
            "node_memory": _Prefix(history.node_memory),
            "system_cpu": _Prefix(sys_c),
            "system_memory": _Prefix(sys_m),
            "hp_cpu": _Prefix(hp_c),
            "hp_memory": _Prefix(hp_m),
            "be_request": _Prefix(history.be_cpu_request),
        }
        return cls(history, sys_c, sys_m, hp_c, hp_m, prefix)


def _manager_step(
    inputs: Inputs, i: int, node: NodeFacts, scenario: Scenario
) -> tuple[int, int, int, int] | None:
    """(batch cpu, batch memory, mid cpu, mid memory) at bin ``i``; None when the window has
    no node usage (the manager would degrade and remove the keys)."""
    strategy = scenario.strategy
    first = i - strategy.metric_aggregate_duration_seconds + 1
    avg = {name: p.avg(first, i)[0] for name, p in inputs.prefix.items()}
    if avg["node_cpu"] != avg["node_cpu"] or avg["node_memory"] != avg["node_memory"]:
        return None
    if not strategy.enable:
        return 0, 0, 0, 0
    view = NodeView("", (node.cpu_milli, node.memory), node.reserved, node.reserved, (0, 0), {})

    def pair(cpu: str, memory: str) -> Pair:
        return round(_nan0(avg[cpu]) * 1000), round(_nan0(avg[memory]))

    hp = pair("hp_cpu", "hp_memory")
    # prodReclaimable as koordlet last reported it (not averaged: the manager reads the
    # NodeMetric's one value); none recorded: the manager's "not reported" (0)
    history = inputs.history
    reclaimable_cpu, reclaimable_memory = (
        history.prod_reclaimable_cpu[i],
        history.prod_reclaimable_memory[i],
    )
    reclaimable = (
        None
        if isnan(reclaimable_cpu) or isnan(reclaimable_memory)
        else (round(reclaimable_cpu * 1000), round(reclaimable_memory))
    )
    metric = MetricView(
        update_time=history.start + i,
        system_usage=pair("system_cpu", "system_memory"),
        node_usage=pair("node_cpu", "node_memory"),
        pods={_HP_POD: (PRIORITY_PROD, hp[0], hp[1])},
        prod_reclaimable=reclaimable,
    )
    pods: list[PodView] = []
    if node.prod_requests is not None:
        pods = [(_HP_POD, PRIORITY_PROD, False, *node.prod_requests)]
    batch_cpu, batch_memory = batch_amounts(view, metric, pods, strategy)
    mid_cpu, mid_memory = mid_amounts(view, metric, pods, strategy)
    return batch_cpu.value, batch_memory.value, mid_cpu.value, mid_memory.value


def _int(config: Mapping[str, Any], key: str) -> int | None:
    value = config.get(key)
    return None if value is None else int(value)


class _Suppress:
    """CPUSuppress's state from one second to the next (current cpuset size or quota)."""

    def __init__(self, node: NodeFacts, threshold: Mapping[str, Any]) -> None:
        self.node = node
        self.enabled = bool(threshold.get("enable"))
        self.percent = int(threshold.get("cpuSuppressThresholdPercent", 65))
        self.min_percent = _int(threshold, "cpuSuppressMinPercent")
        self.by_quota = threshold.get("cpuSuppressPolicy") == SUPPRESS_CFS_QUOTA
        self.cpus = node.cpu_count
        self.quota = UNLIMITED
        self.allowed = node.cpu_milli / 1000  # unsuppressed: the whole node

    def step(self, node_used: float, pods_used: float, be_used: float) -> float:
        if not self.enabled or isnan(node_used):
            return self.allowed  # disabled, or stale node usage: koordlet changes nothing
        inputs = SuppressInputs(
            capacity_milli=self.node.cpu_milli,
            threshold_percent=self.percent,
            node_used=node_used,
            pods_used=pods_used,
            non_be_used=max(pods_used - _nan0(be_used), 0.0),
            reserved_milli=self.node.reserved[0],
            min_percent=self.min_percent,
        )
        suppress = inputs.suppress_milli()
        if self.by_quota:
            quota = next_quota(suppress, self.quota, self.node.cpu_milli // 1000)
            self.quota = self.quota if quota is None else quota
            self.allowed = self.quota / CFS_PERIOD_US if self.quota > 0 else self.allowed
        else:
            current = self.cpus if self.allowed >= self.cpus else round(self.allowed)
            self.allowed = float(cpuset_count(suppress, current, self.cpus, self.cpus))
        return self.allowed


def _be_cpu_release(
    config: Mapping[str, Any], window: int, i: int, series: tuple[_Prefix, _Prefix, _Prefix]
) -> int:
    """BECPUEvict's release at bin ``i`` with the replayed limit; 0 when it would not fire."""
    try:
        lower, upper = cpuevict.satisfaction_bounds(config)
    except ValueError:
        return 0
    threshold = config.get("cpuEvictBEUsageThresholdPercent")
    requests, limit, used = series
    releases = []
    for first in (i - window + 1, i):  # the window's average, then the current value
        request, count = requests.avg(first, i)
        lim, _ = limit.avg(first, i)
        use, _ = used.avg(first, i)
        if first < i and not cpuevict.enough_samples(count, window, 1.0):
            return 0
        if isnan(request) or isnan(lim) or isnan(use):
            return 0
        if not cpuevict.usage_high_enough(use * 1000, lim * 1000, threshold):
            return 0
        releases.append(cpuevict.satisfaction_release(request * 1000, lim * 1000, lower, upper))
    return min(releases)


def replay(inputs: Inputs, node: NodeFacts, scenario: Scenario) -> Replay:
    history = inputs.history
    n = len(history)
    out = Replay(scenario)
    for i in range(SYNC_SECONDS - 1, n, SYNC_SECONDS):
        amounts = _manager_step(inputs, i, node, scenario)
        out.step_times.append(history.start + i)
        values = amounts or (0, 0, 0, 0)
        out.batch_cpu.append(values[0])
        out.batch_memory.append(values[1])
        out.mid_cpu.append(values[2])
        out.mid_memory.append(values[3])
    threshold = scenario.slo.threshold
    suppress = _Suppress(node, threshold)
    allowed = out.be_allowed
    be_used = array("d", [math.nan]) * n  # BE usage capped at what the replay allows
    for i in range(n):
        allowed.append(suppress.step(history.node_cpu[i], history.pods_cpu[i],
                                     history.be_cpu_usage[i]))  # fmt: skip
        used = history.be_cpu_usage[i]
        out.suppressed.append(1 if not isnan(used) and used > allowed[i] + 1e-9 else 0)
        be_used[i] = min(used, allowed[i]) if not isnan(used) else math.nan
    if threshold.get("enable"):
        _evictions(inputs, node, threshold, out, be_used)
    return out


def _evictions(
    inputs: Inputs,
    node: NodeFacts,
    config: Mapping[str, Any],
    out: Replay,
    be_used: array[float],
) -> None:
    history = inputs.history
    window = max(1, int(config.get("cpuEvictTimeWindowSeconds") or 0))
    try:
        cpu_thresholds: tuple[int, int] | None = cpuevict.node_thresholds(config)
    except ValueError:
        cpu_thresholds = None
    try:
        memory_thresholds: tuple[int, int] | None = memoryevict.thresholds(config)
    except ValueError:
        memory_thresholds = None
    limit = out.be_allowed
    if config.get("cpuEvictPolicy") == "evictByAllocatable":
        # the limit is the batch-cpu published at the time (milli-cores → cores)
        limit = array("d", [-1.0]) * len(history)
        for step, time in enumerate(out.step_times):
            begin = int(time - history.start)
            batch = {keys.BATCH_CPU: out.batch_cpu[step]}
            value = cpuevict.batch_allocatable_milli(batch) / 1000
            for j in range(begin, min(begin + SYNC_SECONDS, len(history))):
                limit[j] = value
    be_series = (inputs.prefix["be_request"], _Prefix(limit), _Prefix(be_used))
    cpu_rest = memory_rest = -1
    for i in range(len(history)):
        now = history.start + i
        if i >= cpu_rest:
            fired = []
            if _be_cpu_release(config, window, i, be_series) > 0:
                fired.append("BECPUEvict")
            if cpu_thresholds is not None:
                avg, _ = inputs.prefix["node_cpu"].avg(i - window + 1, i)
                if not isnan(avg):
                    _, release = cpuevict.node_usage_release(avg, node.cpu_milli, *cpu_thresholds)
                    if release > 0:
                        fired.append("CPUEvict")
            if fired:
                out.evictions.extend((now, feature) for feature in fired)
                cpu_rest = i + CPU_COOL_DOWN
        used = history.node_memory[i]
        if memory_thresholds is not None and i >= memory_rest and not isnan(used):
            _, release = memoryevict.usage_release(used, node.memory, *memory_thresholds)
            if release > 0:
                out.evictions.append((now, "MemoryEvict"))
                memory_rest = i + MEMORY_COOL_DOWN
