"""What the formulas need from the Node object: capacity and reservations, as (milli-cores,
bytes) pairs. A node without a usable cpu/memory capacity raises NodeError (every key is then
removed); an unreadable reservation annotation is ignored with a note, as Koordinator does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordapi import keys
from koordapi.annotation import parse_node_reservation
from koordapi.errors import ModelError
from koordapi.quantity import Pair, milli_value, value
from manager.noderesource.amounts import ZERO


class NodeError(ValueError):
    """The Node lacks what every formula needs (its cpu/memory capacity)."""


@dataclass(frozen=True)
class NodeView:
    name: str
    capacity: Pair
    reserved: Pair  # max(kubelet reserved, reservation annotation), per resource
    kubelet_reserved: Pair  # capacity - allocatable, floored at 0
    annotation_reserved: Pair  # node.koordinator.sh/reservation
    annotations: Mapping[str, str]


def _pair(resources: Mapping[str, Any], where: str) -> Pair:
    try:
        return milli_value(resources["cpu"]), value(resources["memory"])
    except KeyError as err:
        raise NodeError(f"{where}.{err.args[0]} is missing") from None
    except ModelError as err:
        raise NodeError(f"{where}: {err}") from None


def read_node(node: Mapping[str, Any], notes: list[str]) -> NodeView:
    """Capacity and reservations of ``node``; raises NodeError without a usable capacity."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    annotations = metadata.get("annotations") or {}
    capacity = _pair(status.get("capacity") or {}, "status.capacity")
    # a resource missing from allocatable counts as 0 allocatable, all of it reserved, as in
    # Koordinator: the conservative reading of a node that reports no allocatable
    allocatable_map = {"cpu": 0, "memory": 0, **(status.get("allocatable") or {})}
    allocatable = _pair(allocatable_map, "status.allocatable")
    kubelet = (max(capacity[0] - allocatable[0], 0), max(capacity[1] - allocatable[1], 0))
    annotated = _annotation_reserved(annotations, notes)
    reserved = (max(kubelet[0], annotated[0]), max(kubelet[1], annotated[1]))
    return NodeView(metadata.get("name", ""), capacity, reserved, kubelet, annotated, annotations)


def _annotation_reserved(annotations: Mapping[str, str], notes: list[str]) -> Pair:
    text = annotations.get(keys.ANNOTATION_NODE_RESERVATION)
    if not text:
        return ZERO
    try:
        reservation = parse_node_reservation(text)
    except ModelError as err:
        notes.append(f"ignored {err}")
        return ZERO
    resources = reservation.resources
    memory = value(resources["memory"]) if "memory" in resources else 0
    return reservation.cpu_milli, memory
