"""The migration controller: PodMigrationJobs from Pending to Succeeded or Failed.

Two loops over the PodMigrationJob informer. Arbitration (every arbitrationArgs.interval)
decides on the waiting jobs with descheduler.migration.arbitration: the passed ones get the
passed-arbitration annotation, the failed ones their status. The reconcile workers
(maxConcurrentReconciles) take each passed job on: Running (with the pod's uid in
spec.podRef), an eviction through the Eviction API, then Succeeded once the pod is gone.

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/controller.go (doMigrate,
preparePendingJob, evictPodDirectly, evictPod, abortJobIfTimeout, abortJobByMissingPod,
doScavenge; the reasons, messages and Events) and evictor/ (the native evictor and its
descheduler_pods_evicted counts). A 429 from a PodDisruptionBudget, or any failed eviction,
leaves the job Running with a Warning Event and tries again later; a pod is never deleted
directly. Succeeded, Failed and Aborted jobs are left alone, and so are paused ones and those a
dry run wrote down (deleted by the scavenger like every job). ReservationFirst jobs fail
(UnsupportedMode): Reservations do not exist here."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from descheduler.events import NORMAL, WARNING, EventRecorder
from descheduler.metrics import DeschedulerMetrics
from descheduler.migration.arbitration import Outcome, arbitrate
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import (
    ANNOTATION_EVICT_POD,
    ANNOTATION_EVICT_REASON,
    ANNOTATION_EVICT_TRIGGER,
    ANNOTATION_PASSED_ARBITRATION,
    REASON_INVALID_POD_REF,
    REASON_MISSING_POD,
    REASON_UNSUPPORTED_MODE,
    JobError,
    Mode,
    Phase,
    PodMigrationJob,
)
from descheduler.migration.objectlimit import ObjectLimiters
from descheduler.migration.ttl import should_scavenge, timed_out, timeout_status
from descheduler.migration.view import PodView, pod_view
from descheduler.state import DeschedulerState
from koordapi.errors import ModelError
from koordkube.client import KubeApi
from koordkube.errors import KubeError, NotFound
from koordkube.eviction import EvictionAPI, EvictionResult
from koordkube.resources import PodMigrationJob as PodMigrationJobResource
from koordkube.resources import object_key
from koordkube.workqueue import WorkQueue, run_worker

log = logging.getLogger(__name__)

Object = Mapping[str, Any]

REQUEUE_AFTER = 3.0  # defaultRequeueAfter: how soon a job under way is looked at again
SCAVENGE_INTERVAL = 60.0  # the scavenger's period
CONDITION_EVICTION = "Eviction"
REASON_EVICTING = "Evicting"
REASON_EVICT_COMPLETE = "EvictComplete"
ACTION = "Migrating"  # the Events' action


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


def _eviction_condition(obj: Object) -> Mapping[str, Any] | None:
    for condition in _conditions(obj):
        if condition.get("type") == CONDITION_EVICTION:
            return condition
    return None


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
    ) -> None:
        self.api, self.state, self.args = api, state, args
        self.metrics, self.events, self.clock = metrics, events, clock
        self.requeue_after = requeue_after
        self.evictions = EvictionAPI(api)
        self.bucket = TokenBucket(args.evict_qps, args.evict_burst, time.monotonic)
        # objectLimiters: how often one workload's (or namespace's) pods may be evicted
        self.object_limits = ObjectLimiters(args.object_limiters, clock)
        self.queue = WorkQueue()
        state.jobs_informer.add_handler(lambda _event, job: self.queue.add(object_key(job)))
        state.pods.add_handler(self._on_pod)

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
                    await self._finish(obj, Phase.FAILED, decision.reason, decision.message)
            else:
                log.debug("PodMigrationJob %s waits: %s", job.name, decision.message)

    async def scavenge_once(self) -> None:
        """doScavenge: delete jobs long past their TTL, whatever their phase."""
        now = self.clock()
        for job, _ in self.state.jobs():
            if should_scavenge(job, now):
                log.info("deleting PodMigrationJob %s: long past its TTL", job.name)
                try:
                    await self.api.delete(PodMigrationJobResource, job.name)
                except NotFound:
                    pass  # deleted meanwhile
                except KubeError as err:  # the next scavenging pass tries again
                    log.warning("cannot delete PodMigrationJob %s: %s", job.name, err)

    # -- one job ------------------------------------------------------------------------------

    async def _write_status(self, obj: Object, status: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        await self.api.patch(
            PodMigrationJobResource, name, {"status": dict(status)}, subresource="status"
        )

    async def _finish(
        self, obj: Object, phase: Phase, reason: str, message: str, status: str = ""
    ) -> None:
        """Succeeded or Failed, with reason and message, an Event and a count."""
        body: dict[str, Any] = {"phase": str(phase), "reason": reason, "message": message}
        if status:
            body["status"] = status
        await self._write_status(obj, body)
        self.metrics.jobs_finished.labels(str(phase), reason).inc()
        name = (obj.get("metadata") or {}).get("name")
        if phase is Phase.FAILED:
            log.info("PodMigrationJob %s failed: %s: %s", name, reason, message)
            await self.events.post(obj, WARNING, reason, message, ACTION)
        else:
            log.info("PodMigrationJob %s succeeded: %s", name, message)
            await self.events.post(obj, NORMAL, "Complete", message, ACTION)

    async def reconcile(self, name: str) -> float | None:
        """doMigrate for one job; the seconds after which to look again, or None."""
        obj = self.state.jobs_informer.get(name)
        if obj is None:
            return None
        try:
            job = PodMigrationJob.from_dict(obj)
        except JobError as err:
            log.warning("PodMigrationJob %s ignored: %s", name, err)
            return None
        phase = job.effective_phase
        if job.paused or job.dry_run or phase not in (Phase.PENDING, Phase.RUNNING):
            return None  # paused, a dry run's, or Succeeded, Failed, Aborted: left alone
        if timed_out(job, self.clock()):
            status = timeout_status()
            await self._finish(obj, Phase.FAILED, status["reason"], status["message"])
            return None
        if phase == Phase.PENDING and not job.passed_arbitration:
            return None  # arbitration decides on it
        mode = job.effective_mode(self.args.default_job_mode)
        if mode != Mode.EVICT_DIRECTLY:
            await self._finish(
                obj,
                Phase.FAILED,
                REASON_UNSUPPORTED_MODE,
                f"mode {mode} is not supported: it needs Koordinator's Reservations",
            )
            return None
        ref = job.pod_ref
        if ref is None or not ref.valid:
            await self._finish(
                obj, Phase.FAILED, REASON_INVALID_POD_REF, "Abort job caused by invalid PodRef"
            )
            return None
        if phase == Phase.PENDING:
            return await self._start(obj, job)
        return await self._evict(obj, job)

    async def _start(self, obj: Object, job: PodMigrationJob) -> float | None:
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

    async def _missing(self, obj: Object, job: PodMigrationJob) -> None:
        assert job.pod_ref is not None
        await self._finish(
            obj,
            Phase.FAILED,
            REASON_MISSING_POD,
            f'Abort job caused by missing Pod "{job.pod_ref.key}"',
        )

    async def _evict(self, obj: Object, job: PodMigrationJob) -> float | None:
        """evictPodDirectly: evict once; Succeeded once the pod (with that uid) is gone."""
        assert job.pod_ref is not None
        ref = job.pod_ref
        condition = _eviction_condition(obj)
        if condition is not None and condition.get("status") == "True":
            await self._succeed(obj, job)
            return None
        pod = self.state.pod(ref.key)
        pod_uid = str(((pod or {}).get("metadata") or {}).get("uid", ""))
        replaced = pod is not None and condition is not None and ref.uid and ref.uid != pod_uid
        if pod is None or replaced:
            if job.status != CONDITION_EVICTION:
                await self._missing(obj, job)
                return None
            await self._condition(obj, "True", REASON_EVICT_COMPLETE, "")
            await self.events.post(
                obj, NORMAL, REASON_EVICT_COMPLETE, f'Pod "{ref.key}" has been evicted', ACTION
            )
            await self._succeed(obj, job)
            return None
        assert pod is not None
        if condition is not None and condition.get("reason") == REASON_EVICTING:
            return self.requeue_after  # evicted: waiting for the pod to go
        view = _view(pod)
        if view is not None and ANNOTATION_EVICT_POD not in job.annotations:
            limited = self.object_limits.exceeded(view)  # requeueJobIfObjectLimiterFailed
            if limited is not None:
                kind, why = limited
                self.metrics.object_limited.labels(kind).inc()
                log.debug("PodMigrationJob %s waits: %s", job.name, why)
                return self.requeue_after
        wait = self.bucket.take()
        if wait > 0:
            return wait
        node = str((pod.get("spec") or {}).get("nodeName", ""))
        trigger = job.annotations.get(ANNOTATION_EVICT_TRIGGER, "")
        result, said = await self.evictions.evict_async(ref.namespace, ref.name, ref.uid or pod_uid)
        if result is EvictionResult.GONE:
            if job.status == CONDITION_EVICTION:
                return 0.0  # evicted by an earlier try: the pod informer will show it gone
            await self._missing(obj, job)
            return None
        if result is not EvictionResult.STARTED:
            self.metrics.pods_evicted.labels("error", trigger, ref.namespace, node).inc()
            message = f'Failed evict Pod "{ref.key}" caused by {said}'
            log.info("PodMigrationJob %s: %s", job.name, message)
            await self.events.post(obj, WARNING, REASON_EVICTING, message, ACTION)
            return self.requeue_after
        self.metrics.pods_evicted.labels("success", trigger, ref.namespace, node).inc()
        if view is not None:
            self.object_limits.track(
                view, self.state.expected_replicas, self.args.max_migrating_per_workload
            )
        reason = job.annotations.get(ANNOTATION_EVICT_REASON, "")
        message = f'Pod "{ref.key}" evicted from node "{node}" by the reason "{reason}"'
        await self._condition(obj, "False", REASON_EVICTING, message)
        await self.events.post(obj, NORMAL, REASON_EVICTING, message, ACTION)
        return self.requeue_after

    async def _condition(self, obj: Object, status: str, reason: str, message: str) -> None:
        """updateCondition: the Eviction condition, and status/reason/message with it."""
        condition = {
            "type": CONDITION_EVICTION,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock())),
        }
        others = [c for c in _conditions(obj) if c.get("type") != CONDITION_EVICTION]
        await self._write_status(
            obj,
            {
                "status": CONDITION_EVICTION,
                "reason": reason,
                "message": message,
                "conditions": [*others, condition],
            },
        )

    async def _succeed(self, obj: Object, job: PodMigrationJob) -> None:
        assert job.pod_ref is not None
        await self._finish(
            obj,
            Phase.SUCCEEDED,
            "",
            f'Pod "{job.pod_ref.key}" has been evicted',
            status="Complete",
        )
