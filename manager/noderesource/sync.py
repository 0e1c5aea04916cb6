"""Whether a computed result is worth an API write (Koordinator's NeedSync checks).

A node is written when this manager has not written it yet (the timestamp lives in memory,
so the first reconcile after a restart always writes), when more than
``updateTimeThresholdSeconds`` passed since its last write, or when a managed resource
appears, disappears, or moves by more than ``resourceDiffThreshold`` of its current value.
Small moves are otherwise held back: koordlet reports every minute and batch amounts jitter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi.errors import ModelError
from koordapi.quantity import milli_value
from manager.colocation import ColocationStrategy
from manager.noderesource.calculator import NodeResourceResult


def need_sync(
    node: Mapping[str, Any],
    result: NodeResourceResult,
    last_write: float | None,
    now: float,
    strategy: ColocationStrategy,
) -> tuple[bool, str]:
    """(write?, why) for ``result`` against ``node`` as last seen; ``last_write`` is when this
    manager last wrote the node (seconds since the epoch), None for never."""
    if last_write is None:
        return True, "not written by this manager since it started"
    age = now - last_write
    limit = strategy.update_time_threshold_seconds
    if age > limit:
        return True, f"{age:.0f}s since the last write, more than {limit}s"
    status = node.get("status") or {}
    threshold = strategy.resource_diff_threshold
    for section in ("allocatable", "capacity"):
        current = status.get(section) or {}
        for name, outcome in result.resources.items():
            old = current.get(name)
            if (old is None) != (outcome.value is None):
                change = "added" if old is None else "removed"
                return True, f"{name} {change} in status.{section}"
            if old is None or outcome.value is None:
                continue
            try:
                old_milli = milli_value(old)
            except ModelError:
                return True, f"status.{section}[{name}] {old!r} is not a quantity"
            # compared in thousandths, as Koordinator's IsQuantityDiff
            if abs(outcome.value * 1000 - old_milli) > old_milli * threshold:
                return True, (
                    f"{name} {old} → {outcome.quantity} in status.{section} differs by more"
                    f" than {threshold:g} of the current value"
                )
    return False, (
        f"every managed resource within {threshold:g} of its current value and only"
        f" {age:.0f}s since the last write (limit {limit}s)"
    )
