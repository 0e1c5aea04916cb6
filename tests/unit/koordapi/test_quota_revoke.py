"""Reclaim of over-used quotas against cases shaped after Koordinator v1.8's
quota_overuse_revoke_test.go (other numbers; expected values worked out by hand in the
comments), plus the ElasticQuotaArgs the controller reads. cpu in milli-cores, memory in
bytes; times are the injected clock's seconds."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi.errors import ModelError
from koordapi.quota.model import DEFAULT_QUOTA, LABEL_PREEMPTIBLE, ROOT_QUOTA, SYSTEM_QUOTA
from koordapi.quota.revoke import (
    ElasticQuotaArgs,
    OverUseMonitor,
    QuotaRevoker,
    less_than_or_equal,
    mask,
    more_important,
    non_preemptible,
    parse_elastic_quota_args,
    pods_to_revoke,
)

GI = 1 << 30


def pod(
    name: str,
    priority: int | None,
    requests: dict[str, str],
    *,
    start: str | None = None,
    created: str | None = None,
    preemptible: str | None = None,
) -> dict[str, Any]:
    labels = {} if preemptible is None else {LABEL_PREEMPTIBLE: preemptible}
    meta: dict[str, Any] = {"name": name, "namespace": "work", "labels": labels}
    if created is not None:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {
        "nodeName": "node-7",
        "containers": [{"name": "c", "resources": {"requests": dict(requests)}}],
    }
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {"phase": "Running"}
    if start is not None:
        status["startTime"] = start
    return {"metadata": meta, "spec": spec, "status": status}


def names(pods: list[Any]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# -- pods_to_revoke: TestQuotaOverUsedRevokeController_GetToRevokePodList ----------------------

# Like Koordinator's pods (createResourceList(cpu, 0): memory listed at zero), one of them
# asking for 3 bytes of memory while the runtime has none; "5" is the least important but
# non-preemptible.
POD1 = pod("1", 13, {"cpu": "23", "memory": "0"})
POD2 = pod("2", 12, {"cpu": "11", "memory": "3"})
POD3 = pod("3", 11, {"cpu": "17", "memory": "0"})
POD4 = pod("4", 10, {"cpu": "44", "memory": "0"})
POD5 = pod("5", 2, {"cpu": "9", "memory": "0"}, preemptible="false")
# 23 + 11 + 17 + 44 + 9 cores, 3 bytes
USED = {"cpu": 104_000, "memory": 3}


def test_revoke_takes_until_used_fits_then_keeps_back_what_still_fits() -> None:
    # least important first: 5 (skipped, non-preemptible), 4, 3, 2, 1
    # take 4: {60000, 3}, memory still over; take 3: {43000, 3}; take 2: {32000, 0}: fits.
    # give back 2: {43000, 3} over: revoked, {32000, 0}; 3: {49000, 0} kept;
    # 4: {93000, 0} over: revoked
    runtime = {"cpu": 61_000, "memory": 0}
    assert names(pods_to_revoke([POD1, POD2, POD3, POD4, POD5], USED, runtime)) == ["2", "4"]


def test_revoke_returns_every_taken_pod_when_used_never_fits() -> None:
    # after all four preemptible pods, used is still 9000 (pod 5) > -1000: all of them,
    # least important first
    runtime = {"cpu": -1_000, "memory": 0}
    pods = [POD1, POD2, POD3, POD4, POD5]
    assert names(pods_to_revoke(pods, USED, runtime)) == ["4", "3", "2", "1"]
    # pod 4 no longer assigned: the caller leaves it out of the pods and of used
    assert names(
        pods_to_revoke([POD1, POD2, POD3, POD5], {"cpu": 60_000, "memory": 3}, runtime)
    ) == [
        "3",
        "2",
        "1",
    ]


def test_revoke_nothing_while_used_fits() -> None:
    assert pods_to_revoke([POD1, POD2], {"cpu": 34_000, "memory": 3}, {"cpu": 34_000}) == []


def test_revoke_mask_forgets_a_resource_the_taken_pod_does_not_ask_for() -> None:
    # quotav1.Mask(Subtract(used, req), names(req)): taking "a" (cpu only) leaves {cpu: 6000},
    # within 7000, and the memory over-use is no longer seen. Giving "a" back: {cpu: 10000}
    # over 7000, so "a" alone is revoked, never "b" that holds the memory.
    a = pod("a", 1, {"cpu": "4"})
    b = pod("b", 5, {"cpu": "2", "memory": "6Gi"})
    used = {"cpu": 10_000, "memory": 8 * GI}
    runtime = {"cpu": 7_000, "memory": 5 * GI}
    assert names(pods_to_revoke([b, a], used, runtime)) == ["a"]


def test_revoke_compares_only_resources_on_both_sides() -> None:
    # the runtime says nothing of memory: 3 bytes over nothing is not over; cpu 9000 > 8000.
    # take "4" (10th priority, 44 cores): -35000 fits; give it back: 9000 over, revoked
    used = {"cpu": 9_000, "memory": 3}
    assert names(pods_to_revoke([POD4, POD1], used, {"cpu": 8_000})) == ["4"]


def test_revoke_orders_equal_priority_by_start_time_later_first() -> None:
    # equal priority 4: "late" started later, so it is the less important and taken first;
    # "new" has no startTime: its creation time (after both) counts, it goes before them.
    early = pod("early", 4, {"cpu": "3"}, start="2026-03-01T08:00:00Z")
    late = pod("late", 4, {"cpu": "3"}, start="2026-03-01T09:30:00Z")
    new = pod("new", 4, {"cpu": "3"}, created="2026-03-02T00:00:00Z")
    # used 9000 within -1: never; all three returned in taking order
    assert names(pods_to_revoke([early, late, new], {"cpu": 9_000}, {"cpu": -1})) == [
        "new",
        "late",
        "early",
    ]
    # runtime 4000: take new (6000), late (3000): fits; give back late: 6000 over: revoked;
    # new: 6000 over: revoked
    assert names(pods_to_revoke([early, late, new], {"cpu": 9_000}, {"cpu": 4_000})) == [
        "late",
        "new",
    ]


def test_revoke_skips_a_pod_whose_request_does_not_read() -> None:
    broken = pod("broken", 0, {"cpu": "lots"})
    assert names(pods_to_revoke([broken, POD3], {"cpu": 17_000}, {"cpu": 5_000})) == ["3"]


# -- more_important, non_preemptible ------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (pod("a", 7, {}), pod("b", 3, {}), True),
        (pod("a", -2, {}), pod("b", None, {}), False),  # unset priority is 0
        (
            pod("a", 5, {}, start="2026-01-05T10:00:00Z"),
            pod("b", 5, {}, start="2026-01-05T10:00:01Z"),
            True,
        ),
        (
            pod("a", 5, {}, start="2026-01-05T10:00:00Z"),
            pod("b", 5, {}, start="2026-01-05T10:00:00Z"),
            False,  # equal: neither
        ),
        (
            # startTime wins over an earlier creation time
            pod("a", 5, {}, start="2026-01-05T12:00:00Z", created="2026-01-05T01:00:00Z"),
            pod("b", 5, {}, created="2026-01-05T11:00:00Z"),
            False,
        ),
        (
            # no time at all is Go's zero time, before any other
            pod("a", 5, {}),
            pod("b", 5, {}, created="1970-01-01T00:00:00Z"),
            True,
        ),
    ],
)
def test_more_important(a: dict[str, Any], b: dict[str, Any], expected: bool) -> None:
    assert more_important(a, b) is expected


def test_non_preemptible_only_for_the_exact_false_label() -> None:
    assert non_preemptible(pod("p", 0, {}, preemptible="false"))
    assert not non_preemptible(pod("p", 0, {}, preemptible="False"))
    assert not non_preemptible(pod("p", 0, {}, preemptible="true"))
    assert not non_preemptible(pod("p", 0, {}))


def test_quotav1_less_than_or_equal_and_mask() -> None:
    assert less_than_or_equal({"cpu": 5, "memory": 9}, {"cpu": 5})
    assert not less_than_or_equal({"cpu": 6}, {"cpu": 5, "memory": 0})
    assert less_than_or_equal({}, {"cpu": -3})
    assert mask({"cpu": 1, "memory": 2, "pods": 3}, ["memory", "gpu"]) == {"memory": 2}


# -- OverUseMonitor: TestQuotaOverUsedGroupMonitor_Monitor -------------------------------------

UNDER = ({"cpu": 2_000}, {"cpu": 2_000})
OVER = ({"cpu": 2_001}, {"cpu": 2_000})


def test_monitor_fires_only_after_the_delay_then_counts_again() -> None:
    monitor = OverUseMonitor(delay=45.0, last_under_used=1_000.0)
    assert not monitor.check(*OVER, now=1_030.0)
    assert monitor.fires_after() == 1_045.0
    assert not monitor.check(*OVER, now=1_045.0)  # 45 s: not longer than the delay
    assert monitor.check(*OVER, now=1_045.5)
    assert not monitor.check(*OVER, now=1_050.0)  # the count restarted at 1045.5
    assert monitor.fires_after() == 1_090.5


def test_monitor_under_used_restarts_the_count() -> None:
    monitor = OverUseMonitor(delay=45.0, last_under_used=1_000.0)
    assert not monitor.check(*OVER, now=1_040.0)
    assert not monitor.check(*UNDER, now=1_060.0)  # used equal to runtime: within
    assert monitor.fires_after() is None
    assert not monitor.check(*OVER, now=1_100.0)  # 40 s since 1060
    assert monitor.check(*OVER, now=1_106.0)  # 46 s


def test_monitor_with_no_delay_fires_at_the_first_later_check() -> None:
    monitor = OverUseMonitor(delay=0.0, last_under_used=50.0)
    assert not monitor.check(*UNDER, now=60.0)
    assert not monitor.check(*OVER, now=60.0)  # 0 s over is not longer than 0
    assert monitor.check(*OVER, now=60.001)


# -- QuotaRevoker: TestQuotaOverUsedRevokeController_GetToMonitorQuotas -------------------------


def test_revoker_watches_every_quota_but_system_and_root() -> None:
    revoker = QuotaRevoker(ElasticQuotaArgs(delay_evict_time=30.0))
    quotas = {
        "team-a": OVER,
        "team-b": OVER,
        "team-c": UNDER,
        DEFAULT_QUOTA: UNDER,
        SYSTEM_QUOTA: OVER,
        ROOT_QUOTA: OVER,
    }
    assert revoker.due(quotas, now=500.0) == []
    assert sorted(revoker.monitors) == sorted(["team-a", "team-b", "team-c", DEFAULT_QUOTA])
    assert revoker.next_check(500.0) == 530.0
    assert revoker.due(quotas, now=531.0) == ["team-a", "team-b"]
    assert revoker.next_check(531.0) == 561.0  # both counts restarted at 531

    del quotas["team-a"]
    quotas["team-c"] = OVER  # under at 531, over from now on
    assert revoker.due(quotas, now=540.0) == []
    assert "team-a" not in revoker.monitors
    assert revoker.next_check(540.0) == 561.0  # team-b 531 + 30; team-c 531 + 30 too
    del quotas["team-b"]
    assert revoker.due(quotas, now=555.0) == []
    assert revoker.next_check(555.0) == 561.0  # team-c alone now
    # the caller comes back late: not before now
    assert revoker.next_check(600.0) == 600.0
    assert revoker.due(quotas, now=600.0) == ["team-c"]


def test_revoker_new_quota_counts_from_when_it_is_first_seen() -> None:
    revoker = QuotaRevoker(ElasticQuotaArgs(delay_evict_time=10.0))
    assert revoker.due({"team-a": UNDER}, now=100.0) == []
    assert revoker.next_check(100.0) is None
    assert revoker.due({"team-a": UNDER, "team-z": OVER}, now=200.0) == []
    assert revoker.next_check(200.0) == 210.0
    assert revoker.due({"team-a": UNDER, "team-z": OVER}, now=210.5) == ["team-z"]


def test_revoker_reads_its_clock_where_no_time_is_given() -> None:
    clock = [70.0]
    revoker = QuotaRevoker(ElasticQuotaArgs(delay_evict_time=5.0), now=lambda: clock[0])
    assert revoker.due({"team-a": OVER}) == []
    assert revoker.next_check() == 75.0
    clock[0] = 75.25
    assert revoker.due({"team-a": OVER}) == ["team-a"]


# -- ElasticQuotaArgs --------------------------------------------------------------------------


def test_args_defaults() -> None:
    args = parse_elastic_quota_args({})
    assert args == ElasticQuotaArgs(120.0, 1.0, False, True)
    assert not args.revokes
    assert parse_elastic_quota_args({"delayEvictTime": None, "monitorAllQuotas": None}) == args


def test_args_read_with_koordinators_names_and_others_ignored() -> None:
    args = parse_elastic_quota_args(
        {
            "delayEvictTime": "1m30s",
            "revokePodInterval": "500ms",
            "monitorAllQuotas": True,
            "enableRuntimeQuota": True,
            "quotaGroupNamespace": "quotas",
            "defaultQuotaGroupMax": {"cpu": "7"},
            "hookPlugins": [],
        }
    )
    assert args == ElasticQuotaArgs(90.0, 0.5, True, True)
    assert args.revokes
    assert parse_elastic_quota_args({"delayEvictTime": "3m", "revokePodInterval": "5s"}) == (
        ElasticQuotaArgs(delay_evict_time=180.0, revoke_pod_interval=5.0)
    )
    assert parse_elastic_quota_args({"delayEvictTime": "0"}).delay_evict_time == 0.0
    turned_off = parse_elastic_quota_args({"monitorAllQuotas": True, "enableRuntimeQuota": False})
    assert not turned_off.revokes


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"delayEvictTime": 120}, "delayEvictTime"),  # metav1.Duration is a string
        ({"delayEvictTime": "-5s"}, "delayEvictTime"),
        ({"delayEvictTime": "90"}, "delayEvictTime"),  # no unit
        ({"revokePodInterval": ""}, "revokePodInterval"),
        ({"revokePodInterval": "1x"}, "revokePodInterval"),
        ({"revokePodInterval": "-1ms"}, "revokePodInterval"),
        ({"delayEvictTime": "3000000h"}, "delayEvictTime"),  # past Go's 292 years
        ({"monitorAllQuotas": "true"}, "monitorAllQuotas"),
        ({"enableRuntimeQuota": 1}, "enableRuntimeQuota"),
    ],
)
def test_args_bad_values_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ModelError, match=field):
        parse_elastic_quota_args(args)


def test_args_not_an_object_and_negative_values_refused() -> None:
    with pytest.raises(ModelError, match="ElasticQuotaArgs"):
        parse_elastic_quota_args(["delayEvictTime"])  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="delayEvictTime"):
        ElasticQuotaArgs(delay_evict_time=-1.0)
