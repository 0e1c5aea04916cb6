"""NodeResource decisions: batch and mid amounts, degradation, adjustments, sync and patch.

The base node: capacity 100 cores / 400 GiB, allocatable 98 cores / 390 GiB
(kubelet reserves 2 / 10 GiB), system usage 3 cores / 12 GiB, five prod pods requesting
50 cores / 200 GiB in total and using 20 cores / 150 GiB, all reported, none LSE.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
from typing import Any

import pytest

from koordapi import keys
from manager.colocation import ColocationConfig, ColocationStrategy, strategy_for_node
from manager.noderesource import calculate, need_sync, status_patch
from manager.noderesource.adjustments import (
    ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE,
    ANNOTATION_THIRD_PARTY_ALLOCATIONS,
)
from manager.noderesource.calculator import MANAGED_RESOURCES, NodeResourceResult
from manager.noderesource.pods import PodMemo, read_pods

NOW = datetime.datetime(2026, 7, 24, 10, 0, tzinfo=datetime.UTC).timestamp()
GI = 1 << 30
ON = ColocationStrategy(enable=True)


def stamp(seconds_ago: float) -> str:
    moment = datetime.datetime.fromtimestamp(NOW - seconds_ago, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    extended: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": "node-1", "labels": labels or {}, "annotations": annotations or {}},
        "status": {
            "capacity": {"cpu": "100", "memory": "400Gi", **(extended or {})},
            "allocatable": {"cpu": "98", "memory": "390Gi", **(extended or {})},
        },
    }


def make_pod(
    name: str,
    cpu: str,
    memory: str,
    *,
    priority_class: str | None = "koord-prod",
    qos: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    labels = {}
    if priority_class:
        labels[keys.LABEL_PRIORITY_CLASS] = priority_class
    if qos:
        labels[keys.LABEL_QOS_CLASS] = qos
    return {
        "metadata": {"namespace": "default", "name": name, "labels": labels},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        },
        "status": {"phase": phase},
    }


def pod_metric(name: str, cpu: str, memory: str, priority: str = "koord-prod") -> dict[str, Any]:
    return {
        "namespace": "default",
        "name": name,
        "priority": priority,
        "podUsage": {"resources": {"cpu": cpu, "memory": memory}},
    }


def hp_pods() -> list[dict[str, Any]]:
    return [make_pod(f"prod-{i}", "10", "40Gi") for i in range(5)]


def hp_metrics() -> list[dict[str, Any]]:
    return [pod_metric(f"prod-{i}", "4", "30Gi") for i in range(5)]


def make_metric(
    *,
    pods: list[dict[str, Any]] | None = None,
    age: float = 60,
    system: tuple[str, str] | None = ("3", "12Gi"),
    node_usage: tuple[str, str] | None = ("30", "200Gi"),
    reclaimable: tuple[str, str] | None = ("10", "20Gi"),
    **extra: Any,
) -> dict[str, Any]:
    node_part: dict[str, Any] = {}
    if system:
        node_part["systemUsage"] = {"resources": {"cpu": system[0], "memory": system[1]}}
    if node_usage:
        node_part["nodeUsage"] = {"resources": {"cpu": node_usage[0], "memory": node_usage[1]}}
    status: dict[str, Any] = {
        "updateTime": stamp(age),
        "nodeMetric": node_part,
        "podsMetric": hp_metrics() if pods is None else pods,
        **extra,
    }
    if reclaimable:
        status["prodReclaimableMetric"] = {
            "resource": {"resources": {"cpu": reclaimable[0], "memory": reclaimable[1]}}
        }
    return {"metadata": {"name": "node-1"}, "status": status}


def run(
    strategy: ColocationStrategy = ON,
    *,
    node: dict[str, Any] | None = None,
    metric: dict[str, Any] | None = None,
    pods: list[dict[str, Any]] | None = None,
) -> NodeResourceResult:
    return calculate(
        node or make_node(),
        make_metric() if metric is None else metric,
        hp_pods() if pods is None else pods,
        strategy,
        NOW,
    )


# -- batch cases -------------------------------------------------------------------------------


def be_pods(usage_cpu: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pods = [*hp_pods(), make_pod("be-0", "0", "0", priority_class=None, qos="BE")]
    return pods, [*hp_metrics(), pod_metric("be-0", usage_cpu, "8Gi", priority="koord-batch")]


@pytest.mark.parametrize(
    ("strategy", "node", "metric", "pods", "expected"),
    [
        pytest.param(
            ON, None, None, None, {"cpu": "37000", "memory": "98Gi"}, id="c1-usage-policy"
        ),
        pytest.param(
            dataclasses.replace(ON, memory_calculate_policy="request"),
            None,
            None,
            None,
            {"memory": "50Gi"},
            id="c2-memory-request-policy-uses-reserved",
        ),
        pytest.param(
            dataclasses.replace(
                ON,
                cpu_calculate_policy="maxUsageRequest",
                memory_calculate_policy="maxUsageRequest",
            ),
            None,
            None,
            None,
            {"cpu": "7000", "memory": "48Gi"},
            id="c3-max-usage-request-policy",
        ),
        pytest.param(
            dataclasses.replace(ON, batch_cpu_threshold_percent=30),
            None,
            None,
            None,
            {"cpu": "30000", "memory": "98Gi"},
            id="c4-batch-cpu-threshold-caps",
        ),
        pytest.param(
            ON,
            None,
            make_metric(pods=be_pods("1")[1]),
            be_pods("1")[0],
            {"cpu": "37000", "memory": "98Gi"},
            id="c5-be-usage-low",
        ),
        pytest.param(
            ON,
            None,
            make_metric(pods=be_pods("30")[1]),
            be_pods("30")[0],
            {"cpu": "37000", "memory": "98Gi"},
            id="c5-be-usage-high-same-result",
        ),
        pytest.param(
            ON,
            None,
            make_metric(pods=[*hp_metrics(), pod_metric("gone", "5", "10Gi")]),
            None,
            {"cpu": "32000", "memory": "88Gi"},
            id="c5-dangling-prod-metric-adds-usage",
        ),
        pytest.param(
            ON,
            None,
            make_metric(pods=[*hp_metrics(), pod_metric("gone", "5", "10Gi", "koord-batch")]),
            None,
            {"cpu": "37000", "memory": "98Gi"},
            id="c5-dangling-batch-metric-ignored",
        ),
        pytest.param(
            ON,
            None,
            make_metric(system=("80", "300Gi")),
            None,
            {"cpu": "0", "memory": "0"},
            id="c6-never-negative",
        ),
        pytest.param(
            ON,
            make_node(labels={"node.koordinator.sh/cpu-reclaim-ratio": "0.5"}),
            None,
            None,
            {"cpu": "27000"},
            id="c10-label-reclaim-ratio",
        ),
        pytest.param(
            ON,
            make_node(annotations={keys.ANNOTATION_CPU_NORMALIZATION_RATIO: "1.2"}),
            None,
            None,
            {"cpu": "44400", "memory": "98Gi"},
            id="c11-cpu-normalization-amplifies",
        ),
        # A margin of 29 %: float64 makes it 28999m of 100 cores and 116Gi - 1 byte of 400Gi
        # (MultiplyMilliQuant, MultiplyQuant), so batch is 1m and 1 byte more than exact
        # arithmetic gives: c1 + (default margin - 29 %) of capacity + 1.
        pytest.param(
            dataclasses.replace(
                ON, cpu_reclaim_threshold_percent=71, memory_reclaim_threshold_percent=71
            ),
            None,
            None,
            None,
            {"cpu": "48001", "memory": str(122 * 2**30 + 1)},
            id="c12-margin-truncated-in-float64-as-koordinator",
        ),
    ],
)
def test_part_c_batch_cases(
    strategy: ColocationStrategy,
    node: dict[str, Any] | None,
    metric: dict[str, Any] | None,
    pods: list[dict[str, Any]] | None,
    expected: dict[str, str],
) -> None:
    strategy = strategy_for_node(ColocationConfig(strategy), node or make_node())
    result = run(strategy, node=node, metric=metric, pods=pods)
    quantities = result.quantities
    for resource, quantity in expected.items():
        assert quantities[f"kubernetes.io/batch-{resource}"] == quantity
    assert result.reason == ""


@pytest.mark.parametrize(
    ("metric", "reason"),
    [
        pytest.param(
            make_metric(age=16 * 60), "more than degradeTimeMinutes 15", id="c7-16-min-old"
        ),
        pytest.param(None, "NodeMetric not found", id="missing-node-metric"),
        pytest.param({"status": {"nodeMetric": {}}}, "no status.updateTime", id="no-update-time"),
    ],
)
def test_stale_or_missing_metric_removes_batch_and_mid(
    metric: dict[str, Any] | None, reason: str
) -> None:
    result = calculate(make_node(), metric, hp_pods(), ON, NOW)
    assert result.quantities == dict.fromkeys(MANAGED_RESOURCES)
    assert reason in result.reason
    assert result.reason.startswith("degraded")
    patch = status_patch(make_node(extended={keys.BATCH_CPU: "37000"}), result)
    assert patch["status"]["allocatable"] == dict.fromkeys(MANAGED_RESOURCES)
    assert patch["status"]["capacity"] == dict.fromkeys(MANAGED_RESOURCES)


def test_fifteen_minutes_old_is_still_fresh() -> None:
    assert run(metric=make_metric(age=15 * 60)).quantities[keys.BATCH_CPU] == "37000"


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param(ColocationStrategy(), id="c8-cluster-disabled"),
        pytest.param(dataclasses.replace(ON, enable=False), id="c8-node-disabled"),
    ],
)
def test_disabled_removes_every_key(strategy: ColocationStrategy) -> None:
    result = run(strategy)
    assert result.quantities == dict.fromkeys(MANAGED_RESOURCES)
    assert "DisableInConfig" in result.reason
    assert all("DisableInConfig" in o.explanation for o in result.resources.values())


def test_node_disabled_by_annotation_strategy() -> None:
    node = make_node(annotations={"node.koordinator.sh/colocation-strategy": '{"enable": false}'})
    strategy = strategy_for_node(ColocationConfig(ON), node)
    assert "DisableInConfig" in run(strategy, node=node).reason


# -- mid cases ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "metric", "expected"),
    [
        pytest.param(ON, make_metric(), "10000", id="dynamic-prod-reclaimable-10-cores"),
        pytest.param(
            ON, make_metric(reclaimable=None), "0", id="missing-prod-reclaimable-written-as-0"
        ),
        pytest.param(
            dataclasses.replace(
                ON,
                mid_reclaim_mode="static",
                mid_static_cpu_reserved_percent=20,
                mid_cpu_threshold_percent=15,
            ),
            make_metric(),
            "15000",
            id="static-20-reserved-15-threshold",
        ),
        pytest.param(
            dataclasses.replace(ON, mid_reclaim_mode="static", mid_static_cpu_reserved_percent=20),
            make_metric(),
            "20000",
            id="static-20-reserved-default-threshold",
        ),
        pytest.param(
            ON, make_metric(node_usage=("95", "390Gi")), "5000", id="dynamic-limited-by-unused"
        ),
        pytest.param(
            ON, make_metric(node_usage=None), "0", id="dynamic-no-node-usage-counts-none-unused"
        ),
        pytest.param(
            dataclasses.replace(ON, mid_unallocated_percent=50),
            make_metric(),
            "33500",  # 10 + (100 - max(2, 3) - 50) * 50% = 10 + 23.5
            id="dynamic-plus-unallocated-share",
        ),
        pytest.param(
            dataclasses.replace(ON, mid_cpu_threshold_percent=5),
            make_metric(),
            "5000",
            id="dynamic-capped-by-threshold",
        ),
    ],
)
def test_part_c_mid_cases(
    strategy: ColocationStrategy, metric: dict[str, Any], expected: str
) -> None:
    result = run(strategy, metric=metric)
    assert result.quantities[keys.MID_CPU] == expected
    assert result.resources[keys.MID_CPU].explanation.startswith(f"{keys.MID_CPU} {expected} =")


def test_mid_memory_dynamic() -> None:
    assert run().quantities[keys.MID_MEMORY] == "20Gi"


def test_mid_skips_mid_pods_in_unallocated() -> None:
    pods = [*hp_pods(), make_pod("mid-0", "20", "1Gi", priority_class="koord-mid")]
    strategy = dataclasses.replace(ON, mid_unallocated_percent=100)
    result = run(strategy, pods=pods)
    # 10 reclaimable + (100 - 3 - 50) unallocated, the mid pod's 20 cores not subtracted
    assert result.quantities[keys.MID_CPU] == "57000"


# -- pod accounting ----------------------------------------------------------------------------


def test_hp_pod_without_metric_counts_its_request_in_every_policy() -> None:
    pods = [*hp_pods(), make_pod("new", "6", "20Gi")]
    usage = run(pods=pods)
    assert usage.quantities[keys.BATCH_CPU] == "31000"  # 37 - 6
    assert "6 requested by pods without metrics" in usage.resources[keys.BATCH_CPU].explanation
    max_policy = dataclasses.replace(
        ON, cpu_calculate_policy="maxUsageRequest", memory_calculate_policy="maxUsageRequest"
    )
    result = run(max_policy, pods=pods)
    assert result.quantities[keys.BATCH_CPU] == "1000"  # 7 - 6: Koordinator would say 7
    assert result.quantities[keys.BATCH_MEMORY] == "28Gi"  # 48 - 20


def test_lse_pod_cpu_counts_at_request_memory_at_usage() -> None:
    pods = [*hp_pods()[:4], make_pod("prod-4", "10", "40Gi", qos="LSE")]
    result = run(pods=pods)
    # HP used cpu: 4 * 4 + 10 (request) = 26 → 100 - 40 - 3 - 26
    assert result.quantities[keys.BATCH_CPU] == "31000"
    assert result.quantities[keys.BATCH_MEMORY] == "98Gi"


def test_batch_and_free_pods_are_not_high_priority() -> None:
    pods = [
        *hp_pods(),
        make_pod("b", "30", "100Gi", priority_class="koord-batch"),
        make_pod("f", "30", "100Gi", priority_class="koord-free"),
    ]
    metrics = [*hp_metrics(), pod_metric("b", "20", "90Gi"), pod_metric("f", "20", "90Gi")]
    result = run(pods=pods, metric=make_metric(pods=metrics))
    assert result.quantities[keys.BATCH_CPU] == "37000"


def test_finished_pods_do_not_count_but_their_metrics_do() -> None:
    pods = [*hp_pods(), make_pod("done", "30", "100Gi", phase="Succeeded")]
    assert run(pods=pods).quantities[keys.BATCH_CPU] == "37000"
    metrics = [*hp_metrics(), pod_metric("done", "1", "1Gi")]
    assert run(pods=pods, metric=make_metric(pods=metrics)).quantities[keys.BATCH_CPU] == "36000"


def test_pending_pod_counts() -> None:
    pods = [*hp_pods(), make_pod("pending", "2", "1Gi", phase="Pending")]
    assert run(pods=pods).quantities[keys.BATCH_CPU] == "35000"


def test_host_applications_above_batch_count_as_system_usage() -> None:
    apps = [
        {
            "name": "agent",
            "priority": "koord-prod",
            "usage": {"resources": {"cpu": "2", "memory": "1Gi"}},
        },
        {
            "name": "yarn",
            "priority": "koord-batch",
            "usage": {"resources": {"cpu": "9", "memory": "9Gi"}},
        },
    ]
    result = run(metric=make_metric(hostApplicationMetric=apps))
    assert result.quantities[keys.BATCH_CPU] == "35000"  # system 3 + 2
    assert "incl. host applications 2" in result.resources[keys.BATCH_CPU].explanation


def test_reservation_annotation_raises_reserved() -> None:
    reservation = json.dumps({"resources": {"cpu": "8", "memory": "20Gi"}})
    node = make_node(annotations={keys.ANNOTATION_NODE_RESERVATION: reservation})
    result = run(node=node)
    assert result.quantities[keys.BATCH_CPU] == "32000"  # system max(3, 8)
    assert result.quantities[keys.BATCH_MEMORY] == "90Gi"  # system max(12, 20)


def test_reserved_cpus_count_whole_cores() -> None:
    node = make_node(annotations={keys.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs": "0-5"}'})
    assert run(node=node).quantities[keys.BATCH_CPU] == "34000"  # system max(3, 6)


def test_unreadable_reservation_annotation_is_ignored_with_a_note() -> None:
    node = make_node(annotations={keys.ANNOTATION_NODE_RESERVATION: "{not json"})
    result = run(node=node)
    assert result.quantities[keys.BATCH_CPU] == "37000"
    assert any(keys.ANNOTATION_NODE_RESERVATION in note for note in result.notes)


@pytest.mark.parametrize(
    "bad_pod",
    [
        pytest.param(make_pod("prod-4", "ten", "40Gi"), id="malformed-cpu"),
        pytest.param(make_pod("prod-4", "10", "-40Gi"), id="negative-memory"),
        pytest.param(
            {
                "metadata": {"namespace": "default", "name": "prod-4"},
                "spec": {"containers": [{"resources": {"requests": ["cpu"]}}]},
                "status": {"phase": "Running"},
            },
            id="requests-not-a-map",
        ),
    ],
)
def test_unreadable_pod_is_skipped_and_its_metric_still_counts(bad_pod: dict[str, Any]) -> None:
    pods = [*hp_pods()[:4], bad_pod]
    result = run(pods=pods)
    # prod-4's metric (4 cores / 30 GiB) now dangles at koord-prod: the amounts do not change
    assert result.quantities[keys.BATCH_CPU] == "37000"
    assert result.quantities[keys.BATCH_MEMORY] == "98Gi"
    assert any("default/prod-4" in note for note in result.notes)


# -- invalid NodeMetric ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "where"),
    [
        pytest.param(make_metric(system=("-3", "12Gi")), "systemUsage", id="negative-system"),
        pytest.param(
            make_metric(pods=[*hp_metrics()[:4], pod_metric("prod-4", "4", "-1")]),
            "podsMetric[4]",
            id="negative-pod-usage",
        ),
        pytest.param(
            make_metric(node_usage=("lots", "1Gi")), "nodeUsage", id="malformed-node-usage"
        ),
        pytest.param(
            make_metric(reclaimable=("-1", "0")), "prodReclaimable", id="negative-reclaimable"
        ),
        pytest.param(
            make_metric(system=None), "no nodeMetric.systemUsage", id="missing-system-usage"
        ),
        pytest.param(make_metric(system=("3", "")), "systemUsage", id="empty-memory-quantity"),
    ],
)
def test_unusable_node_metric_degrades_with_the_path(metric: dict[str, Any], where: str) -> None:
    result = run(metric=metric)
    assert result.quantities == dict.fromkeys(MANAGED_RESOURCES)
    assert result.reason.startswith("degraded")
    assert where in result.reason


def test_pod_metric_missing_a_resource_counts_the_request_for_it() -> None:
    metrics = [*hp_metrics()[:4]]
    metrics.append(
        {"namespace": "default", "name": "prod-4", "podUsage": {"resources": {"memory": "30Gi"}}}
    )
    result = run(metric=make_metric(pods=metrics))
    assert result.quantities[keys.BATCH_CPU] == "31000"  # prod-4 at its 10-core request
    assert result.quantities[keys.BATCH_MEMORY] == "98Gi"


def test_node_without_allocatable_counts_everything_reserved() -> None:
    node = make_node()
    del node["status"]["allocatable"]
    result = run(node=node)
    assert result.quantities[keys.BATCH_CPU] == "0"
    assert "reserved 100" in result.resources[keys.BATCH_CPU].explanation
    node["status"]["allocatable"] = {"cpu": "lots"}
    assert "status.allocatable" in run(node=node).reason


@pytest.mark.parametrize(
    "node",
    [
        pytest.param({"metadata": {"name": "n"}, "status": {}}, id="no-capacity"),
        pytest.param(
            {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "x", "memory": "1Gi"}}},
            id="malformed-capacity",
        ),
    ],
)
def test_node_without_capacity_removes_every_key(node: dict[str, Any]) -> None:
    result = run(node=node)
    assert result.quantities == dict.fromkeys(MANAGED_RESOURCES)
    assert "status.capacity" in result.reason


# -- adjustments -------------------------------------------------------------------------------


def third_party(cpu: str, memory: str, priority: str = "koord-batch") -> str:
    resources = {keys.BATCH_CPU: cpu, keys.BATCH_MEMORY: memory}
    return json.dumps(
        {"allocations": [{"name": "yarn", "priority": priority, "resources": resources}]}
    )


def test_third_party_batch_allocations_are_subtracted_and_origin_recorded() -> None:
    node = make_node(annotations={ANNOTATION_THIRD_PARTY_ALLOCATIONS: third_party("7000", "8Gi")})
    result = run(node=node)
    assert result.quantities[keys.BATCH_CPU] == "30000"
    assert result.quantities[keys.BATCH_MEMORY] == "90Gi"
    origin = json.loads(result.annotations[ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE])
    assert origin == {"resources": {keys.BATCH_CPU: "37000", keys.BATCH_MEMORY: "98Gi"}}
    assert "third-party batch allocations 7000" in result.resources[keys.BATCH_CPU].explanation


def test_third_party_allocations_floor_at_zero_and_ignore_other_priorities() -> None:
    node = make_node(annotations={ANNOTATION_THIRD_PARTY_ALLOCATIONS: third_party("99000", "1Ti")})
    assert run(node=node).quantities[keys.BATCH_CPU] == "0"
    node = make_node(
        annotations={ANNOTATION_THIRD_PARTY_ALLOCATIONS: third_party("7000", "8Gi", "koord-prod")}
    )
    assert run(node=node).quantities[keys.BATCH_CPU] == "37000"


def test_unreadable_third_party_allocations_remove_batch_only() -> None:
    node = make_node(annotations={ANNOTATION_THIRD_PARTY_ALLOCATIONS: "[1"})
    result = run(node=node)
    assert result.quantities[keys.BATCH_CPU] is None
    assert result.quantities[keys.BATCH_MEMORY] is None
    assert result.quantities[keys.MID_CPU] == "10000"
    assert "third-party" in result.reason


def test_normalization_rounds_up_and_shows_in_the_explanation() -> None:
    node = make_node(annotations={keys.ANNOTATION_CPU_NORMALIZATION_RATIO: "1.15"})
    result = run(node=node, metric=make_metric(system=("3.001", "12Gi")))
    # (100 - 40 - 3.001 - 20) = 36.999 cores = 36999 milli * 1.15 = 42548.85 → 42549
    assert result.quantities[keys.BATCH_CPU] == "42549"
    assert "36999 * cpu-normalization ratio 1.15" in result.resources[keys.BATCH_CPU].explanation


@pytest.mark.parametrize("ratio", ["0.8", "-1", "abc", "1000"])
def test_normalization_below_one_or_unreadable_leaves_batch_cpu(ratio: str) -> None:
    node = make_node(annotations={keys.ANNOTATION_CPU_NORMALIZATION_RATIO: ratio})
    assert run(node=node).quantities[keys.BATCH_CPU] == "37000"


def test_origin_annotation_keeps_other_resources_and_records_zero_on_reset() -> None:
    old = json.dumps({"resources": {"example.com/thing": "3", keys.BATCH_CPU: "1"}})
    node = make_node(annotations={ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE: old})
    result = run(ColocationStrategy(), node=node)
    origin = json.loads(result.annotations[ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE])
    assert origin["resources"] == {
        "example.com/thing": "3",
        keys.BATCH_CPU: "0",
        keys.BATCH_MEMORY: "0",
    }


def test_every_written_number_is_in_its_explanation() -> None:
    result = run()
    assert result.resources[keys.BATCH_CPU].explanation == (
        "kubernetes.io/batch-cpu 37000 = capacity 100 - margin 40 (60% reclaim)"
        " - system 3 (max of usage 3, reserved 2) - HP used 20 (usage policy)"
    )
    assert result.resources[keys.BATCH_MEMORY].explanation == (
        "kubernetes.io/batch-memory 98Gi = capacity 400Gi - margin 140Gi (65% reclaim)"
        " - system 12Gi (max of usage 12Gi, reserved 10Gi) - HP used 150Gi (usage policy)"
    )
    capped = run(dataclasses.replace(ON, batch_cpu_threshold_percent=30))
    assert capped.resources[keys.BATCH_CPU].explanation.startswith(
        "kubernetes.io/batch-cpu 30000 = min(30% of capacity = 30, capacity 100"
    )
    clamped = run(metric=make_metric(system=("80", "12Gi")))
    assert "max(0, capacity 100" in clamped.resources[keys.BATCH_CPU].explanation
    assert clamped.resources[keys.BATCH_CPU].explanation.endswith("= -40)")


# -- sync throttling ---------------------------------------------------------------------------


def current(
    cpu: str = "37000", memory: str = "98Gi", mid: tuple[str, str] = ("10000", "20Gi")
) -> dict[str, Any]:
    return make_node(
        extended={
            keys.BATCH_CPU: cpu,
            keys.BATCH_MEMORY: memory,
            keys.MID_CPU: mid[0],
            keys.MID_MEMORY: mid[1],
        }
    )


@pytest.mark.parametrize(
    ("node", "last_write", "expected", "why"),
    [
        pytest.param(current("35000"), NOW - 100, False, "within 0.1", id="c9-within-10pct-recent"),
        pytest.param(current("37k"), NOW - 100, False, "within", id="c9-server-canonical-form"),
        pytest.param(current("33000"), NOW - 100, True, "batch-cpu 33000", id="c9-more-than-10pct"),
        pytest.param(current("35000"), NOW - 301, True, "301s", id="c9-301s-since-write"),
        pytest.param(current("35000"), NOW - 300, False, "300s", id="c9-300s-is-not-more"),
        pytest.param(current("35000"), None, True, "not written", id="never-written"),
        pytest.param(make_node(), NOW - 10, True, "added", id="key-added"),
        pytest.param(current(memory="90Gi"), NOW - 10, False, "within", id="memory-within"),
        pytest.param(current(memory="80Gi"), NOW - 10, True, "batch-memory", id="memory-beyond"),
        pytest.param(current(cpu="0"), NOW - 10, True, "batch-cpu", id="old-zero-new-positive"),
        pytest.param(current(cpu="junk"), NOW - 10, True, "not a quantity", id="old-unreadable"),
    ],
)
def test_need_sync(
    node: dict[str, Any], last_write: float | None, expected: bool, why: str
) -> None:
    write, reason = need_sync(node, run(), last_write, NOW, ON)
    assert write is expected
    assert why in reason


def test_need_sync_on_removal_and_zero_to_zero() -> None:
    removed = run(ColocationStrategy())
    write, reason = need_sync(current(), removed, NOW - 10, NOW, ON)
    assert write
    assert "removed" in reason
    zero = run(metric=make_metric(system=("80", "300Gi")))
    write, _ = need_sync(current("0", "0"), zero, NOW - 10, NOW, ON)
    assert not write


# -- patch -------------------------------------------------------------------------------------


def test_status_patch_sets_both_maps_and_changed_annotations_only() -> None:
    result = run()
    patch = status_patch(current(), result)
    expected = {
        keys.BATCH_CPU: "37000",
        keys.BATCH_MEMORY: "98Gi",
        keys.MID_CPU: "10000",
        keys.MID_MEMORY: "20Gi",
    }
    assert patch["status"] == {"allocatable": expected, "capacity": expected}
    assert set(patch["metadata"]["annotations"]) == {ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE}
    node = current()
    node["metadata"]["annotations"] = dict(result.annotations)
    assert "metadata" not in status_patch(node, result)


def test_status_patch_applies_as_a_merge_patch() -> None:
    node = current()
    node["status"]["allocatable"]["example.com/other"] = "1"
    patch = status_patch(node, run(ColocationStrategy()))

    def merge(target: Any, change: Any) -> Any:  # RFC 7386
        if not isinstance(change, dict):
            return change
        out = dict(target) if isinstance(target, dict) else {}
        for key, value in change.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(out.get(key), value)
        return out

    merged = merge(node, patch)
    assert merged["status"]["allocatable"] == {
        "cpu": "98",
        "memory": "390Gi",
        "example.com/other": "1",
    }
    assert merged["status"]["capacity"] == {"cpu": "100", "memory": "400Gi"}


# -- the pod memo ------------------------------------------------------------------------------


def test_pod_memo_reuses_views_by_uid_and_resource_version() -> None:
    memo = PodMemo(limit=3)
    pod = make_pod("prod-0", "10", "40Gi")
    pod["metadata"].update(uid="u0", resourceVersion="7")
    assert read_pods([pod], [], memo) == [("default/prod-0", "koord-prod", False, 10000, 40 * GI)]
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "20"
    assert read_pods([changed], [], memo)[0][3] == 10000  # same version: the memo answers
    changed["metadata"]["resourceVersion"] = "8"
    assert read_pods([changed], [], memo)[0][3] == 20000
    finished = copy.deepcopy(changed)
    finished["status"]["phase"] = "Succeeded"
    assert read_pods([finished], [], memo) == []  # the phase is checked before the memo
    for version in ("9", "10", "11"):
        changed["metadata"]["resourceVersion"] = version
        read_pods([changed], [], memo)
    assert len(memo.views) <= 3
    result = calculate(make_node(), make_metric(), hp_pods(), ON, NOW, memo=PodMemo())
    assert result.quantities[keys.BATCH_CPU] == "37000"
