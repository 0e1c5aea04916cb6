"""Migration arbitration: the limits that hold a job back, the checks that fail it, and whole
rounds.

Cases marked with an upstream test come from Koordinator v1.8.0's
pkg/descheduler/controllers/migration/arbitrator/filter_test.go, arbitrator_test.go and
migration/util/util_test.go; "own" cases add corners (missing owner, missing pod, modes,
TTL, paused jobs, limits counted within one round).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from descheduler.args import EvictorArgs
from descheduler.cluster import PodInfo
from descheduler.migration.arbitration import Outcome, arbitrate
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import ANNOTATION_PASSED_ARBITRATION, PodMigrationJob, PodRef
from descheduler.migration.limits import (
    Migrating,
    expected_replicas_reason,
    forbidden_reason,
    wait_reason,
)
from descheduler.migration.view import (
    ClusterView,
    OwnerRef,
    PodView,
    WorkloadView,
    pod_view,
    workload_view,
)

NOW = 1_700_000_000.0
STS1 = OwnerRef("StatefulSet", "test-1", "sts-1-uid", "apps/v1")
STS2 = OwnerRef("StatefulSet", "test-2", "sts-2-uid", "apps/v1")
EVICT_DIRECTLY = MigrationControllerArgs(default_job_mode="EvictDirectly")
NO_LIMITS = replace(EVICT_DIRECTLY, max_migrating_per_node=0)


def _pod(
    name: str,
    *,
    owner: OwnerRef | None = None,
    namespace: str = "default",
    node: str = "test-node",
    available: bool = True,
    eviction_cost: int = 0,
    evict_annotation: bool = False,
) -> PodView:
    info = PodInfo(
        namespace,
        name,
        owner_kinds=() if owner is None else (owner.kind,),
        eviction_cost=eviction_cost,
    )
    return PodView(
        info,
        uid=f"{namespace}/{name}-uid",
        node_name=node,
        owner=owner,
        owner_uids=() if owner is None else (owner.uid,),
        available=available,
        evict_annotation=evict_annotation,
    )


def _job(
    name: str, pod: PodView | None, *, passed: bool = False, **fields: object
) -> PodMigrationJob:
    ref = None if pod is None else PodRef(pod.namespace, pod.name, pod.uid)
    annotations = {ANNOTATION_PASSED_ARBITRATION: "true"} if passed else {}
    return PodMigrationJob(
        name,
        uid=f"{name}-uid",
        created=NOW,
        pod_ref=ref,
        annotations=annotations,
        **fields,  # type: ignore[arg-type]
    )


def _migrating(pods: list[PodView]) -> list[Migrating]:
    """Jobs that passed arbitration for ``pods`` (the upstream fixtures' migrating pods)."""
    return [Migrating(_job(f"test-{i}", pod, passed=True), pod) for i, pod in enumerate(pods)]


def _holds(
    pod: PodView,
    args: MigrationControllerArgs,
    migrating: list[Migrating],
    view: ClusterView | None = None,
) -> bool:
    return wait_reason(pod, args, view or ClusterView.of([]), migrating) is not None


# -- limits that make a job wait (filter_test.go) -------------------------------------------


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "passes"),
    [
        # TestFilterMaxMigratingGlobally
        (0, 0, False, True),  # maxMigratingGlobally=0
        (1, 0, False, True),  # maxMigratingGlobally=1 no migrating Pods
        (1, 1, True, True),  # maxMigratingGlobally=1 one migrating same Pod
        (1, 1, False, False),  # maxMigrating=1 one migrating Pod with diff Pod
    ],
)
def test_filter_max_migrating_globally(
    limit: int, migrating: int, same_pod: bool, passes: bool
) -> None:
    pods = [_pod(f"test-migrating-pod-{i}") for i in range(migrating)]
    pod = pods[0] if same_pod else _pod("test-pod", node="")
    args = replace(NO_LIMITS, max_migrating_globally=limit)
    assert _holds(pod, args, _migrating(pods)) is not passes


