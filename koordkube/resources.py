"""The kinds the components read and write, and conversions between lightkube objects and dicts.

Koordinator's CRDs (NodeMetric, NodeSLO, ClusterColocationProfile, PodMigrationJob, Device, and
the ElasticQuota and PodGroup it takes from scheduler-plugins) are lightkube generic resources
(dict-shaped); built-in kinds come from ``lightkube.resources``. Either class only names a REST
endpoint for ``koordkube.client``: objects themselves travel as plain Kubernetes JSON dicts
(``Object``), which is what the pure decision modules take. ``to_dict``/``from_dict`` convert
when code does use lightkube's typed models. Typed models drop fields their schema does not
know and re-format timestamps, so read-modify-write paths should stay on dicts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from lightkube.core import resource as lkres
from lightkube.core.dictmixin import DictMixin
from lightkube.generic_resource import Generic, create_global_resource, create_namespaced_resource

Object = dict[str, Any]
"""One Kubernetes object as JSON: ``{"apiVersion", "kind", "metadata", "spec", "status"}``."""

SLO_GROUP = "slo.koordinator.sh"
CONFIG_GROUP = "config.koordinator.sh"
SCHEDULING_GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"

# create_global_resource registers each class in lightkube's resource registry (so that
# lightkube.codecs can load these kinds from YAML); calling it again with the same signature
# returns the same class, so importing this module twice is harmless.
NodeMetric = create_global_resource(SLO_GROUP, VERSION, "NodeMetric", "nodemetrics")
NodeSLO = create_global_resource(SLO_GROUP, VERSION, "NodeSLO", "nodeslos")
ClusterColocationProfile = create_global_resource(
    CONFIG_GROUP, VERSION, "ClusterColocationProfile", "clustercolocationprofiles"
)
# koord-descheduler's migration requests; cluster-scoped, as Koordinator's CRD.
PodMigrationJob = create_global_resource(
    SCHEDULING_GROUP, VERSION, "PodMigrationJob", "podmigrationjobs"
)
# a node's GPUs and RDMA NICs, one per node named after it: koordlet writes it, koord-scheduler's
# DeviceShare reads it; cluster-scoped, and without a status subresource, as Koordinator's CRD.
Device = create_global_resource(SCHEDULING_GROUP, VERSION, "Device", "devices")
# resources held on a node for the pods that will need them: the extender places and holds
# them, koord-manager keeps their status; cluster-scoped, as Koordinator's CRD.
Reservation = create_global_resource(SCHEDULING_GROUP, VERSION, "Reservation", "reservations")
# The quota tree and gangs: the scheduler-plugins group's kinds, which Koordinator uses as
# they are; namespaced.
SIGS_SCHEDULING_GROUP = "scheduling.sigs.k8s.io"
ElasticQuota = create_namespaced_resource(
    SIGS_SCHEDULING_GROUP, VERSION, "ElasticQuota", "elasticquotas"
)
PodGroup = create_namespaced_resource(SIGS_SCHEDULING_GROUP, VERSION, "PodGroup", "podgroups")

R = TypeVar("R", bound=lkres.Resource)


def api_version(res: type[lkres.Resource]) -> str:
    """Return ``group/version`` (``v1`` for the core group) of a lightkube resource class."""
    info = lkres.api_info(res)
    base = info.parent or info.resource
    return f"{base.group}/{base.version}" if base.group else base.version


def kind(res: type[lkres.Resource]) -> str:
    """Return the kind of a lightkube resource class (of the parent for a subresource)."""
    info = lkres.api_info(res)
    return str((info.parent or info.resource).kind)


def is_namespaced(res: type[lkres.Resource]) -> bool:
    return issubclass(res, (lkres.NamespacedResource, lkres.NamespacedSubResource))


def to_dict(obj: Any) -> Object:
    """Return a lightkube object (typed or generic) or a mapping as a fresh plain dict."""
    if isinstance(obj, DictMixin):
        return obj.to_dict()
    if isinstance(obj, Generic):
        data = dict(obj)
        if isinstance(data.get("metadata"), DictMixin):  # set as a typed ObjectMeta
            data["metadata"] = data["metadata"].to_dict()
        return copy.deepcopy(data)
    if isinstance(obj, Mapping):
        return copy.deepcopy(dict(obj))
    raise TypeError(f"cannot convert {type(obj).__name__} to a Kubernetes object dict")


def from_dict(res: type[R], data: Mapping[str, Any]) -> R:
    """Build an instance of lightkube resource class ``res`` from a plain dict."""
    body = copy.deepcopy(dict(data))
    body.setdefault("apiVersion", api_version(res))
    body.setdefault("kind", kind(res))
    build: Any = res  # typed models build from_dict, generic resources are dict subclasses
    return cast(R, build.from_dict(body) if issubclass(res, DictMixin) else build(body))


def with_type_meta(res: type[lkres.Resource], obj: Object) -> Object:
    """Fill ``apiVersion``/``kind``, which list items of built-in kinds leave out."""
    obj.setdefault("apiVersion", api_version(res))
    obj.setdefault("kind", kind(res))
    return obj


def object_key(obj: Mapping[str, Any]) -> str:
    """Return client-go's cache key: ``namespace/name``, or ``name`` for cluster-scoped kinds."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """Split an ``object_key`` back into (namespace or None, name)."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)
