"""``koordctl explain node NAME``: the batch and mid resources on a Node and how each was made.

The NodeResource controller stores its explanation in the node's annotation
(manager.controllers.noderesource.ANNOTATION_EXPLANATION); this renders it next to what the
Node holds now, so a changed number is traceable to its inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from manager.controllers.noderesource import ANNOTATION_EXPLANATION
from manager.noderesource.calculator import MANAGED_RESOURCES


def render_node_explanation(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    lines = [f"node {meta.get('name')}"]
    lines += [f"  {name}: {allocatable.get(name, '-')}" for name in MANAGED_RESOURCES]
    raw = (meta.get("annotations") or {}).get(ANNOTATION_EXPLANATION)
    if raw is None:
        lines.append("no explanation: koord-manager has not written this node")
        return "\n".join(lines)
    try:
        record = json.loads(raw)
    except ValueError:
        lines.append(f"unreadable explanation annotation: {raw[:200]}")
        return "\n".join(lines)
    lines.append(f"written {record.get('updateTime')} because {record.get('writtenBecause')}")
    if record.get("reason"):
        lines.append(f"reason: {record['reason']}")
    lines.append("how:")
    lines += [f"  {text}" for text in (record.get("resources") or {}).values()]
    for note in record.get("notes") or []:
        lines.append(f"note: {note}")
    return "\n".join(lines)