def test_max_migrating_globally_reason() -> None:
    args = replace(NO_LIMITS, max_migrating_globally=1)
    hold = wait_reason(_pod("p"), args, ClusterView.of([]), _migrating([_pod("q", node="n2")]))
    assert hold is not None
    assert (hold.limit, hold.message) == (
        "MaxMigratingGlobally",
        "1 pod(s) migrating, the limit is 1",
    )


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "same_node", "passes"),
    [
        # TestFilterMaxMigratingPerNode
        (0, 0, False, True, True),  # maxMigrating=0
        (1, 0, False, True, True),  # maxMigrating=1 no migrating Pods
        (1, 1, True, True, True),  # maxMigrating=1 one migrating Pod with same Pod and Node
        (1, 1, False, True, False),  # ... with diff Pod and same Node
        (1, 1, False, False, True),  # ... with diff Pod and Node
        (2, 2, True, True, True),  # maxMigrating=2 two migrating Pod with same Pod and Node
        (2, 2, False, False, True),  # ... with diff Pod and Node
        (2, 2, False, True, False),  # ... with diff Pod and same Node
    ],
)
def test_filter_max_migrating_per_node(
    limit: int, migrating: int, same_pod: bool, same_node: bool, passes: bool
) -> None:
    pods = [_pod(f"test-migrating-pod-{i}") for i in range(migrating)]
    pod = pods[0] if same_pod else _pod("test-pod", node="test-node" if same_node else "other-node")
    args = replace(EVICT_DIRECTLY, max_migrating_per_node=limit)
    assert _holds(pod, args, _migrating(pods)) is not passes


def test_per_node_counts_pods_not_jobs_and_needs_a_node() -> None:
    # own: two jobs for one pod count once; a pod not bound to a node is never held by it
    other = _pod("other")
    twice = [
        Migrating(_job("a", other, passed=True), other),
        Migrating(_job("b", other, phase="Running"), other),
    ]
    args = replace(EVICT_DIRECTLY, max_migrating_per_node=2)
    assert wait_reason(_pod("p"), args, ClusterView.of([]), twice) is None
    args = replace(EVICT_DIRECTLY, max_migrating_per_node=1)
    hold = wait_reason(_pod("p"), args, ClusterView.of([]), twice)
    assert hold is not None
    assert hold.message == "1 pod(s) migrating on node test-node, the limit is 1"
    assert wait_reason(_pod("p", node=""), args, ClusterView.of([]), twice) is None


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "same_namespace", "passes"),
    [
        # TestFilterMaxMigratingPerNamespace
        (0, 0, False, True, True),  # maxMigrating=0
        (1, 0, False, True, True),  # maxMigrating=1 no migrating Pods
        (1, 1, True, True, True),  # ... one migrating Pod with same Pod and Namespace
        (1, 1, False, True, False),  # ... with diff Pod and same Namespace
        (1, 1, False, False, True),  # ... with diff Pod and Namespace
        (2, 2, True, True, True),  # maxMigrating=2 two migrating Pod with same Pod and Namespace
        (2, 2, False, False, True),  # ... with diff Pod and Namespace
        (2, 2, False, True, False),  # ... with diff Pod and same Namespace
    ],
)
def test_filter_max_migrating_per_namespace(
    limit: int, migrating: int, same_pod: bool, same_namespace: bool, passes: bool
) -> None:
    pods = [_pod(f"test-migrating-pod-{i}") for i in range(migrating)]
    namespace = "default" if same_namespace else "other-namespace"
    pod = pods[0] if same_pod else _pod("test-pod", namespace=namespace)
    args = replace(NO_LIMITS, max_migrating_per_namespace=limit)
    assert _holds(pod, args, _migrating(pods)) is not passes


