"""One arbitration round: which waiting PodMigrationJobs may run now, which wait for the
migrations under way, and which fail, and why (arbitrate). A pure decision: the caller
annotates the passed jobs (ANNOTATION_PASSED_ARBITRATION "true"), writes the failed jobs'
status (Decision.status) and arbitrates the waiting ones again next round.

    args = MigrationControllerArgs.from_dict(config)              # descheduler.migration.args
    jobs = [PodMigrationJob.from_dict(obj) for obj in pmj_list]   # descheduler.migration.job
    view = ClusterView.of([pod_view(p) for p in pods], workloads) # descheduler.migration.view
    result = arbitrate([j for j in jobs if j.waiting], jobs, view, args, now=time.time())

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/arbitrator/
arbitrator.go (doOnceArbitrate: sort, then the non-retryable checks fail a job and the
retryable ones leave it waiting; a job that passes counts at once against the limits of the
jobs after it) and controller.go (what the controller would then fail the job for: a paused
job stays put, a timed-out one, an invalid podRef, a missing pod). Both modes are arbitrated
alike; the controller then reserves first (ReservationFirst) or evicts (EvictDirectly).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import (
    REASON_FORBIDDEN_MIGRATE_POD,
    REASON_INVALID_POD_REF,
    REASON_MISSING_POD,
    REASON_TIMEOUT,
    Phase,
    PodMigrationJob,
)
from descheduler.migration.limits import Migrating, forbidden_reason, wait_reason
from descheduler.migration.order import sort_candidates
from descheduler.migration.ttl import TIMEOUT_MESSAGE, timed_out
from descheduler.migration.view import ClusterView

REASON_PAUSED = "Paused"  # a waiting reason, never written to status


class Outcome(enum.StrEnum):
    PASSED = "Passed"  # may run now: annotate it as having passed arbitration
    WAITING = "Waiting"  # held back by a limit or paused: arbitrate it again later
    FAILED = "Failed"  # will never run: set its status to Failed with reason and message


@dataclass(frozen=True)
class Decision:
    job: PodMigrationJob
    outcome: Outcome
    reason: str = ""  # CamelCase (status.reason) for a failed job; the limit for a waiting one
    message: str = ""  # for a user to read

    @property
    def status(self) -> dict[str, str] | None:
        """The status to write for a failed job; None for the others."""
        if self.outcome is not Outcome.FAILED:
            return None
        return {"phase": str(Phase.FAILED), "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class ArbitrationResult:
    decisions: tuple[Decision, ...] = ()  # in the order the jobs were arbitrated

    def _with(self, outcome: Outcome) -> list[PodMigrationJob]:
        return [d.job for d in self.decisions if d.outcome is outcome]

    @property
    def passed(self) -> list[PodMigrationJob]:
        return self._with(Outcome.PASSED)

    @property
    def waiting(self) -> list[PodMigrationJob]:
        return self._with(Outcome.WAITING)

    @property
    def failed(self) -> list[PodMigrationJob]:
        return self._with(Outcome.FAILED)

    def decision(self, name: str) -> Decision:
        """The decision on the job named ``name`` (KeyError if it was not arbitrated)."""
        for decision in self.decisions:
            if decision.job.name == name:
                return decision
        raise KeyError(name)


def _failed(job: PodMigrationJob, reason: str, message: str) -> Decision:
    return Decision(job, Outcome.FAILED, reason, message)


def decide(
    job: PodMigrationJob,
    args: MigrationControllerArgs,
    view: ClusterView,
    migrating: Sequence[Migrating],
    now: float,
) -> Decision:
    """The decision on one waiting job, given the jobs migrating so far."""
    if job.paused:
        return Decision(job, Outcome.WAITING, REASON_PAUSED, "the PodMigrationJob is paused")
    if timed_out(job, now):
        return _failed(job, REASON_TIMEOUT, TIMEOUT_MESSAGE)
    ref = job.pod_ref
    if ref is None or not ref.valid:
        return _failed(job, REASON_INVALID_POD_REF, "Abort job caused by invalid PodRef")
    pod = view.pod(ref.key)
    if pod is None:
        return _failed(job, REASON_MISSING_POD, f'Abort job caused by missing Pod "{ref.key}"')
    forbidden = forbidden_reason(pod, args, view)
    if forbidden is not None:
        return _failed(
            job,
            REASON_FORBIDDEN_MIGRATE_POD,
            f'Pod "{pod.key}" is forbidden to migrate because it does not meet the '
            f"requirements: {forbidden}",
        )
    hold = wait_reason(pod, args, view, migrating)
    if hold is not None:
        return Decision(job, Outcome.WAITING, hold.limit, hold.message)
    return Decision(job, Outcome.PASSED)


def arbitrate(
    candidates: Iterable[PodMigrationJob],
    running: Iterable[PodMigrationJob],
    view: ClusterView,
    args: MigrationControllerArgs,
    *,
    now: float,
) -> ArbitrationResult:
    """Decides on the ``candidates`` that are waiting (Pending, not yet passed; others are
    ignored), in Koordinator's order. ``running`` are the other jobs of the cluster: those
    Running or passed and Pending count against the limits, and each candidate that passes
    counts against the candidates after it. ``now`` is seconds since the epoch."""
    waiting = [job for job in candidates if job.waiting]
    others = list(running)
    migrating = [
        Migrating(job, None if job.pod_ref is None else view.pod(job.pod_ref.key))
        for job in others
        if job.migrating
    ]
    decisions = []
    for job in sort_candidates(waiting, view, [*others, *waiting]):
        decision = decide(job, args, view, migrating, now)
        decisions.append(decision)
        if decision.outcome is Outcome.PASSED:
            assert job.pod_ref is not None  # a job passes only with a pod
            migrating.append(Migrating(job, view.pod(job.pod_ref.key)))
    return ArbitrationResult(tuple(decisions))
