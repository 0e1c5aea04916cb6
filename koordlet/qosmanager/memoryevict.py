"""MemoryEvict: when node memory use crosses the NodeSLO threshold, evict until it is back
under the lower mark.

Node usage is MemTotal - MemAvailable (the node collector's ``node_memory_usage``), as a
whole percent of capacity. At or above ``memoryEvictThresholdPercent`` (70) the release is
capacity x (usage% - lower%), with lower = ``memoryEvictLowerPercent`` or threshold - 2.

* BEMemoryEvict: pods labelled BE (as Koordinator: not an unlabelled Kubernetes BestEffort
  pod), spec.priority ascending (when both have one), then memory used
  descending, then name descending.
* MemoryEvict: pods that opted in (see ``eviction.eviction_allowed``), in the generic order.

Both need ``resourceUsedThresholdWithBE.enable``. After an eviction the strategy rests for
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
    eviction_allowed,
    generic_order,
)
from koordlet.qosmanager.framework import Context, is_labelled_be, pod_labels

NAME = "MemoryEvict"
FEATURES = ("BEMemoryEvict", "MemoryEvict")
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


class MemoryEvict(EvictStrategy):
    name = NAME
    features = FEATURES

    def __init__(self, evictor: Evictor, *, interval: float = 1.0, cool_down: float = 4.0) -> None:
        super().__init__(evictor, interval=interval, cool_down=cool_down)

    def tasks(self, ctx: Context, config: Mapping[str, Any]) -> list[EvictTask] | str:
        try:
            threshold, lower = thresholds(config)
        except ValueError as err:
            return f"no action: {err}"
        used = ctx.last("node_memory_usage")
        capacity = ctx.node.memory
        if used is None or capacity <= 0:
            return "no action: node memory usage is stale or missing"
        percent = int(used) * 100 // capacity
        if percent < threshold:
            return f"memory {percent}% < threshold {threshold}%"
        release = capacity * (percent - lower) // 100
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
        tasks = [
            EvictTask(feature, release, self._candidates(ctx, feature, config),
                      lambda c: c.memory_used, "memory-used", f"{feature}: {reason}", inputs)
            for feature in FEATURES
            if ctx.rules.gates.enabled(feature)
        ]  # fmt: skip
        if not any(t.candidates for t in tasks):
            return f"{reason}, but no pod may be evicted"
        return tasks

    def _candidates(self, ctx: Context, feature: str, config: Mapping[str, Any]) -> list[Candidate]:
        found = [
            Candidate(known, memory_used=int(ctx.last("pod_memory_usage", pod_labels(known)) or 0))
            for known in ctx.pods
            if known.containers
        ]
        if feature == "BEMemoryEvict":
            be = [c for c in found if is_labelled_be(c.known)]
            # name descending, then memory descending (stable sorts: the last key wins)
            be.sort(key=lambda c: c.name, reverse=True)
            be.sort(key=lambda c: c.memory_used, reverse=True)
            return be
        limit = config.get("evictEnabledPriorityThreshold")
        if limit is None:
            return []
        allowed = [c for c in found if eviction_allowed(c.known, feature, int(limit))]
        return generic_order(allowed, lambda c: c.memory_used)
