"""An ElasticQuota (``elasticquotas.scheduling.sigs.k8s.io``) with Koordinator's labels and
annotations read into one value: its place in the quota tree, its min, max and shared weight.

Amounts are integers as Koordinator's quota code counts them (``getQuantityValue``): ``cpu``
in milli-cores, every other resource in whole units (memory in bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.quantity import resource_value

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"
PLURAL = "elasticquotas"
KIND = "ElasticQuota"

# Koordinator's names (apis/extension/elastic_quota.go).
SYSTEM_QUOTA = "koordinator-system-quota"
ROOT_QUOTA = "koordinator-root-quota"
DEFAULT_QUOTA = "koordinator-default-quota"
PREFIX = "quota.scheduling.koordinator.sh"
LABEL_IS_PARENT = f"{PREFIX}/is-parent"
LABEL_PARENT = f"{PREFIX}/parent"
LABEL_ALLOW_LENT_RESOURCE = f"{PREFIX}/allow-lent-resource"
LABEL_QUOTA_NAME = f"{PREFIX}/name"  # on a pod: the quota it runs in
LABEL_IS_ROOT = f"{PREFIX}/is-root"
LABEL_TREE_ID = f"{PREFIX}/tree-id"
LABEL_PREEMPTIBLE = f"{PREFIX}/preemptible"  # on a pod: "false" keeps it within min
LABEL_ALLOW_FORCE_UPDATE = f"{PREFIX}/allow-force-update"
ANNOTATION_SHARED_WEIGHT = f"{PREFIX}/shared-weight"
ANNOTATION_RUNTIME = f"{PREFIX}/runtime"
ANNOTATION_REQUEST = f"{PREFIX}/request"
ANNOTATION_CHILD_REQUEST = f"{PREFIX}/child-request"
ANNOTATION_NAMESPACES = f"{PREFIX}/namespaces"
ANNOTATION_GUARANTEED = f"{PREFIX}/guaranteed"
ANNOTATION_ALLOCATED = f"{PREFIX}/allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = f"{PREFIX}/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = f"{PREFIX}/non-preemptible-used"
# the resources whose max must stay at or above status.used (the webhook's check)
ANNOTATION_MAX_STRICT_CHECK_RESOURCE_KEYS = f"{PREFIX}/max-strict-check-resource-keys"

Resources = dict[str, int]
"""A resource list in the quota code's units (see the module doc)."""


def resources(raw: Mapping[str, Any] | None) -> Resources:
    """A ResourceList (``{"cpu": "1500m", "memory": "2Gi"}``) in the quota code's units;
    raises ModelError for a malformed amount."""
    return {name: resource_value(name, amount) for name, amount in (raw or {}).items()}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {name: a.get(name, 0) + b.get(name, 0) for name in {*a, *b}}


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {name: a.get(name, 0) - b.get(name, 0) for name in {*a, *b}}


def total(lists: Iterable[Mapping[str, int]]) -> Resources:
    found: Resources = {}
    for one in lists:
        found = add(found, one)
    return found


def max_of(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """quotav1.Max: each resource of either list at the larger of the two."""
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in {*a, *b}}


def parse_resource_list(text: str) -> Resources:
    """A ResourceList written as JSON (Koordinator's quota annotations); raises ModelError."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ModelError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ModelError(f"not a resource list: {text!r}")
    return resources(raw)


def _json_resources(annotations: Mapping[str, str], key: str) -> Resources:
    text = annotations.get(key)
    if not text:
        return {}
    try:
        return parse_resource_list(text)
    except ModelError as exc:
        raise ModelError(f"annotation {key}: {exc}") from exc


@dataclass(frozen=True)
class ElasticQuota:
    name: str
    namespace: str = ""
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    is_root: bool = False
    tree_id: str = ""
    allow_lent_resource: bool = True
    min: Resources = field(default_factory=dict)
    max: Resources = field(default_factory=dict)
    # Koordinator's GetSharedWeight: the annotation where set and not all zero, else max.
    shared_weight: Resources = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ElasticQuota:
        """Read an ElasticQuota object; raises ModelError for malformed amounts or
        annotations."""
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        spec = obj.get("spec") or {}
        name = str(meta.get("name") or "")
        maximum = resources(spec.get("max"))
        weight = _json_resources(annotations, ANNOTATION_SHARED_WEIGHT)
        namespaces: tuple[str, ...] = ()
        if annotations.get(ANNOTATION_NAMESPACES):
            try:
                listed = json.loads(annotations[ANNOTATION_NAMESPACES])
            except ValueError:
                listed = None  # Koordinator ignores an unreadable list
            if isinstance(listed, list):
                namespaces = tuple(str(n) for n in listed)
        parent = str(labels.get(LABEL_PARENT) or "")
        return cls(
            name=name,
            namespace=str(meta.get("namespace") or ""),
            parent=parent or ("" if name == ROOT_QUOTA else ROOT_QUOTA),
            is_parent=labels.get(LABEL_IS_PARENT) == "true",
            is_root=labels.get(LABEL_IS_ROOT) == "true",
            tree_id=str(labels.get(LABEL_TREE_ID) or ""),
            allow_lent_resource=labels.get(LABEL_ALLOW_LENT_RESOURCE) != "false",
            min=resources(spec.get("min")),
            max=maximum,
            shared_weight=weight if any(weight.values()) else dict(maximum),
            namespaces=namespaces,
        )


def pod_quota_name(pod: Mapping[str, Any]) -> str:
    """The quota a pod names (its ``quota.scheduling.koordinator.sh/name`` label); empty when
    it names none (the namespace's quota or the default quota then applies)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(LABEL_QUOTA_NAME) or "")


def pod_non_preemptible(pod: Mapping[str, Any]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_PREEMPTIBLE) == "false"