def test_skipped_gates_lift_their_limits() -> None:
    # TestFilterMaxMigratingPerNamespace/TestFilterMaxMigratingPerWorkload "skip gate ...":
    # with the gate skipped, the pod passes where it would otherwise be held
    migrating = _migrating([_pod("migrating-pod", owner=STS1)])
    pod = _pod("test-pod", owner=STS1)
    view = ClusterView.of([], {STS1.uid: WorkloadView(10)})
    namespace = replace(NO_LIMITS, max_migrating_per_namespace=1, max_unavailable_per_workload=9)
    assert _holds(pod, namespace, migrating, view)
    assert not _holds(
        pod, replace(namespace, skip_eviction_gates=("MaxMigratingPerNamespace",)), migrating, view
    )
    workload = replace(NO_LIMITS, max_migrating_per_workload=1, max_unavailable_per_workload=9)
    assert _holds(pod, workload, migrating, view)
    assert not _holds(
        pod, replace(workload, skip_eviction_gates=("MaxMigratingPerWorkload",)), migrating, view
    )
    node = replace(EVICT_DIRECTLY, max_migrating_per_node=1, max_unavailable_per_workload=9)
    assert _holds(pod, node, migrating, view)
    assert not _holds(
        pod, replace(node, skip_eviction_gates=("MaxMigratingPerNode",)), migrating, view
    )


@pytest.mark.parametrize(
    ("limit", "migrating", "same_pod", "same_workload", "passes"),
    [
        # TestFilterMaxMigratingPerWorkload (totalReplicas=10, maxUnavailable 9)
        (1, 0, False, False, True),  # maxMigrating=1 no migrating Pod
        (1, 1, True, True, True),  # ... one migrating Pod with same Pod and Workload
        (1, 1, False, True, False),  # ... with diff Pod and same Workload
        (1, 1, False, False, True),  # ... with diff Pod and diff Workload
        (2, 2, True, True, True),  # maxMigrating=2 two migrating Pod with same Pod and Workload
        (2, 2, False, True, False),  # ... with diff Pod and same Workload
        (2, 2, False, False, True),  # ... with diff Pod and diff Workload
    ],
)
def test_filter_max_migrating_per_workload(
    limit: int, migrating: int, same_pod: bool, same_workload: bool, passes: bool
) -> None:
    pods = [_pod(f"test-migrating-pod-{i}", owner=STS1) for i in range(migrating)]
    owner = STS1 if same_workload else STS2
    pod = replace(pods[0], owner=owner) if same_pod else _pod("test-pod", owner=owner)
    view = ClusterView.of([], {STS1.uid: WorkloadView(10), STS2.uid: WorkloadView(10)})
    args = replace(NO_LIMITS, max_migrating_per_workload=limit, max_unavailable_per_workload=9)
    assert _holds(pod, args, _migrating(pods), view) is not passes


@pytest.mark.parametrize(
    ("limit", "unavailable", "migrating", "same_workload", "passes"),
    [
        # TestFilterMaxUnavailablePerWorkload (totalReplicas=10, maxMigrating 9)
        (1, 0, 0, True, True),  # maxUnavailable=1 no migrating Pod and no unavailable Pod
        (1, 1, 0, True, False),  # ... one unavailable Pod with same Workload
        (1, 0, 1, True, False),  # ... one migrating Pod with same Workload
        (1, 1, 0, True, False),  # ... one unavailable Pod and one migrating Pod (sic: 0 migrating)
        (2, 0, 0, True, True),  # maxUnavailable=2 no migrating Pod and no unavailable Pod
        (2, 1, 0, True, True),  # ... one unavailable Pod with same Workload
        (2, 0, 1, True, True),  # ... one migrating Pod with same Workload
        (2, 1, 1, True, False),  # ... one unavailable Pod and one migrating Pod with same Workload
        (2, 1, 1, False, True),  # ... one unavailable Pod and one migrating Pod with diff Workload
    ],
)
def test_filter_max_unavailable_per_workload(
    limit: int, unavailable: int, migrating: int, same_workload: bool, passes: bool
) -> None:
    broken = [
        _pod(f"test-unavailable-pod-{i}", owner=STS1, available=False) for i in range(unavailable)
    ]
    moving = [_pod(f"test-migrating-pod-{i}", owner=STS1) for i in range(migrating)]
    healthy = [
        _pod(f"test-available-pod-{i}", owner=STS1) for i in range(10 - unavailable - migrating)
    ]
    workloads = {STS1.uid: workload_view(10, broken + moving + healthy), STS2.uid: WorkloadView(10)}
    pod = _pod("test-pod", owner=STS1 if same_workload else STS2)
    args = replace(NO_LIMITS, max_migrating_per_workload=9, max_unavailable_per_workload=limit)
    assert _holds(pod, args, _migrating(moving), ClusterView.of([], workloads)) is not passes


