"""What the pods of each ElasticQuota ask for and use, kept from informer events, and the
quota tree built on it: the counting koord-scheduler's extender admits pods with
(``scheduler.quota``) and koord-manager writes each quota's status from
(``manager.controllers.elasticquota``), so the two never count differently.

``QuotaBook`` keeps the ElasticQuotas (their tree, and which namespace maps to which quota:
``koordapi.quota.topology``), every pod's request counted in its quota (all pods not finished:
Koordinator's request, which decides how idle quota is lent) and among them the assigned ones
(bound, or bound by the caller and not yet seen: Koordinator's used), and the cluster's
allocatable. Koordinator's elastic-quota plugin keeps the same sums in its GroupQuotaManager
(OnPodAdd/OnPodUpdate/OnPodDelete, updatePodRequestNoLock, updatePodUsedNoLock). The runtime
arithmetic is ``koordapi.quota.runtime``; the tree is rebuilt only when something changed
since it was last asked for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordapi.errors import ModelError
from koordapi.pod import pod_requests
from koordapi.quota.model import (
    ANNOTATION_NAMESPACES,
    ElasticQuota,
    Resources,
    add,
    pod_non_preemptible,
    resources,
    subtract,
    total,
)
from koordapi.quota.runtime import QuotaTree, QuotaUsage, format_resources
from koordapi.quota.topology import QuotaTopology, quota_of_pod

log = logging.getLogger(__name__)

Object = Mapping[str, Any]
_FINISHED = ("Succeeded", "Failed")


def pod_request(pod: Object) -> Resources:
    """Every resource the pod requests, as Kubernetes' PodRequests counts it (containers,
    init containers, pod-level resources, overhead), in the quota code's units."""
    spec = pod.get("spec") or {}
    names: set[str] = set((spec.get("overhead") or {}).keys())
    amounts = [
        (container.get("resources") or {})
        for section in ("containers", "initContainers")
        for container in spec.get(section) or ()
    ]
    for part in ("requests", "limits"):
        for resources_of in (*amounts, spec.get("resources") or {}):
            names.update((resources_of.get(part) or {}).keys())
    found = {name: pod_requests(spec, (name, name))[0] for name in sorted(names)}
    return {name: amount for name, amount in found.items() if amount}


