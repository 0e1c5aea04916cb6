"""The order of waiting PodMigrationJobs.

Cases marked with an upstream test come from Koordinator v1.8.0's
pkg/descheduler/controllers/migration/arbitrator/sort_test.go; "own" cases add corners.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from descheduler.cluster import PodInfo
from descheduler.migration.job import ANNOTATION_PASSED_ARBITRATION, PodMigrationJob, PodRef
from descheduler.migration.order import (
    PodOf,
    by_controller,
    by_creation_time,
    by_migrating_num,
    by_pod,
    migrating_per_owner,
    pod_order_key,
    sort_candidates,
)
from descheduler.migration.view import ClusterView, OwnerRef, PodView
from koordapi import qos

NOW = 1_700_000_000.0


def _pod(name: str, owner: str | None = None, **info: object) -> PodView:
    ref = None if owner is None else OwnerRef("Job", owner, owner, "batch/v1")
    return PodView(
        PodInfo("default", name, **info),  # type: ignore[arg-type]
        uid=f"default/{name}",
        node_name="test-node",
        owner=ref,
        owner_uids=() if owner is None else (owner,),
    )


def _job(name: str, pod: str | None, created: float = NOW, **fields: object) -> PodMigrationJob:
    ref = None if pod is None else PodRef("default", pod, f"default/{pod}")
    return PodMigrationJob(name, uid=f"{name}uid", created=created, pod_ref=ref, **fields)  # type: ignore[arg-type]


def _pod_of(view: ClusterView) -> PodOf:
    return lambda job: None if job.pod_ref is None else view.pod(job.pod_ref.key)


def test_sort_jobs_by_creation_time() -> None:
    # TestSortJobsByCreationTime: newest first, stable for equal seconds
    jobs = [
        _job("test-job-1", None, 222222),
        _job("test-job-2", None, 222222222),
        _job("test-job-3", None, 111111111),
        _job("test-job-4", None, 11111),
        _job("test-job-5", None, 11111),
    ]
    assert [j.name for j in by_creation_time(jobs)] == [
        "test-job-2",
        "test-job-3",
        "test-job-1",
        "test-job-4",
        "test-job-5",
    ]


def test_creation_time_counts_whole_seconds() -> None:
    # own: Unix() drops the fraction, so these two tie and keep their order; no creation
    # time is Go's zero time, the oldest
    jobs = [_job("a", None, 100.1), _job("b", None, 100.9), _job("c", None, 101.0)]
    jobs.append(PodMigrationJob("d"))
    assert [j.name for j in by_creation_time(jobs)] == ["c", "a", "b", "d"]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        # TestSortJobsByPod test-1 .. test-4: job i's pod has rank order[i]
        (list(range(10)), list(range(10))),
        (list(range(9, -1, -1)), list(range(9, -1, -1))),
        ([], []),
        ([8, 7, 5, 4, 9, 2, 3, 11], [5, 6, 3, 2, 1, 0, 4, 7]),
    ],
)
def test_sort_jobs_by_pod(order: list[int], expected: list[int]) -> None:
    pods = [_pod(f"test-pod-{i}") for i in range(len(order))]
    view = ClusterView.of(pods)
    jobs = [_job(f"test-job-{i}", f"test-pod-{i}") for i in range(len(order))]
    rank = {f"test-pod-{i}": r for i, r in enumerate(order)}
    got = by_pod(jobs, _pod_of(view), key=lambda pod: rank[pod.name])
    assert [j.name for j in got] == [f"test-job-{i}" for i in expected]


def test_jobs_without_a_known_pod_come_first() -> None:
    # own: SortJobsByPod ranks a job whose pod was not found at MinInt
    view = ClusterView.of([_pod("p1"), _pod("p2")])
    jobs = [_job("j1", "p1"), _job("j2", "gone"), _job("j3", "p2"), _job("j4", None)]
    assert [j.name for j in by_pod(jobs, _pod_of(view))] == ["j2", "j4", "j1", "j3"]


def test_pod_sorter_order() -> None:
    # own, after sorter/pod.go: lowest priority class, priority, Kubernetes QoS, Koordinator
    # QoS, deletion cost, eviction cost first; then newest first
    pods = {
        "prod": _pod("prod", priority_class=qos.PROD),
        "batch": _pod("batch", priority_class=qos.BATCH),
        "free": _pod("free", priority_class=qos.FREE),
        "none": _pod("none", priority_class=qos.NONE_PRIORITY),
        "prio-low": _pod("prio-low", priority=9100),
        "prio-high": _pod("prio-high", priority=9900),
        "guaranteed": _pod("guaranteed", priority=9100, kube_qos=qos.KubeQoS.GUARANTEED),
        "be": _pod("be", priority=9100, qos_class=qos.QoSClass.BE),
        "cost": _pod("cost", priority=9100, deletion_cost=-5),
        "evict-cost": _pod("evict-cost", priority=9100, eviction_cost=-5),
        "old": _pod("old", priority=9100, created=NOW - 100),
        "new": _pod("new", priority=9100, created=NOW),
    }
    names = sorted(pods, key=lambda name: pod_order_key(pods[name]))
    # prod has no spec.priority (0), the lowest of koord-prod; at 9100, BestEffort-QoS "be"
    # goes before the LS pods, which then go by deletion cost, eviction cost and age (no
    # creation time last); Guaranteed after Burstable; the none class last of all
    assert names == [
        "free", "batch", "prod", "be", "cost", "evict-cost", "new", "old",
        "prio-low", "guaranteed", "prio-high", "none",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("count", "job_of", "expected"),
    [
        # TestSortJobsByController test-1 .. test-5 (job_of: migration job → batch Job)
        (10, {4: 0, 8: 0}, [0, 1, 2, 3, 4, 8, 5, 6, 7, 9]),
        (10, {}, list(range(10))),
        (10, {3: 0, 8: 0, 1: 1, 9: 1}, [0, 1, 9, 2, 3, 8, 4, 5, 6, 7]),
        (5, {2: 0, 3: 0, 4: 0}, [0, 1, 2, 3, 4]),
        (6, {0: 0, 4: 1, 2: 2}, [0, 1, 2, 3, 4, 5]),
    ],
)
def test_sort_jobs_by_controller(
    count: int, job_of: Mapping[int, int], expected: list[int]
) -> None:
    pods = [
        _pod(f"test-pod-{i}", None if i not in job_of else f"test-job-{job_of[i]}")
        for i in range(count)
    ]
    view = ClusterView.of(pods)
    jobs = [_job(f"test-migration-job-{i}", f"test-pod-{i}") for i in range(count)]
    got = by_controller(jobs, _pod_of(view))
    assert [j.name for j in got] == [f"test-migration-job-{i}" for i in expected]


def _migrating_fixture(
    *,
    count: int,
    running: int,
    passed: int,
    job_of: Mapping[int, int],
    running_of: Mapping[int, int],
    passed_of: Mapping[int, int],
) -> tuple[list[PodMigrationJob], list[PodMigrationJob], ClusterView]:
    """The fixture of TestSortJobsByMigratingNum: waiting jobs, Running jobs, and Pending jobs
    that passed arbitration, each on its own pod, some pods owned by batch Jobs."""

    def owner(mapping: Mapping[int, int], i: int) -> str | None:
        return None if i not in mapping else f"test-job-{mapping[i]}"

    pods, waiting, others = [], [], []
    for i in range(count):
        pods.append(_pod(f"test-pod-{i}", owner(job_of, i)))
        waiting.append(_job(f"test-migration-job-{i}", f"test-pod-{i}"))
    for i in range(running):
        pods.append(_pod(f"test-running-pod-{i}", owner(running_of, i)))
        others.append(
            _job(f"test-running-migration-job-{i}", f"test-running-pod-{i}", phase="Running")
        )
    for i in range(passed):
        pods.append(_pod(f"test-passed-pod-{i}", owner(passed_of, i)))
        others.append(
            _job(
                f"test-passed-migration-job-{i}",
                f"test-passed-pod-{i}",
                annotations={ANNOTATION_PASSED_ARBITRATION: "true"},
            )
        )
    return waiting, others, ClusterView.of(pods)


@pytest.mark.parametrize(
    ("count", "running", "passed", "job_of", "running_of", "passed_of", "expected"),
    [
        # TestSortJobsByMigratingNum test-1 .. test-6
        (10, 5, 0, {4: 0, 8: 0}, {3: 0, 1: 1}, {}, [4, 8, 0, 1, 2, 3, 5, 6, 7, 9]),
        (10, 2, 0, {}, {}, {}, list(range(10))),
        (5, 2, 0, {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}, {0: 0}, {}, [0, 1, 2, 3, 4]),
        (5, 0, 2, {2: 0, 3: 0, 4: 0}, {}, {0: 0}, [2, 3, 4, 0, 1]),
        (6, 2, 2, {2: 0, 3: 1, 5: 0}, {0: 1}, {0: 0}, [2, 3, 5, 0, 1, 4]),
        (10, 5, 0, {4: 0, 8: 0, 7: 1}, {3: 0, 1: 1, 0: 1}, {}, [7, 4, 8, 0, 1, 2, 3, 5, 6, 9]),
    ],
)
def test_sort_jobs_by_migrating_num(
    *,
    count: int,
    running: int,
    passed: int,
    job_of: Mapping[int, int],
    running_of: Mapping[int, int],
    passed_of: Mapping[int, int],
    expected: list[int],
) -> None:
    waiting, others, view = _migrating_fixture(
        count=count,
        running=running,
        passed=passed,
        job_of=job_of,
        running_of=running_of,
        passed_of=passed_of,
    )
    counts = migrating_per_owner([*waiting, *others], view)
    got = by_migrating_num(waiting, _pod_of(view), counts)
    assert [j.name for j in got] == [f"test-migration-job-{i}" for i in expected]


@pytest.mark.parametrize(
    ("waiting", "running", "passed", "expected"),
    # TestGetMigratingJobNum: all pods owned by one batch Job; waiting jobs do not count
    [(3, 3, 3, 6), (4, 0, 0, 0), (1, 2, 3, 5)],
)
def test_get_migrating_job_num(waiting: int, running: int, passed: int, expected: int) -> None:
    jobs, others, view = _migrating_fixture(
        count=waiting,
        running=running,
        passed=passed,
        job_of=dict.fromkeys(range(waiting), 0),
        running_of=dict.fromkeys(range(running), 0),
        passed_of=dict.fromkeys(range(passed), 0),
    )
    assert migrating_per_owner([*jobs, *others], view).get("test-job-0", 0) == expected


def test_sort_candidates_applies_the_four_sorts_last_one_first() -> None:
    # own: the last sort (migrating jobs of the batch Job) decides first, the pod order
    # breaks its ties, and creation time breaks the pod order's ties
    pods = [
        _pod("batch-a", priority_class=qos.BATCH),
        _pod("prod-b", priority_class=qos.PROD),
        _pod("prod-c", priority_class=qos.PROD),
        _pod("job-d", "busy", priority_class=qos.PROD),
        _pod("busy-running", "busy"),
    ]
    view = ClusterView.of(pods)
    waiting = [
        _job("a", "batch-a", NOW - 50),
        _job("b", "prod-b", NOW - 20),
        _job("c", "prod-c", NOW - 10),
        _job("d", "job-d", NOW - 90),
    ]
    running = [_job("r", "busy-running", NOW - 500, phase="Running")]
    ordered = sort_candidates(waiting, view, [*waiting, *running])
    # prod-b and prod-c tie in the pod order (same created=None); the newer job c goes first
    assert [j.name for j in ordered] == ["d", "a", "c", "b"]
