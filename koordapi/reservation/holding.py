"""The room reservations hold on a node, and whether (and into which reservation) a pod fits.

Koordinator counts a placed reservation on its node as a reserve pod requesting the
reservation's allocatable, less what its owner pods took (pkg/scheduler/plugins/reservation
``fitsNode``: ``allocatable - (requested - rRemained - rAllocated)``). So a pod that is not an
owner sees the node's free room less every reservation's remainder; an owner sees the
remainder of the reservation it goes into as free too (``Aligned``, and the deprecated empty
policy read as Aligned), and with ``Restricted`` must fit within that remainder for each
resource the reservation holds (``fitsReservation``). A reservation allocated once
(``allocateOnce``, the default) holds nothing after its first owner.

Here the stock kube-scheduler counts only real pods, so this is the extender's check, applied
after kube-scheduler's own NodeResourcesFit on the nodes that passed it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordapi.errors import ModelError
from koordapi.gang.fit import request_of, tolerates
from koordapi.gang.spec import pod_key
from koordapi.quota.model import Resources
from koordapi.reservation.model import (
    POLICY_RESTRICTED,
    Affinity,
    Object,
    Reservation,
    allocated_to,
    ignores_reservations,
    is_reserve_pod,
    reservation_affinity,
)

PODS = "pods"
_FINISHED = ("Succeeded", "Failed")
_BLOCKING = ("NoSchedule", "NoExecute")
_UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}

# Koordinator's reasons (pkg/scheduler/plugins/reservation/plugin.go)
REASON_AFFINITY = "node(s) no reservations match reservation affinity"
REASON_NO_RESERVATION_FITS = "node(s) no reservation(s) to meet the requirements"
RESERVATION_REASON_PREFIX = "Reservation(s) "  # reservationutil.ErrReasonPrefix


@dataclass(frozen=True)
class Held:
    """One active reservation on a node and what its owners there have taken of it."""

    reservation: Reservation
    allocated: Resources  # masked to the resources it holds
    owners: tuple[str, ...]  # namespace/name of the pods allocated in it
    remaining: Resources  # what it still holds against other pods

    @property
    def consumed(self) -> bool:
        """An allocate-once reservation that has its owner: nothing left to give or hold."""
        return self.reservation.allocate_once and bool(self.owners)


def holds_on_node(reservations: Iterable[Reservation], pods: Iterable[Object]) -> list[Held]:
    """The active reservations among ``reservations`` (those placed on the node, the caller's
    choice) with what the node's ``pods`` allocated in each (their reservation-allocated
    annotation; a finished pod no longer takes anything)."""
    active = {r.uid: r for r in reservations if r.active and r.uid}
    taken: dict[str, Resources] = {uid: {} for uid in active}
    owners: dict[str, list[str]] = {uid: [] for uid in active}
    for pod in pods:
        where = allocated_to(pod)
        if where is None or where[1] not in active:
            continue
        if (pod.get("status") or {}).get("phase") in _FINISHED:
            continue
        try:
            request = request_of(pod)
        except ModelError:
            request = {}
        mine = taken[where[1]]
        for name, amount in request.items():
            if name != PODS and name in active[where[1]].allocatable:  # quotav1.Mask
                mine[name] = mine.get(name, 0) + amount
        owners[where[1]].append(pod_key(pod))
    held = []
    for uid, r in sorted(active.items(), key=lambda item: item[1].name):
        allocated = taken[uid]
        remaining = {
            name: max(amount - allocated.get(name, 0), 0)
            for name, amount in r.allocatable.items()
            if name != PODS
        }
        entry = Held(r, allocated, tuple(sorted(owners[uid])), remaining)
        if entry.consumed:
            entry = Held(r, allocated, entry.owners, {})
        held.append(entry)
    return held


def held_total(holds: Iterable[Held], but: str = "") -> Resources:
    """What the reservations hold together, leaving out the one with uid ``but``."""
    total: Resources = {}
    for h in holds:
        if h.reservation.uid == but:
            continue
        for name, amount in h.remaining.items():
            total[name] = total.get(name, 0) + amount
    return total


def can_use(pod: Object, held: Held, affinity: Affinity | None) -> bool:
    """Whether the pod may go into this reservation (checkReservationMatchedOrIgnored): it is
    Available, not consumed, and the pod is one of its owners; then an affinity naming a
    reservation takes that one and nothing else is checked; otherwise the reservation must be
    schedulable (unless the affinity tolerates node.kubernetes.io/unschedulable), its
    NoSchedule/NoExecute taints tolerated by the affinity's tolerations (a pod without an
    affinity is not held to them: FindMatchingUntoleratedTaint on none finds nothing) and the
    affinity's reservation selector must match it."""
    r = held.reservation
    if not r.available or held.consumed or not r.is_owner(pod):
        return False
    if affinity is None:
        return not r.unschedulable
    if affinity.name:
        return affinity.name == r.name
    if r.unschedulable and not any(tolerates(t, _UNSCHEDULABLE) for t in affinity.tolerations):
        return False
    untolerated = [
        t
        for t in r.taints
        if t.get("effect") in _BLOCKING
        and not any(tolerates(tol, t) for tol in affinity.tolerations)
    ]
    return not untolerated and affinity.matches(r)


