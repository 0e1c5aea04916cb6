"""koord-descheduler's view of the cluster: informers over Nodes, Pods, NodeMetrics,
PodMigrationJobs and the workloads arbitration counts replicas of (ReplicaSets and
StatefulSets), and the snapshots the pure decisions take (``node_infos`` for LowNodeLoad,
``cluster_view`` for arbitration, ``jobs`` for both).

Expected replicas come from what is cached: a pod controlled by a ReplicaSet counts that
ReplicaSet's spec.replicas and pods (for a Deployment in a rollout, Koordinator counts the
Deployment's replicas and the pods of all its ReplicaSets: here each ReplicaSet stands
alone); a StatefulSet's likewise. A pod controlled by anything else (a Job, an OpenKruise
workload, ...) has a workload that is not found: 0 expected replicas, so arbitration never
migrates it, as Koordinator does when its controller finder cannot resolve the owner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from lightkube.resources.apps_v1 import ReplicaSet, StatefulSet
from lightkube.resources.core_v1 import Node, Pod

from descheduler.cluster import NodeInfo, node_info
from descheduler.migration.job import JobError, PodMigrationJob
from descheduler.migration.view import ClusterView, PodView, WorkloadView, pod_view, workload_view
from descheduler.selectors import LabelSelector
from koordapi.errors import ModelError
from koordkube.client import KubeApi
from koordkube.informer import Informer
from koordkube.podindex import PodsByNode
from koordkube.resources import NodeMetric
from koordkube.resources import PodMigrationJob as PodMigrationJobResource

log = logging.getLogger(__name__)

Object = Mapping[str, Any]


def is_node_ready(node: Object) -> bool:
    """The node's Ready condition is True (Koordinator's descheduler works on ready nodes)."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


class DeschedulerState:
    def __init__(self, api: KubeApi, *, workloads: bool = True) -> None:
        self.nodes = Informer(api, Node)
        self.pods = Informer(api, Pod)
        self.node_metrics = Informer(api, NodeMetric)
        self.jobs_informer = Informer(api, PodMigrationJobResource)
        self.workloads: list[Informer] = (
            [Informer(api, ReplicaSet), Informer(api, StatefulSet)] if workloads else []
        )
        self._by_node = PodsByNode()
        self.pods.add_handler(self._index)

    def _index(self, event: str, pod: Object) -> None:
        self._by_node.apply(event, pod)

    @property
    def informers(self) -> list[Informer]:
        return [self.nodes, self.pods, self.node_metrics, self.jobs_informer, *self.workloads]

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    # -- snapshots ----------------------------------------------------------------------------

    def ready_nodes(self, selector: LabelSelector | None = None) -> list[Object]:
        return [
            node
            for node in self.nodes.list()
            if is_node_ready(node)
            and (
                selector is None
                or selector.matches((node.get("metadata") or {}).get("labels") or {})
            )
        ]

    def node_infos(self, nodes: list[Object]) -> list[NodeInfo]:
        """LowNodeLoad's input: each node with its NodeMetric and pods (a node whose pods do
        not parse is left out, with a log line)."""
        infos = []
        for node in nodes:
            name = str((node.get("metadata") or {}).get("name", ""))
            try:
                infos.append(
                    node_info(node, self.node_metrics.get(name), self._by_node.on(name).values())
                )
            except ModelError as err:
                log.warning("node %s left out of the round: %s", name, err)
        return infos

    def pod(self, key: str) -> Object | None:
        return self.pods.get(key)

    def jobs(self) -> list[tuple[PodMigrationJob, Object]]:
        """Every cached PodMigrationJob, read, with its object (unreadable ones are skipped)."""
        found: list[tuple[PodMigrationJob, Object]] = []
        for obj in self.jobs_informer.list():
            try:
                found.append((PodMigrationJob.from_dict(obj), obj))
            except JobError as err:
                name = (obj.get("metadata") or {}).get("name")
                log.warning("PodMigrationJob %s ignored: %s", name, err)
        return found

    def cluster_view(self, wanted: Callable[[Object], bool] | None = None) -> ClusterView:
        """Pods (those ``wanted``, all by default) and workloads as arbitration reads them."""
        views: list[PodView] = []
        for pod in self.pods.list():
            if wanted is not None and not wanted(pod):
                continue
            try:
                views.append(pod_view(pod))
            except ModelError as err:
                log.debug("pod %s not readable: %s", (pod.get("metadata") or {}).get("name"), err)
        by_owner: dict[str, list[PodView]] = {}
        for view in views:
            if view.owner is not None:
                by_owner.setdefault(view.owner.uid, []).append(view)
        workloads: dict[str, WorkloadView] = {}
        for informer in self.workloads:
            for obj in informer.list():
                uid = str((obj.get("metadata") or {}).get("uid", ""))
                workloads[uid] = workload_view(_expected(obj), by_owner.get(uid, ()))
        return ClusterView.of(views, workloads)

    def expected_replicas(self, uid: str) -> int | None:
        """The expected replicas of the workload with ``uid``; None when it is not cached."""
        for informer in self.workloads:
            for obj in informer.list():
                if (obj.get("metadata") or {}).get("uid") == uid:
                    return _expected(obj)
        return None


def _expected(workload: Object) -> int:
    """A ReplicaSet's or StatefulSet's spec.replicas (1 when unset, as the API defaults it)."""
    replicas = (workload.get("spec") or {}).get("replicas", 1)
    return replicas if isinstance(replicas, int) else 1
