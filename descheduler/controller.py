"""The migration controller: PodMigrationJobs from Pending to Succeeded or Failed.

Two loops over the PodMigrationJob informer. Arbitration (every arbitrationArgs.interval)
decides on the waiting jobs with descheduler.migration.arbitration: the passed ones get the
passed-arbitration annotation, the failed ones their status. The reconcile workers
(maxConcurrentReconciles) take each passed job on: Running (with the pod's uid in
spec.podRef), then by its mode (spec.mode, else defaultJobMode):

- EvictDirectly: an eviction through the Eviction API, then Succeeded once the pod is gone.
- ReservationFirst: a Reservation for the pod on another node first (created from the pod,
  named after the job's uid, owned by the pod's controller; or the user's reservationRef),
  waited for while Pending (its Unschedulable message copied onto the job); an expired one,
  one that did not get a node, or one on the pod's own node fails the job. Once it is
  Available the pod is evicted; then the job waits for the replacement pod to be bound into
  the Reservation (status.currentOwners, which koord-manager writes) and to be Ready, and
  succeeds with that pod in status.podRef. A job that migrates a pod kube-scheduler could not
  place (the Reservation owned by that pod) evicts nothing and waits for the pod to be placed.
  The Reservation is read from the API server at each pass (no informer: a cluster without
  the Reservation CRD still runs EvictDirectly jobs), and deleted when the job times out, is
  scavenged or is deleted.

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/controller.go (doMigrate,
preparePendingJob, evictPodDirectly, evictPod, createReservation, setReservationOrder,
syncReservationScheduleFailed, prepareJobWithReservationScheduleSuccess,
waitForPendingPodScheduled, waitForPodBindReservation, waitForPodReady, the abortJob*
functions, doScavenge; the conditions, reasons, messages and Events) and evictor/ (the native
evictor and its descheduler_pods_evicted counts). A 429 from a PodDisruptionBudget, or any
failed eviction, leaves the job Running with a Warning Event and tries again later; a pod is
never deleted directly. Succeeded, Failed and Aborted jobs are left alone, and so are paused
ones and those a dry run wrote down (deleted by the scavenger like every job)."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from lightkube.resources.core_v1 import Pod

from descheduler.events import NORMAL, WARNING, EventRecorder
from descheduler.metrics import DeschedulerMetrics
from descheduler.migration.arbitration import Outcome, arbitrate
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import (
    ANNOTATION_EVICT_POD,
    ANNOTATION_EVICT_REASON,
    ANNOTATION_EVICT_TRIGGER,
    ANNOTATION_PASSED_ARBITRATION,
    CONDITION_BOUND_POD_READY,
    CONDITION_EVICTION,
    CONDITION_POD_BOUND_RESERVATION,
    CONDITION_POD_SCHEDULED,
    CONDITION_RESERVATION_BOUND,
    CONDITION_RESERVATION_CREATED,
    CONDITION_RESERVATION_SCHEDULED,
    REASON_EVICT_COMPLETE,
    REASON_EVICTING,
    REASON_FAILED_CREATE_RESERVATION,
    REASON_FORBIDDEN_MIGRATE_POD,
    REASON_INVALID_POD_REF,
    REASON_MISSING_POD,
    REASON_MISSING_RESERVATION,
    REASON_RESERVATION_EXPIRED,
    REASON_UNSCHEDULABLE,
    REASON_WAIT_FOR_BOUND_POD_READY,
    REASON_WAIT_FOR_POD_BIND_RESERVATION,
    JobError,
    Mode,
    Phase,
    PodMigrationJob,
)
from descheduler.migration.objectlimit import ObjectLimiters
from descheduler.migration.reservation import (
    bound_pod,
    is_migrate_pending_pod,
    reservation_object,
    reservation_options,
    reservation_ref,
)
from descheduler.migration.ttl import should_scavenge, timed_out, timeout_status
from descheduler.migration.view import PodView, pod_view
from descheduler.state import DeschedulerState
from koordapi.errors import ModelError
from koordapi.reservation.model import LABEL_RESERVATION_ORDER, Reservation
from koordkube.client import KubeApi
from koordkube.errors import AlreadyExists, KubeError, NotFound
from koordkube.eviction import EvictionAPI, EvictionResult
from koordkube.resources import PodMigrationJob as PodMigrationJobResource
from koordkube.resources import Reservation as ReservationResource
from koordkube.resources import object_key
from koordkube.workqueue import WorkQueue, run_worker

log = logging.getLogger(__name__)

Object = Mapping[str, Any]
Job = dict[str, Any]  # the job's object, its status kept up to date as the pass writes it

REQUEUE_AFTER = 3.0  # defaultRequeueAfter: how soon a job under way is looked at again
SCAVENGE_INTERVAL = 60.0  # the scavenger's period
ACTION = "Migrating"  # the Events' action
TRUE, FALSE = "True", "False"


class TokenBucket:
    """evictQPS and evictBurst: at most ``burst`` evictions at once, refilled at ``qps``."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float]) -> None:
        self.qps, self.burst, self.clock = qps, max(1, burst), clock
        self.tokens = float(self.burst)
        self.stamp = clock()

    def take(self) -> float:
        """0 when a token was taken, else the seconds until one is there."""
        if self.qps <= 0:
            return 0.0
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.qps


