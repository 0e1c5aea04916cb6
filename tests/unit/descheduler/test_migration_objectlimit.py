"""objectLimiters, with cases from Koordinator v1.8.0's controller_test.go
(TestRequeueJobIfObjectLimiterFailed, ...WithNamespace) on a fake clock instead of its sleeps,
and numbers of our own (37 replicas, 20 %, a rate changed between evictions)."""

from __future__ import annotations

from typing import Any

import pytest

from descheduler.migration.args import ObjectLimiter
from descheduler.migration.objectlimit import ObjectLimiters
from descheduler.migration.view import PodView, pod_view


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, *, owner: str = "rs-1", namespace: str = "test-namespace") -> PodView:
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"{name}-uid",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": owner,
                    "uid": f"{owner}-uid",
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    return pod_view(obj)


def replicas(count: int | None) -> Any:
    return lambda _uid: count


WORKLOAD_10_PER_S = {"workload": ObjectLimiter(duration=1.0, max_migrating=10)}


@pytest.mark.parametrize(
    ("wait", "limited"),
    [(0.1, False), (0.01, True)],  # upstream's "less than" and "exceeded workload limiter"
)
def test_a_workload_is_limited_until_its_bucket_refills(wait: float, limited: bool) -> None:
    clock = Clock()
    limits = ObjectLimiters(WORKLOAD_10_PER_S, clock)
    limits.track(pod("a"), replicas(100), None)  # 10 of 100 per second: one per 0.1 s
    clock.now += wait
    found = limits.exceeded(pod("b"))
    assert (found is not None) is limited
    if found:
        kind, why = found
        assert kind == "workload"
        assert "rs-1/ReplicaSet/apps/v1(rs-1-uid)" in why


def test_another_workload_and_a_disabled_limiter_are_not_limited() -> None:
    clock = Clock()
    limits = ObjectLimiters(WORKLOAD_10_PER_S, clock)
    limits.track(pod("a", owner="rs-other"), replicas(100), None)
    clock.now += 0.01
    assert limits.exceeded(pod("b")) is None  # its own workload evicted nothing
    assert limits.exceeded(pod("c", owner="rs-other")) is not None
    off = ObjectLimiters({"workload": ObjectLimiter(duration=0.0, max_migrating=10)}, clock)
    off.track(pod("a"), replicas(100), None)
    assert off.exceeded(pod("b")) is None


def test_the_default_workload_limiter_takes_max_migrating_per_workload() -> None:
    """Five minutes, maxMigrating from maxMigratingPerWorkload (20 % of 37 replicas: 7), so
    one eviction per 300/7 s, about 43 s."""
    clock = Clock()
    limits = ObjectLimiters({"workload": ObjectLimiter(duration=300.0)}, clock)
    limits.track(pod("a"), replicas(37), "20%")
    clock.now += 42.0
    assert limits.exceeded(pod("b")) is not None
    clock.now += 1.0  # 43 s: 7 * 43 / 300 = 1.003 tokens
    assert limits.exceeded(pod("b")) is None
    # without maxMigratingPerWorkload Koordinator's ladder: 10 % of 37 is 3, one per 100 s
    ladder = ObjectLimiters({"workload": ObjectLimiter(duration=300.0)}, clock)
    ladder.track(pod("a"), replicas(37), None)
    clock.now += 99.0
    assert ladder.exceeded(pod("b")) is not None
    clock.now += 1.0
    assert ladder.exceeded(pod("b")) is None


def test_a_burst_lets_that_many_through_at_once() -> None:
    clock = Clock()
    limits = ObjectLimiters(
        {"workload": ObjectLimiter(duration=1.0, max_migrating=10, burst=2)}, clock
    )
    limits.track(pod("a"), replicas(100), None)
    clock.now += 0.01
    assert limits.exceeded(pod("b")) is None  # upstream's "workload limiter with burst"
    limits.track(pod("b"), replicas(100), None)
    assert limits.exceeded(pod("c")) is not None


NAMESPACE_LIMITS = {
    "workload": ObjectLimiter(duration=1.0, max_migrating=10),
    "namespace": ObjectLimiter(duration=1.0, max_migrating=5),
}


@pytest.mark.parametrize(("wait", "limited"), [(0.1, True), (0.2, False)])
def test_a_namespace_limits_every_workload_in_it(wait: float, limited: bool) -> None:
    clock = Clock()
    limits = ObjectLimiters(NAMESPACE_LIMITS, clock)
    limits.track(pod("a"), replicas(100), None)
    clock.now += wait
    # another workload of the same namespace: only the namespace's bucket says no
    found = limits.exceeded(pod("b", owner="rs-2"))
    assert (found is not None) is limited
    if found:
        assert found[0] == "namespace"
    assert limits.exceeded(pod("c", owner="rs-2", namespace="test-namespace-other")) is None


def test_a_namespace_limiter_takes_a_whole_number_only() -> None:
    clock = Clock()
    percent = ObjectLimiters({"namespace": ObjectLimiter(duration=1.0, max_migrating="50%")}, clock)
    percent.track(pod("a"), replicas(100), None)
    assert percent.exceeded(pod("b", owner="rs-2")) is None  # a percentage is 0: not tracked
    text = ObjectLimiters({"namespace": ObjectLimiter(duration=1.0, max_migrating="3")}, clock)
    text.track(pod("a"), replicas(100), None)
    assert text.exceeded(pod("b", owner="rs-2")) is not None


def test_an_unknown_workload_tracks_nothing_and_stops_the_limiters_after_it() -> None:
    """As upstream's trackEvictedPod: a maxMigrating of 0 returns before the next limiter."""
    clock = Clock()
    limits = ObjectLimiters(NAMESPACE_LIMITS, clock)
    limits.track(pod("a"), replicas(None), None)
    assert limits.exceeded(pod("b")) is None
    assert limits.exceeded(pod("c", owner="rs-2")) is None  # the namespace was not fed


def test_a_changed_rate_applies_from_then_and_an_idle_bucket_is_forgotten() -> None:
    clock = Clock()
    limits = ObjectLimiters({"workload": ObjectLimiter(duration=10.0)}, clock)
    limits.track(pod("a"), replicas(3), None)  # 1 of 3 per 10 s
    clock.now += 5.0  # 0.5 token accrued at the old rate
    limits.track(pod("b"), replicas(40), None)  # 10 % of 40: 4 per 10 s; nothing to take
    clock.now += 1.0  # 0.5 + 0.4 = 0.9
    assert limits.exceeded(pod("c")) is not None
    clock.now += 0.25  # 1.0
    assert limits.exceeded(pod("c")) is None
    limits.track(pod("c"), replicas(40), None)
    clock.now += 14.9  # 1.5 durations after the last eviction less a little: still known
    assert limits.exceeded(pod("d")) is None  # refilled anyway
    assert len(limits._buckets) == 1
    clock.now += 0.2
    limits.exceeded(pod("d"))
    assert not limits._buckets
