"""``koordctl quota``: the ElasticQuota tree with each quota's min, max, used, runtime and
request, marked where a quota is being reclaimed (used over runtime) or over its max; and
``koordctl quota why NAMESPACE/POD``: why a pod of a quota or a gang is not running.

Both read the API server (``--kubeconfig``, in-cluster credentials or ``~/.kube/config``)
through ``koordctl.client``; everything else here is pure: functions that take the
objects as the API server sends them (dicts) and return rows, reports and text.

The tree is the one Koordinator's labels draw (apis/extension/elastic_quota.go): a quota sits
under the quota its ``quota.scheduling.koordinator.sh/parent`` label names, in the block of its
``quota.scheduling.koordinator.sh/tree-id`` label; one without a parent, or whose parent is
not in its tree, sits at the block's top (under the root). The runtime and request are the
annotations koord-manager's quota status controller writes (elastic_quota.go
AnnotationRuntime / AnnotationRequest), used is ``status.used``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.gang import spec as gang_spec
from koordapi.gang.gate import GATE
from koordapi.gang.reasons import go_duration
from koordapi.quota.model import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    DEFAULT_QUOTA,
    LABEL_PARENT,
    LABEL_QUOTA_NAME,
    LABEL_TREE_ID,
    ROOT_QUOTA,
    Resources,
    parse_resource_list,
    resources,
)
from koordapi.quota.runtime import format_amount
from koordapi.quota.topology import QuotaTopology, quota_name_of_pod, quota_of_pod
from koordctl import client

# The scheduling gate koord-manager's pod webhook puts on a gang member; its gang controller
# removes it once the whole gang fits.
GANG_SCHEDULING_GATE = GATE
# The events that say why a pod waits: kube-scheduler's (the extender's quota reason is in its
# message) and those whose reason starts with one of these (koord-manager's gang controller).
FAILED_SCHEDULING = "FailedScheduling"
REASON_PREFIXES = ("Gang", "Quota")
NONE = "-"  # a value that is not there (an annotation not yet written)
_EMPTY: Mapping[str, Any] = {}
_SHORT = {"memory": "mem"}  # "cpu 1500m mem 2Gi"
_DONE = ("Succeeded", "Failed")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(obj.get("metadata"))


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- amounts ---------------------------------------------------------------------------------


def _order(name: str) -> tuple[int, str]:
    return ({"cpu": 0, "memory": 1}.get(name, 2), name)


def shown(amounts: Mapping[str, int]) -> dict[str, str]:
    """Amounts as the quota code prints them (``format_amount``), cpu and memory first."""
    return {name: format_amount(name, amounts[name]) for name in sorted(amounts, key=_order)}


def amounts_text(amounts: Mapping[str, str] | None) -> str:
    """One cell: "cpu 1500m mem 2Gi nvidia.com/gpu 2"; "-" where the list is not there."""
    if amounts is None:
        return NONE
    if not amounts:
        return "<empty>"  # there, and naming nothing (printResourceList's word)
    return " ".join(f"{_SHORT.get(name, name)} {amount}" for name, amount in amounts.items())


def exceeded(amounts: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """The resources ``limit`` names that ``amounts`` also names and exceeds (quotav1.
    LessThanOrEqual's exceeded dimensions, sorted)."""
    return sorted(name for name, most in limit.items() if name in amounts and amounts[name] > most)


# -- one quota -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaRow:
    """One line of ``koordctl quota``; ``--json`` prints these as they are."""

    tree: str  # the tree-id label, "" for the default tree
    depth: int  # 0 at the top of the tree's block
    name: str  # namespace/name
    parent: str  # the parent label as the tree reads it (the root quota where unset)
    min: dict[str, str] | None
    max: dict[str, str] | None
    used: dict[str, str] | None
    runtime: dict[str, str] | None
    request: dict[str, str] | None
    marks: list[str] = field(default_factory=list)


def _read(
    what: str, read: Callable[[Any], Resources], raw: Any, marks: list[str]
) -> tuple[Resources | None, dict[str, str] | None]:
    """Amounts read with ``read`` (None where ``raw`` is absent); a malformed list reads as
    absent, with a mark saying so."""
    if raw is None or raw == "":
        return None, None
    try:
        amounts = read(raw)
    except (ModelError, TypeError, ValueError, AttributeError) as err:
        marks.append(f"{what} unreadable: {err}")
        return None, None
    return amounts, shown(amounts)


def quota_row(obj: Mapping[str, Any], tree: str = "", depth: int = 0) -> QuotaRow:
    """One ElasticQuota's line: its amounts and what is wrong with them. A mark where used
    exceeds runtime (the quota is being reclaimed: Koordinator preempts its borrowed pods) or
    used or request exceeds max."""
    meta = _meta(obj)
    labels = _mapping(meta.get("labels"))
    annotations = _mapping(meta.get("annotations"))
    spec = _mapping(obj.get("spec"))
    name = _str(meta.get("name"))
    marks: list[str] = []
    _, minimum = _read("min", resources, spec.get("min"), marks)
    maximum, max_shown = _read("max", resources, spec.get("max"), marks)
    used, used_shown = _read("used", resources, _mapping(obj.get("status")).get("used"), marks)
    runtime, runtime_shown = _read(
        "runtime", parse_resource_list, annotations.get(ANNOTATION_RUNTIME), marks
    )
    request, request_shown = _read(
        "request", parse_resource_list, annotations.get(ANNOTATION_REQUEST), marks
    )
    if used is not None and runtime is not None and (names := exceeded(used, runtime)):
        marks.append(f"used > runtime ({', '.join(names)}): being reclaimed")
    if used is not None and maximum is not None and (names := exceeded(used, maximum)):
        marks.append(f"used > max ({', '.join(names)})")
    if request is not None and maximum is not None and (names := exceeded(request, maximum)):
        marks.append(f"request > max ({', '.join(names)})")
    parent = _str(labels.get(LABEL_PARENT)) or ("" if name == ROOT_QUOTA else ROOT_QUOTA)
    return QuotaRow(
        tree=tree,
        depth=depth,
        name=f"{_str(meta.get('namespace'))}/{name}",
        parent=parent,
        min=minimum,
        max=max_shown,
        used=used_shown,
        runtime=runtime_shown,
        request=request_shown,
        marks=marks,
    )


# -- the tree --------------------------------------------------------------------------------


def _parent_of(obj: Mapping[str, Any]) -> str:
    name = _str(_meta(obj).get("name"))
    parent = _str(_mapping(_meta(obj).get("labels")).get(LABEL_PARENT))
    return parent or ("" if name == ROOT_QUOTA else ROOT_QUOTA)


def _sort_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return _str(_meta(obj).get("name")), _str(_meta(obj).get("namespace"))


def _tree_rows(tree: str, objects: Sequence[Mapping[str, Any]]) -> list[QuotaRow]:
    """One tree's block, depth first, children sorted by name. A quota whose parent is not in
    the block starts it; quotas whose parents form a cycle (none reachable from the top) start
    it too, the first by name, marked."""
    names = {_str(_meta(obj).get("name")) for obj in objects}
    children: dict[str, list[Mapping[str, Any]]] = {}
    tops: list[Mapping[str, Any]] = []
    for obj in sorted(objects, key=_sort_key):
        parent = _parent_of(obj)
        if parent in names and parent != _str(_meta(obj).get("name")):
            children.setdefault(parent, []).append(obj)
        else:
            tops.append(obj)
    rows: list[QuotaRow] = []
    seen: set[int] = set()

    def walk(start: Mapping[str, Any], cycle: bool = False) -> None:
        """Depth first from ``start`` with a stack (a tree may be deeper than Python's
        recursion limit)."""
        stack: list[tuple[Mapping[str, Any], int]] = [(start, 0)]
        while stack:
            obj, depth = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            row = quota_row(obj, tree, depth)
            if depth == 0 and cycle:
                row.marks.append(f"parent {row.parent} is in a cycle of parents")
            elif depth == 0 and row.parent not in names and row.parent not in ("", ROOT_QUOTA):
                row.marks.append(f"parent {row.parent} is no quota of this tree")
            rows.append(row)
            kids = children.get(_str(_meta(obj).get("name")), [])
            stack += [(child, depth + 1) for child in reversed(kids)]

    for obj in tops:
        walk(obj)
    for obj in sorted(objects, key=_sort_key):
        if id(obj) not in seen:
            walk(obj, cycle=True)
    return rows


def quota_rows(objects: Sequence[Mapping[str, Any]]) -> list[QuotaRow]:
    """Every ElasticQuota as a line of the tree: one block per tree-id (the default tree, no
    tree-id, first), each depth first."""
    trees: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        tree = _str(_mapping(_meta(obj).get("labels")).get(LABEL_TREE_ID))
        trees.setdefault(tree, []).append(obj)
    return [row for tree in sorted(trees) for row in _tree_rows(tree, trees[tree])]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip


def render_tree(rows: Sequence[QuotaRow]) -> str:
    """The text of ``koordctl quota``: a table per tree, children indented under parents."""
    if not rows:
        return "no ElasticQuota in the cluster"
    lines: list[str] = []
    for tree in dict.fromkeys(row.tree for row in rows):
        if lines:
            lines.append("")
        lines.append(f"tree {tree}" if tree else "default tree")
        table = [["NAME", "MIN", "MAX", "USED", "RUNTIME", "REQUEST", ""]]
        for row in rows:
            if row.tree != tree:
                continue
            cells = (row.min, row.max, row.used, row.runtime, row.request)
            mark = f"! {'; '.join(row.marks)}" if row.marks else ""
            table.append(["  " * row.depth + row.name, *map(amounts_text, cells), mark])
        lines += [f"  {line}" for line in _table(table)]
    return "\n".join(lines)


# -- why a pod waits -------------------------------------------------------------------------


def _topology(quotas: Sequence[Mapping[str, Any]]) -> QuotaTopology:
    """The tree as koord-manager's webhook keeps it, for quota_of_pod (a quota that does not
    parse is left out, as the webhook's informer leaves it)."""
    topology = QuotaTopology()
    for obj in quotas:
        try:
            topology.on_add(obj)
        except (ModelError, TypeError, ValueError, AttributeError):
            continue
    return topology


def _quota_part(pod: Mapping[str, Any], quotas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The pod's quota (GetQuotaName, then the default quota where that one is not in the
    tree: the quota the extender counts the pod in), how it was chosen, and its line."""
    topology = _topology(quotas)
    meta = _meta(pod)
    namespace = _str(meta.get("namespace"))
    named = quota_name_of_pod(pod, topology)
    effective = quota_of_pod(pod, topology)
    if _str(_mapping(meta.get("labels")).get(LABEL_QUOTA_NAME)):
        how = f"its label {LABEL_QUOTA_NAME}"
        if named != effective:
            how += f" names {named}, which does not exist: counted in {effective}"
    elif named == DEFAULT_QUOTA:
        how = f"no {LABEL_QUOTA_NAME} label and no quota for namespace {namespace}: the default"
    elif topology.namespace_quota.get(namespace) == named:
        how = f"namespace {namespace} is in its {ANNOTATION_NAMESPACES} annotation"
    else:
        how = f"the quota named as namespace {namespace}"
    found = [obj for obj in quotas if _str(_meta(obj).get("name")) == effective]
    row = quota_row(found[0]) if found else None
    return {"name": effective, "how": how, "quota": asdict(row) if row else None}


def _bound(pod: Mapping[str, Any]) -> bool:
    return bool(_str(_mapping(pod.get("spec")).get("nodeName")))


def _gated(pod: Mapping[str, Any]) -> bool:
    gates = _mapping(pod.get("spec")).get("schedulingGates")
    return isinstance(gates, list) and any(
        _mapping(gate).get("name") == GANG_SCHEDULING_GATE for gate in gates
    )


def _gang_part(
    pod: Mapping[str, Any],
    podgroup: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The pod's gang: its spec (from the PodGroup where there is one, else the pod's own
    annotations), the PodGroup's status, and how many members exist, are bound and gated."""
    own = gang_spec.gang_id(pod)
    if not own:
        return None
    spec = (
        gang_spec.spec_from_podgroup(podgroup)
        if podgroup is not None
        else gang_spec.spec_from_pod(pod)
    )
    members = [p for p in pods if gang_spec.gang_id(p) == own] or [pod]
    status = _mapping((podgroup or _EMPTY).get("status"))
    return {
        "id": own,
        "spec": None
        if spec is None
        else {
            "source": spec.source,
            "minAvailable": spec.min_member,
            "totalNumber": spec.total_member,
            "mode": spec.mode,
            "waitingTime": go_duration(spec.wait_time),
            "groups": list(spec.group),
        },
        "podGroup": None
        if podgroup is None
        else {
            "phase": _str(status.get("phase")) or NONE,
            "scheduled": status.get("scheduled", 0),
            "running": status.get("running", 0),
        },
        "members": len(members),
        "bound": sum(1 for p in members if _bound(p)),
        "gated": sum(1 for p in members if _gated(p)),
    }


def _event_time(event: Mapping[str, Any]) -> float:
    series = _mapping(event.get("series"))
    for value in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        _meta(event).get("creationTimestamp"),
    ):
        moment = gang_spec.parse_time(value)
        if moment is not None:
            return moment
    return 0.0


