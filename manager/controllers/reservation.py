"""The reservation controller: a Reservation from Pending to Available, Succeeded or Failed.

Koordinator's scheduler places a Reservation itself and its reservation controller
(pkg/scheduler/plugins/reservation/controller) keeps the status. Here the stock kube-scheduler
places it, so this controller (koord-manager's leader) does the rest:

* a Pending Reservation gets its reserve pod (koordapi.reservation.reservepod), which
  kube-scheduler places and the extender turns into the Reservation's node (Available); while
  kube-scheduler cannot place it, the pod's PodScheduled message becomes the Reservation's
  Scheduled condition, False for Unschedulable (SetReservationUnschedulable), as Koordinator's
  scheduler writes it;
* an Available Reservation's ``currentOwners`` and ``allocated`` follow the pods bound into it
  (their reservation-allocated annotation), and one allocated once (``allocateOnce``, the
  default) becomes Succeeded with its first owner (syncStatus);
* a Reservation past its ``expires`` or ``ttl``, or whose node is gone, becomes Failed with
  Ready False for Expired (expireReservation): the extender then holds nothing for it;
* a reserve pod left behind (its Reservation placed, finished or gone) is deleted, and a
  Succeeded or expired Reservation is deleted ``gc_duration`` after it ended (Koordinator's
  garbage collection, 24 h).

Status is written with a merge patch carrying the resourceVersion read: the extender writes the
same objects' placement, so a conflict is read again rather than overwritten.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from lightkube.resources.core_v1 import Pod

from koordapi.errors import ModelError
from koordapi.gang.spec import parse_time
from koordapi.quota.model import Resources
from koordapi.quota.runtime import resource_list
from koordapi.quota.usage import pod_request
from koordapi.reservation.model import (
    CONDITION_READY,
    REASON_EXPIRED,
    REASON_SUCCEEDED,
    Phase,
    Reservation,
    allocated_to,
    expired_status,
    reserve_pod_reservation,
    succeeded_conditions,
    unschedulable_conditions,
)
from koordapi.reservation.reservepod import reserve_pod, reserve_pod_name
from koordkube.client import KubeApi
from koordkube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from koordkube.resources import Reservation as ReservationResource
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics

log = logging.getLogger(__name__)

NAME = "reservation"
PREFIX = "reservation/"  # queue keys of Reservations; any other key is a node's name
GC_DURATION = 24 * 3600.0  # defaultGCDuration
RETRY = 1.0  # after a conflict: read again
_FINISHED = ("Succeeded", "Failed")

Object = Mapping[str, Any]


def key_of(name: str) -> str:
    return PREFIX + name


def _meta(obj: Object) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _unschedulable_message(pod: Object) -> str | None:
    """kube-scheduler's message while it cannot place the pod, else None."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return None


def _ended_at(reservation: Reservation) -> float | None:
    """When a finished Reservation ended, as isReservationNeedCleanup reads it: an expired one
    at its Expired condition's transition, a Succeeded one at its Succeeded condition's last
    probe (SetReservationSucceeded keeps the transition time of the Ready it had while
    Available)."""
    cond = reservation.condition(CONDITION_READY)
    if cond is None:
        return None
    if cond.get("reason") == REASON_EXPIRED:
        return parse_time(cond.get("lastTransitionTime"))
    if cond.get("reason") == REASON_SUCCEEDED:
        return parse_time(cond.get("lastProbeTime"))
    return None


