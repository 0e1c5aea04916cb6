"""NodeResource decisions as pure functions over Kubernetes JSON dicts: which batch and mid
extended resources a node publishes (calculator), whether that is worth a write (sync), and
the patch that writes it (patch). No Kubernetes I/O happens here.

    strategy = strategy_for_node(config, node)
    result = calculate(node, node_metric, pods, strategy, now)
    write, why = need_sync(node, result, last_write, now, strategy)
    if write:
        body = status_patch(node, result)
"""

from __future__ import annotations

from manager.noderesource.calculator import (
    MANAGED_RESOURCES,
    NodeResourceResult,
    ResourceOutcome,
    calculate,
)
from manager.noderesource.patch import status_patch
from manager.noderesource.sync import need_sync

__all__ = [
    "MANAGED_RESOURCES",
    "NodeResourceResult",
    "ResourceOutcome",
    "calculate",
    "need_sync",
    "status_patch",
]
