"""LowNodeLoad's rounds: which nodes a pool takes, the eviction reasons, and whole rounds.

Most cases re-express Koordinator v1.8.0's own tests with their numbers:
pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go and
utilization_util_test.go. Cases marked "own" add numbers and corners of our own.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any, NamedTuple

import pytest

from descheduler.anomaly import AnomalyDetector, LowNodeLoadState
from descheduler.args import AnomalyCondition, EvictorArgs, LowNodeLoadArgs, NodePool
from descheduler.cluster import NodeInfo, PodInfo, node_info, raw_allocatable
from descheduler.lownodeload import balance, balance_pool, eviction_reason, select_pool_nodes
from descheduler.selectors import LabelSelector
from descheduler.utilization import NodeLoad, Thresholds, set_node_thresholds
from koordapi import keys
from tests.unit.descheduler.fakes import GI, NOW, build_node, build_pod, pool_args

# -- builders in the shape of Koordinator's pkg/descheduler/test helpers ----------------------


MIRROR = {"kubernetes.io/config.source": "api", "kubernetes.io/config.mirror": "mirror"}
LOCAL_VOLUME = [{"name": "sample", "hostPath": {"path": "somePath"}, "emptyDir": {}}]
BATCH = {keys.LABEL_PRIORITY_CLASS: "koord-batch"}


def protected(node: str, millicpu: int = 400, memory: int = 0, **kw: Any) -> list[dict[str, Any]]:
    """The three pods every upstream case keeps: a DaemonSet pod, a mirror pod with local
    storage, a system-critical pod without owner."""
    return [
        build_pod("p6", millicpu, memory, node, owner="DaemonSet", **kw),
        build_pod(
            "p7",
            millicpu,
            memory,
            node,
            owner="Pod",
            annotations=MIRROR,
            volumes=LOCAL_VOLUME,
            **kw,
        ),
        build_pod(
            "p8",
            millicpu,
            memory,
            node,
            owner=None,
            namespace="kube-system",
            priority=2 * 10**9,
            **kw,
        ),
    ]


def rs_pods(node: str, *names: str, millicpu: int = 400, memory: int = 0) -> list[dict[str, Any]]:
    return [build_pod(name, millicpu, memory, node) for name in names]


def _requests(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["spec"]["containers"][0]["resources"]["requests"])


def cluster(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[NodeInfo]:
    """node_info for each node, with a NodeMetric built as setupNodeMetrics does: each pod's
    usage is its requests, the node's the sum; reported at NOW. koordapi reads cpu and memory
    only, so other resources are added to the pod usage afterwards."""
    infos = []
    for node in nodes:
        name = node["metadata"]["name"]
        mine = [p for p in pods if p["spec"]["nodeName"] == name]
        entries = []
        for pod in mine:
            core = {k: v for k, v in _requests(pod).items() if k in ("cpu", "memory")}
            entries.append(
                {
                    "namespace": pod["metadata"]["namespace"],
                    "name": pod["metadata"]["name"],
                    "podUsage": {"resources": core},
                }
            )
        metric = {
            "metadata": {"name": name},
            "status": {
                "updateTime": datetime.datetime.fromtimestamp(NOW, datetime.UTC).isoformat(),
                "nodeMetric": {"nodeUsage": {"resources": {}}},
                "podsMetric": entries,
            },
        }
        info = node_info(node, metric, mine)
        assert info.metric is not None
        usage = {key: dict(value) for key, value in info.metric.pod_usage.items()}
        for pod in mine:
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            for resource, amount in _requests(pod).items():
                if resource not in ("cpu", "memory"):
                    usage[key][resource] = int(amount)
        infos.append(
            dataclasses.replace(info, metric=dataclasses.replace(info.metric, pod_usage=usage))
        )
    return infos


def evicted(result: Any) -> list[str]:
    return [victim.pod.split("/")[1] for _, victim in result.victims()]


# -- pool membership (Test_filterNodes) -----------------------------------------------------


def test_filter_nodes_without_a_selector_takes_all() -> None:
    nodes = [NodeInfo("test-node-1", {}), NodeInfo("test-node-2", {})]
    assert select_pool_nodes(NodePool("p"), nodes, {"test-node-1"}) == nodes


def test_filter_nodes_with_a_matching_selector() -> None:
    nodes = [NodeInfo("test-node-1", {}), NodeInfo("test-node-2", {}, labels={"test": "true"})]
    pool = NodePool("p", node_selector=LabelSelector.parse({"matchLabels": {"test": "true"}}, "s"))
    assert [n.name for n in select_pool_nodes(pool, nodes, ())] == ["test-node-2"]
    # own: a node an earlier pool processed is skipped once there is a selector
    assert select_pool_nodes(pool, nodes, {"test-node-2"}) == []


def test_filter_nodes_with_an_unmatched_selector() -> None:
    nodes = [NodeInfo("test-node-1", {}), NodeInfo("test-node-2", {})]
    pool = NodePool("p", node_selector=LabelSelector.parse({"matchLabels": {"test": "true"}}, "s"))
    assert select_pool_nodes(pool, nodes, ()) == []


# -- the anomaly detector in the round (low_node_load_test.go) ------------------------------


def test_one_consecutive_abnormality_needs_no_detector() -> None:
    # ConsecutiveAbnormalities 1: both hot nodes count at their first report, and the round
    # keeps no detector for them (the detector alone would want a second report)
    nodes = [build_node(n, 4000, 3000, 110) for n in ("test-node-1", "test-node-2", "idle")]
    pods = [
        *rs_pods("test-node-1", "a", "b", "c", millicpu=1000),
        *rs_pods("test-node-2", "d", "e", "f", millicpu=1000),
    ]
    state = LowNodeLoadState()
    result = balance(pool_args({"cpu": 30}, {"cpu": 50}), cluster(nodes, pods), state, NOW)
    assert result.pools[0].abnormal_nodes == ("test-node-1", "test-node-2")
    assert state.node_detector.counts("test-node-1") == (0, 0)
    assert not state.node_detector.is_anomalous("test-node-1")
    assert AnomalyDetector(AnomalyCondition(1, 1)).observe("n", True) is False


# -- eviction reasons (TestOverUtilizedEvictionReason) --------------------------------------

REASON_NODE = {
    "metadata": {
        "name": "test-node",
        "annotations": {keys.ANNOTATION_NODE_RAW_ALLOCATABLE: '{"cpu":96,"memory":"512Gi"}'},
    },
    "status": {"allocatable": {"cpu": "96", "memory": "512Gi"}},
}


@pytest.mark.parametrize(
    ("prod", "usage", "prod_usage", "want"),
    [
        (
            False,
            {"cpu": 64000, "memory": 32 * GI},
            {},
            "node is overutilized, node cpu usage(66.67%)>threshold(50.00%)",
        ),
        (
            False,
            {"cpu": 64000, "memory": 400 * GI},
            {},
            "node is overutilized, node cpu usage(66.67%)>threshold(50.00%), "
            "node memory usage(78.12%)>threshold(50.00%)",
        ),
        (
            True,
            {"cpu": 46000, "memory": 250 * GI},
            {"cpu": 45000, "memory": 200 * GI},
            "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%)",
        ),
        (
            True,
            {"cpu": 46000, "memory": 250 * GI},
            {"cpu": 45000, "memory": 250 * GI},
            "node is overutilized, prod cpu usage(46.88%)>threshold(40.00%), "
            "prod memory usage(48.83%)>threshold(40.00%)",
        ),
    ],
)
def test_over_utilized_eviction_reason(
    prod: bool, usage: dict[str, int], prod_usage: dict[str, int], want: str
) -> None:
    node = NodeInfo("test-node", raw_allocatable(REASON_NODE))
    load = NodeLoad(node, usage, prod_usage, ())
    thresholds = Thresholds(
        {},
        {"cpu": 50, "memory": 50},
        {},
        {"cpu": 40, "memory": 40} if prod else {},
        ("cpu", "memory"),
    )
    set_node_thresholds([load], thresholds, use_deviation=False)
    assert eviction_reason(load, thresholds, prod=prod) == want


# -- whole rounds (TestLowNodeLoad) ---------------------------------------------------------

N1_N2_N3 = [
    build_node("n1", 4000, 3000, 9),
    build_node("n2", 4000, 3000, 10),
    build_node("n3", 4000, 3000, 10, unschedulable=True),
]
LOW_30, HIGH_50 = {"cpu": 30, "pods": 30}, {"cpu": 50, "pods": 50}


def run_round(
    args: LowNodeLoadArgs, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> Any:
    return balance(args, cluster(nodes, pods), LowNodeLoadState(), NOW)


def test_no_evictable_pods() -> None:
    pods = [build_pod(f"p{i}", 400, 0, "n1", owner="DaemonSet") for i in range(1, 5)]
    pods += [
        build_pod("p5", 400, 0, "n1", owner="Pod", annotations=MIRROR, volumes=LOCAL_VOLUME),
        build_pod("p6", 400, 0, "n1", owner=None, namespace="kube-system", priority=2 * 10**9),
        build_pod("p9", 400, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), N1_N2_N3, pods)
    assert evicted(result) == []
    [hot] = result.pools[0].hot_nodes
    assert (hot.node, hot.note) == ("n1", "no removable pods")


def test_without_priorities() -> None:
    pods = [
        *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), N1_N2_N3, pods)
    # p5 does not fit n2 once p1..p4 are charged to it (2000m of its 2000m high threshold)
    assert evicted(result) == ["p1", "p2", "p3", "p4"]
    pool = result.pools[0]
    assert (pool.category("high"), pool.category("both-low"), pool.category("")) == (
        ["n1"],
        ["n2"],
        ["n3"],
    )
    n1 = pool.nodes[0]
    assert n1.usage == {"cpu": 3200, "memory": 0, "pods": 8}
    assert (n1.low, n1.high) == (
        {"cpu": 1200, "memory": 3000, "pods": 2},
        {"cpu": 2000, "memory": 3000, "pods": 4},
    )
    reasons = [victim.reason for _, victim in result.victims()]
    assert reasons[0] == (
        "node is overutilized, node cpu usage(80.00%)>threshold(50.00%), "
        "node pods usage(88.89%)>threshold(50.00%)"
    )
    assert reasons[3] == "node is overutilized, node pods usage(55.56%)>threshold(50.00%)"


def test_without_priorities_but_excluding_namespaces() -> None:
    pods = [
        build_pod(f"p{i}", 400, 0, "n1", owner=None, namespace="namespace1") for i in range(1, 6)
    ]
    pods += [*protected("n1"), build_pod("p9", 400, 0, "n2")]
    result = run_round(pool_args(LOW_30, HIGH_50, exclude=("namespace1",)), N1_N2_N3, pods)
    assert evicted(result) == []


def test_without_priorities_but_include_only_default_namespace() -> None:
    pods = [
        *rs_pods("n1", "p1", "p2"),
        *(
            build_pod(f"p{i}", 400, 0, "n1", owner=None, namespace=f"namespace{i}")
            for i in (3, 4, 5)
        ),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50, include=("default",)), N1_N2_N3, pods)
    assert evicted(result) == ["p1", "p2"]


def test_without_priorities_stop_when_memory_capacity_is_depleted() -> None:
    pods = [
        *rs_pods("n1", "p1", "p2", "p3", "p4", "p5", memory=300),
        *protected("n1", memory=300),
        build_pod("p9", 400, 2100, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), N1_N2_N3, pods)
    # n2 can take 900 bytes of memory under its (filled-in, 100 %) threshold: three pods
    assert evicted(result) == ["p1", "p2", "p3"]


def test_with_priorities() -> None:
    pods = [build_pod(f"p{i}", 400, 0, "n1", priority=10000) for i in range(1, 5)]
    pods += [
        build_pod("p5", 400, 0, "n1", priority=0),
        build_pod("p6", 400, 0, "n1", owner="DaemonSet", priority=10000),
        build_pod(
            "p7", 400, 0, "n1", owner="Pod", priority=0, annotations=MIRROR, volumes=LOCAL_VOLUME
        ),
        build_pod("p8", 400, 0, "n1", owner=None, namespace="kube-system", priority=2 * 10**9),
        build_pod("p9", 400, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), N1_N2_N3, pods)
    assert len(evicted(result)) == 4


def test_without_priorities_evicting_best_effort_pods_only() -> None:
    pods = [
        build_pod("p1", 400, 0, "n1", best_effort=True),
        build_pod("p2", 400, 0, "n1", best_effort=True),
        build_pod("p3", 400, 0, "n1"),
        build_pod("p4", 400, 0, "n1", best_effort=True),
        build_pod("p5", 400, 0, "n1", best_effort=True),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), N1_N2_N3, pods)
    assert evicted(result) == ["p1", "p2", "p4", "p5"]


EXT = "example.com/foo"


def test_with_extended_resource() -> None:
    nodes = [
        build_node("n1", 4000, 3000, 9, extended={EXT: 8}),
        build_node("n2", 4000, 3000, 10, extended={EXT: 8}),
        build_node("n3", 4000, 3000, 10, unschedulable=True),
    ]
    pods = [build_pod(f"p{i}", 0, 0, "n1", extended={EXT: 1}) for i in range(1, 6)]
    pods += [
        build_pod("p6", 0, 0, "n1", owner="Pod", extended={EXT: 1}),
        build_pod(
            "p7",
            0,
            0,
            "n1",
            owner="Pod",
            annotations=MIRROR,
            volumes=LOCAL_VOLUME,
            extended={EXT: 1},
        ),
        build_pod(
            "p8",
            0,
            0,
            "n1",
            owner=None,
            namespace="kube-system",
            priority=2 * 10**9,
            extended={EXT: 1},
        ),
        build_pod("p9", 0, 0, "n2", extended={EXT: 1}),
    ]
    result = run_round(pool_args({"pods": 30, EXT: 30}, {"pods": 50, EXT: 50}), nodes, pods)
    # n2 can take 3 of the extended resource before reaching 4 (50 % of 8)
    assert evicted(result) == ["p1", "p2", "p3"]


def test_with_extended_resource_in_some_of_nodes() -> None:
    nodes = [
        build_node("n1", 4000, 3000, 9, extended={EXT: 8}),
        build_node("n2", 4000, 3000, 10),
        build_node("n3", 4000, 3000, 10, unschedulable=True),
    ]
    pods = [build_pod("p1", 0, 0, "n1", extended={EXT: 1}), build_pod("p9", 0, 0, "n2")]
    result = run_round(pool_args({"pods": 30, EXT: 30}, {"pods": 50, EXT: 50}), nodes, pods)
    assert evicted(result) == []
    assert result.pools[0].note == "all nodes are under target utilization"


def test_without_priorities_but_only_other_node_is_unschedulable() -> None:
    nodes = [build_node("n1", 4000, 3000, 9), build_node("n2", 4000, 3000, 10, unschedulable=True)]
    pods = [*rs_pods("n1", "p1", "p2", "p3", "p4", "p5"), *protected("n1")]
    result = run_round(pool_args(LOW_30, HIGH_50), nodes, pods)
    assert evicted(result) == []
    assert result.pools[0].note == "no node is underutilized"


def test_only_other_node_does_not_match_the_node_selector_of_p4_and_p5() -> None:
    nodes = [
        build_node("n1", 4000, 3000, 9),
        build_node("n2", 4000, 3000, 10, labels={"datacenter": "east"}),
    ]
    west = {"datacenter": "west"}
    pods = [
        *rs_pods("n1", "p1", "p2", "p3"),
        build_pod("p4", 400, 0, "n1", owner="Pod", node_selector=west),
        build_pod("p5", 400, 0, "n1", owner="Pod", node_selector=west),
        *protected("n1"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), nodes, pods)
    assert evicted(result) == ["p1", "p2", "p3"]


def test_deviation_thresholds() -> None:
    pods = [
        *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    args = pool_args({"cpu": 5, "pods": 5}, {"cpu": 5, "pods": 5}, deviation=True)
    result = run_round(args, N1_N2_N3, pods)
    assert len(evicted(result)) == 2
    # mean cpu (80 + 10 + 0) / 3 = 30 %: 25 % and 35 % of 4000m; pods 32.96 % +- 5
    n1, n2, _ = result.pools[0].nodes
    assert (n1.low["cpu"], n1.high["cpu"], n1.low["pods"], n1.high["pods"]) == (1000, 1400, 2, 3)
    assert (n2.category, n2.high["pods"]) == ("both-low", 3)


PROD_NODES_20 = [build_node(n, 4000, 3000, 20) for n in ("n1", "n2", "n3")]


class ProdCase(NamedTuple):
    name: str
    low: Mapping[str, float]
    high: Mapping[str, float]
    prod_low: Mapping[str, float]
    prod_high: Mapping[str, float]
    deviation: bool
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    evictions: int


PROD_CASES = [
    ProdCase(
        "node && prod thresholds, node under thresholds, but prod over thresholds",
        LOW_30,
        {"cpu": 90, "pods": 90},
        {"cpu": 20, "pods": 20},
        {"cpu": 40, "pods": 40},
        False,
        N1_N2_N3,
        [
            *rs_pods("n1", "p1", "p2"),
            *(build_pod(f"p{i}", 400, 0, "n1", labels=BATCH) for i in (3, 4, 5)),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
        ],
        2,
    ),
    ProdCase(
        "both node and prod usage is higher than thresholds, only node usage will be evicted",
        LOW_30,
        {"cpu": 70, "pods": 80},
        {"cpu": 20, "pods": 20},
        {"cpu": 40, "pods": 40},
        False,
        N1_N2_N3,
        [
            *rs_pods("n1", "p1", "p2", "p3"),
            *(build_pod(f"p{i}", 400, 0, "n1", labels=BATCH) for i in (4, 5)),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
        ],
        1,
    ),
    ProdCase(
        "support reschedule prod pod only",
        {"cpu": 0, "pods": 0},
        {"cpu": 100, "pods": 100},
        {"cpu": 30, "pods": 30},
        {"cpu": 50, "pods": 50},
        False,
        N1_N2_N3,
        [
            *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
        ],
        4,
    ),
    ProdCase(
        "both low resource used by high node, prod pods lack room",
        {"cpu": 30, "pods": 50},
        {"cpu": 60, "pods": 80},
        {"cpu": 20, "pods": 30},
        {"cpu": 30, "pods": 50},
        False,
        PROD_NODES_20,
        [
            *rs_pods("n1", "p1", "p2", "p3", "p4", "p5", "p16", "p17"),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
            *rs_pods("n3", "p10", "p11", "p12", "p13", "p14", "p15"),
        ],
        5,
    ),
    ProdCase(
        "node is always appropriately for node usage, prod pod rebalance successful",
        {"cpu": 0, "pods": 0},
        {"cpu": 100, "pods": 100},
        {"cpu": 10, "pods": 10},
        {"cpu": 10, "pods": 10},
        True,
        PROD_NODES_20,
        [
            *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
            *rs_pods("n3", "p10", "p11"),
        ],
        3,
    ),
    ProdCase(
        "stop prod pod eviction when the node recovers to normal",
        {"cpu": 0, "pods": 0},
        {"cpu": 100, "pods": 100},
        {"cpu": 60, "pods": 60},
        {"cpu": 70, "pods": 70},
        False,
        PROD_NODES_20[:2],
        [
            *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
            *protected("n1"),
            build_pod("p9", 400, 0, "n2"),
        ],
        1,
    ),
]


@pytest.mark.parametrize("case", PROD_CASES, ids=[case.name for case in PROD_CASES])
def test_prod_thresholds(case: ProdCase) -> None:
    args = pool_args(
        case.low,
        case.high,
        prod_low=case.prod_low,
        prod_high=case.prod_high,
        deviation=case.deviation,
    )
    assert len(evicted(run_round(args, case.nodes, case.pods))) == case.evictions


def test_prod_over_thresholds_moves_prod_pods_only() -> None:
    # the first prod case in detail: n1 is between its node thresholds but its prod pods use
    # 2000m of 4000m (over 40 %); batch pods p3..p5 are not prod and stay
    pods = [
        *rs_pods("n1", "p1", "p2"),
        *(build_pod(f"p{i}", 400, 0, "n1", labels=BATCH) for i in (3, 4, 5)),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    args = pool_args(
        LOW_30,
        {"cpu": 90, "pods": 90},
        prod_low={"cpu": 20, "pods": 20},
        prod_high={"cpu": 40, "pods": 40},
    )
    result = run_round(args, N1_N2_N3, pods)
    assert evicted(result) == ["p1", "p2"]
    pool = result.pools[0]
    assert (pool.category("prod-high"), pool.category("both-low")) == (["n1"], ["n2"])
    [hot] = pool.hot_nodes
    assert hot.prod and hot.reason == (
        "node is overutilized, prod cpu usage(50.00%)>threshold(40.00%), "
        "prod pods usage(55.56%)>threshold(40.00%)"
    )


# -- whole rounds: corners of our own -------------------------------------------------------


def test_boundaries_are_strict() -> None:
    # own: a node exactly at its high threshold (2000m of 4000m) is not hot; 2001m is
    nodes = [build_node("hot", 4000, 8 * GI, 110), build_node("idle", 8000, 8 * GI, 110)]
    at = [build_pod("a", 1000, GI, "hot"), build_pod("b", 1000, GI, "hot")]
    over = [*at, build_pod("c", 1, 0, "hot")]
    args = pool_args({"cpu": 20}, {"cpu": 50})
    assert run_round(args, nodes, at).pools[0].note == "all nodes are under target utilization"
    result = run_round(args, nodes, over)
    # the 1m pod covers the 1m excess exactly: it scores highest (2) and is enough
    assert evicted(result) == ["c"]


def test_fit_reserves_target_room_in_pod_list_order() -> None:
    # own: as upstream, every removable pod is charged to a target while the pods are
    # classified, in list order, chosen or not: with a 4000m target (2000m high) a and b
    # take its room, so c, the best choice, does not fit and a goes instead
    nodes = [build_node("hot", 4000, 8 * GI, 110), build_node("idle", 4000, 8 * GI, 110)]
    pods = [
        build_pod("a", 1000, GI, "hot"),
        build_pod("b", 1000, GI, "hot"),
        build_pod("c", 1, 0, "hot"),
    ]
    assert evicted(run_round(pool_args({"cpu": 20}, {"cpu": 50}), nodes, pods)) == ["a"]


def test_gigabytes_and_fractional_thresholds() -> None:
    # own: a 96-core / 384 GiB node with 300 GiB in use (78.125 %) against 33.3 / 66.6 %,
    # and a 1 TiB spare node; the batch pod goes first although others fit the excess better
    nodes = [build_node("big", 96000, 384 * GI, 110), build_node("spare", 96000, 1024 * GI, 110)]
    pods = [
        build_pod("db", 8000, 200 * GI, "big"),
        build_pod("etl", 4000, 60 * GI, "big", labels=BATCH),
        build_pod("cache", 2000, 40 * GI, "big"),
        build_pod("web", 4000, 16 * GI, "spare"),
    ]
    args = pool_args({"cpu": 33.3, "memory": 33.3}, {"cpu": 66.6, "memory": 66.6})
    result = run_round(args, nodes, pods)
    [hot] = result.pools[0].hot_nodes
    assert hot.reason == "node is overutilized, node memory usage(78.12%)>threshold(66.60%)"
    # excess: 300 GiB - int(0.666 * 384 GiB) = 44.256 GiB; cache (40 GiB) would score 0.90
    # and db (200 GiB) 1.22, but etl is koord-batch and goes first; 240 GiB (62.5 %) is under
    assert evicted(result) == ["etl"]
    assert result.pools[0].nodes[0].high["memory"] == 274603029037  # int(0.666 * 384 GiB)
    assert hot.victims[0].reason == hot.reason


def test_a_resource_high_but_not_low_is_judged_at_100_percent() -> None:
    # own: highThresholds.memory 50 without lowThresholds.memory is replaced by 100 %
    nodes = [build_node("hot", 4000, 1000, 110), build_node("idle", 4000, 1000, 110)]
    pods = [build_pod("a", 100, 900, "hot"), build_pod("b", 100, 0, "idle")]
    args = pool_args({"cpu": 30}, {"cpu": 50, "memory": 50})
    result = run_round(args, nodes, pods)
    assert result.pools[0].nodes[0].high["memory"] == 1000
    assert result.pools[0].note == "all nodes are under target utilization"


def test_prod_low_nodes_count_toward_number_of_nodes() -> None:
    # own: one hot node, one truly low, one in between whose prod usage is under 100 %: the
    # in-between node counts as prod-low, so 2 > numberOfNodes 1 and the round goes on
    nodes = [build_node(n, 4000, 3000, 110) for n in ("hot", "low", "mid")]
    pods = [
        *rs_pods("hot", "h1", "h2", "h3", millicpu=1000),
        build_pod("l1", 100, 0, "low"),
        build_pod("m1", 1600, 0, "mid"),
    ]
    args = pool_args({"cpu": 30}, {"cpu": 50}, number_of_nodes=1)
    result = run_round(args, nodes, pods)
    pool = result.pools[0]
    assert (pool.category("both-low"), pool.category("prod-low")) == (["low"], ["mid"])
    assert evicted(result) == ["h1"]  # 3000m - 1000m is 2000m: at the threshold, done
    stopped = run_round(pool_args({"cpu": 30}, {"cpu": 50}, number_of_nodes=2), nodes, pods)
    assert stopped.pools[0].note == "2 underutilized node(s), not more than numberOfNodes 2"


def test_node_level_hot_node_without_low_targets() -> None:
    # own: the only non-hot node is prod-low (between the node thresholds): the node-level
    # round has no target, the hot node is reported with that note
    nodes = [build_node("hot", 4000, 3000, 110), build_node("mid", 4000, 3000, 110)]
    pods = [*rs_pods("hot", "h1", "h2", "h3", millicpu=1000), build_pod("m1", 1600, 0, "mid")]
    result = run_round(pool_args({"cpu": 30}, {"cpu": 50}), nodes, pods)
    [hot] = result.pools[0].hot_nodes
    assert (hot.node, hot.victims, hot.note) == ("hot", (), "no target nodes")


def test_a_node_over_a_low_only_resource_is_still_low() -> None:
    # own: pods is only in the low map, so its high threshold is 0 and one pod is over it;
    # the node is under its low thresholds, which are looked at first: nothing is hot
    nodes = [build_node("a", 4000, 3000, 110), build_node("b", 4000, 3000, 110)]
    pods = [build_pod("x", 100, 0, "a")]
    result = run_round(pool_args({"cpu": 30, "pods": 30}, {"cpu": 50}), nodes, pods)
    assert result.pools[0].nodes[0].high["pods"] == 0
    assert result.pools[0].note == "all nodes are under target utilization"


def test_without_node_fit_pods_without_usage_move_uncounted() -> None:
    # own: nodeFit off; two pods have no NodeMetric entry: they sort last and are chosen,
    # but nothing moves with them, so the node stays over and they all go
    nodes = [build_node("hot", 4000, 3000, 110), build_node("idle", 8000, 3000, 110)]
    pods = [*rs_pods("hot", "a", "b", "c", millicpu=1000)]
    infos = cluster(nodes, pods)
    hot = infos[0]
    assert hot.metric is not None
    usage = dict(hot.metric.pod_usage)
    usage.pop("default/a")
    infos[0] = dataclasses.replace(
        hot,
        pods=(*hot.pods, PodInfo("default", "ghost", created=NOW + 1)),
        metric=dataclasses.replace(hot.metric, system_usage={"cpu": 2500}, pod_usage=usage),
    )
    args = pool_args({"cpu": 30}, {"cpu": 50}, node_fit=False)
    result = balance(args, infos, LowNodeLoadState(), NOW)
    # usage 2500 + 2000 = 4500m, 2500m over; b and c bring it to 2500m, still over; the
    # newer ghost, then a, go without lowering it
    assert evicted(result) == ["b", "c", "ghost", "a"]
    # with nodeFit a pod must have usage to be placed: b and c only
    with_fit = balance(pool_args({"cpu": 30}, {"cpu": 50}), infos, LowNodeLoadState(), NOW)
    assert evicted(with_fit) == ["b", "c"]


def test_anomaly_needs_more_than_n_reports_across_rounds() -> None:
    # own: the default condition (5): the node is hot at its 6th report; a round in between
    # where it is not over its high threshold does not break the streak (it is not observed)
    nodes = [build_node("hot", 4000, 3000, 110), build_node("idle", 4000, 3000, 110)]
    busy = [*rs_pods("hot", "a", "b", "c", millicpu=1000)]
    calm = [*rs_pods("hot", "a", "b", millicpu=1000)]
    args = pool_args({"cpu": 30}, {"cpu": 50}, condition=AnomalyCondition())
    state = LowNodeLoadState()
    notes = []
    for pods in (busy, busy, busy, calm, busy, busy, busy):
        notes.append(balance(args, cluster(nodes, pods), state, NOW).pools[0].note)
    waiting = "none of the nodes is anomalous yet"
    assert notes[:6] == [*[waiting] * 3, "all nodes are under target utilization", *[waiting] * 2]
    assert notes[6] == ""
    # after the round the hot node is marked normal once; evicting brought it under its
    # threshold, which reset it: it must build a new streak
    assert not state.node_detector.is_anomalous("hot")
    assert balance(args, cluster(nodes, busy), state, NOW).pools[0].note == (
        "none of the nodes is anomalous yet"
    )


def test_pools_skip_nodes_an_earlier_pool_found_hot() -> None:
    # own: the default pool (no selector) processes every node; pool "a" (with a selector)
    # then skips the hot node; pool "all" (no selector) sees it again
    nodes = [
        build_node("hot", 4000, 3000, 110, labels={"pool": "a"}),
        build_node("idle", 4000, 3000, 110, labels={"pool": "a"}),
    ]
    pods = [*rs_pods("hot", "a", "b", "c", millicpu=1000)]
    args = LowNodeLoadArgs.from_dict(
        {
            "lowThresholds": {"cpu": 30},
            "highThresholds": {"cpu": 50},
            "anomalyCondition": {"consecutiveAbnormalities": 1, "consecutiveNormalities": 1},
            "nodePools": [
                {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}},
                {"name": "all"},
            ],
        }
    )
    result = balance(args, cluster(nodes, pods), LowNodeLoadState.for_args(args), NOW)
    default, pool_a, pool_all = result.pools
    assert [hot.node for hot in default.hot_nodes] == ["hot"]
    assert [node.name for node in pool_a.nodes] == ["idle"]
    assert pool_a.note == "all nodes are under target utilization"
    # each pool starts from the same NodeMetric: "all" chooses again what the default did
    assert [hot.node for hot in pool_all.hot_nodes] == ["hot"]
    assert evicted(result) == ["a", "a"]


def test_dry_run_chooses_the_same_and_paused_nothing() -> None:
    pods = [
        *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    base = pool_args(LOW_30, HIGH_50)
    dry = dataclasses.replace(base, dry_run=True)
    result = run_round(dry, N1_N2_N3, pods)
    assert result.dry_run and evicted(result) == ["p1", "p2", "p3", "p4"]
    paused = run_round(dataclasses.replace(base, paused=True), N1_N2_N3, pods)
    assert paused.paused and paused.pools == () and paused.victims() == []


def test_evictor_args_apply_in_a_round() -> None:
    # own: p1 and p2 carry priority 10000, at the threshold: kept; p7 (mirror) never goes
    pods = [
        build_pod("p1", 400, 0, "n1", priority=10000),
        build_pod("p2", 400, 0, "n1", priority=10000),
        *rs_pods("n1", "p3", "p4", "p5"),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    evictor = EvictorArgs(
        priority_threshold=10000, evict_local_storage_pods=True, evict_all_bare_pods=True
    )
    result = balance(
        pool_args(LOW_30, HIGH_50), cluster(N1_N2_N3, pods), LowNodeLoadState(), NOW, evictor
    )
    assert evicted(result) == ["p3", "p4", "p5"]


def test_expired_metrics_leave_nodes_out_but_count_them() -> None:
    # own: n2's NodeMetric is stale: n1 has no target, and the pool still has 3 nodes
    infos = cluster(
        N1_N2_N3, [*rs_pods("n1", "p1", "p2", "p3", "p4", "p5"), build_pod("p9", 400, 0, "n2")]
    )
    metric = infos[1].metric
    assert metric is not None
    infos[1] = dataclasses.replace(
        infos[1], metric=dataclasses.replace(metric, update_time=NOW - 180)
    )
    result = balance(pool_args(LOW_30, HIGH_50), infos, LowNodeLoadState(), NOW)
    assert [node.name for node in result.pools[0].nodes] == ["n1", "n3"]
    assert result.pools[0].note == "no node is underutilized"


def test_balance_pool_with_an_empty_selection() -> None:
    pool = NodePool("none", node_selector=LabelSelector({"pool": "x"}))
    args = LowNodeLoadArgs(node_pools=(pool,))
    assert balance_pool(pool, args, cluster(N1_N2_N3, []), LowNodeLoadState(), NOW).note == (
        "no nodes to process"
    )


# -- NodeFit in a round, and the evictor's filter and limits (the round as Koordinator's runs)


def test_only_other_node_does_not_match_the_node_affinity_of_p4_and_p5() -> None:
    nodes = [
        build_node("n1", 4000, 3000, 9),
        build_node("n2", 4000, 3000, 10, labels={"datacenter": "east"}),
    ]
    west = [{"matchExpressions": [{"key": "datacenter", "operator": "In", "values": ["west"]}]}]
    pods = [
        *rs_pods("n1", "p1", "p2", "p3"),
        build_pod("p4", 400, 0, "n1", owner="Pod", affinity_terms=west),
        build_pod("p5", 400, 0, "n1", owner="Pod", affinity_terms=west),
        *protected("n1"),
        build_pod("p9", 0, 0, "n2"),
    ]
    result = run_round(pool_args(LOW_30, HIGH_50), nodes, pods)
    assert evicted(result) == ["p1", "p2", "p3"]


def test_only_pods_that_tolerate_the_low_nodes_taint_are_candidates() -> None:
    # own: n2, the only target, is tainted dedicated=spare:NoSchedule; p2 tolerates it by
    # key and value, p4 by key (Exists), p3's toleration is for NoExecute only
    taint = {"key": "dedicated", "value": "spare", "effect": "NoSchedule"}
    nodes = [build_node("n1", 4000, 3000, 9), build_node("n2", 4000, 3000, 10, taints=[taint])]
    pods = [
        build_pod("p1", 400, 0, "n1"),
        build_pod("p2", 400, 0, "n1", tolerations=[{"key": "dedicated", "value": "spare"}]),
        build_pod(
            "p3", 400, 0, "n1",
            tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}],
        ),
        build_pod("p4", 400, 0, "n1", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        build_pod("p5", 400, 0, "n1"),
        *protected("n1"),
    ]  # fmt: skip
    result = run_round(pool_args(LOW_30, HIGH_50), nodes, pods)
    assert evicted(result) == ["p2", "p4"]


def test_a_pod_whose_requests_the_low_node_cannot_take_is_no_candidate() -> None:
    # own: idle uses 130m of its 8000m but its pods request 7300m; of the hot node's pods
    # (usage as requests: 1100m, 900m, 600m, 700m) only those asking at most 700m would be
    # scheduled there: c and d; their usage also fits idle's threshold (4000m)
    nodes = [build_node("hot", 4000, 8 * GI, 110), build_node("idle", 8000, 8 * GI, 110)]
    pods = [
        build_pod("a", 1100, 0, "hot"),
        build_pod("b", 900, 0, "hot"),
        build_pod("c", 600, 0, "hot"),
        build_pod("d", 700, 0, "hot"),
        build_pod("reserved", 7300, 0, "idle"),
    ]
    infos = cluster(nodes, pods)
    idle = infos[1]
    assert idle.metric is not None
    # the reserving pod is idle: its NodeMetric usage is 130m, its requests stay 7300m
    usage = {"default/reserved": {"cpu": 130, "memory": 0}}
    infos[1] = dataclasses.replace(idle, metric=dataclasses.replace(idle.metric, pod_usage=usage))
    result = balance(pool_args({"cpu": 20}, {"cpu": 50}), infos, LowNodeLoadState(), NOW)
    # 3300m used, 1300m over 2000m: d (700m) then c (600m) bring it to 2000m
    assert evicted(result) == ["d", "c"]


def test_a_hot_node_whose_top_pod_the_evictor_refuses_sheds_its_other_pods() -> None:
    # own: guard's 600m covers the 600m excess exactly (score 2): it would go first and be
    # enough. The evictor's filter refuses it, so it is not counted as moving: x1 and x2
    # (450m each) go instead. ds, a DaemonSet pod, only adds usage.
    nodes = [build_node("hot", 4000, 8 * GI, 110), build_node("idle", 8000, 8 * GI, 110)]
    pods = [
        build_pod("ds", 1100, 0, "hot", owner="DaemonSet"),
        build_pod("x1", 450, 0, "hot"),
        build_pod("guard", 600, 0, "hot"),
        build_pod("x2", 450, 0, "hot"),
    ]
    args = pool_args({"cpu": 20}, {"cpu": 50})
    assert evicted(run_round(args, nodes, pods)) == ["guard"]
    asked: list[str] = []

    def pod_filter(pod: PodInfo) -> str | None:
        asked.append(pod.name)
        return "pod has the maximum eviction cost" if pod.name == "guard" else None

    result = balance(args, cluster(nodes, pods), LowNodeLoadState(), NOW, pod_filter=pod_filter)
    assert evicted(result) == ["x1", "x2"]
    [hot] = result.pools[0].hot_nodes
    assert [(r.pod, r.reason) for r in hot.refused] == [
        ("default/guard", "pod has the maximum eviction cost")
    ]
    # asked while the removable pods are sorted out, then again before each eviction
    assert asked == ["x1", "guard", "x2", "x1", "x2"]


def test_a_pod_refused_by_a_namespace_limit_leaves_its_usage_on_the_node() -> None:
    # own: 3300m on a node whose high threshold is 2000m; a1, a2 (namespace a) and b1
    # (namespace b) use 1100m each and go in list order (equal scores, no creation time).
    # One eviction per namespace: a2 is refused and its 1100m stay, so the node is still
    # over and b1 goes; counting a2 as moved would have stopped the round at 1100m.
    nodes = [build_node("hot", 4000, 8 * GI, 110), build_node("idle", 8000, 8 * GI, 110)]
    pods = [
        build_pod("a1", 1100, 0, "hot", namespace="a"),
        build_pod("a2", 1100, 0, "hot", namespace="a"),
        build_pod("b1", 1100, 0, "hot", namespace="b"),
    ]
    taken: dict[str, int] = {}

    def admit(node: str, pod: PodInfo, reason: str) -> str | None:
        assert (node, reason[:24]) == ("hot", "node is overutilized, no")
        if taken.get(pod.namespace, 0) >= 1:
            return f"maxNoOfPodsToEvictPerNamespace 1 reached in {pod.namespace}"
        taken[pod.namespace] = taken.get(pod.namespace, 0) + 1
        return None

    args = pool_args({"cpu": 20}, {"cpu": 50})
    result = balance(args, cluster(nodes, pods), LowNodeLoadState(), NOW, admit=admit)
    assert evicted(result) == ["a1", "b1"]
    [hot] = result.pools[0].hot_nodes
    assert [r.pod for r in hot.refused] == ["a/a2"]
    # the plugin's own dry run asks no evictor: it chooses as if nothing limited it
    dry = dataclasses.replace(args, dry_run=True)
    taken.clear()
    result = balance(dry, cluster(nodes, pods), LowNodeLoadState(), NOW, admit=admit)
    assert evicted(result) == ["a1", "a2"] and taken == {}


def test_a_pod_refused_by_a_node_limit_leaves_the_targets_room_to_other_nodes() -> None:
    # own: nodeFit off; h1 and h2 each need two of their 1100m pods gone; idle can take
    # 2200m (50 % of 4400m). One eviction per node: a2's refusal leaves idle's room to b1.
    # Had a2 counted, idle's room would be 0 and h2 would keep all its pods.
    nodes = [
        build_node("h1", 4000, 8 * GI, 110),
        build_node("h2", 4000, 8 * GI, 110),
        build_node("idle", 4400, 8 * GI, 110),
    ]
    pods = [
        *rs_pods("h1", "a1", "a2", "a3", millicpu=1100),
        *rs_pods("h2", "b1", "b2", "b3", millicpu=1100),
    ]
    per_node: dict[str, int] = {}

    def admit(node: str, pod: PodInfo, reason: str) -> str | None:
        if per_node.get(node, 0) >= 1:
            return f"maxNoOfPodsToEvictPerNode 1 reached on {node}"
        per_node[node] = per_node.get(node, 0) + 1
        return None

    args = pool_args({"cpu": 20}, {"cpu": 50}, node_fit=False)
    assert evicted(run_round(args, nodes, pods)) == ["a1", "a2"]
    result = balance(args, cluster(nodes, pods), LowNodeLoadState(), NOW, admit=admit)
    assert evicted(result) == ["a1", "b1"]
    h1, h2 = result.pools[0].hot_nodes
    # h1 stays over, so the round asks for a3 too, also refused; b1 takes idle's last room
    assert [r.pod for r in h1.refused] == ["default/a2", "default/a3"]
    assert (h2.refused, h2.note) == ((), "")


def test_max_eviction_total() -> None:
    # TestMaxEvictionTotal: "without priorities" with at most one eviction in all
    pods = [
        *rs_pods("n1", "p1", "p2", "p3", "p4", "p5"),
        *protected("n1"),
        build_pod("p9", 400, 0, "n2"),
    ]
    taken: list[str] = []

    def admit(node: str, pod: PodInfo, reason: str) -> str | None:
        if taken:
            return "maxNoOfPodsToEvictTotal 1 reached"
        taken.append(pod.name)
        return None

    result = balance(
        pool_args(LOW_30, HIGH_50), cluster(N1_N2_N3, pods), LowNodeLoadState(), NOW, admit=admit
    )
    assert evicted(result) == ["p1"]
    [hot] = result.pools[0].hot_nodes
    # n1 stays over (8 pods, 4 allowed) and the round asks for each removable pod in turn
    # (p5 is not one: n2 was full once p1..p4 were charged to it)
    assert [r.pod for r in hot.refused] == ["default/p2", "default/p3", "default/p4"]