def test_unavailable_and_migrating_pods_count_once() -> None:
    # own: a migrating pod that is also unavailable is one pod, as upstream merges the sets
    moving = _pod("moving", owner=STS1, available=False)
    view = ClusterView.of([], {STS1.uid: workload_view(10, [moving])})
    args = replace(NO_LIMITS, max_unavailable_per_workload=2)
    pod = _pod("test-pod", owner=STS1)
    assert wait_reason(pod, args, view, _migrating([moving])) is None
    args = replace(NO_LIMITS, max_unavailable_per_workload=1)
    hold = wait_reason(pod, args, view, _migrating([moving]))
    assert hold is not None
    assert hold.limit == "MaxUnavailablePerWorkload"
    assert hold.message == (
        'The workload test-1/StatefulSet/apps/v1(sts-1-uid) of Pod "default/test-pod" has 1 '
        "unavailable Pods that exceed MaxUnavailablePerWorkload 1"
    )


def test_a_pod_without_owner_has_no_workload_limits() -> None:
    # own: missing owner: no workload, so neither maxMigrating nor maxUnavailable applies
    moving = [_pod(f"m{i}") for i in range(5)]
    args = replace(NO_LIMITS, max_migrating_per_workload=1, max_unavailable_per_workload=1)
    assert wait_reason(_pod("bare"), args, ClusterView.of([]), _migrating(moving)) is None
    assert expected_replicas_reason(_pod("bare"), args, ClusterView.of([])) is None


# -- checks that fail a job -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "limit", "passes"),
    [
        # TestFilterExpectedReplicas (maxMigrating totalReplicas-1)
        (1, 1, False),  # totalReplicas=1 and maxUnavailable=1
        (100, 100, False),  # totalReplicas=100 and maxUnavailable=100
        (100, 10, True),  # totalReplicas=100 and maxUnavailable=10
    ],
)
def test_filter_expected_replicas(total: int, limit: int, passes: bool) -> None:
    view = ClusterView.of([], {STS1.uid: WorkloadView(total)})
    args = replace(
        NO_LIMITS, max_migrating_per_workload=total - 1, max_unavailable_per_workload=limit
    )
    pod = _pod("test-pod", owner=STS1)
    assert (expected_replicas_reason(pod, args, view) is None) is passes
    assert (forbidden_reason(pod, args, view) is None) is passes
    # skipCheckExpectedReplicas and the ExpectedReplicas gate let every case through
    assert forbidden_reason(pod, replace(args, skip_check_expected_replicas=True), view) is None
    assert (
        forbidden_reason(pod, replace(args, skip_eviction_gates=("ExpectedReplicas",)), view)
        is None
    )


def test_expected_replicas_reasons() -> None:
    pod = _pod("test-pod", owner=STS1)
    one = ClusterView.of([], {STS1.uid: WorkloadView(1)})
    assert expected_replicas_reason(pod, NO_LIMITS, one) == (
        "workload test-1/StatefulSet/apps/v1(sts-1-uid) expects 1 replica, its only one"
    )
    # own: a workload that was not found expects 0: maxMigrating and maxUnavailable are 0 too
    assert expected_replicas_reason(pod, NO_LIMITS, ClusterView.of([])) == (
        "workload test-1/StatefulSet/apps/v1(sts-1-uid) expects 0 replica(s), as many as "
        "maxMigrating 0 or maxUnavailable 0 would let go"
    )


@pytest.mark.parametrize(
    # TestFilterPodWithMaxEvictionCost: empty, negative, higher cost pass; MaxInt32 does not
    ("cost", "passes"),
    [(0, True), (-100, True), (100, True), (2**31 - 1, False)],
)
def test_filter_pod_with_max_eviction_cost(cost: int, passes: bool) -> None:
    view = ClusterView.of([], {STS1.uid: WorkloadView(10)})
    reason = forbidden_reason(_pod("p", owner=STS1, eviction_cost=cost), NO_LIMITS, view)
    assert (reason is None) is passes


