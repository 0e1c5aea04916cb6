"""Smoothing of the published batch resources (colocation-config
``batchResourceSmoothingWindowSeconds``, ours; off by default).

Batch capacity follows the NodeMetric, so it rises and falls with every report, and each rise
invites the scheduler to place batch pods that the next report takes back (Koordinator issue
#1906). With a window of W seconds the manager publishes, per batch resource, the lowest value
it computed for the node in the last W seconds: a fall is published at once (capacity that is
gone must not be offered) and a rise only once it has held for the whole window. A removed key
(degraded, disabled) is never smoothed, and removal empties the node's history.

The history lives in the controller's memory: a restarted manager starts afresh, publishing what
it computes until its first window has passed. The explanation says what was smoothed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace

from manager.noderesource.calculator import (
    BATCH_RESOURCES,
    NodeResourceResult,
    ResourceOutcome,
)


class BatchSmoother:
    """Per node and batch resource, the values computed in the last window, oldest first."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[str, deque[tuple[float, int]]]] = {}

    def forget(self, node: str) -> None:
        self._seen.pop(node, None)

    def values(self, node: str, resource: str) -> list[int]:
        """The values of ``resource`` computed for ``node`` in its window, oldest first."""
        return [value for _, value in self._seen.get(node, {}).get(resource, ())]

    def smooth(
        self, node: str, result: NodeResourceResult, window: float, now: float
    ) -> NodeResourceResult:
        """``result`` with each batch resource lowered to its window's minimum."""
        if window <= 0:
            self.forget(node)
            return result
        history = self._seen.setdefault(node, {})
        resources: dict[str, ResourceOutcome] = dict(result.resources)
        for name in BATCH_RESOURCES:
            outcome = resources.get(name)
            if outcome is None or outcome.value is None:
                history.pop(name, None)
                continue
            values = history.setdefault(name, deque())
            values.append((now, outcome.value))
            while values and values[0][0] < now - window:
                values.popleft()
            resources[name] = _lowest(outcome, values, window)
        return replace(result, resources=resources)


def _lowest(
    outcome: ResourceOutcome, values: deque[tuple[float, int]], window: float
) -> ResourceOutcome:
    low = min(value for _, value in values)
    if low >= (outcome.value or 0):
        return outcome
    smoothed = replace(outcome, value=low)
    return replace(
        smoothed,
        explanation=(
            f"{outcome.name} {smoothed.quantity} = smoothed: the lowest of {len(values)} values"
            f" computed in the last {window:g}s (batchResourceSmoothingWindowSeconds); now"
            f" {outcome.explanation.removeprefix(outcome.name + ' ')}"
        ),
    )
