"""The scheduling gate that holds a gang's members until the whole gang fits (ours).

Koordinator holds each member at Permit, inside its scheduler. The stock kube-scheduler has
no Permit for extenders, so koord-manager's pod mutating webhook gives every member of a gang
this gate on CREATE (kube-scheduler does not try a gated pod), and its gang controller removes
it from the members of a group together (``release_patch``), when they fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi.gang.spec import gang_id

GATE = "scheduling.koordinator.sh/gang"


def gates_of(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    gates = (pod.get("spec") or {}).get("schedulingGates")
    return [g for g in gates if isinstance(g, dict)] if isinstance(gates, list) else []


def gated(pod: Mapping[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in gates_of(pod))


def add_gate(pod: dict[str, Any]) -> bool:
    """Give a gang member that is not bound yet the gang's gate (in place); False for a pod in
    no gang, bound, or already gated."""
    spec = pod.get("spec")
    if not isinstance(spec, dict) or spec.get("nodeName") or not gang_id(pod) or gated(pod):
        return False
    spec["schedulingGates"] = [*gates_of(pod), {"name": GATE}]
    return True


def release_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch removing the gate, applied only to the gates seen (``test``): a gate
    another controller added or removed meanwhile makes it fail, and the next pass retries."""
    gates = gates_of(pod)
    return [
        {"op": "test", "path": "/spec/schedulingGates", "value": gates},
        {
            "op": "replace",
            "path": "/spec/schedulingGates",
            "value": [g for g in gates if g.get("name") != GATE],
        },
    ]
