"""koord-scheduler's view of the cluster: Node, Pod, NodeMetric, Device, ElasticQuota and
Reservation informers, as a ClusterView (and DeviceView, QuotaView, ReservationView).

The verbs (scheduler.extender) read only from here. Besides the caches it keeps the pods this
extender bound whose Binding the pod informer has not shown yet ("assumed", with the
annotations planned for them), so that two LSR pods in quick succession are never given the
same CPUs and two GPU pods never the same share of a GPU, and it records which node each change
concerns (the ChangeFeed), so the verbs re-check only those nodes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from lightkube.resources.core_v1 import Node, Pod

from koordapi.errors import ModelError
from koordapi.reservation.model import Reservation as ReservationModel
from koordkube.client import KubeApi
from koordkube.informer import Informer
from koordkube.podindex import PodsByNode
from koordkube.resources import Device, ElasticQuota, NodeMetric, Reservation, object_key
from scheduler import loadaware
from scheduler.extender import scheduled_at
from scheduler.quota import QuotaAdmission

log = logging.getLogger(__name__)

Object = Mapping[str, Any]
MAX_CHANGES = 100_000  # a feed older than this many changes re-checks every node


class InformerClusterView:
    def __init__(self, api: KubeApi, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.nodes = Informer(api, Node)
        self.pods = Informer(api, Pod)
        self.node_metrics = Informer(api, NodeMetric)
        self.devices = Informer(api, Device)
        self.elastic_quotas = Informer(api, ElasticQuota)
        self.reservations = Informer(api, Reservation)
        self.quota = QuotaAdmission()
        # Reservations by name, as read; those this extender placed, until the informer shows
        # them placed; and the nodes with an active one (every filter asks)
        self._reservations: dict[str, ReservationModel] = {}
        self._placed: dict[str, ReservationModel] = {}
        self._held: dict[str, set[str]] = {}  # node -> names of its active reservations
        self._unreadable: dict[str, str] = {}  # name -> resourceVersion logged as malformed
        # pods refused on a node for its reservations' room: asked to be tried again
        # (``requeue``) when a reservation there stops holding (expired, deleted, gone)
        self._refused: dict[str, set[str]] = {}
        self.requeue: set[str] = set()
        self.requeue_wanted = asyncio.Event()
        self._by_node = PodsByNode()
        self._assumed: dict[str, tuple[Object, str, float]] = {}  # pod key → (pod, node, at)
        self._bound_at: dict[str, float] = {}  # pod key → when this extender bound it
        self._changes: list[str] = []
        self._base = 0  # the token of self._changes[0]
        self.nodes.add_handler(lambda _e, node: self._changed(object_key(node)))
        self.nodes.add_handler(self.quota.on_node)
        self.elastic_quotas.add_handler(self.quota.on_quota)
        self.node_metrics.add_handler(lambda _e, metric: self._changed(object_key(metric)))
        self.devices.add_handler(lambda _e, device: self._changed(object_key(device)))
        self.pods.add_handler(self._on_pod)
        self.reservations.add_handler(self._on_reservation)

    @property
    def informers(self) -> list[Informer]:
        """Every informer to run."""
        return [
            self.nodes,
            self.pods,
            self.node_metrics,
            self.devices,
            self.elastic_quotas,
            self.reservations,
        ]

    def synced(self) -> bool:
        """Ready once Nodes, Pods and NodeMetrics are listed. Devices, ElasticQuotas and
        Reservations are not waited for: a cluster without Koordinator's Device CRD, the
        ElasticQuota CRD or the Reservation CRD (or RBAC for them) still schedules; until the
        Device informer lists, GPU pods are judged as on nodes without a Device, until the
        ElasticQuota one does, no quota is checked, and until the Reservation one does, no
        room is held."""
        return all(i.synced.is_set() for i in (self.nodes, self.pods, self.node_metrics))

    # -- ChangeFeed -----------------------------------------------------------------------------

    def _changed(self, node: str) -> None:
        self._changes.append(node)
        if len(self._changes) > MAX_CHANGES:
            drop = len(self._changes) // 2
            del self._changes[:drop]
            self._base += drop

    def changes_since(self, token: int) -> tuple[int, Collection[str] | None]:
        end = self._base + len(self._changes)
        if not self._base <= token <= end:
            return end, None
        return end, set(self._changes[token - self._base :])

    # -- pods -----------------------------------------------------------------------------------

    def _on_pod(self, event: str, pod: Object) -> None:
        key = object_key(pod)
        old, node = self._by_node.apply(event, pod)
        if old is not None:
            self._changed(old)
        if event == "DELETED":
            self._bound_at.pop(key, None)
            self._assumed.pop(key, None)
        if self._refused and (event == "DELETED" or node is not None):
            for refused in self._refused.values():
                refused.discard(key)
        if node is not None and self._assumed.pop(key, None) is not None:
            log.debug("pod %s: its binding to %s is visible", key, node)
        # an assumed pod whose Binding is not visible yet still counts as assigned
        self.quota.on_pod(event, pod, key, assumed=key in self._assumed)
        if node is not None:
            self._changed(node)

    def assume(self, pod: Object, node: str, annotations: Mapping[str, str]) -> None:
        """Count ``pod`` on ``node`` from now on, with ``annotations``, until its Binding shows."""
        key = object_key(pod)
        meta = dict(pod.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        placed = {**pod, "metadata": meta, "spec": {**(pod.get("spec") or {}), "nodeName": node}}
        now = self.clock()
        self._assumed[key] = (placed, node, now)
        self._bound_at[key] = now
        self.quota.on_pod("MODIFIED", placed, key, assumed=True)
        self._changed(node)

    def forget(self, pod: Object) -> None:
        """The bind failed: the pod is not on the node after all."""
        key = object_key(pod)
        assumed = self._assumed.pop(key, None)
        self._bound_at.pop(key, None)
        if assumed is not None:
            self._changed(assumed[1])
            known = self.pods.get(key)
            self.quota.on_pod("DELETED" if known is None else "MODIFIED", known or pod, key)

    def pod(self, namespace: str, name: str) -> Object | None:
        return self.pods.get(f"{namespace}/{name}")

    def quota_reason(self, pod: Object) -> str | None:
        """Why the pod's ElasticQuota has no room for it now, else None (QuotaView)."""
        return self.quota.reason(pod)

    # -- reservations (scheduler.reservation.ReservationView) ----------------------------------

    def _on_reservation(self, event: str, obj: Object) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        old = self.reservation(name)
        if event == "DELETED":
            self._reservations.pop(name, None)
            self._placed.pop(name, None)
        else:
            try:
                self._reservations[name] = ReservationModel.from_dict(obj)
                self._unreadable.pop(name, None)
            except ModelError as err:
                version = str(meta.get("resourceVersion") or "")
                if self._unreadable.get(name) != version:
                    log.warning(
                        "Reservation %s is not usable, holding nothing for it: %s", name, err
                    )
                    self._unreadable[name] = version
                self._reservations.pop(name, None)
            seen = self._reservations.get(name)
            if seen is not None and (seen.node_name or seen.finished):
                self._placed.pop(name, None)  # the informer has caught up
        self._reindex(name, old)

    def _reindex(self, name: str, old: ReservationModel | None) -> None:
        new = self.reservation(name)
        for r in (old, new):
            if r is not None and r.node_name:
                names = self._held.get(r.node_name, set())
                names.discard(name)
                if not names:
                    self._held.pop(r.node_name, None)
        if new is not None and new.active:
            self._held.setdefault(new.node_name, set()).add(name)
        if old is not None and old.active and (new is None or not new.active):
            self._release(old.node_name)
        for node in {r.node_name for r in (old, new) if r is not None and r.node_name}:
            self._changed(node)

    def note_refused(self, pod_key: str, node: str) -> None:
        """``pod_key`` was refused on ``node`` for the room its reservations hold."""
        self._refused.setdefault(node, set()).add(pod_key)

    def _release(self, node: str) -> None:
        """A reservation on ``node`` stopped holding: the pods refused there are to be tried
        again. kube-scheduler has no event for it (a Reservation is not its kind)."""
        refused = self._refused.pop(node, set())
        if refused:
            self.requeue |= refused
            self.requeue_wanted.set()

    def reservation(self, name: str) -> ReservationModel | None:
        return self._placed.get(name) or self._reservations.get(name)

    def place(self, placed: ReservationModel) -> None:
        """Hold ``placed`` (now Available on its node) from now on, until the informer shows
        it so: kube-scheduler forgets the reserve pod as soon as it is deleted."""
        old = self.reservation(placed.name)
        self._placed[placed.name] = placed
        self._reindex(placed.name, old)

    def reservation_nodes(self) -> Collection[str]:
        return self._held.keys()

    def reservations_on(self, name: str) -> Sequence[ReservationModel]:
        found = [self.reservation(n) for n in self._held.get(name, ())]
        return [r for r in found if r is not None]

    # -- ClusterView ----------------------------------------------------------------------------

    def node(self, name: str) -> Object | None:
        return self.nodes.get(name)

    def node_metric(self, name: str) -> Object | None:
        return self.node_metrics.get(name)

    def device(self, name: str) -> Object | None:
        return self.devices.get(name)

    def pods_on(self, name: str) -> Sequence[Object]:
        found = self._by_node.on(name)
        assumed = [p for k, (p, n, _) in self._assumed.items() if n == name and k not in found]
        return [*found.values(), *assumed] if assumed else list(found.values())

    def assigned_since_report(self, name: str) -> Sequence[tuple[Object, float]]:
        """Every active pod on the node with when it was assigned (this extender's bind time,
        else its PodScheduled condition); the estimator decides which still count."""
        return [
            (pod, self._bound_at.get(object_key(pod)) or scheduled_at(pod))
            for pod in self.pods_on(name)
            if not loadaware.is_terminated(pod)
        ]
