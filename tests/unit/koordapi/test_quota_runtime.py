"""The runtime quota of a quota tree and the admission check, against cases shaped after
Koordinator v1.8's runtime_quota_calculator_test.go and group_quota_manager_test.go (other
numbers; each expected value worked out by hand in the comments). cpu in milli-cores, memory
in bytes."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi.errors import ModelError
from koordapi.quota.model import (
    DEFAULT_QUOTA,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_PARENT,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuota,
)
from koordapi.quota.runtime import (
    UNBOUNDED_MAX,
    QuotaTree,
    QuotaUsage,
    Share,
    format_amount,
    format_resources,
    redistribute,
    scaled_mins,
)

GI = 2**30
MI = 2**20


def quota(
    name: str,
    parent: str = ROOT_QUOTA,
    *,
    max: dict[str, int],
    min: dict[str, int] | None = None,
    lend: bool = True,
    weight: dict[str, int] | None = None,
) -> ElasticQuota:
    """An ElasticQuota as CreateQuota makes them: shared weight = max unless given."""
    return ElasticQuota(
        name=name,
        parent=parent,
        allow_lent_resource=lend,
        min=dict(min or {}),
        max=dict(max),
        shared_weight=dict(weight if weight is not None else max),
    )


def requests(**by_quota: dict[str, int]) -> dict[str, QuotaUsage]:
    return {name: QuotaUsage(request=amounts) for name, amounts in by_quota.items()}


# -- one level: quotaTree.redistribution (TestRuntimeQuotaCalculator_IterationAdjustQuota) ----

A = Share("a", request=410, min=900, shared_weight=30)  # asks less than min: gets its ask
B = Share("b", request=2600, min=1500, shared_weight=50)
C = Share("c", request=4100, min=1000, shared_weight=20)
D = Share("d", request=6000, min=800, shared_weight=70)


def test_redistribution_shares_what_is_left_by_weight_round_after_round() -> None:
    # mins first: a 410 (its request), b 1500, c 1000, d 800; left 7300-3710 = 3590, weight 140
    # round 1: b +int(50*3590/140+.5)=1282 -> 2782 >= 2600: b 2600, 182 back
    #          c +int(20*3590/140+.5)=513 -> 1513; d +int(70*3590/140+.5)=1795 -> 2595
    # round 2 (182 among c, d, weight 90): c +int(40.44+.5)=40 -> 1553; d +int(141.56+.5)=142
    assert redistribute(7300, [A, B, C, D]) == {"a": 410, "b": 2600, "c": 1553, "d": 2737}


def test_redistribution_zero_shared_weight_keeps_only_its_min() -> None:
    d = Share("d", request=6000, min=800, shared_weight=0)
    # left 3590 among b, c (weight 70): b +2564 -> 4064: b 2600, 1464 back; c +1026 -> 2026
    # round 2 (1464 among c and d, weight 20): c +1464 -> 3490; d +0 stays at min 800
    assert redistribute(7300, [A, B, C, d]) == {"a": 410, "b": 2600, "c": 3490, "d": 800}


def test_redistribution_guaranteed_above_min_is_the_floor() -> None:
    d = Share("d", request=6000, min=800, shared_weight=0, guaranteed=2900)
    # floors: a 410, b 1500, c 1000, d 2900; left 1490 among b, c (weight 70)
    # b +int(1064.29+.5)=1064 -> 2564; c +int(425.71+.5)=426 -> 1426; nothing back
    assert redistribute(7300, [A, B, C, d]) == {"a": 410, "b": 2564, "c": 1426, "d": 2900}


def test_redistribution_a_quota_that_does_not_lend_keeps_its_whole_min() -> None:
    a = Share("a", request=410, min=900, shared_weight=30, allow_lent_resource=False)
    # a 900 (not 410); left 7300-4200 = 3100, weight 140
    # round 1: b +1107 -> 2607: b 2600, 7 back; c +443 -> 1443; d +1550 -> 2350
    # round 2 (7, weight 90): c +int(1.56+.5)=2 -> 1445; d +int(5.44+.5)=5 -> 2355
    assert redistribute(7300, [a, B, C, D]) == {"a": 900, "b": 2600, "c": 1445, "d": 2355}


def test_redistribution_rounding_may_hand_out_more_than_the_total() -> None:
    shares = [Share(n, request=7, min=3, shared_weight=5) for n in "xyz"]
    # mins 9 of 11; 2 left: each +int(2/3+.5)=1 -> 4 each, 12 in all
    assert redistribute(11, shares) == {"x": 4, "y": 4, "z": 4}


def test_redistribution_grants_mins_beyond_a_smaller_total() -> None:
    shares = [Share("x", 4500, 3000, 1), Share("y", 4500, 4000, 1)]
    assert redistribute(5000, shares) == {"x": 3000, "y": 4000}


def test_scaled_mins_are_proportional_where_the_mins_exceed_the_total() -> None:
    mins = {
        "a": {"cpu": 3100, "memory": 10 * GI},
        "b": {"cpu": 2600, "memory": 10 * GI},
        "c": {"cpu": 4000, "memory": 10 * GI},
    }
    # cpu: 9700 > 7300: a int(7300*3100/9700)=int(2332.99)=2332, b int(1956.70)=1956,
    # c int(3010.31)=3010
    # memory: 30Gi within 37Gi, unchanged
    assert scaled_mins({"cpu": 7300, "memory": 37 * GI}, mins) == {
        "a": {"cpu": 2332, "memory": 10 * GI},
        "b": {"cpu": 1956, "memory": 10 * GI},
        "c": {"cpu": 3010, "memory": 10 * GI},
    }
    assert scaled_mins({"cpu": 0}, {"a": {"cpu": 5}}) == {"a": {"cpu": 0}}


# -- the tree (group_quota_manager_test.go) --------------------------------------------------

CLUSTER = {"cpu": 97300, "memory": 37 * GI}
BIG = {"cpu": 97300, "memory": 37 * GI}


def test_two_quotas_borrow_by_weight_and_a_lone_asker_takes_all() -> None:
    # TestGroupQuotaManager_UpdateQuotaDeltaRequest
    quotas = [
        quota("t1", max=BIG, min={"cpu": 51000, "memory": 17 * GI}),
        quota("t2", max=BIG, min={"cpu": 43000, "memory": 19 * GI}),
    ]
    alone = QuotaTree(quotas, CLUSTER, requests(t1={"cpu": 120000, "memory": 30 * GI}))
    # t1 asks more than max (97300) and the whole cluster is idle: runtime = request capped
    assert alone.runtime("t1") == {"cpu": 97300, "memory": 30 * GI}
    assert alone.runtime("t2") == {"cpu": 0, "memory": 0}
    both = QuotaTree(
        quotas,
        CLUSTER,
        requests(t1={"cpu": 120000, "memory": 30 * GI}, t2={"cpu": 150000, "memory": 33 * GI}),
    )
    # cpu: mins 51000 + 43000, 3300 left, equal weights: +1650 each
    # memory: mins 17Gi + 19Gi, 1Gi left: +512Mi each
    assert both.runtime("t1") == {"cpu": 52650, "memory": 17 * GI + 512 * MI}
    assert both.runtime("t2") == {"cpu": 44650, "memory": 19 * GI + 512 * MI}
    assert both.request("t1") == {"cpu": 120000, "memory": 30 * GI}
    assert both.info("t1").limited_request == {"cpu": 97300, "memory": 30 * GI}
    assert both.request(ROOT_QUOTA) == {"cpu": 2 * 97300, "memory": 63 * GI}


def test_children_that_do_not_lend_ask_their_min_of_the_parent() -> None:
    # TestGroupQuotaManager_NotAllowLentResource_3 and _4: the parent lends, the children
    # child1 (min 13000) does not, child2 (min 17000) lends in _3, not in _4
    cluster = {"cpu": 73000}
    for child2_lends, idle in ((True, (13000, 0)), (False, (13000, 17000))):
        quotas = [
            quota("team", max={"cpu": 96000}, min={"cpu": 41000}),
            quota("child1", "team", max={"cpu": 96000}, min={"cpu": 13000}, lend=False),
            quota("child2", "team", max={"cpu": 96000}, min={"cpu": 17000}, lend=child2_lends),
        ]
        tree = QuotaTree(quotas, cluster)
        # no pods: child1 asks its min 13000 (child2 17000 when it does not lend); the team
        # asks their sum, within its min, and lends the rest
        assert tree.runtime("child1") == {"cpu": idle[0]}
        assert tree.runtime("child2") == {"cpu": idle[1]}
        assert tree.runtime("team") == {"cpu": sum(idle)}
        assert tree.request("child1") == {"cpu": 13000}
        assert tree.info("child1").child_request == {}

    tree = QuotaTree(quotas, cluster, requests(child1={"cpu": 29000}))
    # the team asks 29000 + 17000 = 46000 > its min 41000: 41000 + the 32000 idle -> 46000;
    # in the team child2 keeps 17000, child1 13000 + the 16000 left -> 29000
    assert tree.runtime("team") == {"cpu": 46000}
    assert tree.runtime("child1") == {"cpu": 29000}
    assert tree.runtime("child2") == {"cpu": 17000}
    assert tree.request("team") == {"cpu": 46000}


def test_requests_when_no_quota_lends() -> None:
    # TestGroupQuotaManager_ChildRequestAndRequest_All_not_allowLent: each quota asks its
    # min until its pods ask more
    box = {"cpu": 40000}
    quotas = [
        quota("q1", max=box, min={"cpu": 23000}, lend=False),
        quota("q2", "q1", max=box, min={"cpu": 11000}, lend=False),
        quota("q3", "q1", max=box, min={"cpu": 7000}, lend=False),
    ]
    tree = QuotaTree(quotas, {"cpu": 50000})
    assert [tree.request(n) for n in ("q1", "q2", "q3")] == [
        {"cpu": 23000},  # 11000 + 7000 from its children, raised to its min
        {"cpu": 11000},
        {"cpu": 7000},
    ]
    assert tree.info("q1").child_request == {"cpu": 18000}
    # q2's pods ask 6000: still its min; then 18000: q2 asks 18000, q1 18000 + 7000
    tree = QuotaTree(quotas, {"cpu": 50000}, requests(q2={"cpu": 6000}))
    assert (tree.request("q2"), tree.request("q1")) == ({"cpu": 11000}, {"cpu": 23000})
    assert tree.info("q2").child_request == {"cpu": 6000}
    tree = QuotaTree(quotas, {"cpu": 50000}, requests(q2={"cpu": 18000}))
    assert (tree.request("q2"), tree.request("q1")) == ({"cpu": 18000}, {"cpu": 25000})


def test_a_request_over_max_counts_in_the_parents_only_up_to_max() -> None:
    # TestGroupQuotaManager_MultiUpdateQuotaRequest2: three levels, the leaf asks over its max
    quotas = [
        quota("top", max=BIG, min={"cpu": 83000, "memory": 29 * GI}),
        quota("mid", "top", max={"cpu": 61000, "memory": 23 * GI}, min={"cpu": 47000}),
        quota("leaf", "mid", max={"cpu": 31700, "memory": 13 * GI}, min={"cpu": 21000}),
    ]
    tree = QuotaTree(quotas, CLUSTER, requests(leaf={"cpu": 57000, "memory": 19 * GI}))
    assert tree.request("leaf") == {"cpu": 57000, "memory": 19 * GI}
    for name in ("mid", "top"):
        assert tree.request(name) == {"cpu": 31700, "memory": 13 * GI}
    # every level asks less than its min of the idle cluster: runtime = the capped request
    for name in ("leaf", "mid", "top"):
        assert tree.runtime(name) == {"cpu": 31700, "memory": 13 * GI}


def test_a_child_max_above_the_parents_max() -> None:
    # TestGroupQuotaManager_MultiChildMaxGreaterParentMax
    quotas = [
        quota(
            "p", max={"cpu": 301000, "memory": 1021 * GI}, min={"cpu": 177000, "memory": 757 * GI}
        ),
        quota(
            "c",
            "p",
            max={"cpu": 503000, "memory": 2047 * GI},
            min={"cpu": 101000, "memory": 509 * GI},
        ),
    ]
    cluster = {"cpu": 353000, "memory": 1777 * GI}
    tree = QuotaTree(quotas, cluster, requests(c={"cpu": 401000, "memory": 1501 * GI}))
    # p asks (401000, 1501Gi) capped at its max (301000, 1021Gi): 177000 + 176000 idle covers
    # 301000; 757Gi + 1020Gi idle covers 1021Gi. c then shares p's runtime alone:
    # 101000 + 200000 = 301000 (< its 401000); 509Gi + 512Gi = 1021Gi
    assert tree.info("p").limited_request == {"cpu": 301000, "memory": 1021 * GI}
    assert tree.runtime("p") == {"cpu": 301000, "memory": 1021 * GI}
    assert tree.runtime("c") == {"cpu": 301000, "memory": 1021 * GI}


def test_mins_scale_down_when_they_exceed_the_total() -> None:
    # TestGroupQuotaManager_MultiUpdateQuotaRequest_WithScaledMinQuota1 and _3
    big = {"cpu": 1_000_000}
    quotas = [
        quota("p", max=big, min={"cpu": 9700}),
        quota("a", "p", max=big, min={"cpu": 3100}),
        quota("b", "p", max=big, min={"cpu": 2600}),
        quota("c", "p", max=big, min={"cpu": 4000}),
    ]
    usage = requests(a={"cpu": 5000}, b={"cpu": 5000}, c={"cpu": 5000})
    tree = QuotaTree(quotas, {"cpu": 7301}, usage)
    # p's min 9700 > 7301: scaled to 7301, its runtime 7301. In p: mins scaled to
    # int(7301*3100/9700)=2333, int(1956.97)=1956, int(3010.72)=3010 (7299); 2 left, equal
    # weights: +int(2/3+.5)=1 each -> 7302 in all, one more than p has (Koordinator's 66667)
    assert tree.runtime("p") == {"cpu": 7301}
    assert tree.info("a").auto_scale_min == {"cpu": 2333}
    assert tree.info("a").min == {"cpu": 3100}
    assert [tree.runtime(n)["cpu"] for n in "abc"] == [2334, 1957, 3011]
    # scaling off: p gets its min 9700 (beyond the cluster), its children their mins
    unscaled = QuotaTree(quotas, {"cpu": 7301}, usage, enable_min_quota_scale=False)
    assert unscaled.runtime("p") == {"cpu": 9700}
    assert [unscaled.runtime(n)["cpu"] for n in "abc"] == [3100, 2600, 4000]


def test_the_system_and_default_quotas_use_is_taken_off_the_root() -> None:
    # TestGroupQuotaManager_UpdateClusterTotalResource, _UpdateDefaultQuotaGroup,
    # _UpdateQuotaInternalAndRequest (a resource max names that no node has)
    usage = {
        SYSTEM_QUOTA: QuotaUsage(used={"cpu": 7100, "memory": 3 * GI}),
        DEFAULT_QUOTA: QuotaUsage(request={"cpu": 2300}, used={"cpu": 2300, "memory": GI}),
        "q": QuotaUsage(request={"cpu": 120000, "memory": 40 * GI, "nvidia.com/gpu": 3}),
    }
    quotas = [
        quota("q", max={"cpu": 100000, "memory": 40 * GI, "nvidia.com/gpu": 4}),
        quota(DEFAULT_QUOTA, max={"cpu": 5000, "memory": 5 * GI}),
    ]
    tree = QuotaTree(quotas, CLUSTER, usage)
    # root: 97300 - 7100 - 2300 = 87900 cpu, 37Gi - 3Gi - 1Gi = 33Gi, no gpu on any node
    assert tree.runtime(ROOT_QUOTA) == {"cpu": 87900, "memory": 33 * GI}
    assert tree.runtime("q") == {"cpu": 87900, "memory": 33 * GI, "nvidia.com/gpu": 0}
    assert tree.runtime(DEFAULT_QUOTA) == {"cpu": 5000, "memory": 5 * GI}
    assert tree.runtime(SYSTEM_QUOTA) == UNBOUNDED_MAX
    assert tree.used(ROOT_QUOTA) == {"cpu": 9400, "memory": 4 * GI}
    # the default quota has no runtime of its own: the plugin refuses none of its pods
    assert tree.check_pod(DEFAULT_QUOTA, {"cpu": 9000}) is None
    reason = tree.check_pod(DEFAULT_QUOTA, {"cpu": 9000}, enable_runtime_quota=False)
    assert reason is not None
    assert "runtime: cpu:5,memory:5Gi, used: cpu:2300m,memory:1Gi" in reason
    assert tree.names() == sorted([ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA, "q"])
    assert tree.children(ROOT_QUOTA) == ["q"]


def test_guarantee_usage_keeps_what_a_quota_holds() -> None:
    # TestGroupQuotaManager_OnPodUpdateUsedForGuarantee (ElasticQuotaGuaranteeUsage on)
    quotas = [
        quota("a", max={"cpu": 10000}, min={"cpu": 2000}),
        quota("b", max={"cpu": 10000}, min={"cpu": 3000}),
    ]
    usage = {
        "a": QuotaUsage(request={"cpu": 6000}, used={"cpu": 3500}),
        "b": QuotaUsage(request={"cpu": 9000}),
    }
    # gate off: mins 2000 + 3000, 5000 left, equal weights: a 4500, b 5500
    plain = QuotaTree(quotas, {"cpu": 10000}, usage)
    assert (plain.runtime("a"), plain.runtime("b")) == ({"cpu": 4500}, {"cpu": 5500})
    # gate on: a holds 3500 > its min: floors 3500 + 3000, 3500 left: a 5250, b 4750
    held = QuotaTree(quotas, {"cpu": 10000}, usage, guarantee_usage=True)
    assert held.info("a").guaranteed == {"cpu": 3500}
    assert held.info("b").guaranteed == {"cpu": 3000}
    assert (held.runtime("a"), held.runtime("b")) == ({"cpu": 5250}, {"cpu": 4750})
    assert held.info("a").allow_lent_resource is False


def test_usage_counts_only_the_resources_max_names_and_sums_up_the_tree() -> None:
    quotas = [
        quota("p", max={"cpu": 50000, "memory": 9 * GI}),
        quota("c", "p", max={"cpu": 50000}),
    ]
    usage = {
        "c": QuotaUsage(
            request={"cpu": 1700, "memory": GI},
            used={"cpu": 1300, "memory": GI},
            non_preemptible_used={"cpu": 300},
        ),
        "p": QuotaUsage(used={"cpu": 200, "memory": 2 * GI}),
    }
    tree = QuotaTree(quotas, CLUSTER, usage)
    assert tree.used("c") == {"cpu": 1300}
    assert tree.used("p") == {"cpu": 1500, "memory": 2 * GI}
    assert tree.request("p") == {"cpu": 1700}
    assert tree.info("p").non_preemptible_used == {"cpu": 300}
    assert tree.min("c") == {}
    assert tree.max("c") == {"cpu": 50000}


# -- the admission check (plugin.go PreFilter) -----------------------------------------------


def leaf_tree(**usage: QuotaUsage) -> QuotaTree:
    quotas = [
        quota("team", max=BIG, min={"cpu": 83000, "memory": 29 * GI}),
        quota(
            "leaf",
            "team",
            max={"cpu": 31700, "memory": 13 * GI},
            min={"cpu": 4000, "memory": 8 * GI},
        ),
    ]
    return QuotaTree(quotas, CLUSTER, usage)


def test_a_pod_fits_while_used_plus_its_request_is_within_runtime() -> None:
    tree = leaf_tree(
        leaf=QuotaUsage(
            request={"cpu": 57000, "memory": 19 * GI}, used={"cpu": 29000, "memory": 12 * GI}
        )
    )
    assert tree.runtime("leaf") == {"cpu": 31700, "memory": 13 * GI}
    assert tree.check_pod("leaf", {"cpu": 2700, "memory": GI}) is None
    # a resource the quota's max does not name is not counted
    assert tree.check_pod("leaf", {"cpu": 2000, "nvidia.com/gpu": 8}) is None
    assert tree.check_pod("leaf", {"cpu": 3000, "memory": 512 * MI}) == (
        "Insufficient quotas, quotaName: leaf, runtime: cpu:31700m,memory:13Gi, "
        "used: cpu:29,memory:12Gi, pod's request: cpu:3,memory:512Mi, exceedDimensions: [cpu]"
    )
    assert tree.check_pod("leaf", {"cpu": 3000, "memory": 2 * GI}) == (
        "Insufficient quotas, quotaName: leaf, runtime: cpu:31700m,memory:13Gi, "
        "used: cpu:29,memory:12Gi, pod's request: cpu:3,memory:2Gi, "
        "exceedDimensions: [cpu memory]"
    )
    assert tree.check_pod("", {"cpu": 10**9}) is None
    assert tree.check_pod("nobody", {"cpu": 1}) == "Could not find the specified ElasticQuota"


def test_a_non_preemptible_pod_must_fit_within_min() -> None:
    tree = leaf_tree(
        leaf=QuotaUsage(
            request={"cpu": 9000, "memory": 3 * GI},
            used={"cpu": 3500, "memory": 2 * GI},
            non_preemptible_used={"cpu": 3500, "memory": 2 * GI},
        )
    )
    pod = {"cpu": 700, "memory": GI}
    assert tree.check_pod("leaf", pod) is None  # runtime 9000 > 4200 used
    assert tree.check_pod("leaf", pod, non_preemptible=True) == (
        "Insufficient non-preemptible quotas, quotaName: leaf, min: cpu:4,memory:8Gi, "
        "nonPreemptibleUsed: cpu:3500m,memory:2Gi, pod's request: cpu:700m,memory:1Gi, "
        "exceedDimensions: [cpu]"
    )
    assert tree.check_pod("leaf", {"cpu": 500}, non_preemptible=True) is None


def test_parent_quotas_are_checked_when_asked() -> None:
    # checkQuotaRecursive. The cluster's 33000 is less than the children's mins (28000 +
    # 9000; scaling off): the team asks 31700 (the leaf's 40000 capped) + 6100 and gets the
    # 33000; in it the leaf gets its min 28000, sib its 6100, 1100 more than the team has
    quotas = [
        quota("team", max=BIG),
        quota("leaf", "team", max={"cpu": 31700}, min={"cpu": 28000}),
        quota("sib", "team", max={"cpu": 9000}, min={"cpu": 9000}),
    ]
    usage = {
        "leaf": QuotaUsage(request={"cpu": 40000}, used={"cpu": 20000}),
        "sib": QuotaUsage(request={"cpu": 6100}, used={"cpu": 6100}),
    }
    tree = QuotaTree(quotas, {"cpu": 33000}, usage, enable_min_quota_scale=False)
    assert tree.runtime("team") == {"cpu": 33000, "memory": 0}
    assert tree.runtime("leaf") == {"cpu": 28000}
    # room: the leaf 8000, the team 33000 - 26100 = 6900
    assert tree.check_pod("leaf", {"cpu": 6900}, enable_check_parent_quota=True) is None
    assert tree.check_pod("leaf", {"cpu": 7000}) is None
    assert tree.check_pod("leaf", {"cpu": 7000}, enable_check_parent_quota=True) == (
        "Insufficient quotas, quotaNameTopo: [team leaf], runtime: cpu:33,memory:0, "
        "used: cpu:26100m, pod's request: cpu:7, exceedDimensions: [cpu]"
    )


# -- bad input -------------------------------------------------------------------------------


def test_an_unknown_parent_a_cycle_and_a_duplicate_name_the_quota() -> None:
    small = {"cpu": 1000}
    with pytest.raises(ModelError, match=r"quota orphan: parent quota 'ghost' does not exist"):
        QuotaTree([quota("orphan", "ghost", max=small)], CLUSTER)
    cycle = [
        quota("x", "y", max=small),
        quota("y", "x", max=small),
        quota("below", "x", max=small),
        quota("fine", max=small),
    ]
    with pytest.raises(ModelError, match=r"its parents form a cycle \(x -> y -> x\)"):
        QuotaTree(cycle, CLUSTER)
    with pytest.raises(ModelError, match=r"quota me: its parents form a cycle \(me -> me\)"):
        QuotaTree([quota("me", "me", max=small)], CLUSTER)
    with pytest.raises(ModelError, match="quota twin: listed twice"):
        QuotaTree([quota("twin", max=small), quota("twin", max=small)], CLUSTER)
    tree = QuotaTree([quota("fine", max=small)], CLUSTER)
    with pytest.raises(ModelError, match="'nobody' is not in the quota tree"):
        tree.runtime("nobody")


def eq_object(
    name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_from_objects_reads_koordinators_objects_and_names_a_malformed_one() -> None:
    objects = [
        eq_object("team", {"max": {"cpu": "7300m", "memory": "37Gi"}, "min": {"cpu": "2"}}),
        eq_object(
            "strict",
            {"max": {"cpu": "3", "memory": "8Gi"}, "min": {"cpu": "1500m", "memory": "3Gi"}},
            {LABEL_PARENT: "team", LABEL_ALLOW_LENT_RESOURCE: "false"},
        ),
    ]
    tree = QuotaTree.from_objects(objects, {"cpu": 16000, "memory": 64 * GI})
    # strict does not lend: it asks its min (1500m, 3Gi) of team, which asks the same of the
    # root (below team's min in cpu; memory has no min: 3Gi granted from the idle cluster)
    assert tree.runtime("strict") == {"cpu": 1500, "memory": 3 * GI}
    assert tree.runtime("team") == {"cpu": 1500, "memory": 3 * GI}
    bad = [eq_object("broken", {"max": {"cpu": "lots"}})]
    with pytest.raises(ModelError, match=r"quota broken: .*'lots'"):
        QuotaTree.from_objects(bad, CLUSTER)


def test_amounts_print_as_koordinators_quantities() -> None:
    assert format_amount("cpu", 7300) == "7300m"
    assert format_amount("cpu", 7000) == "7"
    assert format_amount("cpu", 1_000_000) == "1k"
    assert format_amount("cpu", 0) == "0"
    assert format_amount("memory", 37 * GI) == "37Gi"
    assert format_amount("memory", 1_500_000) == "1500000"
    assert format_amount("memory", 1000) == "1k"  # under 1024 bytes Kubernetes prints decimal
    assert format_amount("pods", 2000) == "2k"
    assert format_amount("nvidia.com/gpu", 3) == "3"
    assert format_resources({}) == "<empty>"
    assert format_resources({"memory": 512 * MI, "cpu": 250}) == "cpu:250m,memory:512Mi"
