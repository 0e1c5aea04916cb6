"""The PodMigrationJob model, the job built for a pod, and the TTL decisions.

Cases marked with an upstream test come from Koordinator v1.8.0's
pkg/descheduler/controllers/migration/controller_test.go (TestAbortJobIfTimeout,
TestDoScavenge, TestEvict); "own" cases add corners.
"""

from __future__ import annotations

from typing import Any

import pytest

from descheduler.migration.job import (
    ANNOTATION_EVICT_REASON,
    ANNOTATION_EVICT_TRIGGER,
    ANNOTATION_JOB_CREATED_BY,
    ANNOTATION_PASSED_ARBITRATION,
    DRY_RUN_ALL,
    JobError,
    PodMigrationJob,
    PodRef,
    format_duration,
    new_pod_migration_job,
    parse_duration,
)
from descheduler.migration.ttl import should_scavenge, timed_out, timeout_status

NOW = 1_700_000_000.0


def test_from_dict_reads_every_field() -> None:
    job = PodMigrationJob.from_dict(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "PodMigrationJob",
            "metadata": {
                "name": "job-1",
                "uid": "u-1",
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "annotations": {ANNOTATION_PASSED_ARBITRATION: "true"},
            },
            "spec": {
                "paused": True,
                "ttl": "5m0s",
                "mode": "EvictDirectly",
                "podRef": {"namespace": "ns", "name": "web-0", "uid": "p-1"},
                "deleteOptions": {"gracePeriodSeconds": 30},
            },
            "status": {
                "phase": "Running",
                "status": "Evicting",
                "reason": "Evicting",
                "message": "evicting",
                "nodeName": "node-2",
            },
        }
    )
    assert job == PodMigrationJob(
        name="job-1",
        uid="u-1",
        created=NOW,
        annotations={ANNOTATION_PASSED_ARBITRATION: "true"},
        paused=True,
        ttl=300.0,
        mode="EvictDirectly",
        pod_ref=PodRef("ns", "web-0", "p-1"),
        delete_options={"gracePeriodSeconds": 30},
        phase="Running",
        status="Evicting",
        reason="Evicting",
        message="evicting",
        node_name="node-2",
    )
    assert job.migrating and not job.waiting


@pytest.mark.parametrize(
    ("phase", "passed", "waiting", "migrating"),
    [
        ("", False, True, False),  # an empty phase reads as Pending
        ("Pending", False, True, False),
        ("Pending", True, False, True),  # passed arbitration, not yet taken on
        ("", True, False, True),
        ("Running", False, False, True),
        ("Succeeded", True, False, False),
        ("Failed", False, False, False),
        ("Aborted", False, False, False),
    ],
)
def test_waiting_and_migrating(phase: str, passed: bool, waiting: bool, migrating: bool) -> None:
    annotations = {ANNOTATION_PASSED_ARBITRATION: "true"} if passed else {}
    job = PodMigrationJob("j", phase=phase, annotations=annotations)
    assert (job.waiting, job.migrating) == (waiting, migrating)
    assert job.effective_phase == (phase or "Pending")


def test_an_empty_object_reads_as_a_bare_pending_job() -> None:
    job = PodMigrationJob.from_dict({})
    assert job == PodMigrationJob(name="")
    assert job.pod_ref is None and job.ttl is None and job.created is None
    assert job.effective_mode("EvictDirectly") == "EvictDirectly"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"spec": {"ttl": 300}}, "spec.ttl: must be a duration such as 5m0s, got 300"),
        ({"spec": {"ttl": "five"}}, "spec.ttl: not a duration: 'five'"),
        ({"spec": {"podRef": "ns/name"}}, "spec.podRef: must be an object, got 'ns/name'"),
        ({"spec": {"podRef": {"name": 5}}}, "spec.podRef.name: must be a string, got 5"),
        ({"spec": {"paused": "true"}}, "spec.paused: must be true or false, got 'true'"),
        ({"metadata": {"creationTimestamp": "yesterday"}},
         "metadata.creationTimestamp: not an RFC 3339 time: 'yesterday'"),
        ({"status": []}, "status: must be an object, got []"),
    ],
)  # fmt: skip
def test_from_dict_refuses_wrong_types(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(JobError) as caught:
        PodMigrationJob.from_dict(obj)
    assert str(caught.value) == message


def test_new_job_for_a_pod() -> None:
    pod = {"metadata": {"namespace": "ns", "name": "web-0", "uid": "p-1"}}
    job = new_pod_migration_job(
        pod,
        name="6f1c",
        mode="EvictDirectly",
        ttl=300.0,
        reason="node is overutilized",
        trigger="LowNodeLoad",
        delete_options={"gracePeriodSeconds": 0},
        created_by="reconciler-1",
    )
    assert job == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "6f1c",
            "annotations": {
                ANNOTATION_EVICT_REASON: "node is overutilized",
                ANNOTATION_EVICT_TRIGGER: "LowNodeLoad",
                ANNOTATION_JOB_CREATED_BY: "reconciler-1",
            },
        },
        "spec": {
            "podRef": {"namespace": "ns", "name": "web-0", "uid": "p-1"},
            "mode": "EvictDirectly",
            "ttl": "5m0s",
            "deleteOptions": {"gracePeriodSeconds": 0},
        },
        "status": {"phase": "Pending"},
    }
    parsed = PodMigrationJob.from_dict(job)
    assert parsed.waiting and parsed.ttl == 300.0
    assert parsed.pod_ref == PodRef("ns", "web-0", "p-1")