class ReservationController:
    """Keeps Reservations' reserve pods and status (leader only: a reconciler of
    ``manager.app``; keys ``reservation/NAME``, and node names, which ask for the
    Reservations on that node)."""

    NAME = NAME

    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        metrics: ManagerMetrics,
        *,
        enqueue: Callable[[str], None] = lambda _key: None,
        clock: Callable[[], float] = time.time,
        gc_duration: float = GC_DURATION,
    ) -> None:
        """``clock``: epoch seconds (condition times are written from it)."""
        self.api, self.state, self.metrics = api, state, metrics
        self.enqueue, self.clock, self.gc_duration = enqueue, clock, gc_duration
        self._unreadable: dict[str, str] = {}  # name -> resourceVersion logged as malformed
        state.reservations.add_handler(self._on_reservation)
        state.pods.add_handler(self._on_pod)

    def _on_reservation(self, _event: str, obj: dict[str, Any]) -> None:
        self.enqueue(key_of(str(_meta(obj).get("name") or "")))

    def _on_pod(self, _event: str, pod: dict[str, Any]) -> None:
        name = reserve_pod_reservation(pod)
        if name:
            self.enqueue(key_of(name))
        into = allocated_to(pod)
        if into is not None and into[0]:  # an owner came, changed or went
            self.enqueue(key_of(into[0]))

    # -- one Reservation ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """Sync one Reservation; the seconds until it must be looked at again (its expiry, its
        garbage collection), None when only a change will."""
        if not key.startswith(PREFIX):  # a node changed: its Reservations (gone node: expire)
            for placed in self.state.reservations.list():
                if (placed.get("status") or {}).get("nodeName") == key:
                    self.enqueue(key_of(str(_meta(placed).get("name") or "")))
            return None
        name = key.removeprefix(PREFIX)
        obj = self.state.reservations.get(name)
        if obj is None:
            return None  # the garbage collector removes its reserve pod (owner reference)
        try:
            reservation = Reservation.from_dict(obj)
        except ModelError as err:
            self._unusable(name, obj, err)
            return None
        self._unreadable.pop(name, None)
        try:
            return await self._sync(obj, reservation, self.clock())
        except Conflict:
            self.metrics.reconciles.labels(NAME, "conflict").inc()
            return RETRY

    async def _sync(self, obj: Object, reservation: Reservation, now: float) -> float | None:
        pod = self._reserve_pod(obj)
        if reservation.finished:
            await self._delete_reserve_pod(pod)
            return await self._collect(reservation, now)
        node_gone = (
            bool(reservation.node_name) and self.state.nodes.get(reservation.node_name) is None
        )
        if reservation.due_to_expire(now) or node_gone:
            await self._write(reservation, expired_status(reservation, now), "expired")
            await self._delete_reserve_pod(pod)
            why = "its node is gone" if node_gone else "it expired"
            log.info("Reservation %s failed: %s", reservation.name, why)
            return None
        if reservation.pending:
            await self._keep_reserve_pod(obj, reservation, pod, now)
        else:
            await self._delete_reserve_pod(pod)  # the extender deletes it; a failed delete
            await self._sync_owners(reservation, now)
        expiry = reservation.expiry()
        return None if expiry is None else max(expiry - now, 0.0) + 0.5

    def _reserve_pod(self, obj: Object) -> Object | None:
        namespace, name = reserve_pod_name(obj)
        return self.state.pods.get(f"{namespace}/{name}") if name else None

    async def _keep_reserve_pod(
        self, obj: Object, reservation: Reservation, pod: Object | None, now: float
    ) -> None:
        if pod is None:
            created = reserve_pod(obj)
            try:
                await self.api.create(Pod, created)
            except AlreadyExists:
                return
            except (Forbidden, Invalid, NotFound) as err:  # trying again will not help
                message = f"reserve pod not created: {err}"
                if message != reservation.unschedulable_message:
                    conditions = unschedulable_conditions(reservation, message, now)
                    await self._write(reservation, {"conditions": conditions}, "unschedulable")
                    log.warning("Reservation %s: %s", reservation.name, message)
                return
            self.metrics.reconciles.labels(NAME, "reserve-pod-created").inc()
            meta = created["metadata"]
            log.info(
                "Reservation %s: reserve pod %s/%s created for kube-scheduler to place",
                reservation.name,
                meta["namespace"],
                meta["name"],
            )
            return
        bound = str((pod.get("spec") or {}).get("nodeName") or "")
        if bound:  # a scheduler that does not call the extender bound it: it cannot hold room
            await self._delete_reserve_pod(pod)
            scheduler = (pod.get("spec") or {}).get("schedulerName")
            message = (
                f"reserve pod bound to {bound} by scheduler {scheduler}, which does not call "
                "koord-scheduler's extender: the template's schedulerName must name one that does"
            )
        else:
            message = _unschedulable_message(pod) or ""
        if not message or message == reservation.unschedulable_message:
            return
        conditions = unschedulable_conditions(reservation, message, now)
        await self._write(reservation, {"conditions": conditions}, "unschedulable")

    async def _delete_reserve_pod(self, pod: Object | None) -> None:
        if pod is None:
            return
        meta = _meta(pod)
        try:
            await self.api.delete(Pod, str(meta.get("name")), namespace=str(meta.get("namespace")))
        except NotFound:
            return
        self.metrics.reconciles.labels(NAME, "reserve-pod-deleted").inc()

    async def _sync_owners(self, reservation: Reservation, now: float) -> None:
        """syncStatus: currentOwners (sorted by uid) and allocated (masked to what it holds)
        from the pods on its node that went into it; Succeeded once allocated if once."""
        owners: list[dict[str, str]] = []
        allocated: Resources = {}
        for pod in self.state.pods_on(reservation.node_name):
            into = allocated_to(pod)
            if into is None or into[1] != reservation.uid:
                continue
            if (pod.get("status") or {}).get("phase") in _FINISHED:
                continue
            meta = _meta(pod)
            owners.append(
                {
                    "namespace": str(meta.get("namespace") or ""),
                    "name": str(meta.get("name") or ""),
                    "uid": str(meta.get("uid") or ""),
                }
            )
            try:
                request = pod_request(pod)
            except ModelError:
                continue
            for name, amount in request.items():
                if name in reservation.allocatable:
                    allocated[name] = allocated.get(name, 0) + amount
        owners.sort(key=lambda o: o["uid"])
        current = sorted(
            (dict(o) for o in reservation.current_owners), key=lambda o: o.get("uid", "")
        )
        if owners == current and allocated == reservation.allocated:
            return
        status: dict[str, Any] = {"allocated": resource_list(allocated), "currentOwners": owners}
        outcome = "owners"
        if reservation.allocate_once and owners:
            status["phase"] = str(Phase.SUCCEEDED)
            status["conditions"] = succeeded_conditions(reservation, now)
            outcome = "succeeded"
        await self._write(reservation, status, outcome)
        log.info(
            "Reservation %s: owners %s%s",
            reservation.name,
            ", ".join(f"{o['namespace']}/{o['name']}" for o in owners) or "none",
            " (allocated once: Succeeded)" if outcome == "succeeded" else "",
        )

    async def _collect(self, reservation: Reservation, now: float) -> float | None:
        """Delete a Succeeded or expired Reservation ``gc_duration`` after it ended."""
        ended = _ended_at(reservation)
        if ended is None:
            return None
        if now - ended < self.gc_duration:
            return ended + self.gc_duration - now
        try:
            await self.api.delete(ReservationResource, reservation.name)
        except NotFound:
            return None
        self.metrics.reconciles.labels(NAME, "collected").inc()
        log.info("Reservation %s: deleted, %s since it ended", reservation.name, reservation.phase)
        return None

    async def _write(
        self, reservation: Reservation, status: Mapping[str, Any], outcome: str
    ) -> None:
        patch = {"metadata": {"resourceVersion": reservation.resource_version}, "status": status}
        await self.api.patch(ReservationResource, reservation.name, patch, subresource="status")
        self.metrics.reconciles.labels(NAME, outcome).inc()

    def _unusable(self, name: str, obj: Object, err: ModelError) -> None:
        version = str(_meta(obj).get("resourceVersion") or "")
        if self._unreadable.get(name) == version:
            return
        self._unreadable[name] = version
        self.metrics.reconciles.labels(NAME, "invalid").inc()
        log.warning("Reservation %s is not usable, left as it is: %s", name, err)
