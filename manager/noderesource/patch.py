"""The request body that publishes a result: a JSON merge patch (RFC 7386) for the Node's
``status`` subresource.

The managed resources go into ``status.allocatable`` and ``status.capacity`` with the same
value (Koordinator sets both: an extended resource must appear in capacity to be
allocatable); a removed resource is ``null`` in both, which deletes the key, and is always
sent, so a removal is not lost when the cached node is behind. Annotations ride along in
``metadata.annotations``, only when they change: the Node status strategy resets only
``spec`` on a status write, so they are kept, as Koordinator's ``Status().Update`` relies on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from manager.noderesource.calculator import NodeResourceResult


def status_patch(node: Mapping[str, Any], result: NodeResourceResult) -> dict[str, Any]:
    """The merge patch body for ``PATCH /api/v1/nodes/<name>/status`` (content type
    ``application/merge-patch+json``); ``node`` is the Node as last seen."""
    entries = result.quantities
    patch: dict[str, Any] = {"status": {"allocatable": entries, "capacity": dict(entries)}}
    current = (node.get("metadata") or {}).get("annotations") or {}
    changed = {key: value for key, value in result.annotations.items() if current.get(key) != value}
    if changed:
        patch["metadata"] = {"annotations": changed}
    return patch
