"""``koordctl reservation``: every Reservation by node with the room it holds now, what its
owners took and who they are; and ``koordctl reservation why NAMESPACE/POD``: whether a pod
went into a Reservation and, if not, why not.

Both read the API server (``--kubeconfig``, in-cluster credentials or ``~/.kube/config``);
everything else here is pure: functions that take the objects as the API server sends them
(dicts) and return rows, reports and text. The room and the verdicts are the extender's own
(``koordapi.reservation.holding``): a placed Reservation holds its allocatable less what the
pods annotated ``scheduling.koordinator.sh/reservation-allocated`` with it took (nothing once
an allocate-once one has its owner); a pod that is not an owner is refused on a node where it
fits only by taking that room; an owner goes into the reservation ``holding.check`` nominates.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.gang.fit import Needs, NodeRoom, node_rooms, request_of, unfit_reason
from koordapi.gang.spec import format_time, parse_time, pod_key
from koordapi.reservation import holding
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_AFFINITY,
    CONDITION_READY,
    LABEL_RESERVATION_IGNORED,
    POLICY_RESTRICTED,
    Affinity,
    Owner,
    Reservation,
    allocated_to,
    ignores_reservations,
    is_reserve_pod,
    reservation_affinity,
)
from koordctl import client
from koordctl.quota import FAILED_SCHEDULING, shown

NONE = "-"  # not placed, not written
NEVER = "never"
_SHORT = {"memory": "mem"}
_BLOCKING = ("NoSchedule", "NoExecute")
_FINISHED_PODS = ("Succeeded", "Failed")
_EMPTY: Mapping[str, Any] = {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(obj.get("metadata"))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _node_of(pod: Mapping[str, Any]) -> str:
    return _str(_mapping(pod.get("spec")).get("nodeName"))


def _amounts(amounts: Mapping[str, int]) -> dict[str, str]:
    """As the quota code prints them, cpu and memory first, without the ``pods`` slot."""
    return shown({name: value for name, value in amounts.items() if name != holding.PODS})


def cell(amounts: Mapping[str, str] | None) -> str:
    """One cell: "cpu 1700m mem 3Gi"; "-" where there is nothing to show, "none" for an empty
    list (a consumed reservation holds none)."""
    if amounts is None:
        return NONE
    if not amounts:
        return "none"
    return " ".join(f"{_SHORT.get(name, name)} {amount}" for name, amount in amounts.items())


# -- owners in short form --------------------------------------------------------------------


def _expression_text(expression: Mapping[str, Any]) -> str:
    key, operator = _str(expression.get("key")), _str(expression.get("operator"))
    values = expression.get("values")
    listed = ",".join(str(v) for v in values) if isinstance(values, list) else ""
    return {
        "In": f"{key} in ({listed})",
        "NotIn": f"{key} notin ({listed})",
        "Exists": key,
        "DoesNotExist": f"!{key}",
    }.get(operator, f"{key} {operator} ({listed})")


def selector_text(selector: Mapping[str, Any]) -> str:
    """A label selector as kubectl writes one: ``app=web,tier in (a,b),!canary``."""
    parts = [f"{k}={v}" for k, v in sorted(_mapping(selector.get("matchLabels")).items())]
    expressions = selector.get("matchExpressions")
    for item in expressions if isinstance(expressions, list) else ():
        parts.append(_expression_text(_mapping(item)))
    return ",".join(parts) or "<everything>"


def _ref_name(ref: Mapping[str, Any]) -> str:
    name = _str(ref.get("name")) or (f"uid {ref['uid']}" if ref.get("uid") else "*")
    namespace = _str(ref.get("namespace"))
    return f"{namespace}/{name}" if namespace else name


def owner_text(owner: Owner) -> str:
    """One ReservationOwner: ``pod NS/NAME``, ``KIND NS/NAME`` (a controller), a selector;
    the fields an owner sets together are joined by " & " (they are ANDed)."""
    parts = []
    if owner.object_ref is not None:
        parts.append(f"pod {_ref_name(owner.object_ref)}")
    if owner.controller is not None:
        parts.append(
            f"{_str(owner.controller.get('kind')) or 'controller'} {_ref_name(owner.controller)}"
        )
    if owner.selector is not None:
        parts.append(selector_text(owner.selector))
    return " & ".join(parts)


def owners_text(reservation: Reservation) -> str:
    """Who may go into it (owners are ORed: " | ")."""
    return " | ".join(owner_text(owner) for owner in reservation.owners)


# -- the list --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReservationRow:
    """One line of ``koordctl reservation``; ``--json`` prints these as they are."""

    name: str
    phase: str
    node: str  # "-" while not placed
    held: dict[str, str] | None  # what it holds against other pods now; None: nothing (inactive)
    allocated: dict[str, str] | None  # what its owners took
    owners: list[str]  # namespace/name of the pods in it
    wanted: str  # its owners' spec in short form (shown while no pod is in it)
    expires: str  # RFC 3339, "never", "-" when unreadable
    marks: list[str] = field(default_factory=list)


def _parse(
    objects: Sequence[Mapping[str, Any]],
) -> tuple[list[Reservation], list[tuple[Mapping[str, Any], str]]]:
    """The Reservations that read, and the others with the reason they do not."""
    parsed, bad = [], []
    for obj in objects:
        try:
            parsed.append(Reservation.from_dict(obj))
        except (ModelError, TypeError, ValueError, AttributeError) as err:
            bad.append((obj, str(err)))
    return parsed, bad


def _by_node(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    found: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        if node := _node_of(pod):
            found.setdefault(node, []).append(pod)
    return found


def _holds(
    reservations: Sequence[Reservation], pods_by_node: Mapping[str, Sequence[Mapping[str, Any]]]
) -> dict[str, list[holding.Held]]:
    """The active reservations of each node with what its pods took of each."""
    placed: dict[str, list[Reservation]] = {}
    for r in reservations:
        if r.active:
            placed.setdefault(r.node_name, []).append(r)
    return {
        node: holding.holds_on_node(rs, pods_by_node.get(node, ())) for node, rs in placed.items()
    }


def _expires(reservation: Reservation) -> str:
    when = reservation.expiry()
    return NEVER if when is None else format_time(when)


def _why_ended(reservation: Reservation) -> str:
    """Failed: the Ready condition's reason (Expired), else the phase."""
    cond = reservation.condition(CONDITION_READY)
    reason = _str(_mapping(cond).get("reason"))
    if reason and reason != reservation.phase:
        return f"{reservation.phase} ({reason})"
    return reservation.phase


