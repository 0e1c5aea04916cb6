"""Whether a gang's members fit the cluster together: the room the gang controller plans in.

The stock kube-scheduler has no Permit for extenders, so a gang's members are held back with a
scheduling gate and let go together only when they would all find a node (koord-manager's gang
controller). This module is that check: a first-fit packing of the members, in creation order,
onto each node's free room (allocatable less the requests of the pods bound to it and of the
pods already let go and not yet bound), with the filters a member cannot pass by waiting:
``spec.nodeName``, ``nodeSelector``, required node affinity, taints and ``unschedulable``.

It is deliberately narrower than kube-scheduler's filters (no inter-pod affinity, topology
spread, volumes or ports, no extender filters): a member those refuse is not foreseen here.
Room is counted as kube-scheduler's NodeResourcesFit counts it (PodRequests: containers, init
containers, overhead; one of the node's ``pods``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.quota.model import Resources, resources
from koordapi.quota.usage import pod_request

Object = Mapping[str, Any]
PODS = "pods"
_FINISHED = ("Succeeded", "Failed")
_BLOCKING = ("NoSchedule", "NoExecute")


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def request_of(pod: Object, cache: dict[tuple[str, str], Resources] | None = None) -> Resources:
    """The pod's requests and the one ``pods`` slot it takes; ModelError for a malformed
    amount. ``cache``: requests kept by (uid, resourceVersion), across passes: a pod's requests
    change only with a new version (the caller drops what it no longer needs)."""
    meta = _map(pod.get("metadata"))
    key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
    if cache is not None and all(key) and key in cache:
        return cache[key]
    found = {**pod_request(pod), PODS: 1}
    if cache is not None and all(key):
        cache[key] = found
    return found


@dataclass
class NodeRoom:
    """One node's free room and what a pod must match to use it."""

    name: str
    free: dict[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()
    unschedulable: bool = False

    def take(self, request: Mapping[str, int]) -> None:
        for name, amount in request.items():
            self.free[name] = self.free.get(name, 0) - amount

    def short_of(self, request: Mapping[str, int]) -> list[str]:
        """The resources the node lacks for ``request`` (kube-scheduler's "Insufficient X")."""
        return sorted(n for n, amount in request.items() if amount > self.free.get(n, 0))


def node_rooms(
    nodes: Iterable[Object],
    pods: Iterable[Object],
    cache: dict[tuple[str, str], Resources] | None = None,
) -> dict[str, NodeRoom]:
    """Every node's room after the pods bound to it that have not finished (a node or a pod
    with a malformed amount: the node is left out, the pod counted as nothing); ``cache`` as
    ``request_of``'s."""
    rooms: dict[str, NodeRoom] = {}
    for node in nodes:
        meta, spec = _map(node.get("metadata")), _map(node.get("spec"))
        name = str(meta.get("name") or "")
        try:
            free = resources(_map(_map(node.get("status")).get("allocatable")))
        except ModelError:
            continue
        rooms[name] = NodeRoom(
            name=name,
            free=dict(free),
            labels={str(k): str(v) for k, v in _map(meta.get("labels")).items()},
            taints=tuple(t for t in _list(spec.get("taints")) if isinstance(t, Mapping)),
            unschedulable=bool(spec.get("unschedulable")),
        )
    for pod in pods:
        bound = str(_map(pod.get("spec")).get("nodeName") or "")
        if bound in rooms and _map(pod.get("status")).get("phase") not in _FINISHED:
            try:
                rooms[bound].take(request_of(pod, cache))
            except ModelError:
                continue
    return rooms


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """v1helper.TolerationsTolerateTaint for one toleration (an empty effect matches all)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    if not key:
        return False  # an empty key needs the Exists operator
    return str(toleration.get("value") or "") == str(taint.get("value") or "")


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A node selector requirement; Gt and Lt and unknown operators never match (the
    check stays on the side of "does not fit")."""
    key, operator = str(expression.get("key") or ""), expression.get("operator")
    values = [str(v) for v in _list(expression.get("values"))]
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


@dataclass(frozen=True)
class Needs:
    """What a pod asks of a node besides room, read once per pod."""

    node_name: str
    selector: tuple[tuple[str, str], ...]
    terms: tuple[tuple[Mapping[str, Any], ...], ...] | None  # None: no required affinity
    tolerations: tuple[Mapping[str, Any], ...]

    @classmethod
    def of(cls, pod: Object) -> Needs:
        spec = _map(pod.get("spec"))
        required = _map(
            _map(_map(spec.get("affinity")).get("nodeAffinity")).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
        )
        terms = None
        if required:
            # matchFields (by metadata.name only) is not read: such a term matches no node
            terms = tuple(
                tuple(e for e in _list(t.get("matchExpressions")) if isinstance(e, Mapping))
                if not _list(t.get("matchFields"))
                else ({"operator": "matchFields"},)
                for t in _list(required.get("nodeSelectorTerms"))
                if isinstance(t, Mapping)
            )
        return cls(
            node_name=str(spec.get("nodeName") or ""),
            selector=tuple((str(k), str(v)) for k, v in _map(spec.get("nodeSelector")).items()),
            terms=terms,
            tolerations=tuple(t for t in _list(spec.get("tolerations")) if isinstance(t, Mapping)),
        )

    def shape(self, request: Mapping[str, int]) -> str:
        """Equal for two pods that fit the same nodes: a member that found no node tells that
        every later member of the same shape finds none either (the room only shrinks)."""
        return repr((self, sorted(request.items())))


def unfit_reason(needs: Needs, room: NodeRoom, request: Mapping[str, int]) -> str:
    """Why a pod with ``needs`` and ``request`` cannot go to ``room`` now, in kube-scheduler's
    words; empty when it can."""
    if needs.node_name and needs.node_name != room.name:
        return "node(s) didn't match the requested node name"
    if room.unschedulable:
        return "node(s) were unschedulable"
    if any(room.labels.get(k) != v for k, v in needs.selector):
        return "node(s) didn't match Pod's node affinity/selector"
    if needs.terms is not None and not any(
        all(_expression_matches(e, room.labels) for e in term) for term in needs.terms
    ):  # terms are ORed, a term's expressions ANDed
        return "node(s) didn't match Pod's node affinity/selector"
    for taint in room.taints:
        if taint.get("effect") in _BLOCKING and not any(
            tolerates(t, taint) for t in needs.tolerations
        ):
            return "node(s) had untolerated taint"
    return ", ".join(f"Insufficient {name}" for name in room.short_of(request))


@dataclass(frozen=True)
class Placement:
    """Where each placed pod goes (by ``namespace/name``) and, for each pod left out, the
    fit error kube-scheduler would print ("0/2 nodes are available: ...")."""

    nodes: Mapping[str, str]
    unplaced: Mapping[str, str]


def _fit_error(reasons: Sequence[str], nodes: int) -> str:
    """kube-scheduler's FitError text: each reason with the count of nodes that gave it."""
    counts: dict[str, int] = {}
    for text in reasons:
        for part in text.split(", "):
            counts[part] = counts.get(part, 0) + 1
    parts = [f"{count} {reason}" for reason, count in sorted(counts.items())]
    return f"0/{nodes} nodes are available: {', '.join(parts)}."


def place(pods: Sequence[tuple[str, Object]], rooms: Mapping[str, NodeRoom]) -> Placement:
    """First fit of ``pods`` (key, pod; in the order given) onto ``rooms``, taking the room
    each placed pod needs (the rooms are changed: pass copies to try without keeping)."""
    nodes: dict[str, str] = {}
    unplaced: dict[str, str] = {}
    failed: dict[str, str] = {}  # shape -> fit error
    ordered = sorted(rooms.values(), key=lambda room: room.name)
    for key, pod in pods:
        try:
            request = request_of(pod)
        except ModelError as err:
            unplaced[key] = f"malformed resources: {err}"
            continue
        needs = Needs.of(pod)
        shape = needs.shape(request)
        if shape in failed:
            unplaced[key] = failed[shape]
            continue
        reasons = []
        for room in ordered:
            reason = unfit_reason(needs, room, request)
            if not reason:
                room.take(request)
                nodes[key] = room.name
                break
            reasons.append(reason)
        else:
            unplaced[key] = failed[shape] = _fit_error(reasons, len(ordered))
    return Placement(nodes=nodes, unplaced=unplaced)


def copy_rooms(rooms: Mapping[str, NodeRoom]) -> dict[str, NodeRoom]:
    return {
        name: NodeRoom(r.name, dict(r.free), r.labels, r.taints, r.unschedulable)
        for name, r in rooms.items()
    }
