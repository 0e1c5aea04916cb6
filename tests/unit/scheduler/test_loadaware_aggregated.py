"""LoadAwareScheduling's aggregated (percentile) usage and prod thresholds: table cases derived
from Koordinator v1.8.0's load_aware_test.go ("filter exceed p95 cpu usage", "filter prod cpu
usage", "score load node with p95 but have not reported usage", ...) with our own numbers, the
fallbacks when the NodeMetric lacks an aggregate, the node annotation, and the args'
validation with Koordinator's messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.nodemetric import MetricError
from scheduler import cli, loadaware, schedulerconfig
from scheduler.extender import ExtenderConfig, StaticClusterView, filter, prioritize
from scheduler.loadaware import (
    REASON_CPU_AGGREGATED_USAGE,
    REASON_CPU_USAGE,
    REASON_MEMORY_AGGREGATED_USAGE,
    AggregatedArgs,
    LoadAwareArgs,
    estimate_pod,
    filter_node,
    is_prod_pod,
    node_load,
    score_node,
)
from tests.unit.charts import helm
from tests.unit.scheduler.objects import GI, NOW, make_metric, make_node, make_pod

# 40 cores, 160 GiB: percentages below are of these
NODE = make_node(cpu="40", memory="160Gi")
BATCH_PRIORITY, PROD_PRIORITY = 5500, 9100


def be_pod(name: str = "be", cpu: int = 2000, memory: str = "4Gi", **kw: Any) -> dict[str, Any]:
    """A koord-batch pod: estimated from batch-cpu (milli-cores) and batch-memory, 85 % and
    70 % by default; 2000 -> 1700m."""
    res = {keys.BATCH_CPU: str(cpu), keys.BATCH_MEMORY: memory}
    return make_pod(name, requests=res, limits=res, priority=BATCH_PRIORITY, **kw)


def prod_pod(name: str = "prod", cpu: str = "6", memory: str = "8Gi", **kw: Any) -> dict[str, Any]:
    res = {"cpu": cpu, "memory": memory}
    return make_pod(name, requests=res, limits=res, priority=PROD_PRIORITY, **kw)


def aggregated_metric(
    *,
    cpu: str = "6",
    memory: str = "20Gi",
    aggregates: dict[str, dict[str, dict[str, str]]] | None = None,
    pods: list[tuple[str, str, str, str]] | None = None,
    system: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A fresh NodeMetric: latest usage ``cpu``/``memory``, aggregatedNodeUsages by duration
    ("10m0s" -> {"p95": {"cpu": "21"}}), podsMetric as (namespace/name, priority, cpu,
    memory)."""
    metric = make_metric(cpu=cpu, memory=memory, age=20, report_interval=60)
    node_part = metric["status"]["nodeMetric"]
    node_part["aggregatedNodeUsages"] = [
        {"duration": duration, "usage": {t: {"resources": r} for t, r in usage.items()}}
        for duration, usage in (aggregates or {}).items()
    ]
    if system is not None:
        node_part["systemUsage"] = {"resources": system}
    metric["status"]["podsMetric"] = [
        {
            "namespace": key.split("/")[0],
            "name": key.split("/")[1],
            "priority": priority,
            "podUsage": {"resources": {"cpu": c, "memory": m}},
        }
        for key, priority, c, m in pods or []
    ]
    return metric


# koordlet's shape: several durations, each with several types; p95 over 10m is 21 cores
AGGREGATES = {
    "5m0s": {"p95": {"cpu": "9", "memory": "22Gi"}, "p99": {"cpu": "30", "memory": "40Gi"}},
    "10m0s": {"p95": {"cpu": "21", "memory": "30Gi"}, "p50": {"cpu": "4", "memory": "21Gi"}},
    "30m0s": {"p95": {"cpu": "35", "memory": "31Gi"}},
}