def test_the_evictor_and_namespaces_forbid() -> None:
    view = ClusterView.of([], {STS1.uid: WorkloadView(10)})
    assert forbidden_reason(_pod("bare"), NO_LIMITS, view) == "pod does not have any ownerRefs"
    bare_ok = replace(NO_LIMITS, evictor=EvictorArgs(evict_all_bare_pods=True))
    assert forbidden_reason(_pod("bare"), bare_ok, view) is None
    assert (
        forbidden_reason(_pod("bare"), replace(NO_LIMITS, skip_eviction_gates=("BarePods",)), view)
        is None
    )
    daemon = _pod("ds", owner=OwnerRef("DaemonSet", "ds", "ds-uid"))
    assert forbidden_reason(daemon, bare_ok, view) == "pod is a DaemonSet pod"
    excluded = replace(NO_LIMITS, namespaces_exclude=("default",))
    pod = _pod("p", owner=STS1)
    assert forbidden_reason(pod, excluded, view) == (
        "namespace default is not one whose pods may be migrated"
    )
    assert (
        forbidden_reason(pod, replace(excluded, skip_eviction_gates=("Namespaces",)), view) is None
    )
    assert forbidden_reason(pod, replace(NO_LIMITS, namespaces_include=("prod",)), view) is not None


# -- whole rounds (arbitrator_test.go) -------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "non_retryable", "retryable", "passed", "waiting", "failed"),
    [
        # TestDoOnceArbitrate test-1 .. test-5 (upstream's filters stubbed by name; here a pod
        # with the maximum eviction cost fails and a pod of a workload already short of a
        # replica waits)
        (10, {2}, {3, 7}, {0, 1, 4, 5, 6, 8, 9}, {3, 7}, {2}),
        (10, {3}, {3, 7}, {0, 1, 2, 4, 5, 6, 8, 9}, {7}, {3}),
        (5, {0, 1, 2, 3, 4}, set(), set(), set(), {0, 1, 2, 3, 4}),
        (5, set(), {0, 1, 2, 3, 4}, set(), {0, 1, 2, 3, 4}, set()),
        (5, set(), {2}, {0, 1, 3, 4}, {2}, set()),
    ],
)
def test_do_once_arbitrate(
    *,
    count: int,
    non_retryable: set[int],
    retryable: set[int],
    passed: set[int],
    waiting: set[int],
    failed: set[int],
) -> None:
    pods, workloads, jobs = [], {}, []
    for i in range(count):
        owner = OwnerRef("StatefulSet", f"sts-{i}", f"sts-{i}-uid", "apps/v1")
        cost = 2**31 - 1 if i in non_retryable else 0
        pod = _pod(f"test-pod-{i}", owner=owner, eviction_cost=cost)
        broken = {f"default/broken-{i}"} if i in retryable else set()
        workloads[owner.uid] = WorkloadView(10, frozenset(broken))
        pods.append(pod)
        jobs.append(_job(f"test-job-{i}", pod))
    args = replace(NO_LIMITS, max_unavailable_per_workload=1)
    result = arbitrate(jobs, [], ClusterView.of(pods, workloads), args, now=NOW)

    def names(indexes: set[int]) -> list[str]:
        return sorted(f"test-job-{i}" for i in indexes)

    assert sorted(j.name for j in result.passed) == names(passed)
    assert sorted(j.name for j in result.waiting) == names(waiting)
    assert sorted(j.name for j in result.failed) == names(failed)
    for job in result.failed:
        assert result.decision(job.name).status == {
            "phase": "Failed",
            "reason": "ForbiddenMigratePod",
            "message": f'Pod "default/{job.pod_ref.name if job.pod_ref else ""}" is forbidden to '
            f"migrate because it does not meet the requirements: pod has the maximum eviction "
            f"cost (2147483647)",
        }
    for job in result.waiting:
        assert result.decision(job.name).reason == "MaxUnavailablePerWorkload"


