"""The node-resource explanation: how koord-manager computed a Node's batch and mid resources.

koord-manager's NodeResource controller writes it on the Node, as JSON in the annotation
``ANNOTATION_NODE_RESOURCE_EXPLANATION`` (``updateTime``, ``writtenBecause``, ``reason``, one
line per managed resource under ``resources``, ``notes``); ``koordctl explain node`` renders it
next to what the Node holds now (``render_node_explanation``) and ``koordctl status`` shows it
in the chain, so a changed number is traceable to its inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from koordapi import keys

# Ours (not Koordinator's): how each managed resource on this node was last computed.
ANNOTATION_NODE_RESOURCE_EXPLANATION = "koordinator-py.io/node-resource-explanation"
MANAGED_RESOURCES = (keys.BATCH_CPU, keys.BATCH_MEMORY, keys.MID_CPU, keys.MID_MEMORY)
"""The extended resources the NodeResource controller publishes and explains, in its order."""


def render_node_explanation(node: Mapping[str, Any]) -> str:
    meta = node.get("metadata") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    lines = [f"node {meta.get('name')}"]
    lines += [f"  {name}: {allocatable.get(name, '-')}" for name in MANAGED_RESOURCES]
    raw = (meta.get("annotations") or {}).get(ANNOTATION_NODE_RESOURCE_EXPLANATION)
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