def p95(duration: str = "10m", cpu: int = 57, **more: Any) -> LoadAwareArgs:
    config = {"usageThresholds": {"cpu": cpu}, "usageAggregationType": "p95"}
    if duration:
        config["usageAggregatedDuration"] = duration
    return LoadAwareArgs.from_koordinator({"aggregated": config, **more})


def decide(
    pod: dict[str, Any],
    metric: dict[str, Any],
    args: LoadAwareArgs,
    assigned: list[tuple[dict[str, Any], float]] | None = None,
    node: dict[str, Any] = NODE,
) -> tuple[str | None, int]:
    load = node_load(node, metric, assigned or [], args)
    estimate = estimate_pod(pod, args)
    prod = is_prod_pod(pod)
    return (
        filter_node(estimate, load, args, NOW, prod=prod),
        score_node(estimate, load, args, NOW, prod=prod),
    )


# -- the aggregated filter ---------------------------------------------------------------------

# A prod pod assigned 10 minutes ago (its usage reported) requesting 26 cores: estimated 22.1
OLD_PROD = [(prod_pod("old", cpu="26", memory="2Gi", node="node-1"), NOW - 600)]


@pytest.mark.parametrize(
    ("args", "metric", "assigned", "reason"),
    [
        pytest.param(
            p95(),
            aggregated_metric(aggregates=AGGREGATES),
            None,
            None,
            id="p95-10m-21-cores-plus-1.7-is-56.75%-rounds-to-57-passes",
        ),
        pytest.param(
            p95(),
            aggregated_metric(
                aggregates={**AGGREGATES, "10m0s": {"p95": {"cpu": "21400m", "memory": "1Gi"}}}
            ),
            None,
            REASON_CPU_AGGREGATED_USAGE,
            id="p95-10m-21.4-cores-plus-1.7-is-57.75%-rounds-to-58-filtered",
        ),
        pytest.param(
            p95(duration=""),
            aggregated_metric(aggregates=AGGREGATES),
            None,
            REASON_CPU_AGGREGATED_USAGE,
            id="no-duration-takes-the-longest-30m-p95-35-cores",
        ),
        pytest.param(
            p95(duration="5m"),
            aggregated_metric(cpu="30", aggregates=AGGREGATES),
            None,
            None,
            id="latest-usage-75%-is-not-checked-p95-5m-9-cores-passes",
        ),
        pytest.param(
            p95(duration="20m"),
            aggregated_metric(cpu="39", aggregates=AGGREGATES),
            None,
            None,
            id="no-20m-aggregate-falls-back-to-estimates-only-the-incoming-1.7",
        ),
        pytest.param(
            p95(duration="20m"),
            aggregated_metric(cpu="1", aggregates=AGGREGATES),
            OLD_PROD,
            REASON_CPU_AGGREGATED_USAGE,
            id="no-20m-aggregate-estimates-22.1-plus-1.7-is-59.5%-filtered",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator(
                {"aggregated": {"usageThresholds": {"cpu": 57}, "usageAggregationType": "p90"}}
            ),
            aggregated_metric(cpu="21", aggregates=AGGREGATES),
            None,
            None,
            id="no-p90-at-all-and-no-duration-reads-the-latest-usage-21",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator(
                {"aggregated": {"usageThresholds": {"cpu": 57}, "usageAggregationType": "p90"}}
            ),
            aggregated_metric(cpu="22", aggregates=AGGREGATES),
            None,
            REASON_CPU_AGGREGATED_USAGE,
            id="no-p90-at-all-and-no-duration-reads-the-latest-usage-22",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator(
                {"aggregated": {"usageThresholds": {"cpu": 57}, "usageAggregatedDuration": "5m"}}
            ),
            aggregated_metric(cpu="27", aggregates=AGGREGATES),
            None,
            REASON_CPU_USAGE,
            id="no-type-no-aggregated-filter-the-latest-usage-against-65%",
        ),
        pytest.param(
            p95(cpu=0, usageThresholds={"cpu": 5}),
            aggregated_metric(cpu="39", aggregates=AGGREGATES),
            None,
            None,
            id="aggregated-thresholds-named-but-0-switch-the-filter-off",
        ),
    ],
)
def test_aggregated_filter(
    args: LoadAwareArgs,
    metric: dict[str, Any],
    assigned: list[tuple[dict[str, Any], float]] | None,
    reason: str | None,
) -> None:
    assert decide(be_pod(), metric, args, assigned)[0] == reason