def _row(r: Reservation, held: holding.Held | None, now: float | None) -> ReservationRow:
    marks: list[str] = []
    if r.pending:
        try:
            marks.append(f"wants {cell(_amounts(r.requests()))}")
        except ModelError as err:
            marks.append(f"template unreadable: {err}")
        message = r.unschedulable_message
        if message is not None:
            marks.append(f"Unschedulable: {message}" if message else "Unschedulable")
    if r.phase == "Failed":
        marks.append(_why_ended(r))
    if r.unschedulable and not r.finished:
        marks.append("spec.unschedulable: takes no new owner")
    if held is not None and held.consumed:
        marks.append("allocated once: consumed")
    if now is not None and r.due_to_expire(now):
        marks.append("past its expiry: koord-manager marks it Failed")
    taken: dict[str, str] | None
    if held is not None:
        taken, owners = _amounts(held.allocated) or None, list(held.owners)
        remaining: dict[str, str] | None = _amounts(held.remaining)
    else:
        taken = _amounts(r.allocated) if r.allocated else None
        owners = [f"{_str(o.get('namespace'))}/{_str(o.get('name'))}" for o in r.current_owners]
        remaining = None
    return ReservationRow(
        name=r.name,
        phase=r.phase,
        node=r.node_name or NONE,
        held=remaining,
        allocated=taken,
        owners=owners,
        wanted=owners_text(r),
        expires=_expires(r),
        marks=marks,
    )


