"""NodeFit: whether a pod could be scheduled onto a node, as the descheduler asks it of the
nodes a pod would move to. Taints and tolerations (Taint, Toleration, tolerates_taints), the
pod's nodeSelector and required node affinity (NodeSelectorTerm, match_node_selector), and its
requests against what the node has left (pod_requests, fits_requests). Parsers read the pod's
and node's plain JSON; a NodeSelectorTerm that does not parse is dropped, as Kubernetes'
LazyErrorNodeSelector ignores a term it cannot read (it never matches). No I/O.

It follows Koordinator v1.8.0's pkg/descheduler/node/node.go (NodeFit: node selector and
required affinity, NoSchedule and NoExecute taints, requests, unschedulable; fitsRequest and
nodeAvailableResources), pkg/descheduler/utils/predicates.go (podMatchesNodeLabels,
TolerationsTolerateTaintsWithFilter), Kubernetes' Toleration.ToleratesTaint (its Lt and Gt
operators off, as the descheduler calls it) and component-helpers' nodeaffinity
(MatchNodeSelectorTerms, matchFields on metadata.name).

Amounts are as in descheduler.cluster: cpu in milli-cores, every other resource in whole units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from descheduler.selectors import set_requirement_matches
from koordapi.pod import pod_requests as _two_requests

# Taint effects NodeFit looks at (PreferNoSchedule is only a preference)
HARD_EFFECTS = ("NoSchedule", "NoExecute")
BASIC_RESOURCES = ("cpu", "memory", "pods")
FIELD_NODE_NAME = "metadata.name"

_EMPTY: Mapping[str, Any] = {}


# -- taints and tolerations ----------------------------------------------------------------


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class Toleration:
    """A pod's toleration. An empty key with operator Exists tolerates every taint; an empty
    effect every effect; an empty operator is Equal."""

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Toleration.ToleratesTaint with the comparison operators (Lt, Gt) off: they
        tolerate nothing, as when the descheduler asks."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def node_taints(node: Mapping[str, Any]) -> tuple[Taint, ...]:
    """spec.taints of a Node's JSON."""
    spec = node.get("spec") or _EMPTY
    return tuple(
        Taint(_text(t.get("key")), _text(t.get("value")), _text(t.get("effect")))
        for t in spec.get("taints") or ()
        if isinstance(t, Mapping)
    )


def pod_tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    """spec.tolerations of a pod's spec."""
    return tuple(
        Toleration(*(_text(t.get(key)) for key in ("key", "operator", "value", "effect")))
        for t in spec.get("tolerations") or ()
        if isinstance(t, Mapping)
    )


def tolerates_taints(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> bool:
    """TolerationsTolerateTaintsWithFilter for NoSchedule and NoExecute: each such taint is
    tolerated by some toleration."""
    return all(
        any(toleration.tolerates(taint) for toleration in tolerations)
        for taint in taints
        if taint.effect in HARD_EFFECTS
    )


# -- node selector and required node affinity -----------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions (on labels) or matchFields (on metadata.name) requirement."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """labels.Requirement.Matches."""
        if self.operator not in ("Gt", "Lt"):
            return set_requirement_matches(labels, self.key, self.operator, self.values)
        if self.key not in labels:  # Gt, Lt: the label must hold an integer
            return False
        try:
            have = int(labels[self.key])
        except ValueError:
            return False
        want = int(self.values[0])
        return have > want if self.operator == "Gt" else have < want


@dataclass(frozen=True)
class NodeSelectorTerm:
    """A parsed, valid term: its label requirements and field requirements, all ANDed."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if not all(r.matches(labels) for r in self.expressions):
            return False
        fields = {FIELD_NODE_NAME: name} if name else {}
        # matchFields are looked at only where the node has fields (a name), as upstream
        return not fields or all(_field_matches(r, fields) for r in self.fields)


def _field_matches(requirement: Requirement, fields: Mapping[str, str]) -> bool:
    have = fields.get(requirement.key, "")
    if requirement.operator == "In":
        return have == requirement.values[0]
    return have != requirement.values[0]  # NotIn


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _requirement(raw: Any, *, field: bool) -> Requirement | None:
    """A requirement, or None where Kubernetes' parser refuses it."""
    if not isinstance(raw, Mapping):
        return None
    key, operator = raw.get("key"), raw.get("operator")
    values = raw.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list):
        return None
    if not all(isinstance(v, str) for v in values):
        return None
    if field:  # nodeSelectorRequirementsAsFieldSelector: In or NotIn of exactly one value
        if operator not in ("In", "NotIn") or len(values) != 1:
            return None
    elif operator in ("In", "NotIn"):
        if not values:
            return None
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            return None
    elif operator in ("Gt", "Lt"):
        if len(values) != 1 or not _is_int(values[0]):
            return None
    else:
        return None
    return Requirement(key, str(operator), tuple(values))