@pytest.mark.parametrize(
    ("memory", "reason"),
    [("32Gi", None), ("34Gi", REASON_MEMORY_AGGREGATED_USAGE)],
)
def test_aggregated_memory_on_p50_over_600s(memory: str, reason: str | None) -> None:
    """p50 over 10m is 21 GiB of 160: with 22.4 GiB estimated (32Gi at 70 %) 27.1 % rounds
    to 27, not over 27; with 23.8 GiB, 28 %."""
    args = LoadAwareArgs.from_koordinator(
        {
            "aggregated": {
                "usageThresholds": {"memory": 27},
                "usageAggregationType": "p50",
                "usageAggregatedDuration": "600s",
            }
        }
    )
    metric = aggregated_metric(aggregates=AGGREGATES)
    assert decide(be_pod(memory=memory), metric, args)[0] == reason


def test_a_node_annotation_sets_its_own_aggregated_thresholds() -> None:
    """Koordinator's "filter exceed p95 cpu usage by custom usage": the node's annotation
    replaces the args' aggregated profile; its duration does not come from the args."""
    custom = {
        "aggregatedUsage": {
            "usageThresholds": {"cpu": 80},
            "usageAggregationType": "p99",
            "usageAggregatedDuration": "5m0s",
        }
    }
    node = make_node(
        cpu="40",
        memory="160Gi",
        annotations={keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: json.dumps(custom)},
    )
    metric = aggregated_metric(aggregates=AGGREGATES)
    args = p95(duration="30m")  # 35 cores of p95 over 30m would be filtered
    assert decide(be_pod(), metric, args)[0] == REASON_CPU_AGGREGATED_USAGE  # no annotation
    assert decide(be_pod(), metric, args, node=node)[0] is None  # p99 5m: 31.7 of 40 < 80 %
    custom["aggregatedUsage"]["usageThresholds"] = {"cpu": 78}  # 79.25 % -> 79 > 78
    node["metadata"]["annotations"][keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS] = json.dumps(custom)
    assert decide(be_pod(), metric, args, node=node)[0] == REASON_CPU_AGGREGATED_USAGE
    # without a type the annotation's aggregatedUsage is dropped: the args' apply
    del custom["aggregatedUsage"]["usageAggregationType"]
    node["metadata"]["annotations"][keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS] = json.dumps(custom)
    profile = loadaware.node_threshold_profile(node, args)
    assert profile.aggregation == ("p95", 1800.0)


# -- prod thresholds ---------------------------------------------------------------------------

PROD_ARGS = LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 43}})
# 36 of 40 cores used (90 %, over the 65 % default), of which the prod pod uses 10
BUSY = aggregated_metric(
    cpu="36",
    memory="50Gi",
    pods=[
        ("default/web", "koord-prod", "10", "6Gi"),
        ("default/batch", "koord-batch", "25", "30Gi"),
        ("default/misfiled", "koord-batch", "3", "1Gi"),
    ],
    system={"cpu": "1500m", "memory": "3Gi"},
)
WEB_OLD = (prod_pod("web", cpu="12", node="node-1"), NOW - 600)  # estimated 10.2 cores
BATCH_OLD = (be_pod("batch", cpu=30000, node="node-1"), NOW - 600)


