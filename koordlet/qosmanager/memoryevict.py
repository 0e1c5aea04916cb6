"""MemoryEvict: when node memory use crosses the NodeSLO threshold, evict until it is back
under the lower mark.

Node usage is MemTotal - MemAvailable (the node collector's ``node_memory_usage``), as a
whole percent of capacity. At or above ``memoryEvictThresholdPercent`` (70) the release is
capacity x (usage% - lower%), with lower = ``memoryEvictLowerPercent`` or threshold - 2.

* BEMemoryEvict: pods labelled BE (as Koordinator: not an unlabelled Kubernetes BestEffort
  pod) that their eviction policy allows, priority ascending (``PodRequest.priority``), then
  memory used descending, then name descending.
* MemoryEvict: pods that opted in and have a usage sample (see ``eviction.eviction_allowed``),
  in the generic order.
* MemoryAllocatableEvict: by the batch-memory (mid-memory) requests against the node's
  allocatable, ``memoryAllocatableEvictThresholdPercent`` and ``...LowerPercent``
  (``eviction.allocatable_tasks``); independent of node usage.

They run in that order (Koordinator's); a pod evicted for one counts for the next.

All need ``resourceUsedThresholdWithBE.enable``. After an eviction the strategy rests for
``--memory-evict-cool-time-seconds`` (4 s) so the victims' memory can drain before the next
measurement is trusted. Stale node memory usage means no eviction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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

NAME = "MemoryEvict"
FEATURES = ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict")  # in the order they run
RELEASE_BUFFER_PERCENT = 2


def thresholds(config: Mapping[str, Any]) -> tuple[int, int]:
    """(threshold%, lower%); raises ValueError when they make no sense."""
    threshold = config.get("memoryEvictThresholdPercent")
    if threshold is None:
        raise ValueError("memoryEvictThresholdPercent is not set")
    lower = config.get("memoryEvictLowerPercent")
    lower = threshold - RELEASE_BUFFER_PERCENT if lower is None else lower
    if lower >= threshold:
        raise ValueError(f"memoryEvictLowerPercent {lower} must be under the threshold {threshold}")
    return int(threshold), int(lower)


def usage_release(used: float, capacity: int, threshold: int, lower: int) -> tuple[int, int]:
    """(node memory usage as a whole percent of capacity, bytes to release): the release is
    0 under the threshold, else capacity x (usage% - lower%)."""
    percent = int(used) * 100 // capacity
    if percent < threshold:
        return percent, 0
    return percent, capacity * (percent - lower) // 100


class MemoryEvict(EvictStrategy):
    name = NAME
    features = FEATURES

    def __init__(self, evictor: Evictor, *, interval: float = 1.0, cool_down: float = 4.0) -> None:
        super().__init__(evictor, interval=interval, cool_down=cool_down)

    def tasks(self, ctx: Context, config: Mapping[str, Any]) -> list[EvictTask] | str:
        tasks: list[EvictTask] = []
        notes: list[str] = []
        for feature in FEATURES:
            if not ctx.rules.gates.enabled(feature):
                continue
            built: list[EvictTask] | EvictTask | str
            if feature == "MemoryAllocatableEvict":
                measured = [c for c in self._found(ctx) if c.measured]
                built = allocatable_tasks(ctx, feature, config, measured, kind=1, prefix="memory")
            else:
                built = self._usage_task(ctx, feature, config)
            if isinstance(built, str):
                notes.append(f"{feature}: {built}")
            else:
                tasks.extend(built if isinstance(built, list) else [built])
        return tasks or "; ".join(notes) or "no feature enabled"

    def _usage_task(self, ctx: Context, feature: str, config: Mapping[str, Any]) -> EvictTask | str:
        try:
            threshold, lower = thresholds(config)
        except ValueError as err:
            return f"no action: {err}"
        used = ctx.last("node_memory_usage")
        capacity = ctx.node.memory
        if used is None or capacity <= 0:
            return "no action: node memory usage is stale or missing"
        percent, release = usage_release(used, capacity, threshold, lower)
        if percent < threshold:
            return f"memory {percent}% < threshold {threshold}%"
        reason = (
            f"node memory {percent}% >= threshold {threshold}%: release {percent}% - {lower}%"
            f" of {capacity / (1 << 30):.1f} GiB = {release / (1 << 20):.0f} MiB"
        )
        inputs: dict[str, float | str] = {
            "node_memory_used": used,
            "capacity": capacity,
            "usage_percent": percent,
            "threshold_percent": threshold,
            "lower_percent": lower,
            "release": release,
        }
        candidates = self._candidates(ctx, feature, config)
        if not candidates:
            return f"{reason}, but no pod may be evicted"
        return EvictTask(feature, release, candidates, lambda c: c.memory_used, "memory-used",
                         f"{feature}: {reason}", inputs)  # fmt: skip

    def _found(self, ctx: Context) -> list[Candidate]:
        found = []
        for known in ctx.pods:
            if known.containers:
                used = ctx.last("pod_memory_usage", pod_labels(known))
                measured = used is not None
                found.append(Candidate(known, memory_used=int(used or 0), measured=measured))
        return found

    def _candidates(self, ctx: Context, feature: str, config: Mapping[str, Any]) -> list[Candidate]:
        found = self._found(ctx)
        if feature == "BEMemoryEvict":
            be = [c for c in found if is_labelled_be(c.known) and policy_allows(c.known, feature)]
            # priority ascending, memory descending, name descending (stable sorts: the last
            # key wins)
            be.sort(key=lambda c: c.name, reverse=True)
            be.sort(key=lambda c: c.memory_used, reverse=True)
            be.sort(key=lambda c: c.known.request.priority)
            return be
        limit = config.get("evictEnabledPriorityThreshold")
        if limit is None:
            return []
        allowed = [
            c for c in found if c.measured and eviction_allowed(c.known, feature, int(limit))
        ]
        return generic_order(allowed, lambda c: c.memory_used)
