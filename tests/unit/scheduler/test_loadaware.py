"""LoadAwareScheduling: filter and score cases, the estimator, the assigned-pod accounting, expiry,
thresholds, the score and its 0..10 mapping, and the cache."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordapi import keys
from scheduler import loadaware
from scheduler.loadaware import (
    REASON_CPU_USAGE,
    REASON_MEMORY_USAGE,
    REASON_NODE_METRIC_EXPIRED,
    LoadAwareArgs,
    LoadCache,
    NodeLoad,
    estimate_pod,
    extender_score,
    filter_node,
    node_load,
    score_node,
)
from tests.unit.scheduler.objects import GI, MI, NOW, make_metric, make_node, make_pod

ARGS = LoadAwareArgs()


def running(name: str, cpu: str, memory: str = "1Gi", **kw: Any) -> dict[str, Any]:
    return make_pod(
        name,
        requests={"cpu": cpu, "memory": memory},
        limits={"cpu": cpu, "memory": memory},
        node="node-1",
        **kw,
    )


def decide(
    pod: dict[str, Any],
    metric: dict[str, Any] | None,
    assigned: list[tuple[dict[str, Any], float]] | None = None,
    node: dict[str, Any] | None = None,
    args: LoadAwareArgs = ARGS,
) -> tuple[str | None, int]:
    load = node_load(node or make_node(), metric, assigned or [], args)
    estimate = estimate_pod(pod, args)
    daemonset = loadaware.is_daemonset_pod(pod)
    return (
        filter_node(estimate, load, args, NOW, daemonset=daemonset),
        score_node(estimate, load, args, NOW),
    )


# -- filter and score --------------------------------------------------------------------------

BOUND_10S_AGO = [(running("bound", "4"), NOW - 10)]


@pytest.mark.parametrize(
    ("pod", "metric", "assigned", "reason", "score"),
    [
        pytest.param(
            make_pod(requests={"cpu": "2"}),
            make_metric(cpu="18", memory="32Gi"),
            BOUND_10S_AGO,
            REASON_CPU_USAGE,
            50,  # cpu (32000 - 23100) * 100 / 32000 = 27, memory 74: (27 + 74) / 2
            id="18-cores-used-plus-3400m-plus-1700m-is-72-percent",
        ),
        pytest.param(
            make_pod(requests={"cpu": "2"}),
            make_metric(cpu="18", memory="32Gi"),
            [],
            None,
            None,
            id="same-node-without-the-bound-pod-is-61-percent",
        ),
        pytest.param(
            make_pod(),
            make_metric(age=200),
            [],
            REASON_NODE_METRIC_EXPIRED,
            0,
            id="nodemetric-200s-old-is-expired",
        ),
        pytest.param(make_pod(), None, [], None, 0, id="no-nodemetric-passes-with-score-0"),
        pytest.param(
            make_pod(requests={"cpu": "30"}, owner_kind="DaemonSet"),
            make_metric(cpu="31"),
            [],
            None,
            None,
            id="daemonset-pod-on-a-full-node-passes",
        ),
        pytest.param(
            make_pod(owner_kind="DaemonSet"),
            make_metric(age=200),
            [],
            None,
            0,
            id="daemonset-pod-on-an-expired-node-passes",
        ),
    ],
)
def test_part_c_filter_cases(
    pod: dict[str, Any],
    metric: dict[str, Any] | None,
    assigned: list[tuple[dict[str, Any], float]],
    reason: str | None,
    score: int | None,
) -> None:
    got_reason, got_score = decide(pod, metric, assigned)
    assert got_reason == reason
    if score is not None:
        assert got_score == score


def test_part_c_estimates_are_3400m_and_1700m() -> None:
    assert estimate_pod(running("bound", "4", "1Gi"), ARGS)[0] == 3400
    assert estimate_pod(make_pod(requests={"cpu": "2"}), ARGS)[0] == 1700
    load = node_load(make_node(), make_metric(cpu="18"), BOUND_10S_AGO, ARGS)
    assert load.used[0] == 18000 + 3400


def test_part_c_score_example_is_62() -> None:
    # cpu 16 of 32 cores used (50), memory 32 of 128 GiB (75), weights 1/1 → (50+75)/2 = 62
    load = NodeLoad((32000, 128 * GI), (65, 95), _fresh_digest(), (16000, 32 * GI))
    assert score_node((0, 0), load, ARGS, NOW) == 62


def test_score_example_end_to_end_counts_the_incoming_estimate() -> None:
    pod = make_pod(requests={"cpu": "2", "memory": "4Gi"})  # estimate 1700m, 0.7 x 4 GiB
    memory_estimate = estimate_pod(pod, ARGS)[1]
    assert memory_estimate == round(4 * GI * 0.7)
    metric = make_metric(cpu="14300m", memory=str(32 * GI - memory_estimate))
    assert decide(pod, metric) == (None, 62)


def test_part_c_pod_without_requests_is_estimated_250m_and_200mi() -> None:
    assert estimate_pod(make_pod(), ARGS) == (250, 200 * MI)


def _fresh_digest() -> loadaware.MetricDigest:
    return loadaware.digest_node_metric(make_metric())


# -- the estimator -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "estimate"),
    [
        pytest.param(
            make_pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "4", "memory": "2Gi"}),
            (3400, round(2 * GI * 0.7)),
            id="limit-above-request-is-scaled",
        ),
        pytest.param(
            make_pod(requests={"cpu": "10m"}),
            (9, 200 * MI),  # 8.5 rounds half away from zero, as Go's math.Round
            id="rounds-half-away-from-zero",
        ),
        pytest.param(
            make_pod(limits={"cpu": "2"}),
            (1700, 200 * MI),
            id="limit-only-counts-as-the-request",
        ),
        pytest.param(
            make_pod(
                requests={keys.BATCH_CPU: "2000", keys.BATCH_MEMORY: "1Gi"},
                labels={keys.LABEL_PRIORITY_CLASS: "koord-batch"},
            ),
            (1700, round(GI * 0.7)),
            id="batch-pod-is-read-in-batch-resources",
        ),
        pytest.param(
            make_pod(requests={"cpu": "2"}, priority=5500),
            (250, 200 * MI),
            id="batch-pod-without-batch-requests-gets-the-defaults",
        ),
        pytest.param(
            make_pod(requests={"cpu": "2"}, priority=7500),
            (0, 0),
            id="mid-pod-without-mid-requests-estimates-0-as-koordinator",
        ),
        pytest.param(
            make_pod(requests={"cpu": "2"}, priority=3500),
            (0, 0),
            id="free-pod-estimates-0-as-koordinator",
        ),
    ],
)
def test_estimate_pod(pod: dict[str, Any], estimate: tuple[int, int]) -> None:
    assert estimate_pod(pod, ARGS) == estimate


def test_estimate_counts_init_containers_sidecars_and_overhead() -> None:
    pod = make_pod(requests={"cpu": "1"})
    pod["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "3"}}},  # runs beside the sidecar
    ]
    pod["spec"]["overhead"] = {"cpu": "1"}
    # max(1 + 1, 3 + 1) + 1 = 5 cores → 4250m
    assert estimate_pod(pod, ARGS)[0] == 4250


def test_estimate_refuses_a_malformed_quantity() -> None:
    with pytest.raises(loadaware.PodReadError, match="default/incoming"):
        estimate_pod(make_pod(requests={"cpu": "lots"}), ARGS)


# -- the assigned-pod accounting ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("assigned_ago", "reported_cpu", "added"),
    [
        pytest.param(10, None, 3400, id="assigned-after-report-without-usage-adds-its-estimate"),
        pytest.param(10, "1", 2400, id="assigned-after-report-with-usage-adds-the-difference"),
        pytest.param(80, "1", 2400, id="assigned-within-report-interval-before-it-counts"),
        pytest.param(100, "1", 0, id="assigned-before-the-interval-and-reported-adds-nothing"),
        pytest.param(3600, None, 3400, id="old-but-unreported-pod-adds-its-estimate"),
        pytest.param(10, "5", 0, id="usage-above-the-estimate-adds-nothing"),
    ],
)
def test_assigned_pods_add_what_the_nodemetric_may_miss(
    assigned_ago: float, reported_cpu: str | None, added: int
) -> None:
    # the NodeMetric reported 30 s ago with the default 60 s interval: the window starts 90 s ago
    pods = [("default/bound", reported_cpu, "1Gi")] if reported_cpu else []
    metric = make_metric(cpu="10", pods=pods)
    load = node_load(make_node(), metric, [(running("bound", "4"), NOW - assigned_ago)], ARGS)
    assert load.used[0] == 10000 + added


def test_report_interval_comes_from_the_nodemetric_spec() -> None:
    metric = make_metric(cpu="10", pods=[("default/bound", "1", "1Gi")], report_interval=300)
    load = node_load(make_node(), metric, [(running("bound", "4"), NOW - 200)], ARGS)
    assert load.used[0] == 10000 + 2400


def test_terminated_assigned_pod_adds_nothing() -> None:
    done = running("done", "4")
    done["status"]["phase"] = "Succeeded"
    load = node_load(make_node(), make_metric(cpu="10"), [(done, NOW - 10)], ARGS)
    assert load.used[0] == 10000


# -- filter details ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "reason"),
    [
        pytest.param("1290m", None, id="64.5-percent-rounds-to-65-and-passes"),
        pytest.param("1310m", REASON_CPU_USAGE, id="65.5-percent-rounds-to-66-and-fails"),
    ],
)
def test_usage_percent_is_rounded_half_up(used: str, reason: str | None) -> None:
    # the incoming pod estimates 0 cpu: a koord-free pod
    pod = make_pod(priority=3500)
    assert decide(pod, make_metric(cpu=used), node=make_node(cpu="2"))[0] == reason


def test_memory_threshold_is_95_percent() -> None:
    pod = make_pod(requests={"cpu": "100m", "memory": "10Gi"})  # 7 GiB estimated
    assert decide(pod, make_metric(cpu="1", memory="116Gi"))[0] == REASON_MEMORY_USAGE  # 96 %
    assert decide(pod, make_metric(cpu="1", memory="115Gi"))[0] is None  # 95.3 % rounds to 95
    assert decide(pod, make_metric(cpu="1", memory="110Gi"))[0] is None


@pytest.mark.parametrize(
    ("args", "reason", "score"),
    [
        pytest.param(ARGS, REASON_NODE_METRIC_EXPIRED, 0, id="code-defaults-filter-it"),
        pytest.param(
            LoadAwareArgs(filter_expired_node_metrics=False), None, 0, id="helm-chart-passes-it"
        ),
        pytest.param(
            LoadAwareArgs(enable_schedule_when_node_metrics_expired=True),
            None,
            0,
            id="enable-schedule-when-expired-passes-it",
        ),
        pytest.param(
            LoadAwareArgs(node_metric_expiration_seconds=300), None, 66, id="longer-expiration"
        ),
    ],
)
def test_expired_nodemetric(args: LoadAwareArgs, reason: str | None, score: int) -> None:
    assert decide(make_pod(), make_metric(cpu="13", age=200), args=args) == (reason, score)


def test_nodemetric_without_update_time_counts_as_expired() -> None:
    assert decide(make_pod(), make_metric(age=None))[0] == REASON_NODE_METRIC_EXPIRED


def test_expiry_is_inclusive_at_exactly_180_seconds() -> None:
    assert decide(make_pod(), make_metric(age=180))[0] == REASON_NODE_METRIC_EXPIRED
    assert decide(make_pod(), make_metric(age=179))[0] is None


def test_nodemetric_without_status_nodemetric_passes_with_score_0() -> None:
    metric = make_metric()
    del metric["status"]["nodeMetric"]
    assert decide(make_pod(), metric) == (None, 0)


def test_node_annotation_replaces_the_thresholds() -> None:
    custom = {keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: json.dumps({"usageThresholds": {"cpu": 90}})}
    node = make_node(annotations=custom)
    pod = make_pod(requests={"cpu": "2"})
    assert decide(pod, make_metric(cpu="25"), node=node)[0] is None  # 83 % < 90 %
    assert decide(pod, make_metric(cpu="28"), node=node)[0] == REASON_CPU_USAGE  # 93 %
    # memory is no longer checked: the annotation's map replaces the args' whole
    assert decide(pod, make_metric(cpu="1", memory="127Gi"), node=node)[0] is None


@pytest.mark.parametrize("text", ["{not json", '{"usageThresholds": {"cpu": "90"}}', "[]"])
def test_unreadable_threshold_annotation_keeps_the_args(text: str) -> None:
    node = make_node(annotations={keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: text})
    assert loadaware.node_thresholds(node, ARGS) == (65, 95)


def test_raw_allocatable_annotation_replaces_amplified_allocatable() -> None:
    raw = json.dumps({"cpu": "16"})
    node = make_node(cpu="32", annotations={keys.ANNOTATION_NODE_RAW_ALLOCATABLE: raw})
    assert loadaware.node_allocatable(node) == (16000, 128 * GI)
    assert decide(make_pod(requests={"cpu": "2"}), make_metric(cpu="10"), node=node)[0] == (
        REASON_CPU_USAGE
    )


def test_thresholds_off_pass_everything() -> None:
    args = LoadAwareArgs(cpu_threshold=0, memory_threshold=0)
    assert decide(make_pod(), make_metric(cpu="40", age=500), args=args)[0] is None


# -- malformed NodeMetrics ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda m: m["status"].update(updateTime="yesterday"), id="bad-update-time"),
        pytest.param(
            lambda m: m["status"]["nodeMetric"]["nodeUsage"]["resources"].update(cpu="many"),
            id="bad-node-usage",
        ),
        pytest.param(lambda m: m["status"].update(podsMetric=[{"podUsage": 5}]), id="bad-pods"),
        pytest.param(lambda m: m.update(status="gone"), id="status-not-an-object"),
    ],
)
def test_malformed_nodemetric_counts_as_none_and_says_why(mutate: Any) -> None:
    metric = make_metric(cpu="31")
    mutate(metric)
    load = node_load(make_node(), metric, [], ARGS)
    assert load.metric is None
    assert load.note.startswith("NodeMetric ignored: ")
    assert decide(make_pod(requests={"cpu": "8"}), metric) == (None, 0)


# -- the score ---------------------------------------------------------------------------------


def test_score_weights_and_dominant_resource() -> None:
    load = NodeLoad((32000, 128 * GI), (65, 95), _fresh_digest(), (16000, 32 * GI))
    assert score_node((0, 0), load, LoadAwareArgs(cpu_weight=3, memory_weight=1), NOW) == 56
    # dominant weight 2 adds min(50, 75) twice: (50 + 75 + 2 x 50) / 4 = 56
    assert score_node((0, 0), load, LoadAwareArgs(dominant_resource_weight=2), NOW) == 56
    off = LoadAwareArgs(cpu_weight=0, memory_weight=0)
    assert score_node((0, 0), load, off, NOW) == 0


def test_score_is_0_when_overcommitted() -> None:
    load = NodeLoad((32000, 128 * GI), (65, 95), _fresh_digest(), (40000, 256 * GI))
    assert score_node((0, 0), load, ARGS, NOW) == 0


@pytest.mark.parametrize(
    ("score", "mapped"),
    [(0, 0), (4, 0), (5, 1), (62, 6), (65, 7), (94, 9), (95, 10), (100, 10)],
)
def test_extender_score_rounds_half_up_to_0_10(score: int, mapped: int) -> None:
    assert extender_score(score) == mapped


# -- args --------------------------------------------------------------------------------------


def test_args_from_koordinator_apply_its_defaulting() -> None:
    assert LoadAwareArgs.from_koordinator({}) == ARGS
    helm = LoadAwareArgs.from_koordinator(
        {"filterExpiredNodeMetrics": False, "nodeMetricExpirationSeconds": 300}
    )
    assert (helm.filter_expired_node_metrics, helm.node_metric_expiration_seconds) == (False, 300)
    partial = LoadAwareArgs.from_koordinator(
        {"usageThresholds": {"cpu": 70}, "estimatedScalingFactors": {"memory": 80}}
    )
    assert (partial.cpu_threshold, partial.memory_threshold) == (70, 0)
    assert (partial.cpu_scaling_factor, partial.memory_scaling_factor) == (85, 80)
    dominant_only = LoadAwareArgs.from_koordinator({"dominantResourceWeight": 1})
    assert (dominant_only.cpu_weight, dominant_only.memory_weight) == (0, 0)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"usageThresholds": {"nvidia.com/gpu": 50}}, id="unsupported-resource"),
        pytest.param({"usageThresholds": {"cpu": 101}}, id="threshold-above-100"),
        pytest.param({"estimatedScalingFactors": {"cpu": 0}}, id="zero-scaling-factor"),
        pytest.param({"nodeMetricExpirationSeconds": 0}, id="zero-expiration"),
        pytest.param({"resourceWeights": {"cpu": 1.5}}, id="fractional-weight"),
    ],
)
def test_args_refuse_what_koordinator_refuses(config: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LoadAwareArgs.from_koordinator(config)


# -- the cache ---------------------------------------------------------------------------------


def test_cache_reuses_a_load_until_an_input_changes() -> None:
    cache = LoadCache()
    node, metric = make_node(), make_metric(cpu="10")
    assigned = [(running("a", "4"), NOW - 10)]
    first = cache.node_load("node-1", node, metric, assigned, ARGS)
    assert cache.node_load("node-1", node, metric, list(assigned), ARGS) is first
    assigned.append((running("b", "2"), NOW - 5))
    grown = cache.node_load("node-1", node, metric, assigned, ARGS)
    assert grown.used[0] == 10000 + 3400 + 1700
    newer = make_metric(cpu="12")
    assert cache.node_load("node-1", node, newer, assigned, ARGS).used[0] == 12000 + 5100


def test_cache_treats_a_redecoded_node_with_the_same_version_as_the_same() -> None:
    cache = LoadCache()
    node = make_node()
    node["metadata"].update(uid="n1", resourceVersion="7")
    metric = make_metric()
    first = cache.node_load("node-1", node, metric, [], ARGS)
    copy = json.loads(json.dumps(node))
    assert cache.node_load("node-1", copy, metric, [], ARGS) is first
    changed = json.loads(json.dumps(node))
    changed["metadata"]["resourceVersion"] = "8"
    changed["status"]["allocatable"]["cpu"] = "64"
    assert cache.node_load("node-1", changed, metric, [], ARGS).allocatable[0] == 64000


def test_cache_matches_the_uncached_function() -> None:
    cache = LoadCache()
    metric = make_metric(cpu="10", pods=[("default/a", "1", "1Gi")])
    assigned = [(running("a", "4"), NOW - 10), (running("b", "1"), NOW - 1000)]
    assert cache.node_load("node-1", make_node(), metric, assigned, ARGS) == node_load(
        make_node(), metric, assigned, ARGS
    )


# -- the precomputed forms agree with Koordinator's formulas -----------------------------------


def go_round(value: float) -> int:
    whole = int(value)
    return whole + 1 if value - whole >= 0.5 else whole


@given(
    used=st.integers(0, 1 << 42),
    total=st.integers(1, 1 << 42),
    threshold=st.integers(1, 100),
    estimate=st.integers(0, 1 << 40),
)
def test_filter_matches_koordinator_rounding(
    used: int, total: int, threshold: int, estimate: int
) -> None:
    load = NodeLoad((total, total), (threshold, 0), _fresh_digest(), (used, 0))
    over = go_round((used + estimate) / total * 100) > threshold  # filterNodeUsage
    reason = filter_node((estimate, 0), load, ARGS, NOW)
    assert reason == (REASON_CPU_USAGE if over else None)


@given(
    used=st.tuples(st.integers(0, 1 << 40), st.integers(0, 1 << 44)),
    total=st.tuples(st.integers(0, 1 << 40), st.integers(0, 1 << 44)),
    estimate=st.tuples(st.integers(0, 1 << 36), st.integers(0, 1 << 40)),
    weights=st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100)),
)
def test_score_matches_koordinator_scorer(
    used: tuple[int, int],
    total: tuple[int, int],
    estimate: tuple[int, int],
    weights: tuple[int, int, int],
) -> None:
    def least_used(u: int, capacity: int) -> int:
        return 0 if capacity == 0 or u > capacity else (capacity - u) * 100 // capacity

    cpu_weight, memory_weight, dominant = weights
    args = LoadAwareArgs(
        cpu_weight=cpu_weight, memory_weight=memory_weight, dominant_resource_weight=dominant
    )
    scores = [least_used(used[i] + estimate[i], total[i]) for i in (0, 1)]
    weight_sum = cpu_weight + memory_weight + dominant
    expected = 0
    if weight_sum:  # loadAwareSchedulingScorer
        total_score = cpu_weight * scores[0] + memory_weight * scores[1]
        if dominant:
            total_score += dominant * min(100, *scores)
        expected = total_score // weight_sum
    load = NodeLoad(total, (65, 95), _fresh_digest(), used)
    assert score_node(estimate, load, args, NOW) == expected
    assert score_node(estimate, load, args, NOW) == expected  # again, from the memo


def test_a_remembered_score_follows_the_weights() -> None:
    load = NodeLoad((32000, 128 * GI), (65, 95), _fresh_digest(), (16000, 32 * GI))
    assert score_node((0, 0), load, ARGS, NOW) == 62
    assert score_node((0, 0), load, LoadAwareArgs(cpu_weight=3, memory_weight=1), NOW) == 56


def test_without_expiry_filtering_a_never_reported_nodemetric_is_judged_on_usage() -> None:
    args = LoadAwareArgs(filter_expired_node_metrics=False)
    assert decide(make_pod(), make_metric(cpu="1", age=None), args=args) == (None, 0)
    assert decide(make_pod(), make_metric(cpu="31", age=None), args=args)[0] == REASON_CPU_USAGE


@pytest.mark.parametrize("cpu", ["-4", "0", "nonsense"])
def test_unusable_allocatable_is_neither_filtered_nor_scored(cpu: str) -> None:
    node = make_node(cpu=cpu)
    assert loadaware.node_allocatable(node)[0] == 0
    reason, _ = decide(make_pod(requests={"cpu": "2"}), make_metric(cpu="31"), node=node)
    assert reason is None


def test_negative_node_usage_makes_the_nodemetric_unreadable() -> None:
    load = node_load(make_node(), make_metric(cpu="-3"), [], ARGS)
    assert load.metric is None
    assert "negative usage" in load.note