@pytest.mark.parametrize(
    ("args", "pod", "assigned", "reason"),
    [
        pytest.param(
            PROD_ARGS,
            prod_pod(),
            [WEB_OLD, BATCH_OLD],
            None,
            id="prod-10-plus-5.1-is-37.75%-under-43-although-the-node-is-90%",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 37}}),
            prod_pod(),
            [WEB_OLD, BATCH_OLD],
            REASON_CPU_USAGE,
            id="prod-37.75%-rounds-to-38-over-37",
        ),
        pytest.param(
            PROD_ARGS,
            be_pod(),
            [WEB_OLD, BATCH_OLD],
            REASON_CPU_USAGE,
            id="a-batch-pod-is-judged-on-the-node-36-plus-1.7-over-65%",
        ),
        pytest.param(
            PROD_ARGS,
            prod_pod(),
            [(prod_pod("web", cpu="16", node="node-1"), NOW - 30), BATCH_OLD],
            REASON_CPU_USAGE,
            id="a-recent-prod-pod-adds-13.6-minus-10-reported-46.75%-over-43",
        ),
        pytest.param(
            PROD_ARGS,
            prod_pod(),
            [(prod_pod("web", cpu="16", node="node-1"), NOW - 600), BATCH_OLD],
            None,
            id="the-same-pod-assigned-before-the-report-adds-nothing",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 62}}),
            prod_pod(),
            [WEB_OLD, (prod_pod("misfiled", cpu="12", node="node-1"), NOW - 600)],
            REASON_CPU_USAGE,
            id="a-prod-pod-reported-as-batch-counts-its-whole-estimate-63.25%",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 63}}),
            prod_pod(),
            [WEB_OLD, (prod_pod("misfiled", cpu="12", node="node-1"), NOW - 600)],
            None,
            id="the-same-passes-63",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator(
                {"prodUsageThresholds": {"cpu": 40}, "prodUsageIncludeSys": True}
            ),
            prod_pod(),
            [WEB_OLD],
            REASON_CPU_USAGE,
            id="prodUsageIncludeSys-adds-1.5-system-cores-41.5%",
        ),
        pytest.param(
            LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 40}}),
            prod_pod(),
            [WEB_OLD],
            None,
            id="without-it-37.75%-passes-40",
        ),
    ],
)
def test_prod_filter(
    args: LoadAwareArgs,
    pod: dict[str, Any],
    assigned: list[tuple[dict[str, Any], float]],
    reason: str | None,
) -> None:
    assert decide(pod, BUSY, args, assigned)[0] == reason


def test_prod_thresholds_off_by_default_judge_prod_pods_on_the_node() -> None:
    """Koordinator's "prod usage filter is not enabled by default"."""
    assert decide(prod_pod(), BUSY, LoadAwareArgs(), [WEB_OLD])[0] == REASON_CPU_USAGE


def test_with_prod_thresholds_a_prod_pod_skips_the_aggregated_filter() -> None:
    both = p95(prodUsageThresholds={"cpu": 50})
    metric = aggregated_metric(cpu="36", aggregates=AGGREGATES, pods=[])
    assert decide(prod_pod(), metric, both)[0] is None  # 5.1 of 40: only its own estimate
    only_aggregated = p95()  # prodPod needs prod thresholds: the aggregate applies
    assert decide(prod_pod(), metric, only_aggregated)[0] == REASON_CPU_AGGREGATED_USAGE


# -- scores ------------------------------------------------------------------------------------

SCORE_P95 = {"aggregated": {"scoreAggregationType": "p95", "scoreAggregatedDuration": "10m"}}
BIG_SIZE = {"cpu": "8", "memory": "16Gi"}
BIG = make_pod("big", requests=BIG_SIZE, limits=BIG_SIZE)


def test_score_on_p95() -> None:
    """Koordinator's "score load node with p95": estimate 6.8 cores, 11.2 GiB. On p95 over
    10m (21 cores, 30 GiB): cpu (40 - 27.8) / 40 -> 30, memory -> 74, mean 52; on the latest
    usage (6 cores, 20 GiB) it would be (68 + 80) // 2 = 74."""
    metric = aggregated_metric(aggregates=AGGREGATES)
    assert decide(BIG, metric, LoadAwareArgs())[1] == 74
    assert decide(BIG, metric, LoadAwareArgs.from_koordinator(SCORE_P95))[1] == 52


