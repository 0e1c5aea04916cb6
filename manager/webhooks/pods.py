"""Read a Pod dict the way Koordinator's apis/extension helpers read a corev1.Pod.

Every accessor checks the shape it walks and raises ``admission.ObjectError`` naming the
field, so a malformed pod becomes a denial, never a TypeError in a handler; what the fields
mean (requests, QoS, priority class) is koordapi.pod's, read once the shape is checked.
Shared by the mutating and the validating pod webhooks; no I/O here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from koordapi import pod as pod_model
from koordapi import qos
from koordapi.errors import ModelError, QuantityError
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
    """(where, list) for every requests/limits map of every container, then the pod-level
    ``spec.resources`` ones, then spec.overhead."""
    for where, container in containers(pod):
        resources = _map(container.get("resources"), f"{where}.resources")
        for section in SECTIONS:
            at = f"{where}.resources.{section}"
            yield at, _map(resources.get(section), at)
    pod_level = _map(spec(pod).get("resources"), "spec.resources")
    for section in SECTIONS:
        yield f"spec.resources.{section}", _map(pod_level.get(section), f"spec.resources.{section}")
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


def check_resources(pod: Mapping[str, Any]) -> None:
    """Raise ObjectError for the first malformed resource quantity in the pod. Once it passes,
    koordapi.pod reads the pod's requests without error."""
    for where, resource_list in resource_lists(pod):
        for name, value in resource_list.items():
            quantity(value, f"{where}.{name}")


def qos_raw(pod: Mapping[str, Any]) -> qos.QoSClass:
    """The ``koordinator.sh/qosClass`` label's class; NONE when absent or unknown."""
    labels_of(pod)  # names a malformed label map
    return pod_model.qos_class_raw(pod)


def priority_class_raw(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """Koordinator's ``GetPodPriorityClassRaw``: the priority-class label when present (an
    unknown name is NONE, with no fallback), else the range ``spec.priority`` falls in."""
    labels_of(pod)  # names a malformed label map
    spec(pod)  # ... or spec
    return pod_model.priority_class_raw(pod)


def priority_class_with_default(pod: Mapping[str, Any]) -> qos.PriorityClass:
    """``GetPodPriorityClassWithDefault``: the raw class, else the one the QoS class implies
    (the QoS label, else the Kubernetes QoS class: BestEffort → BE → batch, Burstable → LS and
    Guaranteed → LSR → prod). Call ``check_resources`` first."""
    labels_of(pod)
    spec(pod)
    try:
        return pod_model.priority_class_with_default(pod)
    except (ModelError, TypeError, AttributeError) as err:  # a status of the wrong shape
        raise ObjectError(f"pod: {err}") from None
