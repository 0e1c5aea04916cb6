"""Read a Pod dict the way Koordinator's apis/extension helpers read a corev1.Pod.

Every accessor checks the shape it walks and raises ``admission.ObjectError`` naming the
field, so a malformed pod becomes a denial, never a TypeError in a handler. Shared by the
mutating and the validating pod webhooks; no I/O here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from koordapi import keys, qos
from koordapi.errors import QuantityError
from koordapi.quantity import parse_quantity
from manager.webhooks.admission import ObjectError

CONTAINER_FIELDS = ("initContainers", "containers")
SECTIONS = ("requests", "limits")


def _map(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ObjectError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    result = _map(value, where)
    for key, item in result.items():
        if not isinstance(item, str):
            raise ObjectError(f"{where}[{key}] must be a string, got {type(item).__name__}")
    return result


def metadata(pod: Mapping[str, Any]) -> dict[str, Any]:
    return _map(pod.get("metadata"), "metadata")


def labels_of(pod: Mapping[str, Any]) -> dict[str, str]:
    return _strings(metadata(pod).get("labels"), "metadata.labels")


def annotations_of(pod: Mapping[str, Any]) -> dict[str, str]:
    return _strings(metadata(pod).get("annotations"), "metadata.annotations")


def spec(pod: Mapping[str, Any]) -> dict[str, Any]:
    return _map(pod.get("spec"), "spec")


def containers(
    pod: Mapping[str, Any], fields: tuple[str, ...] = CONTAINER_FIELDS
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, container) for each container, ``where`` like ``spec.containers[main]``."""
    pod_spec = spec(pod)
    for name in fields:
        items = pod_spec.get(name)
        if items is None:
            continue
        if not isinstance(items, list):
            raise ObjectError(f"spec.{name} must be a list")
        for i, container in enumerate(items):
            if not isinstance(container, dict):
                raise ObjectError(f"spec.{name}[{i}] must be an object")
            label = container.get("name")
            yield f"spec.{name}[{label if isinstance(label, str) else i}]", container


def resource_lists(pod: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, list) for every requests/limits map of every container, then spec.overhead."""
    for where, container in containers(pod):
        resources = _map(container.get("resources"), f"{where}.resources")
        for section in SECTIONS:
            at = f"{where}.resources.{section}"
            yield at, _map(resources.get(section), at)
    yield "spec.overhead", _map(spec(pod).get("overhead"), "spec.overhead")


def quantity(value: Any, where: str) -> Decimal:
    """A resource amount; ObjectError naming ``where`` when it is malformed or negative."""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ObjectError(f"{where}: not a quantity: {value!r}")
    try:
        amount = parse_quantity(value)
    except QuantityError as err:
        raise ObjectError(f"{where}: {err}") from None
    if amount < 0:
        raise ObjectError(f"{where}: negative quantity {value!r}")
    return amount


def milli(amount: Decimal) -> int:
    """``amount`` in thousandths, rounded up (Kubernetes ``Quantity.MilliValue``)."""
    return math.ceil(amount * 1000)


def check_resources(pod: Mapping[str, Any]) -> None:
    """Raise ObjectError for the first malformed resource quantity in the pod."""
    for where, resource_list in resource_lists(pod):
        for name, value in resource_list.items():
            quantity(value, f"{where}.{name}")


def container_request(container: Mapping[str, Any], where: str, name: str) -> Decimal:
    """The container's request for ``name``; its limit when only that is set (API defaulting)."""
    resources = _map(container.get("resources"), f"{where}.resources")
    for section in SECTIONS:
        values = _map(resources.get(section), f"{where}.resources.{section}")
        if name in values:
            return quantity(values[name], f"{where}.resources.{section}.{name}")
    return Decimal(0)


def pod_request(pod: Mapping[str, Any], name: str) -> Decimal:
    """The pod's effective request (Kubernetes ``PodRequests``): app containers and sidecars
    summed, at least the largest init container (plus the sidecars started before it), plus
    overhead."""
    total = sum(
        (container_request(c, w, name) for w, c in containers(pod, ("containers",))), Decimal(0)
    )
    sidecars = init_peak = Decimal(0)
    for where, container in containers(pod, ("initContainers",)):
        amount = container_request(container, where, name)
        if container.get("restartPolicy") == "Always":
            sidecars += amount
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + amount)
    overhead = _map(spec(pod).get("overhead"), "spec.overhead")
    extra = quantity(overhead[name], f"spec.overhead.{name}") if name in overhead else Decimal(0)
    return max(total + sidecars, init_peak) + extra


def qos_raw(pod: Mapping[str, Any]) -> qos.QoSClass:
    """The ``koordinator.sh/qosClass`` label's class; NONE when absent or unknown."""
    return qos.qos_from_label(labels_of(pod).get(keys.LABEL_QOS_CLASS))


def priority_class_raw(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """Koordinator's ``GetPodPriorityClassRaw``: the priority-class label when present (an
    unknown name is NONE, with no fallback), else the range ``spec.priority`` falls in."""
    pod_labels = labels_of(pod)
    if keys.LABEL_PRIORITY_CLASS in pod_labels:
        return qos.priority_class_of(None, pod_labels[keys.LABEL_PRIORITY_CLASS])
    priority = spec(pod).get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        return qos.priority_class_of(priority)
    return qos.NONE_PRIORITY


def _best_effort(pod: Mapping[str, Any]) -> bool:
    """Kubernetes BestEffort: no container requests or limits cpu or memory."""
    for _, container in containers(pod):
        resources = _map(container.get("resources"), "resources")
        for section in SECTIONS:
            values = _map(resources.get(section), section)
            if "cpu" in values or "memory" in values:
                return False
    return True


def priority_class_with_default(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """``GetPodPriorityClassWithDefault``: the raw class, else the one the QoS class implies
    (the QoS label, else Kubernetes QoS: BestEffort → BE → batch, others → LS/LSR → prod)."""
    raw = priority_class_raw(pod)
    if raw is not qos.NONE_PRIORITY:
        return raw
    klass = qos_raw(pod)
    if klass is qos.QoSClass.NONE:
        klass = qos.QoSClass.BE if _best_effort(pod) else qos.QoSClass.LS
    return qos.default_priority_class_for_qos(klass)