def test_score_on_an_unreported_aggregate_falls_back_to_estimates() -> None:
    """Koordinator's "score load node with p95 but have not reported usage" (and "... and have
    assigned pods"): the pods' full estimates stand in for the usage."""
    args = LoadAwareArgs.from_koordinator(SCORE_P95)
    metric = aggregated_metric(cpu="39", memory="150Gi")  # no aggregates at all
    # 6.8 of 40 cores -> 83; 11.2 GiB (rounded up a byte) of 160 -> 92
    assert decide(BIG, metric, args)[1] == (83 + 92) // 2
    # an old pod estimated 6.8 cores / 11.2 GiB: cpu (40 - 13.6) -> 66, memory -> 85
    assigned = [(make_pod("old", requests=BIG_SIZE, limits=BIG_SIZE, node="node-1"), NOW - 600)]
    assert decide(BIG, metric, args, assigned)[1] == (66 + 85) // 2


def test_score_according_prod_usage() -> None:
    """Koordinator's "score prod Pod": a prod pod is scored on the prod pods' usage."""
    args = LoadAwareArgs.from_koordinator({"scoreAccordingProdUsage": True})
    # prod: 10 + 5.1 cores -> (40 - 15.1) / 40 -> 62; 6 GiB + 5.6 GiB of 160 -> 92
    assert decide(prod_pod(), BUSY, args, [WEB_OLD])[1] == (62 + 92) // 2
    # a batch pod is scored on the node: 36 + 1.7 -> 5; 50 GiB + 2.8 GiB -> 67
    assert decide(be_pod(), BUSY, args, [WEB_OLD])[1] == (5 + 67) // 2
    # without it: 36 + 5.1 cores is over 40 -> 0; 55.6 GiB -> 65
    assert decide(prod_pod(), BUSY, LoadAwareArgs(), [WEB_OLD])[1] == (0 + 65) // 2


# -- the extender carries the pod's priority -----------------------------------------------------


def test_the_extender_judges_a_prod_pod_on_prod_usage() -> None:
    view = StaticClusterView(nodes=[NODE], node_metrics=[BUSY])
    config = ExtenderConfig(
        loadaware=LoadAwareArgs.from_koordinator(
            {"prodUsageThresholds": {"cpu": 43}, "scoreAccordingProdUsage": True}
        )
    )
    prod = {"Pod": prod_pod(), "NodeNames": ["node-1"]}
    batch = {"Pod": be_pod(), "NodeNames": ["node-1"]}
    assert filter(prod, view, NOW, config=config)["NodeNames"] == ["node-1"]
    assert filter(batch, view, NOW, config=config)["FailedNodes"] == {"node-1": REASON_CPU_USAGE}
    # no prod pod assigned in the view: 5.1 cores and 5.6 GiB -> (87 + 96) // 2 = 91 -> 9
    assert prioritize(prod, view, NOW, config=config) == [{"Host": "node-1", "Score": 9}]


# -- args ----------------------------------------------------------------------------------------


def test_the_args_read_koordinators_fields() -> None:
    args = LoadAwareArgs.from_koordinator(
        {
            "prodUsageThresholds": {"cpu": 47, "memory": 83},
            "prodUsageIncludeSys": True,
            "scoreAccordingProdUsage": True,
            "aggregated": {
                "usageThresholds": {"memory": 71},
                "usageAggregationType": "p99",
                "usageAggregatedDuration": "7m30s",
                "scoreAggregationType": "avg",
            },
        }
    )
    assert (args.prod_cpu_threshold, args.prod_memory_threshold) == (47, 83)
    assert args.prod_usage_include_sys and args.score_according_prod_usage
    assert args.aggregated == AggregatedArgs((0, 71), "p99", 450.0, "avg", 0.0)
    assert LoadAwareArgs.from_koordinator({}).aggregated is None


