"""Reservations in the extender's verbs: the room they hold, and owners going into them.

kube-scheduler counts only real pods, so a placed Reservation (koordapi.reservation) is held
here: on a node with active reservations, ``filter`` refuses a pod that only fits by taking
their room (``koordapi.reservation.holding.check``), and lets an owner use the remainder of
the reservation it goes into. An owner is kept to the nodes where a reservation of its takes
it whenever one is among the candidates: Koordinator scores such a node with the Reservation
plugin at weight 5000 (its chart's scheduler profile), which no other score can outweigh, and
a single extender's score cannot carry that weight. ``bind`` writes the reservation-allocated
annotation on an owner, naming the reservation it went into; koord-manager counts it in the
Reservation's status from there.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from koordapi.errors import ModelError
from koordapi.gang.fit import node_rooms
from koordapi.gang.spec import pod_key
from koordapi.reservation import holding
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    Reservation,
    allocated_annotation,
    is_reserve_pod,
)

# an owner's candidate without its reservation, while a node with it passes (ours: in
# Koordinator the score decides, see the module doc)
REASON_RESERVED_ELSEWHERE = "node(s) didn't have the pod's reservation, which another node has"

Object = Mapping[str, Any]


class ReservationView(Protocol):
    """What a ClusterView offers when it keeps the Reservations (scheduler.state). A view
    without ``reservations_on`` is a cluster without reservations: nothing is held. A view may
    also offer ``note_refused(pod_key, node)``: told of each pod refused on a node for its
    reservations' room (so that it can have the pod tried again once the room is free)."""

    def reservation_nodes(self) -> Collection[str]:
        """The names of the nodes with a placed, active Reservation (cheap: every filter asks)."""

    def reservations_on(self, name: str) -> Sequence[Reservation]:
        """The Reservations placed on the node (active or not)."""


def held_nodes(view: object) -> Collection[str]:
    nodes = getattr(view, "reservation_nodes", None)
    return () if nodes is None else nodes()


# a pod with reservation affinity on a node without an active reservation
_NO_RESERVATION = holding.Verdict(holding.REASON_AFFINITY, final=True)


def requires_reservation(pod: Object) -> bool:
    """Whether the pod may only go into a reservation: it has reservation affinity. Koordinator's
    PreFilter then leaves it only the nodes with a reservation it matches, and refuses it
    unresolvably when there is none (a reserve pod is placed by its own rules)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return ANNOTATION_RESERVATION_AFFINITY in annotations and not is_reserve_pod(pod)


def node_holds(
    name: str, node: Object, view: Any, kept: dict[str, Any] | None = None
) -> tuple[Mapping[str, int], list[holding.Held]] | None:
    """The node's free room (allocatable less its pods' requests) and its active
    reservations' holds; None when none is active there. ``kept``: results by node name to
    reuse, valid until the view's ChangeFeed names the node (DecisionCache.holds)."""
    if kept is not None and name in kept:
        found: tuple[Mapping[str, int], list[holding.Held]] | None = kept[name]
        return found
    pods = view.pods_on(name)
    holds = holding.holds_on_node(view.reservations_on(name), pods)
    room = node_rooms([node], pods).get(name) if holds else None
    # no room: a malformed allocatable, which NodeResourcesFit refuses already
    result = None if room is None else (room.free, holds)
    if kept is not None:
        kept[name] = result
    return result


def node_verdict(
    pod: Object,
    name: str,
    node: Object | None,
    view: Any,
    *,
    ask: holding.Ask | None = None,
    kept: dict[str, Any] | None = None,
) -> holding.Verdict | None:
    """The pod on one node with reservations; None when none is active there (or the view
    does not know the node: the other checks say so)."""
    if node is None:
        return None
    found = node_holds(name, node, view, kept)
    if found is None:
        return None
    return holding.check(pod, found[0], found[1], ask)


def filter_held(
    pod: Object,
    passed: list[int],
    names: Sequence[str],
    sent: Sequence[Object] | None,
    view: Any,
    *,
    failed: dict[str, str],
    unresolvable: dict[str, str],
    cache: Any = None,
) -> list[int]:
    """The candidates among ``passed`` (indices into ``names``) that the reservations leave to
    the pod; the others get their reason in ``failed`` (or ``unresolvable``)."""
    nodes, required = held_nodes(view), requires_reservation(pod)
    if not nodes and not required:
        return passed
    verdicts: dict[int, holding.Verdict] = {}
    try:
        ask: holding.Ask | None = holding.Ask.of(pod)
    except ModelError:
        ask = None  # holding.check says why, on each node
    # the Node objects a request carries are trusted for that request only
    kept = cache.holds if cache is not None and sent is None and cache.trusts(view) else None
    for i in passed:
        verdict = None
        if names[i] in nodes:
            node = view.node(names[i]) if sent is None else sent[i]
            verdict = node_verdict(pod, names[i], node, view, ask=ask, kept=kept)
        if verdict is None and required:  # no reservation here for it to go into
            verdict = _NO_RESERVATION
        if verdict is not None:
            verdicts[i] = verdict
    if not verdicts:
        return passed
    left = []
    note = getattr(view, "note_refused", None)
    for i in passed:
        verdict = verdicts.get(i)
        if verdict is not None and verdict.reason:
            (unresolvable if verdict.final else failed)[names[i]] = verdict.reason
            if note is not None and not verdict.final:
                note(pod_key(pod), names[i])
        else:
            left.append(i)
    into = [i for i in left if i in verdicts and verdicts[i].into is not None]
    if into and len(into) < len(left):
        for i in left:
            if i not in into:
                failed[names[i]] = REASON_RESERVED_ELSEWHERE
        return into
    return left


def bind_annotations(pod: Object, node_name: str, view: Any) -> tuple[dict[str, str], str]:
    """(annotations, error) at bind: the reservation-allocated annotation for an owner going
    into a reservation on ``node_name``, an error when the reservations there no longer leave
    the pod room (kube-scheduler then tries it again)."""
    if is_reserve_pod(pod) or node_name not in held_nodes(view):
        return {}, ""
    verdict = node_verdict(pod, node_name, view.node(node_name), view)
    if verdict is None:
        return {}, ""
    if verdict.reason:
        return {}, f"node {node_name}: {verdict.reason}"
    if verdict.into is None:
        return {}, ""
    return {ANNOTATION_RESERVATION_ALLOCATED: allocated_annotation(verdict.into.reservation)}, ""