def test_jobs_passing_in_a_round_count_against_the_next() -> None:
    # own: three jobs on one node, maxMigratingPerNode 2: the first two (in order) pass
    workloads = {STS1.uid: WorkloadView(30)}
    pods = [_pod(f"p{i}", owner=STS1) for i in range(3)]
    jobs = [replace(_job(f"j{i}", pod), created=NOW - i) for i, pod in enumerate(pods)]
    result = arbitrate(jobs, [], ClusterView.of(pods, workloads), EVICT_DIRECTLY, now=NOW)
    assert [(d.job.name, d.outcome) for d in result.decisions] == [
        ("j0", Outcome.PASSED),
        ("j1", Outcome.PASSED),
        ("j2", Outcome.WAITING),
    ]
    assert result.decision("j2").message == "2 pod(s) migrating on node test-node, the limit is 2"
    assert result.decision("j2").status is None


def test_running_jobs_count_and_finished_ones_do_not() -> None:
    # own: Running and passed-Pending jobs hold the node's slots; Succeeded ones do not
    workloads = {STS1.uid: WorkloadView(30)}
    others = [_pod(f"o{i}", owner=STS1) for i in range(4)]
    pod = _pod("p", owner=STS1)
    view = ClusterView.of([*others, pod], workloads)
    candidate = _job("j", pod)
    finished = [
        _job("s0", others[0], phase="Succeeded", passed=True),
        _job("s1", others[1], phase="Failed"),
    ]
    result = arbitrate([candidate], finished, view, EVICT_DIRECTLY, now=NOW)
    assert result.passed == [candidate]
    busy = [_job("r", others[2], phase="Running"), _job("q", others[3], passed=True)]
    result = arbitrate([candidate], [*finished, *busy], view, EVICT_DIRECTLY, now=NOW)
    assert result.waiting == [candidate]


def test_never_the_last_available_replica() -> None:
    # own: a workload of 2 with one replica down (maxUnavailable 1) keeps its last one; a
    # workload of 1 never loses its only one
    down = _pod("down", owner=STS1, available=False)
    last = _pod("last", owner=STS1)
    view = ClusterView.of([down, last], {STS1.uid: workload_view(2, [down, last])})
    result = arbitrate([_job("j", last)], [], view, NO_LIMITS, now=NOW)
    assert result.decision("j").outcome is Outcome.WAITING
    only = _pod("only", owner=STS2)
    view = ClusterView.of([only], {STS2.uid: workload_view(1, [only])})
    result = arbitrate([_job("j", only)], [], view, NO_LIMITS, now=NOW)
    assert result.decision("j").outcome is Outcome.FAILED
    assert result.decision("j").reason == "ForbiddenMigratePod"


def test_both_modes_are_arbitrated_alike() -> None:
    # Koordinator's arbitrator does not look at the mode: a ReservationFirst job (its own
    # mode or defaultJobMode's) passes as an EvictDirectly one does
    pod = _pod("p", owner=STS1)
    view = ClusterView.of([pod], {STS1.uid: WorkloadView(10)})
    for job, args in (
        (_job("j", pod), MigrationControllerArgs()),
        (_job("j", pod, mode="ReservationFirst"), EVICT_DIRECTLY),
        (_job("j", pod, mode="EvictDirectly"), MigrationControllerArgs()),
    ):
        assert arbitrate([job], [], view, args, now=NOW).decision("j").outcome is Outcome.PASSED