def test_new_job_without_ttl_uid_or_options() -> None:
    # TestEvict: a pod without uid gives a podRef of namespace and name only
    job = new_pod_migration_job(
        {"metadata": {"namespace": "test", "name": "test-pod"}},
        name="j",
        mode="ReservationFirst",
        ttl=0,
    )
    assert job["spec"] == {
        "podRef": {"namespace": "test", "name": "test-pod"},
        "mode": "ReservationFirst",
    }
    assert job["metadata"]["annotations"] == {
        ANNOTATION_EVICT_REASON: "",
        ANNOTATION_EVICT_TRIGGER: "",
    }
    assert "namespace" not in job["metadata"]  # PodMigrationJob is cluster-scoped


def test_dry_run_leaves_no_marker_in_the_object() -> None:
    # own: the choice documented on new_pod_migration_job; a dry run lives on the request
    job = new_pod_migration_job(
        {"metadata": {"namespace": "a", "name": "b"}}, name="j", mode="EvictDirectly", ttl=60
    )
    assert "dry" not in repr(job).lower()
    assert DRY_RUN_ALL == "All"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300.0, "5m0s"), (90.0, "1m30s"), (5400.0, "1h30m0s"), (45.0, "45s"), (1.5, "1.5s"),
     (-600.0, "-10m0s")],
)  # fmt: skip
def test_durations_round_trip(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text, "ttl") == seconds


# -- TTL ---------------------------------------------------------------------------------------


def test_abort_job_if_timeout() -> None:
    # TestAbortJobIfTimeout: no TTL never times out; a TTL of 30m does not at creation, and
    # does 60 minutes later, with reason Timeout
    job = PodMigrationJob("test", created=NOW, pod_ref=PodRef("default", "test-pod"))
    assert not timed_out(job, NOW)
    assert not timed_out(job, NOW + 60 * 60)
    job = PodMigrationJob("test", created=NOW, ttl=30 * 60, pod_ref=PodRef("default", "test-pod"))
    assert not timed_out(job, NOW)
    assert timed_out(job, NOW + 60 * 60)
    assert timeout_status() == {
        "phase": "Failed",
        "reason": "Timeout",
        "message": "Abort job caused by timeout",
    }


def test_timeout_boundaries() -> None:
    # own: at the TTL exactly it has timed out; a zero TTL is none; a job not created yet
    # (no creation time) has not
    job = PodMigrationJob("j", created=NOW, ttl=300.0)
    assert not timed_out(job, NOW + 299.999)
    assert timed_out(job, NOW + 300.0)
    assert not timed_out(PodMigrationJob("j", created=NOW, ttl=0.0), NOW + 10**6)
    assert not timed_out(PodMigrationJob("j", ttl=300.0), NOW + 10**6)


def test_do_scavenge() -> None:
    # TestDoScavenge: at now+20m, the ten jobs with a 15m TTL are deleted (15m + 5m); the job
    # without TTL created an hour in the future is kept
    future = PodMigrationJob("test", created=NOW + 3600, pod_ref=PodRef("default", "test-pod"))
    ttl_jobs = [PodMigrationJob(f"test-{i}", created=NOW, ttl=15 * 60) for i in range(10)]
    later = NOW + 20 * 60
    assert [job.name for job in [future, *ttl_jobs] if should_scavenge(job, later)] == [
        f"test-{i}" for i in range(10)
    ]


def test_scavenge_boundaries() -> None:
    # own: 30 minutes for a job without TTL, TTL + 5 minutes otherwise, whatever the phase
    assert not should_scavenge(PodMigrationJob("j", created=NOW), NOW + 1799)
    assert should_scavenge(PodMigrationJob("j", created=NOW, phase="Succeeded"), NOW + 1800)
    assert not should_scavenge(PodMigrationJob("j", created=NOW, ttl=900.0), NOW + 1199)
    assert should_scavenge(PodMigrationJob("j", created=NOW, ttl=900.0), NOW + 1200)
    assert not should_scavenge(PodMigrationJob("j"), NOW + 10**6)
