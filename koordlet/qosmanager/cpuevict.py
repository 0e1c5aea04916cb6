"""CPUEvict: evict when best-effort pods are starved of CPU for long, or the node is too busy.

* BECPUEvict (satisfaction): over the window (``cpuEvictTimeWindowSeconds``, at least one
  collect interval) the BE pods' usage, request and real limit are averaged from
  ``node_be{be_resource=cpu}``; the average counts only with samples covering a third of the
  window, in whole seconds as Koordinator counts (3 samples at 1 s cover a 10 s window). When
  BE usage is at least ``cpuEvictBEUsageThresholdPercent`` (90) of the limit and the
  satisfaction limit/request is at most ``cpuEvictBESatisfactionLowerPercent``, the release is
  request x (upper% - satisfaction), taking the smaller of the windowed and the current
  figure. With ``cpuEvictPolicy: evictByAllocatable`` the limit is the node's allocatable
  batch-cpu (none published: no eviction; 0: 1m). Victims: pods labelled BE (not an
  unlabelled Kubernetes BestEffort pod, which holds no batch-cpu) that their eviction policy
  allows, by priority ascending (``PodRequest.priority``: spec.priority in cluster mode, the
  class default standalone), then usage/request descending; each gives back its batch-cpu
  request.
* CPUAllocatableEvict: the batch-cpu (mid-cpu) requests of pods at or under
  ``allocatableEvictPriorityThreshold`` above ``cpuAllocatableEvictThresholdPercent`` of the
  node's allocatable release down to ``cpuAllocatableEvictLowerPercent``
  (``eviction.allocatable_tasks``), from pods that opted in, in the generic order then
  request descending; each gives back its request.
* CPUEvict (node usage): average node CPU at or above ``cpuEvictThresholdPercent`` releases
  capacity x (usage% - lower%), lower = ``cpuEvictLowerPercent`` or threshold - 2, from pods
  that opted in and have a usage sample (generic order); each gives back its CPU usage.

BECPUEvict runs first, then CPUAllocatableEvict, then CPUEvict (Koordinator's order); a pod
evicted for one counts for the next.

All need ``resourceUsedThresholdWithBE.enable``; after an eviction the strategy rests for
``--cpu-evict-cool-time-seconds`` (20 s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from koordapi import keys
from koordapi.errors import ModelError
from koordlet.qosmanager.eviction import (
    Candidate,
    Evictor,
    EvictStrategy,
    EvictTask,
    allocatable_tasks,
    eviction_allowed,
    generic_order,
    policy_allows,
)
from koordlet.qosmanager.framework import Context, is_labelled_be, pod_labels
from runtimehooks.hooks.batchresource import extended_resources

NAME = "CPUEvict"
FEATURES = ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict")  # in the order they run
BE_USAGE_THRESHOLD_PERCENT = 90
SATISFACTION_LOWER_MAX = 60
SATISFACTION_UPPER_MAX = 100
RELEASE_BUFFER_PERCENT = 2
MIN_ALLOCATABLE_BATCH_MILLI = 1


def batch_cpu_request(candidate: Candidate) -> int:
    return candidate.cpu_request_milli


def satisfaction_release(request: float, limit: float, lower: int, upper: int) -> int:
    """Milli-cores to release so that limit/request rises back to ``upper``%; 0 if none."""
    if request <= 0:
        return 0
    satisfaction = limit / request
    if satisfaction > lower / 100:
        return 0
    gap = upper / 100 - satisfaction
    return int(request * gap) if gap > 0 else 0


def batch_allocatable_milli(allocatable: Mapping[str, int]) -> float:
    """The node's batch-cpu allocatable as evictByAllocatable takes it: -1 when absent (so
    nothing is evicted), 1 when zero (the manager publishes 0 while LS usage is high, and the
    satisfaction must still be judged), else the value."""
    value = allocatable.get(keys.BATCH_CPU)
    if value is None or value < 0:
        return -1.0
    return float(value) if value > 0 else float(MIN_ALLOCATABLE_BATCH_MILLI)


def enough_samples(count: int, window: float, collect_interval: float) -> bool:
    """Whether ``count`` samples cover a third of the window, in Koordinator's whole seconds
    (3 samples at 1 s satisfy a 10 s window: 10 // 3 = 3)."""
    return count * int(collect_interval) >= int(window) // 3


def usage_high_enough(usage: float, limit: float, threshold: int | None) -> bool:
    if limit <= 0:  # no limit known (no batch-cpu allocatable): nothing to judge by
        return False
    if limit < 1000:  # under one core everything looks saturated; do not trust the ratio
        return True
    return usage / limit >= (BE_USAGE_THRESHOLD_PERCENT if threshold is None else threshold) / 100


def satisfaction_bounds(config: Mapping[str, Any]) -> tuple[int, int]:
    """BECPUEvict's (lower%, upper%) satisfaction; raises ValueError when they are unset or
    outside (0,60] and (0,100), or upper is below lower."""
    lower = config.get("cpuEvictBESatisfactionLowerPercent")
    upper = config.get("cpuEvictBESatisfactionUpperPercent")
    if lower is None or upper is None:
        raise ValueError("cpuEvictBESatisfactionLowerPercent and UpperPercent must be set")
    if not (0 < lower <= SATISFACTION_LOWER_MAX and 0 < upper < SATISFACTION_UPPER_MAX):
        raise ValueError(f"satisfaction bounds {lower}%/{upper}% are outside (0,60] and (0,100)")
    if upper < lower:
        raise ValueError(f"satisfaction upper {upper}% is below lower {lower}%")
    return lower, upper


def node_thresholds(config: Mapping[str, Any]) -> tuple[int, int]:
    """CPUEvict's (threshold%, lower%); raises ValueError when they are unset or make no sense
    (lower defaults to threshold - 2)."""
    threshold = config.get("cpuEvictThresholdPercent")
    if threshold is None or config.get("evictEnabledPriorityThreshold") is None:
        raise ValueError("cpuEvictThresholdPercent and evictEnabledPriorityThreshold must be set")
    lower = config.get("cpuEvictLowerPercent")
    lower = threshold - RELEASE_BUFFER_PERCENT if lower is None else lower
    if lower >= threshold:
        raise ValueError(f"cpuEvictLowerPercent {lower} must be under the threshold {threshold}")
    return int(threshold), int(lower)


def node_usage_release(
    avg_cores: float, capacity_milli: int, threshold: int, lower: int
) -> tuple[int, int]:
    """(window-average node CPU as a whole percent of capacity, milli-cores to release): the
    release is 0 under the threshold, else capacity x (usage% - lower%)."""
    percent = int(avg_cores * 1000) * 100 // capacity_milli
    if percent < threshold:
        return percent, 0
    return percent, capacity_milli * (percent - lower) // 100


class CPUEvict(EvictStrategy):
    name = NAME
    features = FEATURES

    def __init__(
        self,
        evictor: Evictor,
        *,
        interval: float = 1.0,
        cool_down: float = 20.0,
        collect_interval: float = 1.0,
    ) -> None:
        super().__init__(evictor, interval=interval, cool_down=cool_down)
        self.collect_interval = collect_interval

    def tasks(self, ctx: Context, config: Mapping[str, Any]) -> list[EvictTask] | str:
        # whole seconds, as Koordinator's int64 windowSeconds
        window = max(int(self.collect_interval), int(config.get("cpuEvictTimeWindowSeconds") or 0))
        tasks: list[EvictTask] = []
        notes: list[str] = []
        builds = {
            "BECPUEvict": self._be_task,
            "CPUAllocatableEvict": self._allocatable_tasks,
            "CPUEvict": self._node_task,
        }
        for feature in FEATURES:
            if ctx.rules.gates.enabled(feature):
                built = builds[feature](ctx, config, window)
                if isinstance(built, str):
                    notes.append(f"{feature}: {built}")
                else:
                    tasks.extend(built if isinstance(built, list) else [built])
        return tasks or "; ".join(notes) or "no feature enabled"

    def _allocatable_tasks(
        self, ctx: Context, config: Mapping[str, Any], window: float
    ) -> list[EvictTask] | str:
        measured = [c for c in self._candidates(ctx) if c.measured]
        return allocatable_tasks(ctx, "CPUAllocatableEvict", config, measured, kind=0,
                                 prefix="cpu")  # fmt: skip

    def _candidates(self, ctx: Context) -> list[Candidate]:
        found = []
        for known in ctx.pods:
            if not known.containers:
                continue
            used = ctx.last("pod_cpu_usage", pod_labels(known))
            request = 0
            try:
                spec = extended_resources(known.request) or {}
            except ModelError:  # one pod's bad annotation must not stop eviction for all
                spec = {}
            for resources in spec.values():
                value = resources.requests.get(keys.BATCH_CPU)
                request += max(0, math.ceil(value)) if value is not None else 0
            milli = int((used or 0) * 1000)
            found.append(Candidate(known, cpu_used_milli=milli, cpu_request_milli=request,
                                   measured=used is not None))  # fmt: skip
        return found

    def _be_window(self, ctx: Context, window: float) -> tuple[dict[str, float], bool]:
        """Averages and current values of BE usage/request/real-limit; valid flag."""
        values: dict[str, float] = {}
        valid = True
        for allocation in ("usage", "request", "real-limit"):
            labels = {"be_resource": "cpu", "be_allocation": allocation}
            agg = ctx.window("node_be", window, labels)
            if agg is None or not enough_samples(agg.count, window, self.collect_interval):
                valid = False
                continue
            values[allocation] = agg.avg
            values[f"current-{allocation}"] = agg.last
        return values, valid

    def _be_task(self, ctx: Context, config: Mapping[str, Any], window: float) -> EvictTask | str:
        try:
            lower, upper = satisfaction_bounds(config)
        except ValueError as err:
            return str(err)
        values, valid = self._be_window(ctx, window)
        if not valid:
            return f"not enough BE CPU samples in the last {window:g}s"
        usage_threshold = config.get("cpuEvictBEUsageThresholdPercent")
        by_allocatable = config.get("cpuEvictPolicy") == "evictByAllocatable"
        releases = []
        for prefix in ("", "current-"):
            limit = values[f"{prefix}real-limit"]
            if by_allocatable:
                limit = batch_allocatable_milli(ctx.node.allocatable)
                if limit <= 0:
                    return f"evictByAllocatable: the node has no {keys.BATCH_CPU} allocatable"
            usage, request = values[f"{prefix}usage"], values[f"{prefix}request"]
            if not usage_high_enough(usage, limit, usage_threshold):
                return f"BE usage {usage:.0f}m is under the threshold of limit {limit:.0f}m"
            releases.append(satisfaction_release(request, limit, lower, upper))
        release = min(releases)
        if release <= 0:
            return "BE satisfaction is above the lower bound"
        request, limit = values["request"], values["real-limit"]
        reason = (
            f"BECPUEvict: BE satisfaction {limit:.0f}m/{request:.0f}m <= {lower}%:"
            f" release request x ({upper}% - satisfaction) = {release}m"
        )
        be = [
            c
            for c in self._candidates(ctx)
            if is_labelled_be(c.known) and policy_allows(c.known, "BECPUEvict")
        ]
        # priority ascending, then usage/request descending (stable sorts: the last key wins)
        be.sort(key=lambda c: c.cpu_used_milli / c.cpu_request_milli if c.cpu_request_milli else 0,
                reverse=True)  # fmt: skip
        be.sort(key=lambda c: c.known.request.priority)
        inputs: dict[str, float | str] = {k: round(v, 1) for k, v in values.items()}
        return EvictTask("BECPUEvict", release, be, batch_cpu_request, "batch-cpu-request",
                         reason, inputs)  # fmt: skip

    def _node_task(self, ctx: Context, config: Mapping[str, Any], window: float) -> EvictTask | str:
        try:
            threshold, lower = node_thresholds(config)
        except ValueError as err:
            return str(err)
        limit = int(config["evictEnabledPriorityThreshold"])  # node_thresholds checked it
        agg = ctx.window("node_cpu_usage", window)
        capacity = ctx.node.cpu_milli
        if agg is None or capacity <= 0:
            return "node CPU usage is stale or missing"
        percent, release = node_usage_release(agg.avg, capacity, threshold, lower)
        if percent < threshold:
            return f"node CPU {percent}% < threshold {threshold}%"
        reason = (
            f"CPUEvict: node CPU {percent}% >= threshold {threshold}%:"
            f" release {percent}% - {lower}% of {capacity / 1000:g} cores = {release}m"
        )
        allowed = [
            c
            for c in self._candidates(ctx)
            if c.measured and eviction_allowed(c.known, "CPUEvict", limit)
        ]
        ordered = generic_order(allowed, lambda c: c.cpu_used_milli)
        return EvictTask("CPUEvict", release, ordered, lambda c: c.cpu_used_milli, "cpu-used",
                         reason, {"usage_percent": percent, "release_milli": release})  # fmt: skip