def reservation_rows(
    reservations: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] = (),
    now: float | None = None,
) -> list[ReservationRow]:
    """Every Reservation, by node (those not placed last, under "-"), then by name. ``pods``:
    the cluster's pods (those annotated reservation-allocated are what owners took); ``now``
    marks one past its expiry that koord-manager has not ended yet."""
    parsed, bad = _parse(reservations)
    holds = _holds(parsed, _by_node(pods))
    by_uid = {h.reservation.uid: h for node in holds.values() for h in node}
    rows = [_row(r, by_uid.get(r.uid) if r.active else None, now) for r in parsed]
    for obj, reason in bad:
        status = _mapping(obj.get("status"))
        rows.append(
            ReservationRow(
                name=_str(_meta(obj).get("name")),
                phase=_str(status.get("phase")) or NONE,
                node=_str(status.get("nodeName")) or NONE,
                held=None,
                allocated=None,
                owners=[],
                wanted=NONE,
                expires=NONE,
                marks=[f"unreadable: {reason}"],
            )
        )
    return sorted(rows, key=lambda row: (row.node == NONE, row.node, row.name))


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def render_rows(rows: Sequence[ReservationRow]) -> str:
    """The text of ``koordctl reservation``: one table, a node's reservations together; OWNERS
    are the pods in it, else (in brackets) who may go in."""
    if not rows:
        return "no Reservation in the cluster"
    table = [["NODE", "NAME", "PHASE", "HELD", "ALLOCATED", "OWNERS", "EXPIRES", ""]]
    for row in rows:
        owners = ", ".join(row.owners) if row.owners else f"[{row.wanted}]"
        mark = f"! {'; '.join(row.marks)}" if row.marks else ""
        table.append(
            [
                row.node,
                row.name,
                row.phase,
                cell(row.held),
                cell(row.allocated),
                owners,
                row.expires,
                mark,
            ]
        )
    return "\n".join(_table(table))


# -- why a pod did or did not use one ---------------------------------------------------------


def _taints(r: Reservation) -> str:
    return ", ".join(
        f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
        for t in r.taints
        if t.get("effect") in _BLOCKING
    )