def _term(raw: Any) -> NodeSelectorTerm | None:
    """A term, or None when it matches nothing: empty, or one of its requirements refused."""
    if not isinstance(raw, Mapping):
        return None
    expressions = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return None
    if not expressions and not fields:
        return None
    parsed = [_requirement(r, field=False) for r in expressions]
    parsed_fields = [_requirement(r, field=True) for r in fields]
    if any(r is None for r in parsed) or any(r is None for r in parsed_fields):
        return None
    return NodeSelectorTerm(
        tuple(r for r in parsed if r is not None),
        tuple(r for r in parsed_fields if r is not None),
    )


def required_node_affinity(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...] | None:
    """The terms of spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    (any one must match); None when the pod has no such requirement. Terms that cannot match
    are left out, so a requirement with none left matches no node."""
    affinity = (spec.get("affinity") or _EMPTY).get("nodeAffinity") or _EMPTY
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    raw_terms = (required if isinstance(required, Mapping) else _EMPTY).get("nodeSelectorTerms")
    terms = (_term(raw) for raw in raw_terms or ())
    return tuple(term for term in terms if term is not None)


def match_node_selector(
    node_selector: Mapping[str, str],
    affinity: Sequence[NodeSelectorTerm] | None,
    labels: Mapping[str, str],
    name: str,
) -> bool:
    """podMatchesNodeLabels: the node carries every label of spec.nodeSelector, and, where
    the pod requires node affinity, one of its terms matches."""
    if any(labels.get(key) != value for key, value in node_selector.items()):
        return False
    return affinity is None or any(term.matches(labels, name) for term in affinity)


# -- requests ------------------------------------------------------------------------------


def _named(resources: Any, names: set[str]) -> None:
    for section in ("requests", "limits"):
        amounts = (resources if isinstance(resources, Mapping) else _EMPTY).get(section)
        if isinstance(amounts, Mapping):
            names.update(str(name) for name in amounts)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Kubernetes' PodRequests for every resource the pod names (containers, sidecar and init
    containers, pod-level resources, overhead), through koordapi.pod's rules. Raises
    ModelError for a malformed amount."""
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, Mapping):
                _named(container.get("resources"), names)
    _named(spec.get("resources"), names)
    overhead = spec.get("overhead")
    if isinstance(overhead, Mapping):
        names.update(str(name) for name in overhead)
    return {name: _two_requests(spec, (name, name))[0] for name in sorted(names)}


def fits_requests(
    requests: Mapping[str, int],
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
) -> list[str]:
    """fitsRequest: the resources the pod asks for that the node has not got left (empty: it
    fits). What is left is the node's status allocatable less what its pods request; a
    resource the node does not offer has nothing left, but cpu, memory and pods are always
    counted (from 0 when not allocatable). ``requested`` counts the node's pods under "pods"."""
    short = []
    for name, amount in requests.items():
        if name in BASIC_RESOURCES or name in allocatable:
            left = allocatable.get(name, 0) - requested.get(name, 0)
        else:
            left = 0
        if amount > left:
            short.append(name)
    return short
