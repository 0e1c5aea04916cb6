"""The cluster as migration arbitration sees it: pods (PodView: the LowNodeLoad PodInfo plus
uid, node, controller and availability), workloads (WorkloadView: expected replicas and
which of their pods are unavailable) and both together (ClusterView), with the adapters
that build them from Kubernetes JSON (pod_view, workload_view).

It follows what Koordinator v1.8.0's pkg/descheduler/controllers/migration/arbitrator reads:
the pod's controller reference (metav1.GetControllerOf), its node, the workload's expected
replicas and pods (controllerfinder.GetPodsForRef), and availability as Kubernetes'
IsPodActive and IsPodReady.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from descheduler.cluster import PodInfo, pod_info
from descheduler.migration.job import ANNOTATION_EVICT_POD

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True)
class OwnerRef:
    """A pod's controller reference (the owner reference with ``controller: true``)."""

    kind: str
    name: str
    uid: str
    api_version: str = ""

    def describe(self) -> str:
        """As Koordinator logs an owner: name/kind/apiVersion(uid)."""
        return f"{self.name}/{self.kind}/{self.api_version}({self.uid})"


@dataclass(frozen=True)
class PodView:
    """One pod. ``info`` carries what the evictor's protections and the pod order read;
    ``available`` is active (not Succeeded, not Failed, not being deleted) and Ready."""

    info: PodInfo
    uid: str = ""
    node_name: str = ""
    owner: OwnerRef | None = None
    owner_uids: tuple[str, ...] = ()  # every owner reference's uid, controller or not
    available: bool = True
    evict_annotation: bool = False  # descheduler.alpha.kubernetes.io/evict: passes every check

    @property
    def namespace(self) -> str:
        return self.info.namespace

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def key(self) -> str:
        return self.info.key


@dataclass(frozen=True)
class WorkloadView:
    """A workload (the controller pods name): the replicas it expects and the keys
    (namespace/name) of its pods that are not available."""

    expected_replicas: int
    unavailable_pods: frozenset[str] = frozenset()


# what GetPodsForRef gives for a workload it cannot find: no pods, no replicas
UNKNOWN_WORKLOAD = WorkloadView(expected_replicas=0)


@dataclass(frozen=True)
class ClusterView:
    """Pods by namespace/name, workloads by their uid. A workload missing here is one that
    was not found: 0 expected replicas, so its pods are never migrated."""

    pods: Mapping[str, PodView] = field(default_factory=dict)
    workloads: Mapping[str, WorkloadView] = field(default_factory=dict)

    @classmethod
    def of(
        cls, pods: Iterable[PodView], workloads: Mapping[str, WorkloadView] | None = None
    ) -> ClusterView:
        return cls({pod.key: pod for pod in pods}, dict(workloads or {}))

    def pod(self, key: str) -> PodView | None:
        return self.pods.get(key)

    def workload(self, uid: str) -> WorkloadView:
        return self.workloads.get(uid, UNKNOWN_WORKLOAD)


def _controller(refs: Iterable[Any]) -> OwnerRef | None:
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return OwnerRef(
                kind=str(ref.get("kind", "")),
                name=str(ref.get("name", "")),
                uid=str(ref.get("uid", "")),
                api_version=str(ref.get("apiVersion", "")),
            )
    return None


def is_pod_available(pod: Mapping[str, Any]) -> bool:
    """IsPodActive and IsPodReady: not Succeeded or Failed, no deletionTimestamp, and a Ready
    condition with status True."""
    metadata = pod.get("metadata") or _EMPTY
    status = pod.get("status") or _EMPTY
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if metadata.get("deletionTimestamp") is not None:
        return False
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def pod_view(pod: Mapping[str, Any]) -> PodView:
    """A pod's JSON as arbitration reads it (PodInfo through descheduler.cluster.pod_info,
    which raises ModelError for unreadable resources)."""
    metadata = pod.get("metadata") or _EMPTY
    refs = [r for r in metadata.get("ownerReferences") or () if isinstance(r, Mapping)]
    return PodView(
        info=pod_info(pod),
        uid=str(metadata.get("uid", "")),
        node_name=str((pod.get("spec") or _EMPTY).get("nodeName", "")),
        owner=_controller(refs),
        owner_uids=tuple(str(r.get("uid", "")) for r in refs if r.get("uid")),
        available=is_pod_available(pod),
        evict_annotation=ANNOTATION_EVICT_POD in (metadata.get("annotations") or _EMPTY),
    )


def workload_view(expected_replicas: int, pods: Iterable[PodView]) -> WorkloadView:
    """A workload from its expected replicas (the scale of its controller) and its pods
    (for a Deployment, the pods of all its ReplicaSets)."""
    return WorkloadView(expected_replicas, frozenset(pod.key for pod in pods if not pod.available))