def _placement(obj: Object) -> tuple[str, str]:
    """What of a quota decides which pods count in it besides its name (quota_of_pod): its
    namespace and its namespaces annotation."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return str(meta.get("namespace") or ""), str(annotations.get(ANNOTATION_NAMESPACES) or "")


@dataclass(frozen=True)
class _Share:
    """What one pod adds to its quota."""

    quota: str
    request: Resources
    assigned: bool
    non_preemptible: bool


@dataclass(frozen=True)
class _Pod:
    """What is kept of a pod to place it in a quota again when the quotas change."""

    obj: Object
    request: Resources
    assigned: bool


Operation = Callable[[Mapping[str, int], Mapping[str, int]], Resources]


class QuotaBook:
    """The quotas, the pods counted in them and the cluster's allocatable, fed by informer
    events (not thread-safe: one event loop calls it)."""

    def __init__(self) -> None:
        self.topology = QuotaTopology()
        self._quotas: dict[str, ElasticQuota] = {}
        self._objects: dict[str, Object] = {}  # the last object seen of each quota
        self._pods: dict[str, _Pod] = {}
        self._shares: dict[str, _Share] = {}
        self._usage: dict[str, list[Resources]] = {}  # quota → [request, used, np req, np used]
        self._allocatable: dict[str, Resources] = {}
        self._tree: QuotaTree | None = None
        self._stale = True
        self.broken = ""
        """Why the quota tree cannot be built (an unknown parent, a cycle): said once in the
        log, and ``tree()`` is None meanwhile."""
        self.rejected: dict[str, str] = {}
        """Each ElasticQuota left out because it cannot be read (a malformed amount or
        annotation), by name: why. Its pods count in the quota they would run in without it."""

    @property
    def quotas(self) -> Mapping[str, ElasticQuota]:
        """The quotas read, by name (the rejected ones are not among them)."""
        return self._quotas

    # -- events ---------------------------------------------------------------------------

    def on_quota(self, event: str, obj: Object) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        before = self._objects.pop(name, None)
        was = self._quotas.pop(name, None)
        self.rejected.pop(name, None)
        if event == "DELETED":
            if before is not None:
                self.topology.on_delete(before)
                log.info("ElasticQuota %s deleted", name)
        else:
            try:
                quota = ElasticQuota.from_object(obj)
                if before is None:
                    self.topology.on_add(obj)
                else:  # an update keeps the quota's children linked to it
                    self.topology.on_update(before, obj)
            except ModelError as err:
                log.warning("ElasticQuota %s ignored: %s", name, err)
                self.rejected[name] = str(err)
                if before is not None:
                    self.topology.on_delete(before)
            else:
                self._quotas[name], self._objects[name] = quota, obj
                if before is None or before.get("spec") != obj.get("spec"):
                    log.info(
                        "ElasticQuota %s: parent %s, min %s, max %s",
                        name,
                        quota.parent or "-",
                        format_resources(quota.min),
                        format_resources(quota.max),
                    )
                if before is not None and _placement(before) == _placement(obj):
                    # the pods stay where they count (a status write, a new min): the tree
                    # is rebuilt only if the quota's numbers changed
                    self._stale = self._stale or was != quota
                    return
        self._replace_all()  # a quota's names and namespaces decide where pods count

    def on_node(self, event: str, node: Object) -> None:
        name = str((node.get("metadata") or {}).get("name") or "")
        if event == "DELETED":
            self._allocatable.pop(name, None)
        else:
            try:
                self._allocatable[name] = resources((node.get("status") or {}).get("allocatable"))
            except ModelError as err:
                log.warning("node %s: allocatable ignored for quotas: %s", name, err)
                self._allocatable.pop(name, None)
        self._stale = True

    def on_pod(self, event: str, pod: Object, key: str, *, assumed: bool = False) -> None:
        """A pod event (``assumed``: the caller bound it and its Binding is not seen yet)."""
        self._remove(key)
        if event == "DELETED" or (pod.get("status") or {}).get("phase") in _FINISHED:
            self._pods.pop(key, None)
            return
        try:
            request = pod_request(pod)
        except (ModelError, TypeError, AttributeError) as err:
            log.warning("pod %s: not counted in its quota: %s", key, err)
            self._pods.pop(key, None)
            return
        assigned = assumed or bool((pod.get("spec") or {}).get("nodeName"))
        self._pods[key] = _Pod(pod, request, assigned)
        self._place(key)

    def assigned_pods(self, quota: str) -> list[Object]:
        """The pods counted as used in ``quota`` (bound, not finished): what reclaim picks
        from (Koordinator's QuotaInfo.GetPodThatIsAssigned)."""
        return [
            self._pods[key].obj
            for key, share in self._shares.items()
            if share.quota == quota and share.assigned
        ]

    # -- the tree -------------------------------------------------------------------------

    def tree(self) -> QuotaTree | None:
        """The quota tree with the current numbers; None while it cannot be built."""
        if self._stale:
            self._stale = False
            usage = {
                name: QuotaUsage(request=r, used=u, non_preemptible_request=nr,
                                 non_preemptible_used=nu)
                for name, (r, u, nr, nu) in self._usage.items()
            }  # fmt: skip
            cluster = total(self._allocatable.values())
            try:
                self._tree = QuotaTree(self._quotas.values(), cluster, usage)
            except ModelError as err:
                if str(err) != self.broken:
                    log.error("quotas not checked: the quota tree cannot be built: %s", err)
                self.broken, self._tree = str(err), None
            else:
                self.broken = ""
        return self._tree

    # -- bookkeeping ----------------------------------------------------------------------

    def _place(self, key: str) -> None:
        pod = self._pods[key]
        share = _Share(
            quota_of_pod(pod.obj, self.topology),
            pod.request,
            pod.assigned,
            pod_non_preemptible(pod.obj),
        )
        self._shares[key] = share
        self._count(share, add)

    def _remove(self, key: str) -> None:
        share = self._shares.pop(key, None)
        if share is not None:
            self._count(share, subtract)

    def _count(self, share: _Share, op: Operation) -> None:
        sums = self._usage.setdefault(share.quota, [{}, {}, {}, {}])
        sums[0] = op(sums[0], share.request)
        if share.assigned:
            sums[1] = op(sums[1], share.request)
        if share.non_preemptible:
            sums[2] = op(sums[2], share.request)
            if share.assigned:
                sums[3] = op(sums[3], share.request)
        self._stale = True

    def _replace_all(self) -> None:
        self._shares.clear()
        self._usage.clear()
        for key in self._pods:
            self._place(key)
        self._stale = True
