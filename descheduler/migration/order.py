"""The order in which arbitration considers waiting PodMigrationJobs: four stable sorts,
applied one after the other, so the last one decides first and the earlier ones break its
ties (sort_candidates).

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/arbitrator/sort.go
and arbitrator.go (SortJobsByCreationTime, SortJobsByPod with the PodSorter of
pkg/descheduler/utils/sorter/pod.go, SortJobsByController, SortJobsByMigratingNum, in
that order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from descheduler.migration.job import Phase, PodMigrationJob
from descheduler.migration.view import ClusterView, PodView
from descheduler.utilization import _KUBE_QOS_ORDER, _PRIORITY_CLASS_ORDER, _QOS_ORDER

JOB_KIND = "Job"  # batch Jobs are the controllers the last two sorts group by
_GO_ZERO_TIME = -62135596800  # Unix() of Go's zero time: a job without a creation time

PodOf = Callable[[PodMigrationJob], PodView | None]


def by_creation_time(jobs: Sequence[PodMigrationJob]) -> list[PodMigrationJob]:
    """SortJobsByCreationTime: newest first, by whole seconds; no creation time is oldest."""

    def seconds(job: PodMigrationJob) -> int:
        return _GO_ZERO_TIME if job.created is None else math.floor(job.created)

    return sorted(jobs, key=seconds, reverse=True)


def pod_order_key(pod: PodView) -> tuple[Any, ...]:
    """PodSorter without usage: lowest Koordinator priority class first (free, batch, mid,
    prod, none), then spec.priority, Kubernetes QoS (BestEffort first), Koordinator QoS (BE
    first), deletion cost, eviction cost; newest first, no creation time last."""
    info = pod.info
    return (
        _PRIORITY_CLASS_ORDER.get(info.priority_class.name, 5),
        info.priority or 0,
        _KUBE_QOS_ORDER[info.kube_qos],
        _QOS_ORDER[info.qos_class],
        info.deletion_cost,
        info.eviction_cost,
        math.inf if info.created is None else -info.created,
    )


def by_pod(
    jobs: Sequence[PodMigrationJob],
    pod_of: PodOf,
    key: Callable[[PodView], Any] = pod_order_key,
) -> list[PodMigrationJob]:
    """SortJobsByPod: jobs in the order of their pods (``key``); jobs whose pod is unknown
    first."""
    with_pods = [(job, pod) for job in jobs if (pod := pod_of(job)) is not None]
    rank: dict[int, int] = {id(job): -1 for job in jobs}
    ranked = sorted(range(len(with_pods)), key=lambda i: key(with_pods[i][1]))
    for position, index in enumerate(ranked):
        rank[id(with_pods[index][0])] = position
    return sorted(jobs, key=lambda job: rank[id(job)])


def job_controller(pod: PodView | None) -> str | None:
    """The uid of the pod's controller when that is a batch Job."""
    if pod is None or pod.owner is None or pod.owner.kind != JOB_KIND:
        return None
    return pod.owner.uid


def by_controller(jobs: Sequence[PodMigrationJob], pod_of: PodOf) -> list[PodMigrationJob]:
    """SortJobsByController: the jobs of pods of one batch Job move up next to the first of
    them; other jobs keep their place."""
    first: dict[str, int] = {}
    rank = []
    for i, job in enumerate(jobs):
        owner = job_controller(pod_of(job))
        if owner is None:
            rank.append(i)
        else:
            rank.append(first.setdefault(owner, i))
    order = sorted(range(len(jobs)), key=lambda i: rank[i])
    return [jobs[i] for i in order]


def counts_as_migrating_for_order(job: PodMigrationJob) -> bool:
    """isJobMigrating: passed arbitration (whatever its phase) or Running."""
    return job.passed_arbitration or job.phase == Phase.RUNNING


def migrating_per_owner(jobs: Iterable[PodMigrationJob], view: ClusterView) -> dict[str, int]:
    """getMigratingJobNum for every owner at once: how many migrating jobs have a pod that
    the owner (by uid, controller or not) owns."""
    counts: dict[str, int] = {}
    for job in jobs:
        if job.pod_ref is None or not counts_as_migrating_for_order(job):
            continue
        pod = view.pod(job.pod_ref.key)
        for uid in set(pod.owner_uids) if pod is not None else ():
            counts[uid] = counts.get(uid, 0) + 1
    return counts


def by_migrating_num(
    jobs: Sequence[PodMigrationJob], pod_of: PodOf, migrating: Mapping[str, int]
) -> list[PodMigrationJob]:
    """SortJobsByMigratingNum: jobs whose batch Job already has the most migrating jobs
    first (to finish what is under way); jobs of other pods count 0."""

    def count(job: PodMigrationJob) -> int:
        owner = job_controller(pod_of(job))
        return 0 if owner is None else migrating.get(owner, 0)

    return sorted(jobs, key=count, reverse=True)


def sort_candidates(
    candidates: Sequence[PodMigrationJob],
    view: ClusterView,
    all_jobs: Iterable[PodMigrationJob] = (),
) -> list[PodMigrationJob]:
    """The order arbitration takes ``candidates`` in. ``all_jobs`` are the jobs known to the
    cluster (those counted by SortJobsByMigratingNum); pods are found by namespace/name."""

    def pod_of(job: PodMigrationJob) -> PodView | None:
        return None if job.pod_ref is None else view.pod(job.pod_ref.key)

    jobs = by_creation_time(candidates)
    jobs = by_pod(jobs, pod_of)
    jobs = by_controller(jobs, pod_of)
    return by_migrating_num(jobs, pod_of, migrating_per_owner(all_jobs, view))