def _short(request: Mapping[str, int], room: Mapping[str, int]) -> list[str]:
    return sorted(n for n, a in request.items() if n != PODS and a > 0 and a > room.get(n, 0))


def _shares(request: Mapping[str, int], held: Held) -> bool:
    return any(
        n != PODS and a > 0 and n in held.reservation.allocatable for n, a in request.items()
    )


def _beyond_reason(name: str, request: Mapping[str, int], held: Held, detailed: bool) -> str:
    """fitsReservation's reason; with the amounts when the pod names the reservation
    (isDetailed; cpu in milli-cores as MilliValue, the rest as Value, as here)."""
    reason = f"{RESERVATION_REASON_PREFIX}Insufficient {name}"
    if not detailed:
        return reason
    used = held.allocated.get(name, 0)
    capacity = held.reservation.allocatable.get(name, 0)
    return f"{reason}, requested: {request.get(name, 0)}, used: {used}, capacity: {capacity}"


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {name: a.get(name, 0) - b.get(name, 0) for name in {*a, *b}}


def score(request: Mapping[str, int], held: Held) -> int:
    """ScoreReservation: MostAllocated over the resources it holds (0..100), what the pod
    and the owners already in it would use of each."""
    # every non-zero resource it holds, pods included (owners ask for no pods: it adds 0)
    names = [n for n, a in held.reservation.allocatable.items() if a > 0]
    if not names:
        return 0
    total = 0
    for name in names:
        capacity = held.reservation.allocatable[name]
        used = request.get(name, 0) + held.allocated.get(name, 0)
        if used <= capacity:
            total += 100 * used // capacity
    return total // len(names)


def nominate(request: Mapping[str, int], fitting: Sequence[Held]) -> Held:
    """The reservation an owner goes into among those it fits: the smallest non-zero
    reservation-order first (findMostPreferredReservationByOrder), else the best score, then
    the name."""
    ordered = [h for h in fitting if h.reservation.order > 0]
    if ordered:
        return min(ordered, key=lambda h: (h.reservation.order, h.reservation.name))
    return min(fitting, key=lambda h: (-score(request, h), h.reservation.name))


@dataclass(frozen=True)
class Verdict:
    """A pod on one node: ``reason`` empty when it fits; ``into`` the reservation it would go
    into (None: the node's unreserved room); ``final`` when waiting cannot help."""

    reason: str = ""
    into: Held | None = None
    final: bool = False


FITS = Verdict()


@dataclass(frozen=True)
class Ask:
    """What ``check`` reads of the pod, read once for every node of a call."""

    request: Mapping[str, int]
    affinity: Affinity | None
    ignored: bool
    reserve: bool

    @classmethod
    def of(cls, pod: Object) -> Ask:
        """Raises ModelError for a malformed amount or reservation-affinity annotation."""
        return cls(
            request_of(pod),
            reservation_affinity(pod),
            ignores_reservations(pod),
            is_reserve_pod(pod),
        )


def check(
    pod: Object, free: Mapping[str, int], holds: Sequence[Held], ask: Ask | None = None
) -> Verdict:
    """Whether ``pod`` fits a node whose room not taken by pods is ``free`` and whose
    reservations are ``holds`` (Koordinator's Reservation Filter with the part of
    NodeResourcesFit that sees reserve pods); ``ask``: the pod's ``Ask.of``, when the caller
    checks it on many nodes."""
    if not holds:
        return FITS
    try:
        ask = ask or Ask.of(pod)
    except ModelError as err:
        return Verdict(f"{RESERVATION_REASON_PREFIX}{err}", final=True)
    affinity, request = ask.affinity, ask.request
    if ask.ignored and affinity is None:
        return FITS  # it may use any reservation's room, and is nobody's owner
    usable = [] if ask.reserve else [h for h in holds if can_use(pod, h, affinity)]
    if affinity is not None and not usable:
        return Verdict(REASON_AFFINITY, final=True)
    # Without affinity, a reservation holding none of what the pod asks for is not one to go
    # into: filterWithReservations skips it (the resource-name intersection) and
    # FilterNominateReservation refuses it, so the pod can only fit beside it.
    candidates = usable if affinity is not None else [h for h in usable if _shares(request, h)]
    total = held_total(holds)
    fitting, by_node, by_reservation = [], set(), []
    for h in candidates:
        short = _short(request, _minus(free, held_total(holds, but=h.reservation.uid)))
        beyond: list[str] = []
        if h.reservation.allocate_policy == POLICY_RESTRICTED:
            held_names = {n: request.get(n, 0) for n in h.reservation.allocatable}
            beyond = _short(held_names, h.remaining)
        if not short and not beyond:
            fitting.append(h)
        by_node.update(short)
        named = affinity is not None and affinity.name == h.reservation.name
        by_reservation += [_beyond_reason(n, request, h, named) for n in beyond]
    if fitting:
        return Verdict(into=nominate(request, fitting))
    if affinity is not None:  # the pod must use a reservation and none has room
        reasons = [f"Insufficient {n} by node" for n in sorted(by_node)] + by_reservation
        return Verdict(", ".join(reasons) or REASON_NO_RESERVATION_FITS)
    short = _short(request, _minus(free, total))
    if not short:
        return FITS
    suffix = " by node" if usable else ""
    return Verdict(", ".join(f"Insufficient {n}{suffix}" for n in short))