def _same(pod: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    uid, other_uid = _str(_meta(pod).get("uid")), _str(_meta(other).get("uid"))
    return uid == other_uid if uid and other_uid else pod_key(pod) == pod_key(other)


def _affinity_text(affinity: Affinity) -> str:
    parts = [f"name {affinity.name}"] if affinity.name else []
    if affinity.selector is not None:
        parts.append("reservations " + ",".join(f"{k}={v}" for k, v in affinity.selector.items()))
    if affinity.tolerations:
        parts.append(f"{len(affinity.tolerations)} toleration(s)")
    return ", ".join(parts) or "any reservation of its"


@dataclass(frozen=True)
class _Cluster:
    """What the verdicts look at: each node's active reservations and its room after the
    other pods (the pod asked about is left out: where it is bound, its own room counts)."""

    holds: Mapping[str, list[holding.Held]]
    rooms: Mapping[str, NodeRoom]

    @classmethod
    def of(
        cls,
        pod: Mapping[str, Any],
        reservations: Sequence[Reservation],
        nodes: Sequence[Mapping[str, Any]],
        pods: Sequence[Mapping[str, Any]],
    ) -> _Cluster:
        others = [p for p in pods if not _same(pod, p)]
        return cls(_holds(reservations, _by_node(others)), node_rooms(nodes, others))

    def held(self, r: Reservation) -> holding.Held | None:
        return next(
            (h for h in self.holds.get(r.node_name, ()) if h.reservation.uid == r.uid), None
        )


def _refusal(r: Reservation, affinity: Affinity | None) -> str:
    """Why an Available reservation with room left does not take its owner
    (``holding.can_use``'s checks after the phase, the owners and allocate-once)."""
    said = f"the pod's {ANNOTATION_RESERVATION_AFFINITY}"
    if affinity is not None and affinity.name and affinity.name != r.name:
        return f"{said} names {affinity.name}"
    if r.unschedulable:
        if affinity is None:
            return "spec.unschedulable: it takes no new owner"
        return f"spec.unschedulable: it takes no new owner ({said} does not tolerate it)"
    if affinity is not None and not affinity.matches(r):
        return f"{said} does not pick it"
    return f"{said} does not tolerate its taints ({_taints(r)})"


def _beside(pod: Mapping[str, Any], r: Reservation) -> str:
    """Why an owner that fits the node is not put into its reservation (``holding.check``
    without affinity: the resource-name intersection, a Restricted remainder)."""
    try:
        request = request_of(pod)
    except ModelError:
        request = {}
    if not any(n != holding.PODS and a > 0 and n in r.allocatable for n, a in request.items()):
        return "it holds none of what the pod asks for"
    if r.allocate_policy == POLICY_RESTRICTED:
        return "Restricted: the pod asks more than it has left"
    return "no room in it"


def _owner_verdict(
    pod: Mapping[str, Any], r: Reservation, cluster: _Cluster, affinity: Affinity | None
) -> tuple[str, bool]:
    """Why the pod, an owner of ``r``, is not in it (its first reason, in the order the
    extender meets them), or that it fits: (text, fits)."""
    if r.pending:
        message = r.unschedulable_message
        return "not placed yet" + (f" (Unschedulable: {message})" if message else ""), False
    if r.finished:
        return f"ended: {_why_ended(r)}", False
    held = cluster.held(r)
    if not r.available or held is None:
        return f"not Available ({r.phase})", False
    if held.consumed:
        return f"consumed: allocated once, to {', '.join(held.owners)}", False
    if not holding.can_use(pod, held, affinity):
        return _refusal(r, affinity), False
    bound = _node_of(pod)
    if bound and bound != r.node_name:
        return f"the pod is bound to {bound}, the reservation is on {r.node_name}", False
    room = cluster.rooms.get(r.node_name)
    if room is None:
        return f"its node {r.node_name} is not in the cluster", False
    needs = dataclasses.replace(Needs.of(pod), node_name="")
    if reason := unfit_reason(needs, room, {}):
        return f"node {r.node_name}: {reason}", False
    verdict = holding.check(pod, room.free, cluster.holds[r.node_name])
    if verdict.reason:
        return f"does not fit on {r.node_name}: {verdict.reason}", False
    into = verdict.into
    if into is None:
        return f"the pod fits on {r.node_name} beside it, not in it ({_beside(pod, r)})", False
    if into.reservation.uid != r.uid:
        return (
            f"fits, but goes into {into.reservation.name} first (reservation-order, then "
            "the fuller fit)"
        ), False
    return f"fits: the extender puts the pod into it on {r.node_name}", True


def _held_against(
    pod: Mapping[str, Any], cluster: _Cluster, affinity: Affinity | None
) -> list[dict[str, Any]]:
    """The nodes kube-scheduler would let the pod on (selectors, taints, free room) where the
    extender refuses it because reservations it cannot use hold the room it needs."""
    try:
        request = request_of(pod)
    except ModelError:
        return []
    needs = Needs.of(pod)
    found = []
    for node in sorted(cluster.holds):
        room = cluster.rooms.get(node)
        holds = cluster.holds[node]
        others = [
            h for h in holds if any(h.remaining.values()) and not holding.can_use(pod, h, affinity)
        ]
        if room is None or not others or unfit_reason(needs, room, request):
            continue
        verdict = holding.check(pod, room.free, holds)
        if not verdict.reason:
            continue  # it fits beside them
        found.append(
            {
                "node": node,
                "held": [
                    {"reservation": h.reservation.name, "held": _amounts(h.remaining)}
                    for h in others
                ],
                "refused": verdict.reason,
            }
        )
    return found


def _event_time(event: Mapping[str, Any]) -> float:
    for value in (
        _mapping(event.get("series")).get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
    ):
        if (moment := parse_time(value)) is not None:
            return moment
    return 0.0


def _events(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pod's FailedScheduling events (kube-scheduler's, the extender's reasons in the
    message), oldest first."""
    found = []
    for event in sorted(
        (e for e in events if e.get("reason") == FAILED_SCHEDULING), key=_event_time
    ):
        moment = _event_time(event)
        count = event.get("count") or _mapping(event.get("series")).get("count")
        found.append(
            {
                "time": format_time(moment) if moment else NONE,
                "count": count if isinstance(count, int) and count > 0 else 1,
                "message": _str(event.get("message")),
            }
        )
    return found


def why_report(
    pod: Mapping[str, Any],
    reservations: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]] = (),
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Everything ``koordctl reservation why`` says of one pod (``--json`` prints it): the
    Reservation it went into (its reservation-allocated annotation), else each Reservation it
    is an owner of with why it is not in it, the reservations held against it on the nodes it
    could go to, and its FailedScheduling events while it waits; ``verdict`` sums it up."""
    phase = _str(_mapping(pod.get("status")).get("phase")) or NONE
    node = _node_of(pod)
    parsed, _ = _parse(reservations)
    report: dict[str, Any] = {
        "pod": pod_key(pod),
        "phase": phase,
        "node": node or None,
        "allocated": None,
        "ignores": ignores_reservations(pod),
        "affinity": None,
        "owned": [],
        "heldAgainst": [],
        "events": [],
        "verdict": "",
    }
    if is_reserve_pod(pod):
        report["verdict"] = "a reserve pod: kube-scheduler places it for its Reservation"
        return report
    where = allocated_to(pod)
    if where is not None:
        name, uid = where
        found = next((r for r in parsed if r.uid == uid or (not uid and r.name == name)), None)
        on = found.node_name if found is not None else None
        report["allocated"] = {"name": name, "uid": uid, "node": on}
        report["verdict"] = (
            f"in Reservation {name} on node {on or node or NONE}"
            if found is not None
            else f"in Reservation {name} (uid {uid or NONE}), no longer in the cluster"
        )
        return report
    affinity: Affinity | None = None
    try:
        affinity = reservation_affinity(pod)
        report["affinity"] = None if affinity is None else _affinity_text(affinity)
    except ModelError as err:
        report["affinity"] = f"unreadable: {err}"
    cluster = _Cluster.of(pod, parsed, nodes, pods)
    fits = None
    if not report["ignores"] or affinity is not None:
        for r in sorted(parsed, key=lambda r: r.name):
            if not r.is_owner(pod):
                continue
            text, fit = _owner_verdict(pod, r, cluster, affinity)
            report["owned"].append(
                {
                    "reservation": r.name,
                    "phase": r.phase,
                    "node": r.node_name or None,
                    "fits": fit,
                    "why": text,
                }
            )
            fits = fits or (r if fit else None)
    waiting = not node and phase not in _FINISHED_PODS
    if waiting:
        report["heldAgainst"] = _held_against(pod, cluster, affinity)
        report["events"] = _events(events)
    if node:
        report["verdict"] = f"bound to {node} outside any reservation"
    elif fits is not None:
        report["verdict"] = (
            f"fits into {fits.name} on {fits.node_name}: the extender keeps it to that node"
        )
    elif report["events"]:
        report["verdict"] = f"waiting because: {report['events'][-1]['message']}"
    else:
        report["verdict"] = f"phase {phase}: no FailedScheduling event says why"
    return report


def render_why(report: Mapping[str, Any]) -> str:
    """The text of ``koordctl reservation why``: one line per fact, the verdict last."""
    lines = [f"pod {report['pod']}: phase {report['phase']}, node {report['node'] or NONE}"]
    if report["allocated"] is not None:
        return "\n".join([*lines, report["verdict"]])
    if report["ignores"]:
        lines.append(
            f"label {LABEL_RESERVATION_IGNORED}=true: it uses reserved room as any "
            "pod and goes into none"
        )
    if report["affinity"] is not None:
        lines.append(f"reservation affinity: {report['affinity']}")
    owned = report["owned"]
    lines.append(f"owner of {len(owned)} Reservation(s)" + (":" if owned else ""))
    for entry in owned:
        lines.append(
            f"  {entry['reservation']} ({entry['phase']}, node {entry['node'] or NONE})"
            f": {entry['why']}"
        )
    if report["heldAgainst"]:
        lines.append("refused where it fits only on room held for other pods:")
    for entry in report["heldAgainst"]:
        held = ", ".join(f"{h['reservation']} [{cell(h['held'])}]" for h in entry["held"])
        lines.append(f"  {entry['node']}: {held}: {entry['refused']}")
    for event in report["events"]:
        lines.append(
            f"event {event['time']} FailedScheduling x{event['count']}: {event['message']}"
        )
    lines.append(report["verdict"])
    return "\n".join(lines)


def _why(args: argparse.Namespace) -> int:
    namespace, _, name = str(args.pod).rpartition("/")
    if not namespace or not name:
        print(
            f"koordctl reservation why: {args.pod!r}: give the pod as NAMESPACE/NAME",
            file=sys.stderr,
        )
        return 2
    try:
        scene = client.read_reservation_scene(namespace, name, args.kubeconfig)
    except Exception as err:
        print(f"koordctl reservation why: cannot read pod {args.pod}: {err}", file=sys.stderr)
        return 1
    report = why_report(
        scene["pod"], scene["reservations"], scene["nodes"], scene["pods"], scene["events"]
    )
    print(json.dumps(report) if args.json else render_why(report))
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "reservation_command", None) == "why":
        return _why(args)
    try:
        scene = client.read_reservations(args.kubeconfig)
    except Exception as err:
        print(f"koordctl reservation: cannot list Reservations: {err}", file=sys.stderr)
        return 1
    rows = reservation_rows(scene["reservations"], scene["pods"], now=time.time())
    print(json.dumps([asdict(row) for row in rows]) if args.json else render_rows(rows))
    return 0