def _view(pod: Object) -> PodView | None:
    """The pod as the object limiters read it; None (not limited) when it does not parse."""
    try:
        return pod_view(pod)
    except ModelError:
        return None


def _conditions(obj: Object) -> list[dict[str, Any]]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return [dict(c) for c in conditions if isinstance(c, Mapping)]


def get_condition(obj: Object, kind: str) -> Mapping[str, Any] | None:
    """util.GetCondition: the job's condition of that type, None if it has none."""
    for condition in _conditions(obj):
        if condition.get("type") == kind:
            return condition
    return None


def _is_true(obj: Object, kind: str) -> bool:
    condition = get_condition(obj, kind)
    return condition is not None and condition.get("status") == TRUE


def _pod_condition(pod: Object, kind: str) -> Mapping[str, Any] | None:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def is_pod_ready(pod: Object) -> bool:
    """podutil.IsPodReady: the pod's Ready condition is True."""
    condition = _pod_condition(pod, "Ready")
    return condition is not None and condition.get("status") == TRUE


def _key(ref: Mapping[str, Any]) -> str:
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}"


class MigrationController:
    def __init__(
        self,
        api: KubeApi,
        state: DeschedulerState,
        args: MigrationControllerArgs,
        metrics: DeschedulerMetrics,
        events: EventRecorder,
        *,
        clock: Callable[[], float] = time.time,
        requeue_after: float = REQUEUE_AFTER,
        disable_pvc_reservation: bool = False,
    ) -> None:
        self.api, self.state, self.args = api, state, args
        self.metrics, self.events, self.clock = metrics, events, clock
        self.requeue_after = requeue_after
        # the DisablePVCReservation gate: a Reservation's template leaves PVCs out
        self.disable_pvc_reservation = disable_pvc_reservation
        self.evictions = EvictionAPI(api)
        self.bucket = TokenBucket(args.evict_qps, args.evict_burst, time.monotonic)
        # objectLimiters: how often one workload's (or namespace's) pods may be evicted
        self.object_limits = ObjectLimiters(args.object_limiters, clock)
        self.queue = WorkQueue()
        self._cleanups: set[asyncio.Task[bool]] = set()
        state.jobs_informer.add_handler(self._on_job)
        state.pods.add_handler(self._on_pod)

    def _on_job(self, event: str, obj: Object) -> None:
        self.queue.add(object_key(obj))
        if event != "DELETED":
            return
        # the DeleteFunc of Koordinator's watch: a deleted job's Reservation goes with it
        try:
            job = PodMigrationJob.from_dict(obj)
            task = asyncio.get_running_loop().create_task(self.delete_reservation(job))
        except (JobError, RuntimeError):
            return
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def _on_pod(self, event: str, pod: Object) -> None:
        if event != "DELETED":
            return
        key = object_key(pod)
        for job, _ in self.state.jobs():
            if job.pod_ref is not None and job.pod_ref.key == key:
                self.queue.add(job.name)

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Arbitration, the scavenger and the reconcile workers, until cancelled."""
        for key in self.state.jobs_informer.keys():  # noqa: SIM118 - an Informer
            self.queue.add(key)
        tasks = [
            asyncio.create_task(self._arbitration_loop()),
            asyncio.create_task(self._scavenger()),
            *(
                asyncio.create_task(run_worker(self.queue, self.reconcile))
                for _ in range(max(1, self.args.max_concurrent_reconciles))
            ),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.queue.shut_down()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _arbitration_loop(self) -> None:
        while True:
            try:
                await self.arbitrate_once()
            except Exception:
                log.exception("arbitration failed")
            await asyncio.sleep(self.args.arbitration.interval)

    async def _scavenger(self) -> None:
        while True:
            try:
                await self.scavenge_once()
            except Exception:
                log.exception("scavenging PodMigrationJobs failed")
            await asyncio.sleep(SCAVENGE_INTERVAL)

    # -- arbitration --------------------------------------------------------------------------

    async def arbitrate_once(self) -> None:
        """One arbitration round over the cached jobs."""
        jobs = [job for job, _ in self.state.jobs()]
        waiting = [job for job in jobs if job.waiting]
        if not waiting:
            return
        others = [job for job in jobs if not job.waiting]
        result = arbitrate(waiting, others, self.state.cluster_view(), self.args, now=self.clock())
        for decision in result.decisions:
            job = decision.job
            if decision.outcome is Outcome.PASSED:
                log.info("PodMigrationJob %s passed arbitration", job.name)
                patch = {"metadata": {"annotations": {ANNOTATION_PASSED_ARBITRATION: "true"}}}
                await self.api.patch(PodMigrationJobResource, job.name, patch)
            elif decision.outcome is Outcome.FAILED:
                obj = self.state.jobs_informer.get(job.name)
                if obj is not None:
                    await self._finish(
                        copy.deepcopy(dict(obj)), Phase.FAILED, decision.reason, decision.message
                    )
            else:
                log.debug("PodMigrationJob %s waits: %s", job.name, decision.message)

    async def scavenge_once(self) -> None:
        """doScavenge: delete jobs long past their TTL, whatever their phase, each after its
        Reservation (a Reservation that cannot be deleted keeps its job to the next pass)."""
        now = self.clock()
        for job, _ in self.state.jobs():
            if not should_scavenge(job, now):
                continue
            if not await self.delete_reservation(job):
                break
            log.info("deleting PodMigrationJob %s: long past its TTL", job.name)
            try:
                await self.api.delete(PodMigrationJobResource, job.name)
            except NotFound:
                pass  # deleted meanwhile
            except KubeError as err:  # the next scavenging pass tries again
                log.warning("cannot delete PodMigrationJob %s: %s", job.name, err)

    async def delete_reservation(self, job: PodMigrationJob) -> bool:
        """deleteReservation: the job's reservationRef deleted; True when it is gone (or the
        job has none), False when the API server refused."""
        ref = job.reservation_ref
        if ref is None:
            return True
        try:
            await self.api.delete(ReservationResource, str(ref["name"]))
        except NotFound:
            return True
        except KubeError as err:
            log.warning(
                "cannot delete Reservation %s of PodMigrationJob %s: %s", ref["name"], job.name, err
            )
            return False
        log.info("deleted Reservation %s of PodMigrationJob %s", ref["name"], job.name)
        return True

    # -- writing a job ------------------------------------------------------------------------

    async def _write_status(self, obj: Job, status: Mapping[str, Any]) -> None:
        """Merges ``status`` into the job's status; ``obj`` then holds what was written."""
        name = str((obj.get("metadata") or {}).get("name", ""))
        written = await self.api.patch(
            PodMigrationJobResource, name, {"status": dict(status)}, subresource="status"
        )
        if isinstance(written, Mapping) and isinstance(written.get("status"), Mapping):
            obj["status"] = copy.deepcopy(dict(written["status"]))
        else:
            obj["status"] = {**(obj.get("status") or {}), **status}

    async def _finish(
        self,
        obj: Job,
        phase: Phase,
        reason: str,
        message: str,
        status: str = "",
        *,
        event: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Succeeded or Failed, with reason and message, an Event (unless ``event`` is False,
        where Koordinator posts none) and a count."""
        body: dict[str, Any] = {"phase": str(phase), "reason": reason, "message": message}
        if status:
            body["status"] = status
        body.update(extra or {})
        await self._write_status(obj, body)
        self.metrics.jobs_finished.labels(str(phase), reason).inc()
        name = (obj.get("metadata") or {}).get("name")
        if phase is Phase.FAILED:
            log.info("PodMigrationJob %s failed: %s: %s", name, reason, message)
            if event:
                await self.events.post(obj, WARNING, reason, message, ACTION)
        else:
            log.info("PodMigrationJob %s succeeded: %s", name, message)
            if event:
                await self.events.post(obj, NORMAL, "Complete", message, ACTION)

    async def _update_condition(
        self,
        obj: Job,
        kind: str,
        status: str,
        reason: str = "",
        message: str = "",
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> bool:
        """updateCondition: the condition set, and status/reason/message with it, when it
        is new or changed (its status, reason or message); False when nothing was written.
        ``extra`` goes into the same status write."""
        old = get_condition(obj, kind)
        if (
            old is not None
            and old.get("status") == status
            and (old.get("reason") or "") == reason
            and (old.get("message") or "") == message
        ):
            return False
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))
        if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
            stamp = str(old["lastTransitionTime"])
        condition = {"type": kind, "status": status, "lastTransitionTime": stamp}
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        conditions = _conditions(obj)
        for i, existing in enumerate(conditions):
            if existing.get("type") == kind:
                conditions[i] = condition
                break
        else:
            conditions.append(condition)
        body = {"status": kind, "reason": reason, "message": message, "conditions": conditions}
        body.update(extra or {})
        await self._write_status(obj, body)
        return True

    # -- one job ------------------------------------------------------------------------------

    async def reconcile(self, name: str) -> float | None:
        """doMigrate for one job; the seconds after which to look again, or None."""
        cached = self.state.jobs_informer.get(name)
        if cached is None:
            return None
        obj: Job = copy.deepcopy(dict(cached))
        try:
            job = PodMigrationJob.from_dict(obj)
        except JobError as err:
            log.warning("PodMigrationJob %s ignored: %s", name, err)
            return None
        phase = job.effective_phase
        if job.paused or job.dry_run or phase not in (Phase.PENDING, Phase.RUNNING):
            return None  # paused, a dry run's, or Succeeded, Failed, Aborted: left alone
        if timed_out(job, self.clock()):  # abortJobIfTimeout
            if not await self.delete_reservation(job):
                return self.requeue_after
            status = timeout_status()
            await self._finish(obj, Phase.FAILED, status["reason"], status["message"])
            return None
        if phase == Phase.PENDING and not job.passed_arbitration:
            return None  # arbitration decides on it
        ref = job.pod_ref
        if ref is None or not ref.valid:
            await self._finish(
                obj, Phase.FAILED, REASON_INVALID_POD_REF, "Abort job caused by invalid PodRef"
            )
            return None
        if phase == Phase.PENDING:
            return await self._start(obj, job)
        if job.effective_mode(self.args.default_job_mode) == Mode.EVICT_DIRECTLY:
            return await self._evict_directly(obj, job)
        return await self._migrate_by_reservation(obj, job)

    async def _start(self, obj: Job, job: PodMigrationJob) -> float | None:
        """preparePendingJob: the pod's uid into spec.podRef, then phase Running."""
        assert job.pod_ref is not None
        pod = self.state.pod(job.pod_ref.key)
        if pod is None:
            await self._missing(obj, job)
            return None
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        if uid and job.pod_ref.uid != uid:
            patch = {"spec": {"podRef": {"uid": uid}}}
            await self.api.patch(PodMigrationJobResource, job.name, patch)
        await self._write_status(obj, {"phase": str(Phase.RUNNING)})
        return None

    async def _missing(self, obj: Job, job: PodMigrationJob) -> None:
        """abortJobByMissingPod."""
        assert job.pod_ref is not None
        await self._finish(
            obj,
            Phase.FAILED,
            REASON_MISSING_POD,
            f'Abort job caused by missing Pod "{job.pod_ref.key}"',
        )

    def _object_limited(self, job: PodMigrationJob, pod: Object) -> bool:
        """requeueJobIfObjectLimiterFailed: the pod's workload (or namespace) lost pods too
        often lately (a pod with the evict annotation is never limited)."""
        view = _view(pod)
        if view is None or ANNOTATION_EVICT_POD in job.annotations:
            return False
        limited = self.object_limits.exceeded(view)
        if limited is None:
            return False
        kind, why = limited
        self.metrics.object_limited.labels(kind).inc()
        log.debug("PodMigrationJob %s waits: %s", job.name, why)
        return True

    async def _evict_directly(self, obj: Job, job: PodMigrationJob) -> float | None:
        """evictPodDirectly: evict once; Succeeded once the pod (with that uid) is gone."""
        assert job.pod_ref is not None
        complete, after = await self._evict(obj, job, None)
        if not complete:
            return after
        await self._finish(
            obj,
            Phase.SUCCEEDED,
            "",
            f'Pod "{job.pod_ref.key}" has been evicted',
            status="Complete",
        )
        return None

    async def _evict(
        self, obj: Job, job: PodMigrationJob, reservation: Reservation | None
    ) -> tuple[bool, float | None]:
        """evictPod: (True, None) once the pod is gone (Eviction True, EvictComplete); else
        evicts it once (Eviction False, Evicting) and says when to look again, or None when
        the job was failed. With the job's ``reservation``, a Reservation another pod took
        first fails the job (abortJobIfReservationBoundByAnotherPod) before the eviction."""
        assert job.pod_ref is not None
        ref = job.pod_ref
        condition = get_condition(obj, CONDITION_EVICTION)
        if condition is not None and condition.get("status") == TRUE:
            return True, None
        pod = self.state.pod(ref.key)
        pod_uid = str(((pod or {}).get("metadata") or {}).get("uid", ""))
        replaced = pod is not None and condition is not None and ref.uid and ref.uid != pod_uid
        if pod is None or replaced:
            if job.status != CONDITION_EVICTION:
                await self._missing(obj, job)
                return False, None
            await self._update_condition(obj, CONDITION_EVICTION, TRUE, REASON_EVICT_COMPLETE)
            await self.events.post(
                obj, NORMAL, REASON_EVICT_COMPLETE, f'Pod "{ref.key}" has been evicted', ACTION
            )
            return True, None
        assert pod is not None
        if condition is not None and condition.get("reason") == REASON_EVICTING:
            return False, self.requeue_after  # evicted: waiting for the pod to go
        if self._object_limited(job, pod):
            return False, self.requeue_after
        if reservation is not None and reservation.phase == "Succeeded":
            await self._abort_by_reservation_bound(obj)
            return False, None
        wait = self.bucket.take()
        if wait > 0:
            return False, wait
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        trigger = job.annotations.get(ANNOTATION_EVICT_TRIGGER, "")
        result, said = await self.evictions.evict_async(ref.namespace, ref.name, ref.uid or pod_uid)
        if result is EvictionResult.GONE:
            if job.status == CONDITION_EVICTION:
                return False, 0.0  # evicted by an earlier try: the informer will show it gone
            await self._missing(obj, job)
            return False, None
        if result is not EvictionResult.STARTED:
            self.metrics.pods_evicted.labels("error", trigger, ref.namespace, node).inc()
            message = f'Failed evict Pod "{ref.key}" caused by {said}'
            log.info("PodMigrationJob %s: %s", job.name, message)
            await self.events.post(obj, WARNING, REASON_EVICTING, message, ACTION)
            return False, self.requeue_after
        self.metrics.pods_evicted.labels("success", trigger, ref.namespace, node).inc()
        view = _view(pod)
        if view is not None:
            self.object_limits.track(
                view, self.state.expected_replicas, self.args.max_migrating_per_workload
            )
        reason = job.annotations.get(ANNOTATION_EVICT_REASON, "")
        message = f'Pod "{ref.key}" evicted from node "{node}" by the reason "{reason}"'
        await self._update_condition(obj, CONDITION_EVICTION, FALSE, REASON_EVICTING, message)
        await self.events.post(obj, NORMAL, REASON_EVICTING, message, ACTION)
        return False, self.requeue_after

    # -- ReservationFirst ---------------------------------------------------------------------

    async def _migrate_by_reservation(self, obj: Job, job: PodMigrationJob) -> float | None:
        """doMigrate from its ReservationFirst branch on: the Reservation created (or the
        user's given its order), waited for, checked, then the eviction and the replacement
        pod bound into it and Ready."""
        assert job.pod_ref is not None
        ref = job.reservation_ref
        if ref is None:
            pod = self.state.pod(job.pod_ref.key)
            if pod is not None and self._object_limited(job, pod):
                return self.requeue_after
            return await self._create_reservation(obj, job)
        name = str(ref["name"])
        try:
            raw = await self.api.get(ReservationResource, name)
        except NotFound:
            await self._finish(
                obj,
                Phase.FAILED,
                REASON_MISSING_RESERVATION,
                f'Abort job caused by missing Reservation "{name}"',
            )
            return None
        except KubeError as err:
            log.warning("PodMigrationJob %s: cannot read Reservation %s: %s", job.name, name, err)
            return self.requeue_after
        try:
            reservation = Reservation.from_dict(raw)
        except ModelError as err:
            log.warning("PodMigrationJob %s: Reservation %s not readable: %s", job.name, name, err)
            return self.requeue_after
        await self._set_reservation_order(reservation)
        await self._update_condition(obj, CONDITION_RESERVATION_CREATED, TRUE)
        await self._sync_reservation_schedule_failed(obj, reservation)
        if reservation.pending:
            log.debug("PodMigrationJob %s waits for Reservation %s", job.name, name)
            return self.requeue_after
        if reservation.expired:  # abortJobByReservationExpired: no Event in Koordinator
            await self._finish(
                obj, Phase.FAILED, REASON_RESERVATION_EXPIRED, "Reservation expired", event=False
            )
            return None
        if not reservation.scheduled:  # abortJobByReservationUnschedulable, no preemption
            message = reservation.unschedulable_message or ""
            await self._finish(obj, Phase.FAILED, REASON_UNSCHEDULABLE, message, event=False)
            return None
        if not await self._reservation_scheduled(obj, job, reservation):
            return None
        if is_migrate_pending_pod(reservation):
            return await self._wait_for_pending_pod_scheduled(obj, job, reservation)
        complete, after = await self._evict(obj, job, reservation)
        if not complete:
            return after
        owner = bound_pod(reservation)
        if not _is_true(obj, CONDITION_POD_BOUND_RESERVATION) and owner is None:
            # waitForPodBindReservation
            if await self._update_condition(
                obj,
                CONDITION_POD_BOUND_RESERVATION,
                FALSE,
                REASON_WAIT_FOR_POD_BIND_RESERVATION,
            ):
                await self.events.post(
                    obj,
                    NORMAL,
                    REASON_WAIT_FOR_POD_BIND_RESERVATION,
                    "Waiting for Pod bind Reservation",
                    ACTION,
                )
            return self.requeue_after
        if owner is None:
            owner = (obj.get("status") or {}).get("podRef") or {}
        await self._reservation_bound(obj, owner)
        bound = _key(owner)
        if not await self._bound_pod_ready(obj, owner):
            return self.requeue_after
        await self.events.post(
            obj, NORMAL, CONDITION_BOUND_POD_READY, f'Bind pod "{bound}" is ready', ACTION
        )
        await self._update_condition(obj, CONDITION_BOUND_POD_READY, TRUE)
        message = f'Bind Pod "{bound}" in Reservation "{reservation.name}"'
        await self._update_condition(obj, CONDITION_POD_BOUND_RESERVATION, TRUE, "", message)
        await self._finish(
            obj,
            Phase.SUCCEEDED,
            "",
            message,
            status="Complete",
            extra={"podRef": dict(owner)},
        )
        return None

    async def _create_reservation(self, obj: Job, job: PodMigrationJob) -> float | None:
        """createReservation: the Reservation made from the pod (an existing one of that name
        is taken as it is), its reference written into spec.reservationOptions; a refusal is
        the ReservationCreated condition False (FailedCreateReservation), tried again."""
        assert job.pod_ref is not None
        pod = self.state.pod(job.pod_ref.key)
        if pod is None:
            await self._missing(obj, job)
            return None
        ttl = (obj.get("spec") or {}).get("ttl")
        options = reservation_options(
            job.reservation_options,
            pod,
            job_uid=job.uid,
            job_ttl=str(ttl) if ttl and job.ttl and job.ttl > 0 else None,
            now=self.clock(),
            disable_pvc_reservation=self.disable_pvc_reservation,
        )
        body = reservation_object(options)
        name = str(body["metadata"].get("name") or "")
        try:
            try:
                created = await self.api.create(ReservationResource, body)
            except AlreadyExists:
                created = await self.api.get(ReservationResource, name)
        except KubeError as err:
            message = f"Failed to create Reservation caused by {err}"
            log.info("PodMigrationJob %s: %s", job.name, message)
            if await self._update_condition(
                obj, CONDITION_RESERVATION_CREATED, FALSE, REASON_FAILED_CREATE_RESERVATION, message
            ):
                await self.events.post(
                    obj, WARNING, REASON_FAILED_CREATE_RESERVATION, message, ACTION
                )
            return self.requeue_after
        options["reservationRef"] = reservation_ref(created)
        patch = {"spec": {"reservationOptions": options}}
        await self.api.patch(PodMigrationJobResource, job.name, patch)
        await self.events.post(
            obj,
            NORMAL,
            CONDITION_RESERVATION_CREATED,
            f'Successfully create Reservation "{options["reservationRef"]["name"]}"',
            ACTION,
        )
        return None  # the job's update brings it back

    async def _set_reservation_order(self, reservation: Reservation) -> None:
        """setReservationOrder: a Reservation without the reservation-order label (one the
        user named) gets the current time in milliseconds, so owners use it first."""
        if LABEL_RESERVATION_ORDER in reservation.labels:
            return
        order = str(int(self.clock() * 1000))
        patch = {"metadata": {"labels": {LABEL_RESERVATION_ORDER: order}}}
        try:
            await self.api.patch(ReservationResource, reservation.name, patch)
        except KubeError as err:
            log.warning("cannot label Reservation %s: %s", reservation.name, err)

    async def _sync_reservation_schedule_failed(self, obj: Job, reservation: Reservation) -> None:
        """syncReservationScheduleFailed: while the job's ReservationScheduled is not True,
        kube-scheduler's Unschedulable message on the Reservation is copied onto the job
        (ReservationScheduled False, Unschedulable) with a Warning Event."""
        condition = get_condition(obj, CONDITION_RESERVATION_SCHEDULED)
        if condition is not None and condition.get("status") != FALSE:
            return
        message = reservation.unschedulable_message
        if message is None:
            return
        if await self._update_condition(
            obj, CONDITION_RESERVATION_SCHEDULED, FALSE, REASON_UNSCHEDULABLE, message
        ):
            await self.events.post(obj, WARNING, REASON_UNSCHEDULABLE, message, ACTION)

    async def _reservation_scheduled(
        self, obj: Job, job: PodMigrationJob, reservation: Reservation
    ) -> bool:
        """prepareJobWithReservationScheduleSuccess: the node in status.nodeName and
        ReservationScheduled True, once; False when the job was failed because the
        Reservation is on the pod's own node (abortJobIfReserveOnSameNode)."""
        node = reservation.node_name
        if not node or job.node_name or _is_true(obj, CONDITION_RESERVATION_SCHEDULED):
            return True
        assert job.pod_ref is not None
        pod = self.state.pod(job.pod_ref.key)
        if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
            await self._finish(
                obj,
                Phase.FAILED,
                REASON_FORBIDDEN_MIGRATE_POD,
                f'Scheduler assignes the Reservation "{reservation.name}" on the same node as '
                "the Pod",
            )
            return False
        if await self._update_condition(
            obj, CONDITION_RESERVATION_SCHEDULED, TRUE, extra={"nodeName": node}
        ):
            await self.events.post(
                obj,
                NORMAL,
                CONDITION_RESERVATION_SCHEDULED,
                f'Assigned Reservation "{reservation.name}" to node "{node}"',
                ACTION,
            )
        return True

    async def _abort_by_reservation_bound(self, obj: Job) -> None:
        """abortJobByReservationBound."""
        await self._finish(
            obj,
            Phase.FAILED,
            REASON_FORBIDDEN_MIGRATE_POD,
            "Reservation is already bound by another Pod",
        )

    async def _wait_for_pending_pod_scheduled(
        self, obj: Job, job: PodMigrationJob, reservation: Reservation
    ) -> float | None:
        """waitForPendingPodScheduled: a pod kube-scheduler could not place is not evicted;
        the job waits (PodScheduled False, Unschedulable with the pod's message) until the pod
        is placed, and succeeds then; a Reservation another pod took first fails it."""
        assert job.pod_ref is not None
        key = job.pod_ref.key
        pod = self.state.pod(key)
        if pod is None:
            await self._missing(obj, job)
            return None
        condition = _pod_condition(pod, "PodScheduled")
        if condition is None or condition.get("status") == FALSE:
            if reservation.phase == "Succeeded":
                owner = bound_pod(reservation)
                uid = (pod.get("metadata") or {}).get("uid")
                if owner is None or owner.get("uid") != uid:
                    await self._abort_by_reservation_bound(obj)
                    return None
            message = str((condition or {}).get("message") or "")
            await self._update_condition(
                obj, CONDITION_POD_SCHEDULED, FALSE, REASON_UNSCHEDULABLE, message
            )
            return self.requeue_after
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        message = f'Assign Pod "{key}" to node "{node}"'
        if _is_true(obj, CONDITION_POD_SCHEDULED):
            return None
        await self._update_condition(obj, CONDITION_POD_SCHEDULED, TRUE)
        await self._finish(obj, Phase.SUCCEEDED, "", message, status="Complete")
        return None

    async def _reservation_bound(self, obj: Job, owner: Mapping[str, Any]) -> None:
        """handleReservationBoundSuccess: ReservationBound True and the bound pod in
        status.podRef, with an Event, once."""
        if get_condition(obj, CONDITION_RESERVATION_BOUND) is not None and (
            obj.get("status") or {}
        ).get("podRef"):
            return
        await self._update_condition(
            obj, CONDITION_RESERVATION_BOUND, TRUE, extra={"podRef": dict(owner)}
        )
        await self.events.post(
            obj,
            NORMAL,
            "PodBoundReservation",
            f'Reservation bound by pod "{_key(owner)}"',
            ACTION,
        )

    async def _bound_pod_ready(self, obj: Job, owner: Mapping[str, Any]) -> bool:
        """waitForPodReady: the bound pod is Ready (or gone); else BoundPodReady False
        (WaitForBoundPodReady) with an Event."""
        if _is_true(obj, CONDITION_BOUND_POD_READY):
            return True
        key = _key(owner)
        pod = self.state.pod(key)
        if pod is None:  # not cached yet: the API server says whether it is there
            try:
                pod = await self.api.get(
                    Pod, str(owner.get("name", "")), namespace=str(owner.get("namespace", ""))
                )
            except NotFound:
                return True
            except KubeError as err:
                log.warning("cannot read bound pod %s: %s", key, err)
                return False
        if is_pod_ready(pod):
            return True
        if await self._update_condition(
            obj, CONDITION_BOUND_POD_READY, FALSE, REASON_WAIT_FOR_BOUND_POD_READY
        ):
            await self.events.post(
                obj,
                NORMAL,
                REASON_WAIT_FOR_BOUND_POD_READY,
                f"Waiting for Bound Pod {key} Ready",
                ACTION,
            )
        return False
