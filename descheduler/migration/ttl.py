"""When a PodMigrationJob has run out of time: the controller fails a job older than its TTL
(timed_out), and the scavenger deletes any job well past it (should_scavenge). ``now`` is
the caller's clock, in seconds since the epoch.

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/controller.go
(abortJobIfTimeout, doScavenge).
"""

from __future__ import annotations

from descheduler.migration.job import REASON_TIMEOUT, Phase, PodMigrationJob

TIMEOUT_MESSAGE = "Abort job caused by timeout"
SCAVENGE_GRACE = 300.0  # the scavenger waits this long past a job's TTL
SCAVENGE_WITHOUT_TTL = 1800.0  # and this long after the creation of a job without one


def timed_out(job: PodMigrationJob, now: float) -> bool:
    """abortJobIfTimeout: the job has a TTL (not 0) and is at least that old. A job without a
    creation time (not created yet) has not timed out."""
    if not job.ttl or job.created is None:
        return False
    return now - job.created >= job.ttl


def timeout_status() -> dict[str, str]:
    """The status a timed-out job gets."""
    return {"phase": str(Phase.FAILED), "reason": REASON_TIMEOUT, "message": TIMEOUT_MESSAGE}


def should_scavenge(job: PodMigrationJob, now: float) -> bool:
    """doScavenge: the job is 5 minutes past its TTL, or 30 minutes old without a TTL,
    whatever its phase. A job without a creation time is kept."""
    if job.created is None:
        return False
    limit = job.ttl + SCAVENGE_GRACE if job.ttl and job.ttl > 0 else SCAVENGE_WITHOUT_TTL
    return now - job.created >= limit