def relevant(event: Mapping[str, Any]) -> bool:
    reason = _str(event.get("reason"))
    return reason == FAILED_SCHEDULING or reason.startswith(REASON_PREFIXES)


def _events_part(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The events that say why the pod waits, newest last."""
    found = []
    for event in sorted((e for e in events if relevant(e)), key=_event_time):
        moment = _event_time(event)
        count = event.get("count") or _mapping(event.get("series")).get("count")
        found.append(
            {
                "time": gang_spec.format_time(moment) if moment else NONE,
                "type": _str(event.get("type")),
                "reason": _str(event.get("reason")),
                "count": count if isinstance(count, int) and count > 0 else 1,
                "source": _str(_mapping(event.get("source")).get("component"))
                or _str(event.get("reportingComponent"))
                or NONE,
                "message": _str(event.get("message")),
            }
        )
    return found


def _condition(pod: Mapping[str, Any]) -> dict[str, str] | None:
    conditions = _mapping(pod.get("status")).get("conditions")
    for item in conditions if isinstance(conditions, list) else ():
        cond = _mapping(item)
        if cond.get("type") == "PodScheduled":
            return {key: _str(cond.get(key)) for key in ("status", "reason", "message")}
    return None


def why_report(
    pod: Mapping[str, Any],
    quotas: Sequence[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None = None,
    pods: Sequence[Mapping[str, Any]] = (),
    events: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Everything ``koordctl quota why`` says of one pod (``--json`` prints it): ``waiting``
    is None when the pod is bound or done, else the newest word on why it waits: the newest
    relevant event's message, else the PodScheduled condition's, else the gang's gate."""
    meta = _meta(pod)
    phase = _str(_mapping(pod.get("status")).get("phase")) or NONE
    node = _str(_mapping(pod.get("spec")).get("nodeName"))
    found = _events_part(events)
    condition = _condition(pod)
    gated = _gated(pod)
    waiting: str | None = None
    if not node and phase not in _DONE:
        if found:
            waiting = found[-1]["message"] or found[-1]["reason"]
        elif gated:
            waiting = (
                f"held by the scheduling gate {GANG_SCHEDULING_GATE} until the whole gang fits"
            )
        elif condition and condition["status"] == "False" and condition["message"]:
            waiting = condition["message"]
        else:
            waiting = "nothing says why yet (no event, no PodScheduled condition)"
    return {
        "pod": f"{_str(meta.get('namespace'))}/{_str(meta.get('name'))}",
        "phase": phase,
        "node": node or None,
        "quota": _quota_part(pod, quotas),
        "gang": _gang_part(pod, podgroup, pods),
        "gated": gated,
        "podScheduled": condition,
        "events": found,
        "waiting": waiting,
    }


def _quota_line(part: Mapping[str, Any]) -> list[str]:
    lines = [f"quota {part['name']} ({part['how']})"]
    row = part["quota"]
    if row is None:
        lines.append("  no such ElasticQuota in the cluster")
        return lines
    cells = " ".join(
        f"{key} [{amounts_text(row[key])}]" for key in ("min", "max", "used", "runtime", "request")
    )
    lines.append(f"  {cells}")
    lines += [f"  ! {mark}" for mark in row["marks"]]
    return lines


def _gang_lines(gang: Mapping[str, Any] | None) -> list[str]:
    if gang is None:
        return ["gang: none"]
    spec = gang["spec"]
    if spec is None:
        lines = [f"gang {gang['id']}: not set up (no PodGroup and no readable min-available)"]
    else:
        source = "PodGroup" if spec["source"] == gang_spec.FROM_POD_GROUP else "annotations"
        lines = [
            f"gang {gang['id']} (from its {source}): min-available {spec['minAvailable']}, "
            f"total-number {spec['totalNumber']}, mode {spec['mode']}, "
            f"waiting-time {spec['waitingTime']}"
        ]
        if len(spec["groups"]) > 1:
            lines.append(f"  gang group: {', '.join(spec['groups'])}")
    lines.append(
        f"  members: {gang['members']} pod(s), {gang['bound']} bound, {gang['gated']} gated"
    )
    group = gang["podGroup"]
    if group is None:
        lines.append("  PodGroup: none")
    else:
        lines.append(
            f"  PodGroup: phase {group['phase']}, scheduled {group['scheduled']}, "
            f"running {group['running']}"
        )
    return lines


def render_why(report: Mapping[str, Any]) -> str:
    """The text of ``koordctl quota why``: one line per fact, the verdict last."""
    lines = [f"pod {report['pod']}: phase {report['phase']}, node {report['node'] or NONE}"]
    lines += _quota_line(report["quota"])
    lines += _gang_lines(report["gang"])
    gate = "present (koord-manager removes it when the whole gang fits)"
    lines.append(f"scheduling gate {GANG_SCHEDULING_GATE}: {gate if report['gated'] else 'no'}")
    cond = report["podScheduled"]
    if cond is None:
        lines.append("PodScheduled: none")
    else:
        reason = f", {cond['reason']}" if cond["reason"] else ""
        message = f": {cond['message']}" if cond["message"] else ""
        lines.append(f"PodScheduled: {cond['status'] or NONE}{reason}{message}")
    if not report["events"]:
        lines.append("events: none about scheduling, quotas or gangs")
    for event in report["events"]:
        lines.append(
            f"event {event['time']} {event['reason']} x{event['count']} "
            f"({event['source']}): {event['message']}"
        )
    if report["waiting"] is None:
        where = f"bound to {report['node']}, " if report["node"] else ""
        lines.append(f"not waiting ({where}phase {report['phase']})")
    else:
        lines.append(f"waiting because: {report['waiting']}")
    return "\n".join(lines)


# -- I/O -------------------------------------------------------------------------------------


def _why(args: argparse.Namespace) -> int:
    namespace, _, name = str(args.pod).rpartition("/")
    if not namespace or not name:
        print(f"koordctl quota why: {args.pod!r}: give the pod as NAMESPACE/NAME", file=sys.stderr)
        return 2
    try:
        scene = client.read_pod_scene(namespace, name, args.kubeconfig)
    except Exception as err:
        print(f"koordctl quota why: cannot read pod {args.pod}: {err}", file=sys.stderr)
        return 1
    report = why_report(
        scene["pod"], scene["quotas"], scene["podGroup"], scene["pods"], scene["events"]
    )
    print(json.dumps(report) if args.json else render_why(report))
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "quota_command", None) == "why":
        return _why(args)
    try:
        quotas = client.read_quotas(args.kubeconfig)
    except Exception as err:
        print(f"koordctl quota: cannot list ElasticQuotas: {err}", file=sys.stderr)
        return 1
    rows = quota_rows(quotas)
    print(json.dumps([asdict(row) for row in rows]) if args.json else render_tree(rows))
    return 0
