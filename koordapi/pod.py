"""A pod as Kubernetes and Koordinator read it, from the pod's plain JSON (dicts as the API
server sends them). The one implementation of each rule; every component reads pods here.

* Requests and limits: Kubernetes' resourcehelper.PodRequests and PodLimits. App containers
  and restartable (sidecar) init containers are summed; the pod takes at least its largest
  init step (an init container runs alone, next to the sidecars started before it); pod-level
  ``spec.resources`` replace the containers' total where set; ``overhead`` is added (to a
  limit only where one is set). The pod has not necessarily been through API defaulting, so a
  request that is absent while its limit is set (a container's, or the pod-level one) counts
  the limit, as the API server would have written it. CPU counts in milli-cores, every other
  resource in whole units (bytes for memory), each rounded up as Kubernetes' MilliValue and
  Value.
* Kubernetes QoS: ``status.qosClass`` once the API server has set it, else ComputePodQOS from
  the parsed quantities ("1" equals "1000m"), init containers included, pod-level resources
  instead of the containers' where set.
* Koordinator's QoS class and priority class, raw and with their defaults (apis/extension):
  the priority-class label first, then ``spec.priority``, then the class the QoS implies.

No I/O. A malformed quantity raises ModelError (QuantityError), a wrong shape TypeError or
AttributeError: callers that must name the field at fault (the webhooks) check shapes first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, Literal

from koordapi import keys, qos
from koordapi.errors import ModelError
from koordapi.quantity import Pair, milli_value, parse_quantity, value

CPU_MEMORY = ("cpu", "memory")

_EMPTY: Mapping[str, Any] = {}

# -- requests and limits ---------------------------------------------------------------------

# Requests repeat across pods ("500m", "1Gi"), so their integer values are memoized in bounded
# tables (filled up to the bound, never evicted: the common values come first), one per
# conversion. Only text keys are stored; any other key misses and goes through the parser.
_MEMO_LIMIT = 4096


def _memoized(
    convert: Callable[[Any], int],
) -> tuple[Callable[[Any], int | None], Callable[[Any], int]]:
    """(lookup, convert-and-remember) over one bounded table for ``convert``."""
    table: dict[str, int] = {}

    def remembered(quantity: Any) -> int:
        amount = convert(quantity)
        if type(quantity) is str and len(table) < _MEMO_LIMIT:
            table[quantity] = amount
        return amount

    return table.get, remembered


# per resource kind (is it cpu?): the memo's lookup and the converter that fills it
_CONVERSIONS = {True: _memoized(milli_value), False: _memoized(value)}


def pod_requests(
    spec: Mapping[str, Any],
    names: tuple[str, str] = CPU_MEMORY,
    *,
    section: Literal["requests", "limits"] = "requests",
) -> Pair:
    """The pod's effective requests of two resources (cpu and memory by default: milli-cores,
    bytes), by Kubernetes' PodRequests (see the module doc); with ``section="limits"`` its
    limits by PodLimits instead (``pod_limits``). Raises ModelError for a malformed or negative
    amount, TypeError or AttributeError for a wrong shape."""
    # hot path (the manager reads every pod of a node per reconcile): written out, memoized
    first, second = names
    memo_a, convert_a = _CONVERSIONS[first == "cpu"]
    memo_b, convert_b = _CONVERSIONS[second == "cpu"]
    requests = section == "requests"
    a = b = 0
    for container in spec.get("containers") or ():
        resources = container.get("resources") or _EMPTY
        own = resources.get(section) or _EMPTY
        x = own.get(first)
        y = own.get(second)
        if requests and (x is None or y is None):  # API defaulting: the request is the limit
            limits = resources.get("limits") or _EMPTY
            x = limits.get(first) if x is None else x
            y = limits.get(second) if y is None else y
        if x is not None:
            known = memo_a(x)
            a += convert_a(x) if known is None else known
        if y is not None:
            known = memo_b(y)
            b += convert_b(y) if known is None else known
    init_containers = spec.get("initContainers")
    if init_containers:
        a, b = _with_init_containers(init_containers, a, b, names, section)
    pod_level = spec.get("resources")
    if pod_level:  # where set, replaces the containers' total
        amounts = pod_level.get(section) or _EMPTY
        if requests:  # API defaulting, as for a container: the request is the limit
            amounts = {**(pod_level.get("limits") or _EMPTY), **amounts}
        a = convert_a(amounts[first]) if first in amounts else a
        b = convert_b(amounts[second]) if second in amounts else b
    overhead = spec.get("overhead")
    if overhead:
        if first in overhead and (requests or a):
            a += convert_a(overhead[first])
        if second in overhead and (requests or b):
            b += convert_b(overhead[second])
    if a < 0 or b < 0:
        raise ModelError(f"negative {section}")
    return a, b


def pod_limits(spec: Mapping[str, Any], names: tuple[str, str] = CPU_MEMORY) -> Pair:
    """The pod's limits of two resources by Kubernetes' PodLimits: as ``pod_requests``, from
    the limits only (a resource without any counts 0), overhead added only to a limit that is
    set."""
    return pod_requests(spec, names, section="limits")


def _with_init_containers(
    init_containers: Iterable[Any],
    a: int,
    b: int,
    names: tuple[str, str],
    section: Literal["requests", "limits"],
) -> Pair:
    sidecar_a = sidecar_b = step_a = step_b = 0
    for container in init_containers:
        x, y = pod_requests({"containers": (container,)}, names, section=section)
        if container.get("restartPolicy") == "Always":  # a sidecar runs beside the app
            a, b = a + x, b + y
            sidecar_a, sidecar_b = sidecar_a + x, sidecar_b + y
            x, y = sidecar_a, sidecar_b
        else:  # runs alone, next to the sidecars started before it
            x, y = x + sidecar_a, y + sidecar_b
        step_a, step_b = max(step_a, x), max(step_b, y)
    return max(a, step_a), max(b, step_b)


def container_request(container: Mapping[str, Any], name: str) -> int:
    """One container's request of ``name`` (its limit where only that is set), in the unit of
    ``pod_requests``; 0 where neither is set."""
    return pod_requests({"containers": (container,)}, (name, name))[0]


# -- Kubernetes QoS --------------------------------------------------------------------------

_QOS_RESOURCES = CPU_MEMORY
_KUBE_QOS_NAMES: dict[object, qos.KubeQoS] = {kube.value: kube for kube in qos.KubeQoS}


def kube_qos(pod: Mapping[str, Any]) -> qos.KubeQoS:
    """The pod's Kubernetes QoS class (kubectl's GetPodQOS): ``status.qosClass`` where the API
    server has set it to a known class, else ``compute_kube_qos`` of the spec."""
    named = _KUBE_QOS_NAMES.get((pod.get("status") or _EMPTY).get("qosClass"))
    return named if named is not None else compute_kube_qos(pod.get("spec") or _EMPTY)


def compute_kube_qos(spec: Mapping[str, Any]) -> qos.KubeQoS:
    """Kubernetes' ComputePodQOS on exact quantities: only positive cpu and memory amounts
    count. BestEffort when no container (init containers too) requests or limits any;
    Guaranteed when every container limits both and the summed requests equal the summed
    limits; else Burstable. Pod-level ``spec.resources``, where they name cpu or memory, stand
    for the containers. An absent request counts its limit (API defaulting)."""
    pod_level = spec.get("resources") or _EMPTY
    if any(
        name in (pod_level.get(section) or _EMPTY)
        for section in ("requests", "limits")
        for name in _QOS_RESOURCES
    ):
        parts: Iterable[Any] = (pod_level,)
    else:
        parts = (
            (c or _EMPTY).get("resources") or _EMPTY
            for c in (*(spec.get("containers") or ()), *(spec.get("initContainers") or ()))
        )
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for resources in parts:
        own_requests = resources.get("requests") or _EMPTY
        own_limits = resources.get("limits") or _EMPTY
        limited = 0
        for name in _QOS_RESOURCES:
            limit = own_limits.get(name)
            request = own_requests.get(name)
            if request is None:
                request = limit
            if request is not None and (amount := parse_quantity(request)) > 0:
                requests[name] = requests.get(name, Decimal(0)) + amount
            if limit is not None and (amount := parse_quantity(limit)) > 0:
                limits[name] = limits.get(name, Decimal(0)) + amount
                limited += 1
        if limited < len(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return qos.KubeQoS.BESTEFFORT
    if guaranteed and requests == limits:
        return qos.KubeQoS.GUARANTEED
    return qos.KubeQoS.BURSTABLE


# -- Koordinator's QoS and priority classes --------------------------------------------------


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return (pod.get("metadata") or _EMPTY).get("labels") or _EMPTY


def qos_class_raw(pod: Mapping[str, Any]) -> qos.QoSClass:
    """Koordinator's GetPodQoSClassRaw: the ``koordinator.sh/qosClass`` label's class; NONE
    when the label is absent or names no class."""
    return qos.qos_from_label(_labels(pod).get(keys.LABEL_QOS_CLASS))


def qos_class_with_default(pod: Mapping[str, Any]) -> qos.QoSClass:
    """Koordinator's GetPodQoSClassWithDefault: the label's class, else the one the Kubernetes
    QoS class implies (Guaranteed → LSR, Burstable → LS, BestEffort → BE)."""
    found = qos_class_raw(pod)
    return found if found is not qos.QoSClass.NONE else qos.default_qos_for_kube(kube_qos(pod))


def spec_priority(pod: Mapping[str, Any]) -> int | None:
    """``spec.priority``; None where it is absent or not an integer."""
    priority = (pod.get("spec") or _EMPTY).get("priority")
    return priority if type(priority) is int else None


def priority_class_raw(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """Koordinator's GetPodPriorityClassRaw (``qos.raw_priority_class``): the priority-class
    label when present, even naming no class; else the range ``spec.priority`` falls in."""
    return qos.raw_priority_class(_labels(pod).get(keys.LABEL_PRIORITY_CLASS), spec_priority(pod))


def priority_class_with_default(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """Koordinator's GetPodPriorityClassWithDefault: ``priority_class_raw``, else the class the
    QoS class with its default implies (LSE, LSR, LS, SYSTEM → koord-prod; BE → koord-batch).
    The QoS is only worked out when the raw class is NONE."""
    # hot path (once per pod per reconcile): priority_class_raw with _labels and spec_priority
    # written out
    labels = (pod.get("metadata") or _EMPTY).get("labels") or _EMPTY
    priority = (pod.get("spec") or _EMPTY).get("priority")
    found = qos.raw_priority_class(
        labels.get(keys.LABEL_PRIORITY_CLASS), priority if type(priority) is int else None
    )
    if found is not qos.NONE_PRIORITY:
        return found
    return qos.default_priority_class_for_qos(qos_class_with_default(pod))


def priority_value_with_default(pod: Mapping[str, Any]) -> int:
    """Koordinator's GetPodPriorityValueWithDefault: a non-zero ``spec.priority``, else the
    default value of ``priority_class_with_default`` (9500, 7500, 5500, 3500; 0 for none)."""
    return spec_priority(pod) or priority_class_with_default(pod).default