def test_the_scheduler_configuration_takes_the_new_fields() -> None:
    config = schedulerconfig.parse(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "LoadAwareScheduling",
                            "args": {
                                "prodUsageThresholds": {"cpu": 53},
                                "aggregated": {
                                    "usageThresholds": {"cpu": 61},
                                    "usageAggregationType": "p95",
                                },
                            },
                        }
                    ]
                }
            ],
        }
    )
    assert not [i for i in config.ignored if "LoadAware" in i]
    args = config.extender.loadaware
    assert args.prod_cpu_threshold == 53
    assert args.aggregated is not None and args.aggregated.usage_thresholds == (61, 0)


@pytest.mark.parametrize(
    ("aggregated", "message"),
    [
        pytest.param(
            {"usageThresholds": {"cpu": 101}},
            'aggregated.usageThresholds: Invalid value: {"cpu":101}: '
            "resource Threshold of cpu should be less than 100, got 101",
            id="threshold-over-100",
        ),
        pytest.param(
            {"usageThresholds": {"memory": -3}},
            'aggregated.usageThresholds: Invalid value: {"memory":-3}: '
            "resource Threshold of memory should be a positive value, got -3",
            id="negative-threshold",
        ),
        pytest.param(
            {"usageAggregationType": "p80"},
            'aggregated.usageAggregationType: Unsupported value: "p80": '
            'supported values: "avg", "p50", "p90", "p95", "p99"',
            id="p80",
        ),
        pytest.param(
            {"scoreAggregationType": "max"},
            'aggregated.scoreAggregationType: Unsupported value: "max"',
            id="score-type",
        ),
        pytest.param(
            {"usageAggregatedDuration": "-90s"},
            'aggregated.usageAggregatedDuration: Invalid value: "-90s": duration must be >= 0',
            id="negative-duration",
        ),
        pytest.param(
            {"scoreAggregatedDuration": "ten minutes"},
            "aggregated.scoreAggregatedDuration: not a duration",
            id="not-a-duration",
        ),
        pytest.param(
            {"usageThresholds": {"nvidia.com/gpu": 50}},
            "aggregated.usageThresholds: only cpu and memory",
            id="unsupported-resource",
        ),
    ],
)
def test_bad_aggregated_args_are_refused_with_koordinators_message(
    aggregated: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        LoadAwareArgs.from_koordinator({"aggregated": aggregated})
    assert message in str(raised.value)


def test_every_bad_aggregated_field_is_named_at_once() -> None:
    with pytest.raises(ValueError) as raised:
        AggregatedArgs((120, 0), "p42", -1.0)
    said = str(raised.value)
    assert "usageThresholds" in said and "usageAggregationType" in said
    assert "usageAggregatedDuration" in said


def test_prod_thresholds_are_not_range_checked_as_in_koordinator() -> None:
    args = LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": 130}})
    assert args.prod_cpu_threshold == 130
    with pytest.raises(ValueError, match="must be an integer"):
        LoadAwareArgs.from_koordinator({"prodUsageThresholds": {"cpu": "40%"}})
    with pytest.raises(ValueError, match="true or false"):
        LoadAwareArgs.from_koordinator({"scoreAccordingProdUsage": "yes"})


def test_a_malformed_aggregate_makes_the_nodemetric_unreadable() -> None:
    metric = aggregated_metric(aggregates={"ten minutes": {"p95": {"cpu": "1"}}})
    load = node_load(NODE, metric, [], p95())
    assert load.metric is None and "aggregatedNodeUsages[0].duration" in load.note
    with pytest.raises(MetricError):
        loadaware.digest_node_metric(metric)


def test_digest_maps_each_type_to_its_longest_duration() -> None:
    digest = loadaware.digest_node_metric(aggregated_metric(aggregates=AGGREGATES))
    assert digest.aggregated["p95", 0.0] == (35000, 31 * GI)
    assert digest.aggregated["p99", 0.0] == (30000, 40 * GI)
    assert digest.aggregated["p50", 0.0] == digest.aggregated["p50", 600.0]
    assert ("p90", 0.0) not in digest.aggregated


def test_a_node_annotation_alone_can_set_prod_thresholds() -> None:
    custom = {"prodUsageThresholds": {"cpu": 37}}
    node = make_node(
        cpu="40",
        memory="160Gi",
        annotations={keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: json.dumps(custom)},
    )
    # the args' 65 % on the node's 36 + 5.1 cores, or the annotation's 37 % on prod's 15.1
    assert decide(prod_pod(), BUSY, LoadAwareArgs(), [WEB_OLD])[0] == REASON_CPU_USAGE
    assert decide(prod_pod(), BUSY, LoadAwareArgs(), [WEB_OLD], node=node)[0] == REASON_CPU_USAGE
    custom["prodUsageThresholds"] = {"cpu": 38}
    node["metadata"]["annotations"][keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS] = json.dumps(custom)
    assert decide(prod_pod(), BUSY, LoadAwareArgs(), [WEB_OLD], node=node)[0] is None
    # its usageThresholds are still the args': a batch pod is judged on the node
    assert decide(be_pod(), BUSY, LoadAwareArgs(), [WEB_OLD], node=node)[0] == REASON_CPU_USAGE


def test_the_charts_loadaware_values_carry_the_new_args_to_the_extender(tmp_path: Path) -> None:
    """scheduler.loadAware is rendered whole into the --load-aware-config file, which the
    extender reads with these args."""
    load_aware = {
        "prodUsageThresholds": {"cpu": 53, "memory": 88},
        "scoreAccordingProdUsage": True,
        "aggregated": {
            "usageThresholds": {"cpu": 67},
            "usageAggregationType": "p90",
            "usageAggregatedDuration": "10m",
        },
    }
    release = helm.render(helm.CHART, {"scheduler": {"loadAware": load_aware}})
    (text,) = release.find("ConfigMap", "koord-scheduler-loadaware-config")["data"].values()
    path = tmp_path / "loadaware.yaml"
    path.write_text(text)
    args = cli.extender_config(str(path)).loadaware
    assert (args.prod_cpu_threshold, args.prod_memory_threshold) == (53, 88)
    assert args.score_according_prod_usage
    assert args.aggregated == AggregatedArgs((67, 0), "p90", 600.0)
    assert (args.cpu_threshold, args.memory_threshold) == (65, 95)  # the chart's, kept


def test_the_cache_gives_what_the_uncached_function_gives() -> None:
    aggregated = {
        "usageThresholds": {"cpu": 57},
        "usageAggregationType": "p95",
        "scoreAggregationType": "p50",
        "scoreAggregatedDuration": "10m",
    }
    args = LoadAwareArgs.from_koordinator(
        {
            "prodUsageThresholds": {"cpu": 41},
            "scoreAccordingProdUsage": True,
            "aggregated": aggregated,
        }
    )
    custom = {"prodUsageThresholds": {"cpu": 39}}
    node = make_node(
        cpu="40",
        memory="160Gi",
        annotations={keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: json.dumps(custom)},
    )
    metric = aggregated_metric(
        cpu="36", aggregates=AGGREGATES, pods=[("default/web", "koord-prod", "10", "6Gi")]
    )
    cache = loadaware.LoadCache()
    for assigned in ([WEB_OLD], [WEB_OLD, BATCH_OLD], [(WEB_OLD[0], NOW - 5)]):
        cached = cache.node_load("node-1", node, metric, assigned, args)
        assert cached == node_load(node, metric, assigned, args)
        assert cached.prod_thresholds == (39, 0)
        assert cached.score_used is not None and cached.aggregated is not None
