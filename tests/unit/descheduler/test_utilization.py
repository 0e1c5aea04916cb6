"""Node usage, thresholds and classes, the order of nodes and pods, node fit and the pod
filters.

Most cases re-express Koordinator v1.8.0's own tests with their numbers:
pkg/descheduler/framework/plugins/loadaware/utilization_util_test.go. Cases marked "own"
add numbers and corners of our own.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from descheduler.args import EvictorArgs, LowNodeLoadArgs, NodePool
from descheduler.cluster import NodeInfo, NodeMetricData, PodInfo
from descheduler.selectors import LabelSelector
from descheduler.utilization import (
    NodeLoad,
    Thresholds,
    classify_nodes,
    effective_thresholds,
    eviction_blocker,
    node_load,
    pod_fits_any_node_with_threshold,
    set_node_thresholds,
    sort_nodes_by_usage,
    sort_pods_for_eviction,
    usage_percentages,
)
from koordapi import qos
from tests.unit.descheduler.fakes import GI, NOW, pool_args

# -- usage, percentages and thresholds (utilization_util_test.go) ---------------------------


def test_resource_usage_percentages() -> None:
    percentages = usage_percentages(
        {"cpu": 1930, "memory": 3287692 * 1024, "pods": 29},
        {"cpu": 1220, "memory": 3038982964, "pods": 11},
    )
    assert {k: math.floor(v) for k, v in percentages.items()} == {
        "cpu": 63,
        "memory": 90,
        "pods": 37,
    }


def test_usage_percentages_skip_resources_without_allocatable() -> None:
    assert usage_percentages({"cpu": 0}, {"cpu": 10, "memory": 5}) == {}


TEST_ALLOCATABLE = {"cpu": 32000, "memory": 32 * GI, "pods": 110}


def _load(name: str, usage: dict[str, int], **kw: Any) -> NodeLoad:
    return NodeLoad(NodeInfo(name, TEST_ALLOCATABLE, **kw), dict(usage), {}, ())


TEST_NODES = [
    _load("node1", {"cpu": 1730, "memory": 3038982964, "pods": 25}),
    _load("node2", {"cpu": 1220, "memory": 3038982964, "pods": 11}),
    _load("node3", {"cpu": 1530, "memory": 5038982964, "pods": 20}),
]
ALL_WEIGHTS = {"cpu": 1, "memory": 1, "pods": 1}


def test_sort_nodes_by_usage_descending() -> None:
    ordered = sort_nodes_by_usage(TEST_NODES, ALL_WEIGHTS, ascending=False, prod=False)
    assert [n.name for n in ordered] == ["node3", "node1", "node2"]


def test_sort_nodes_by_usage_ascending() -> None:
    ordered = sort_nodes_by_usage(TEST_NODES, ALL_WEIGHTS, ascending=True, prod=False)
    assert [n.name for n in ordered] == ["node2", "node1", "node3"]


def test_sort_nodes_by_usage_ignores_unweighted_resources() -> None:
    # own: with the default weights (no pods) node1 and node2 tie on memory: cpu decides
    ordered = sort_nodes_by_usage(TEST_NODES, {"cpu": 1, "memory": 1}, ascending=False, prod=False)
    assert [n.name for n in ordered] == ["node3", "node1", "node2"]
    ordered = sort_nodes_by_usage(TEST_NODES, {"pods": 1}, ascending=False, prod=False)
    assert [n.name for n in ordered] == ["node1", "node3", "node2"]


def test_sort_pods_on_one_overloaded_node() -> None:
    usage = {
        "ns/pod1": {"cpu": 1000, "memory": 27487790694},
        "ns/pod2": {"cpu": 3000, "memory": 27487790694},
        "ns/pod3": {"cpu": 2000, "memory": 1},
        "ns/pod4": {"cpu": 4000, "memory": 1},
    }
    load = NodeLoad(
        NodeInfo("node0", TEST_ALLOCATABLE, metric=NodeMetricData(NOW, {}, usage)),
        {"cpu": 30000, "memory": 998244353},  # only cpu is over
        {},
        (),
        high={"cpu": 20000, "memory": 27487790694},
    )
    pods = [PodInfo("ns", f"pod{i}") for i in range(1, 5)]
    ordered = sort_pods_for_eviction(load, pods, {"cpu": 1, "memory": 1}, prod=False)
    assert [p.name for p in ordered] == ["pod4", "pod2", "pod3", "pod1"]


def test_a_pod_just_covering_the_excess_goes_first() -> None:
    # own: 10000m over; a 10000m pod scores 2, a 25000m pod 1.4, a 9000m pod 0.9
    usage = {"ns/big": {"cpu": 25000}, "ns/exact": {"cpu": 10000}, "ns/small": {"cpu": 9000}}
    load = NodeLoad(
        NodeInfo("n", TEST_ALLOCATABLE, metric=NodeMetricData(NOW, {}, usage)),
        {"cpu": 30000},
        {},
        (),
        high={"cpu": 20000},
    )
    pods = [
        PodInfo("ns", "small"),
        PodInfo("ns", "big"),
        PodInfo("ns", "exact"),
        PodInfo("ns", "unknown"),
    ]
    ordered = sort_pods_for_eviction(load, pods, {"cpu": 1}, prod=False)
    assert [p.name for p in ordered] == ["exact", "big", "small", "unknown"]


def test_pod_order_keys_come_before_usage() -> None:
    # own: priority class, spec.priority, Kubernetes QoS, Koordinator QoS, deletion cost,
    # eviction cost, usage, then the newest first
    usage = {f"ns/{n}": {"cpu": 1000} for n in "abcdefghij"}
    load = NodeLoad(
        NodeInfo("n", TEST_ALLOCATABLE, metric=NodeMetricData(NOW, {}, usage)),
        {"cpu": 30000},
        {},
        (),
        high={"cpu": 20000},
    )
    pods = [
        PodInfo("ns", "a", priority_class=qos.NONE_PRIORITY),
        PodInfo("ns", "b"),
        PodInfo("ns", "c", priority=100),
        PodInfo("ns", "d", kube_qos=qos.KubeQoS.GUARANTEED),
        PodInfo("ns", "e", qos_class=qos.QoSClass.LSR),
        PodInfo("ns", "f", deletion_cost=5),
        PodInfo("ns", "g", eviction_cost=-5),
        PodInfo("ns", "h", created=NOW),
        PodInfo("ns", "i", created=NOW + 60),
        PodInfo("ns", "j", priority_class=qos.FREE),
    ]
    ordered = sort_pods_for_eviction(load, pods, {"cpu": 1}, prod=False)
    assert [p.name for p in ordered] == ["j", "g", "i", "h", "b", "f", "e", "d", "c", "a"]


def test_pod_fits_any_node_with_threshold_but_exceeds() -> None:
    # upstream's node affinity is a nodeSelector here; the pod matches the node but would
    # take it over its thresholds, and the node's usage is left as it was
    target = NodeLoad(
        NodeInfo("test-node-1", {}, labels={"test-node-type": "test-node-type-A"}),
        {"cpu": 1000, "memory": 2000000000},
        {},
        (),
        high={"cpu": 2000, "memory": 3000000},
    )
    pod = PodInfo("default", "test-pod-1", node_selector={"test-node-type": "test-node-type-A"})
    fits = pod_fits_any_node_with_threshold(
        pod, {"cpu": 1500, "memory": 1500000}, [target], prod=False
    )
    assert fits is False
    assert target.usage == {"cpu": 1000, "memory": 2000000000}


def test_a_fitting_pod_is_charged_to_the_first_fitting_target() -> None:
    # own: the first target's labels do not match, the second's cpu is full, the third
    # takes the pod and keeps its usage
    pod = PodInfo("default", "p", node_selector={"zone": "a"})
    wrong_zone = NodeLoad(
        NodeInfo("t1", {}, labels={"zone": "b"}), {"cpu": 0}, {}, (), high={"cpu": 4000}
    )
    full = NodeLoad(
        NodeInfo("t2", {}, labels={"zone": "a"}), {"cpu": 3600}, {}, (), high={"cpu": 4000}
    )
    room = NodeLoad(
        NodeInfo("t3", {}, labels={"zone": "a"}), {"cpu": 3599}, {}, (), high={"cpu": 4000}
    )
    assert pod_fits_any_node_with_threshold(pod, {"cpu": 401}, [wrong_zone, full, room], prod=False)
    assert (wrong_zone.usage, full.usage, room.usage) == ({"cpu": 0}, {"cpu": 3600}, {"cpu": 4000})


def test_effective_thresholds_fill_missing_resources() -> None:
    thresholds = effective_thresholds(
        NodePool("p", low_thresholds={"cpu": 20}, high_thresholds={"cpu": 80, "memory": 70})
    )
    assert thresholds.resource_names == ("cpu", "memory")
    # own: memory is missing from the low map, so both become 100: the 70 is replaced
    assert thresholds.low == {"cpu": 20, "memory": 100} and thresholds.high == {
        "cpu": 80,
        "memory": 100,
    }
    assert thresholds.prod_low == thresholds.prod_high == {"cpu": 100, "memory": 100}
    deviation = effective_thresholds(
        NodePool(
            "p",
            use_deviation_thresholds=True,
            low_thresholds={"pods": 5},
            high_thresholds={"pods": 5},
        )
    )
    assert deviation.low == {"memory": 0, "pods": 5} and deviation.prod_high == {
        "memory": 0,
        "pods": 0,
    }


def test_a_resource_only_in_the_low_map_has_a_zero_high_threshold() -> None:
    # own: upstream leaves the high map without it, which reads as 0 %: any usage is over
    thresholds = effective_thresholds(
        NodePool("p", low_thresholds={"cpu": 20, "memory": 40}, high_thresholds={"cpu": 60})
    )
    assert "memory" not in thresholds.high
    load = _load("n", {"cpu": 100, "memory": 1})
    set_node_thresholds([load], thresholds, use_deviation=False)
    assert load.high == {"cpu": 19200, "memory": 0}
    # under its low thresholds it is low first (both-low: its prod usage is under 100 %)
    assert classify_nodes([load]).both_low == [load]


def test_threshold_amounts_truncate() -> None:
    # own: 33.3 % of 3 pods is 0.999 pods: 0; of 96 cores not 31968 but, in float64 and
    # truncated as Go's int64() does, one milli-core less
    load = NodeLoad(NodeInfo("n", {"cpu": 96000, "memory": 512 * GI, "pods": 3}), {}, {}, ())
    thresholds = Thresholds(
        {"cpu": 33.3, "pods": 33.3}, {"cpu": 66.7, "pods": 66.7}, {}, {}, ("cpu", "pods")
    )
    set_node_thresholds([load], thresholds, use_deviation=False)
    assert load.low == {"cpu": 31967, "pods": 0}  # 33.3 * 0.01 * 96000 = 31967.999999999996
    assert load.high == {"cpu": 64032, "pods": 2}


def test_node_usage_counts_system_usage_and_every_reported_pod() -> None:
    # own: usage = system + every pod in the report (even one not assigned any more); prod
    # usage only the node's koord-prod pods; pods counts the assigned pods
    metric = NodeMetricData(
        NOW,
        {"cpu": 500, "memory": GI},
        {
            "default/web": {"cpu": 1000, "memory": 2 * GI},
            "default/batch": {"cpu": 3000, "memory": 3 * GI},
            "default/gone": {"cpu": 250},
        },
    )
    node = NodeInfo(
        "n",
        {"cpu": 8000, "memory": 16 * GI, "pods": 110},
        pods=(PodInfo("default", "web"), PodInfo("default", "batch", priority_class=qos.BATCH)),
        metric=metric,
    )
    load = node_load(node, ("cpu", "memory"), NOW, 180)
    assert load is not None
    assert load.usage == {"cpu": 4750, "memory": 6 * GI, "pods": 2}
    assert load.prod_usage == {"cpu": 1000, "memory": 2 * GI, "pods": 1}
    assert [p.name for p in load.prod_pods] == ["web"]


@pytest.mark.parametrize(
    ("update_time", "kept"),
    [(NOW - 179.9, True), (NOW - 180, False), (None, False), (NOW + 5, True)],
)
def test_expired_node_metrics_are_left_out(update_time: float | None, kept: bool) -> None:
    node = NodeInfo("n", {"cpu": 1000}, metric=NodeMetricData(update_time))
    assert (node_load(node, ("cpu",), NOW, 180) is not None) is kept


def test_deviation_thresholds_follow_the_pool_mean() -> None:
    # own: cpu 10 %, 30 %, 80 % of 10 cores: mean 40; +-15 gives 25 % and 55 %
    loads = [
        NodeLoad(NodeInfo(f"n{i}", {"cpu": 10000}), {"cpu": cpu}, {"cpu": 0}, ())
        for i, cpu in enumerate((1000, 3000, 8000))
    ]
    thresholds = Thresholds({"cpu": 15}, {"cpu": 15}, {"cpu": 0}, {"cpu": 0}, ("cpu",))
    set_node_thresholds(loads, thresholds, use_deviation=True)
    assert [(load.low["cpu"], load.high["cpu"]) for load in loads] == [(2500, 5500)] * 3
    # a prod low of 0 in deviation mode means the whole allocatable
    assert loads[0].prod_low == loads[0].prod_high == {"cpu": 10000}
    classes = classify_nodes(loads)
    assert [n.name for n in classes.both_low] == ["n0"]
    assert [n.name for n in classes.high] == ["n2"]
    assert [n.name for n in classes.prod_low] == ["n1"]  # in between, and prod under


def test_deviation_clamps_to_the_allocatable() -> None:
    # own: mean 90 %, +20 would be 110 %: clamped to 100 %; -95 to 0 %
    loads = [NodeLoad(NodeInfo("n", {"memory": 1000}), {"memory": 900}, {}, ())]
    set_node_thresholds(
        loads, Thresholds({"memory": 95}, {"memory": 20}, {}, {}, ("memory",)), use_deviation=True
    )
    assert (loads[0].low["memory"], loads[0].high["memory"]) == (0, 1000)


def test_unschedulable_nodes_are_never_low() -> None:
    idle = NodeLoad(
        NodeInfo("idle", {"cpu": 1000}, unschedulable=True),
        {"cpu": 0},
        {"cpu": 0},
        (),
        low={"cpu": 300},
        high={"cpu": 500},
        prod_low={"cpu": 1000},
        prod_high={"cpu": 1000},
    )
    classes = classify_nodes([idle])
    assert not (
        classes.low or classes.both_low or classes.prod_low or classes.high or classes.prod_high
    )


# -- the pod filters ------------------------------------------------------------------------

PLAIN = pool_args({"cpu": 30}, {"cpu": 50})


@pytest.mark.parametrize(
    ("pod", "evictor", "blocked"),
    [
        (PodInfo("default", "rs"), None, None),
        (
            PodInfo("default", "ds", owner_kinds=("DaemonSet",)),
            EvictorArgs(evict_all_bare_pods=True),
            "DaemonSet",
        ),
        (PodInfo("default", "mirror", mirror=True), None, "mirror"),
        (PodInfo("default", "static", static=True), None, "static"),
        (PodInfo("default", "going", terminating=True), None, "terminating"),
        (PodInfo("default", "bare", owner_kinds=()), None, "ownerRefs"),
        (
            PodInfo("default", "bare", owner_kinds=()),
            EvictorArgs(evict_failed_bare_pods=True),
            "failed phase",
        ),
        (
            PodInfo("default", "bare", owner_kinds=(), failed=True),
            EvictorArgs(evict_failed_bare_pods=True),
            None,
        ),
        (PodInfo("default", "bare", owner_kinds=()), EvictorArgs(evict_all_bare_pods=True), None),
        (PodInfo("kube-system", "critical", priority=2_000_000_000), None, "system critical"),
        (
            PodInfo("kube-system", "critical", priority=2_000_000_000),
            EvictorArgs(evict_system_critical_pods=True),
            None,
        ),
        (
            PodInfo("default", "hi", priority=10000),
            EvictorArgs(priority_threshold=10000),
            "higher priority",
        ),
        (PodInfo("default", "lo", priority=9999), EvictorArgs(priority_threshold=10000), None),
        (PodInfo("default", "none"), EvictorArgs(priority_threshold=0), None),  # no priority: below
        # the threshold is only checked while critical pods are protected, as upstream
        (
            PodInfo("default", "hi", priority=10000),
            EvictorArgs(priority_threshold=10000, evict_system_critical_pods=True),
            None,
        ),
        (PodInfo("default", "local", local_storage=True), None, "local storage"),
        (
            PodInfo("default", "local", local_storage=True),
            EvictorArgs(evict_local_storage_pods=True),
            None,
        ),
        (PodInfo("default", "pvc", pvc=True), None, None),
        (PodInfo("default", "pvc", pvc=True), EvictorArgs(ignore_pvc_pods=True), "PVC"),
        (
            PodInfo("default", "web", labels={"app": "web"}),
            EvictorArgs(label_selector=LabelSelector({"app": "api"})),
            "labelSelector",
        ),
    ],
)
def test_eviction_blockers(pod: PodInfo, evictor: EvictorArgs | None, blocked: str | None) -> None:
    found = eviction_blocker(pod, PLAIN, evictor)
    if blocked is None:
        assert found is None
    else:
        assert found is not None and blocked in found


def test_namespaces_and_pod_selectors() -> None:
    include = pool_args({"cpu": 30}, {"cpu": 50}, include=("default",))
    exclude = pool_args({"cpu": 30}, {"cpu": 50}, exclude=("default",))
    assert eviction_blocker(PodInfo("default", "a"), include) is None
    assert eviction_blocker(PodInfo("other", "a"), include) == "pod namespace is not evictable"
    assert eviction_blocker(PodInfo("default", "a"), exclude) == "pod namespace is not evictable"
    assert eviction_blocker(PodInfo("other", "a"), exclude) is None
    selected = LowNodeLoadArgs.from_dict(
        {
            "podSelectors": [
                {"name": "none"},
                {"name": "web", "selector": {"matchLabels": {"app": "web"}}},
                {"name": "api", "selector": {"matchLabels": {"app": "api"}}},
            ]
        }
    )
    assert eviction_blocker(PodInfo("d", "w", labels={"app": "api"}), selected) is None
    assert eviction_blocker(PodInfo("d", "x", labels={"app": "db"}), selected) == (
        "pod matches none of the podSelectors"
    )