def test_controller_failures_paused_and_timeouts() -> None:
    # own, after controller.go: a timed-out job fails (TestAbortJobIfTimeout's 30m TTL, an
    # hour old); a paused one waits and does not time out; an invalid podRef and a missing
    # pod (TestFiltering's nil pod, which the controller then fails) fail
    pod = _pod("p", owner=STS1)
    view = ClusterView.of([pod], {STS1.uid: WorkloadView(10)})
    old = replace(_job("old", pod, ttl=1800.0), created=NOW - 3600)
    paused = replace(_job("paused", pod, ttl=1800.0, paused=True), created=NOW - 3600)
    no_ref = _job("no-ref", None)
    no_name = replace(_job("no-name", pod), pod_ref=PodRef("default", ""))
    missing = replace(_job("missing", pod), pod_ref=PodRef("default", "gone"))
    result = arbitrate([old, paused, no_ref, no_name, missing], [], view, EVICT_DIRECTLY, now=NOW)
    assert result.decision("old").status == {
        "phase": "Failed",
        "reason": "Timeout",
        "message": "Abort job caused by timeout",
    }
    assert (result.decision("paused").outcome, result.decision("paused").reason) == (
        Outcome.WAITING,
        "Paused",
    )
    for name in ("no-ref", "no-name"):
        assert result.decision(name).status == {
            "phase": "Failed",
            "reason": "InvalidPodRef",
            "message": "Abort job caused by invalid PodRef",
        }
    assert result.decision("missing").status == {
        "phase": "Failed",
        "reason": "MissingPod",
        "message": 'Abort job caused by missing Pod "default/gone"',
    }


def test_the_evict_annotation_passes_every_check() -> None:
    # own, after HaveEvictAnnotation: the pod passes even as a bare pod on a full node
    pod = _pod("p", evict_annotation=True, eviction_cost=2**31 - 1)
    busy = [_pod(f"o{i}") for i in range(2)]
    view = ClusterView.of([pod, *busy])
    running = [_job(f"r{i}", other, phase="Running") for i, other in enumerate(busy)]
    result = arbitrate([_job("j", pod)], running, view, EVICT_DIRECTLY, now=NOW)
    assert result.decision("j").outcome is Outcome.PASSED


def test_only_waiting_candidates_are_arbitrated() -> None:
    pod = _pod("p", owner=STS1)
    view = ClusterView.of([pod], {STS1.uid: WorkloadView(10)})
    jobs = [
        _job("passed", pod, passed=True),
        _job("running", pod, phase="Running"),
        _job("new", pod),
    ]
    result = arbitrate(jobs, [], view, NO_LIMITS, now=NOW)
    assert [d.job.name for d in result.decisions] == ["new"]
    with pytest.raises(KeyError):
        result.decision("running")


# -- the view from JSON --------------------------------------------------------------------


def test_pod_view_from_json() -> None:
    pod = pod_view(
        {
            "metadata": {
                "namespace": "ns",
                "name": "web-0",
                "uid": "u-1",
                "annotations": {"descheduler.alpha.kubernetes.io/evict": "true"},
                "ownerReferences": [
                    {"kind": "Other", "name": "x", "uid": "x-uid"},
                    {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "w-uid",
                     "controller": True},
                ],
            },
            "spec": {"nodeName": "node-1", "containers": []},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )  # fmt: skip
    assert pod.key == "ns/web-0" and pod.uid == "u-1" and pod.node_name == "node-1"
    assert pod.owner == OwnerRef("StatefulSet", "web", "w-uid", "apps/v1")
    assert pod.owner_uids == ("x-uid", "w-uid")
    assert pod.available and pod.evict_annotation
    assert pod.info.owner_kinds == ("Other", "StatefulSet")


@pytest.mark.parametrize(
    ("status", "metadata", "available"),
    [
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, {}, True),
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}, {}, False),
        ({"phase": "Running"}, {}, False),  # no Ready condition
        ({"phase": "Pending"}, {}, False),
        ({"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "True"}]}, {}, False),
        ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
         {"deletionTimestamp": "2023-11-14T22:13:20Z"}, False),
    ],
)  # fmt: skip
def test_availability(
    status: dict[str, object], metadata: dict[str, object], available: bool
) -> None:
    pod = pod_view(
        {"metadata": {"namespace": "a", "name": "b", **metadata}, "spec": {}, "status": status}
    )
    assert pod.available is available
    assert pod.owner is None  # missing owner: no controller reference
    view = workload_view(3, [pod])
    assert view.unavailable_pods == (frozenset() if available else frozenset({"a/b"}))
