"""The NodeSLO custom resource the manager writes for a node (pure, no I/O).

One cluster-scoped NodeSLO per Node, named after it. Koordinator deletes it when the node
goes; we also make the Node its owner, so the garbage collector removes it if the manager
misses the deletion.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from manager.sloconfig import RenderedNodeSLO

API_VERSION = "slo.koordinator.sh/v1alpha1"
KIND = "NodeSLO"


def node_slo_object(node: Mapping[str, Any], rendered: RenderedNodeSLO) -> dict[str, Any]:
    """The full NodeSLO for ``node`` with ``rendered.spec`` and an empty status.

    A node without ``metadata.uid`` (never one read from the API server) gets no owner
    reference, since the API server rejects a reference without a uid.
    """
    metadata = node.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError("the node has no metadata.name")
    slo_metadata: dict[str, Any] = {"name": name}
    uid = metadata.get("uid")
    if uid:
        # No blockOwnerDeletion/controller: those need extra RBAC (nodes/finalizers) and
        # nothing waits on a NodeSLO; a plain reference is enough for garbage collection.
        slo_metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
        ]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": slo_metadata,
        "spec": copy.deepcopy(rendered.spec),
        "status": {},
    }


def needs_update(existing: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether ``existing`` (None: not there yet) must be written to match ``desired``'s spec."""
    if existing is None:
        return True
    return (existing.get("spec") or {}) != (desired.get("spec") or {})
