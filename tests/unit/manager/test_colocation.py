"""The colocation-config ConfigMap key and per-node strategy merging."""

from __future__ import annotations

import json
from typing import Any

import pytest

from manager.colocation import (
    ANNOTATION_NODE_COLOCATION_STRATEGY,
    LABEL_CPU_RECLAIM_RATIO,
    LABEL_MEMORY_RECLAIM_RATIO,
    LABEL_MID_STATIC_CPU_RESERVED_RATIO,
    LABEL_MID_STATIC_MEMORY_RESERVED_RATIO,
    ColocationConfig,
    ColocationStrategy,
    parse_colocation_config,
    strategy_for_node,
)
from manager.errors import ConfigError


def node(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"metadata": {"name": "n", "labels": labels or {}, "annotations": annotations or {}}}


def test_code_defaults() -> None:
    s = ColocationStrategy()
    assert s.enable is False
    assert (s.metric_aggregate_duration_seconds, s.metric_report_interval_seconds) == (300, 60)
    assert s.metric_aggregate_policy == ("5m0s", "10m0s", "30m0s")
    assert s.metric_memory_collect_policy == "usageWithoutPageCache"
    assert (s.cpu_reclaim_threshold_percent, s.memory_reclaim_threshold_percent) == (60, 65)
    assert (s.cpu_calculate_policy, s.memory_calculate_policy) == ("usage", "usage")
    assert (s.degrade_time_minutes, s.update_time_threshold_seconds) == (15, 300)
    assert s.resource_diff_threshold == 0.1
    assert s.mid_reclaim_mode is None
    assert (s.mid_cpu_threshold_percent, s.mid_memory_threshold_percent) == (100, 100)
    assert s.mid_unallocated_percent == 0
    assert (s.mid_static_cpu_reserved_percent, s.mid_static_memory_reserved_percent) == (0, 0)
    assert (s.batch_cpu_threshold_percent, s.batch_memory_threshold_percent) == (None, None)


@pytest.mark.parametrize("text", ["", "  ", "{}"])
def test_empty_config_is_all_defaults(text: str) -> None:
    assert parse_colocation_config(text) == ColocationConfig()


@pytest.mark.parametrize(
    ("key", "value", "attr", "expected"),
    [
        ("enable", True, "enable", True),
        ("metricAggregateDurationSeconds", 120, "metric_aggregate_duration_seconds", 120),
        ("metricReportIntervalSeconds", 30, "metric_report_interval_seconds", 30),
        (
            "metricAggregatePolicy",
            {"durations": ["5m", "1h0m0s"]},
            "metric_aggregate_policy",
            ("5m", "1h0m0s"),
        ),
        (
            "metricMemoryCollectPolicy",
            "usageWithHotPageCache",
            "metric_memory_collect_policy",
            "usageWithHotPageCache",
        ),
        ("cpuReclaimThresholdPercent", 70, "cpu_reclaim_threshold_percent", 70),
        ("cpuCalculatePolicy", "maxUsageRequest", "cpu_calculate_policy", "maxUsageRequest"),
        ("memoryReclaimThresholdPercent", 80, "memory_reclaim_threshold_percent", 80),
        ("memoryCalculatePolicy", "request", "memory_calculate_policy", "request"),
        ("degradeTimeMinutes", 5, "degrade_time_minutes", 5),
        ("updateTimeThresholdSeconds", 60, "update_time_threshold_seconds", 60),
        ("resourceDiffThreshold", 1, "resource_diff_threshold", 1.0),
        ("midReclaimMode", "static", "mid_reclaim_mode", "static"),
        ("midCPUThresholdPercent", 40, "mid_cpu_threshold_percent", 40),
        ("midMemoryThresholdPercent", 0, "mid_memory_threshold_percent", 0),
        ("midUnallocatedPercent", 100, "mid_unallocated_percent", 100),
        ("midStaticCPUReservedPercent", 20, "mid_static_cpu_reserved_percent", 20),
        ("midStaticMemoryReservedPercent", 30, "mid_static_memory_reserved_percent", 30),
        ("batchCPUThresholdPercent", 30, "batch_cpu_threshold_percent", 30),
        ("batchMemoryThresholdPercent", 150, "batch_memory_threshold_percent", 150),
        ("extensions", {"x": 1}, "extensions", {"x": 1}),
    ],
)
def test_every_field_parses(key: str, value: Any, attr: str, expected: Any) -> None:
    config = parse_colocation_config(json.dumps({key: value}))
    assert getattr(config.strategy, attr) == expected
    assert config.strategy.to_json()[key] == value
    assert config.ignored_fields == ()


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        pytest.param(
            {"cpuReclaimThresholdPercent": -1}, "cpuReclaimThresholdPercent", id="negative-reclaim"
        ),
        pytest.param(
            {"cpuReclaimThresholdPercent": "60"}, "cpuReclaimThresholdPercent", id="string-percent"
        ),
        pytest.param(
            {"memoryReclaimThresholdPercent": 60.5},
            "memoryReclaimThresholdPercent",
            id="float-percent",
        ),
        pytest.param(
            {"memoryReclaimThresholdPercent": True},
            "memoryReclaimThresholdPercent",
            id="bool-percent",
        ),
        pytest.param({"enable": "yes"}, "enable", id="enable-not-bool"),
        pytest.param({"degradeTimeMinutes": 0}, "degradeTimeMinutes", id="degrade-zero"),
        pytest.param(
            {"updateTimeThresholdSeconds": 0}, "updateTimeThresholdSeconds", id="update-zero"
        ),
        pytest.param(
            {"metricReportIntervalSeconds": 0}, "metricReportIntervalSeconds", id="report-zero"
        ),
        pytest.param({"resourceDiffThreshold": 0}, "resourceDiffThreshold", id="diff-zero"),
        pytest.param({"resourceDiffThreshold": 1.5}, "resourceDiffThreshold", id="diff-above-one"),
        pytest.param(
            {"midCPUThresholdPercent": 101}, "midCPUThresholdPercent", id="mid-threshold-101"
        ),
        pytest.param(
            {"midUnallocatedPercent": -1}, "midUnallocatedPercent", id="mid-unallocated-negative"
        ),
        pytest.param(
            {"midStaticMemoryReservedPercent": 101},
            "midStaticMemoryReservedPercent",
            id="static-101",
        ),
        pytest.param(
            {"batchCPUThresholdPercent": -5}, "batchCPUThresholdPercent", id="batch-cap-negative"
        ),
        pytest.param(
            {"cpuCalculatePolicy": "request"}, "cpuCalculatePolicy", id="cpu-request-policy"
        ),
        pytest.param(
            {"memoryCalculatePolicy": "bogus"}, "memoryCalculatePolicy", id="memory-policy"
        ),
        pytest.param({"midReclaimMode": "dynamic"}, "midReclaimMode", id="mid-mode"),
        pytest.param(
            {"metricMemoryCollectPolicy": "all"}, "metricMemoryCollectPolicy", id="collect-policy"
        ),
        pytest.param(
            {"metricAggregatePolicy": {"durations": ["5 min"]}}, "durations[0]", id="duration"
        ),
        pytest.param({"extensions": []}, "extensions", id="extensions-not-object"),
        pytest.param({"nodeConfigs": {}}, "nodeConfigs", id="node-configs-not-list"),
        pytest.param(
            {"nodeConfigs": [{"name": "a"}]}, "nodeConfigs[0].nodeSelector", id="no-selector"
        ),
        pytest.param(
            {
                "nodeConfigs": [
                    {"nodeSelector": {}},
                    {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}},
                ]
            },
            "nodeConfigs[1].nodeSelector.matchExpressions[0].operator",
            id="bad-selector-operator",
        ),
        pytest.param(
            {"nodeConfigs": [{"nodeSelector": {}, "cpuReclaimThresholdPercent": -1}]},
            "nodeConfigs[0].cpuReclaimThresholdPercent",
            id="node-config-field",
        ),
        pytest.param(
            {"nodeConfigs": [{"nodeSelector": {}, "name": 3}]}, "nodeConfigs[0].name", id="name"
        ),
        pytest.param([], "colocation-config", id="not-an-object"),
    ],
)
def test_invalid_values_name_their_path(doc: Any, path: str) -> None:
    with pytest.raises(ConfigError, match=path.replace("[", r"\[").replace("]", r"\]")):
        parse_colocation_config(json.dumps(doc))


def test_invalid_json() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_colocation_config("{")


def test_null_is_unset_and_unknown_fields_are_listed() -> None:
    text = json.dumps(
        {
            "enable": True,
            "batchCPUThresholdPercent": None,
            "cpuReclaimThresholdPrecent": 50,
            "nodeConfigs": [{"name": "a", "nodeSelector": {}, "colour": "red"}],
        }
    )
    config = parse_colocation_config(text)
    assert config.strategy.batch_cpu_threshold_percent is None
    assert config.strategy.cpu_reclaim_threshold_percent == 60
    assert config.ignored_fields == ("cpuReclaimThresholdPrecent", "nodeConfigs[0].colour")


def test_to_json_round_trips() -> None:
    strategy = ColocationStrategy(
        enable=True, mid_reclaim_mode="static", batch_cpu_threshold_percent=30
    )
    assert parse_colocation_config(json.dumps(strategy.to_json())).strategy == strategy


# -- per-node merging ------------------------------------------------------------------------

CONFIG = json.dumps(
    {
        "enable": True,
        "cpuReclaimThresholdPercent": 60,
        "memoryReclaimThresholdPercent": 65,
        "extensions": {"a": 1},
        "nodeConfigs": [
            {
                "name": "gpu",
                "nodeSelector": {"matchLabels": {"pool": "gpu"}},
                "cpuReclaimThresholdPercent": 40,
            },
            {
                "name": "off",
                "nodeSelector": {"matchLabels": {"pool": "off"}},
                "enable": False,
                "extensions": {"b": 2},
            },
            {
                "name": "also-gpu",
                "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Exists"}]},
                "cpuReclaimThresholdPercent": 10,
                "memoryReclaimThresholdPercent": 10,
            },
        ],
    }
)


@pytest.mark.parametrize(
    ("labels", "annotations", "cpu", "memory"),
    [
        pytest.param({}, {}, 60, 65, id="cluster"),
        pytest.param({"pool": "gpu"}, {}, 40, 65, id="first-matching-node-config-only"),
        pytest.param({"pool": "x"}, {}, 10, 10, id="later-config-when-earlier-miss"),
        pytest.param(
            {"pool": "gpu"},
            {ANNOTATION_NODE_COLOCATION_STRATEGY: '{"cpuReclaimThresholdPercent": 50}'},
            50,
            65,
            id="annotation-over-node-config",
        ),
        pytest.param(
            {"pool": "gpu", LABEL_CPU_RECLAIM_RATIO: "0.3"},
            {ANNOTATION_NODE_COLOCATION_STRATEGY: '{"cpuReclaimThresholdPercent": 50}'},
            30,
            65,
            id="label-over-annotation",
        ),
        pytest.param(
            {LABEL_MEMORY_RECLAIM_RATIO: "0.29"}, {}, 60, 29, id="ratio-converted-exactly"
        ),
        pytest.param({LABEL_CPU_RECLAIM_RATIO: "-0.5"}, {}, 60, 65, id="negative-ratio-ignored"),
        pytest.param({LABEL_CPU_RECLAIM_RATIO: "half"}, {}, 60, 65, id="invalid-ratio-ignored"),
        pytest.param({LABEL_CPU_RECLAIM_RATIO: "nan"}, {}, 60, 65, id="nan-ratio-ignored"),
        pytest.param({LABEL_CPU_RECLAIM_RATIO: "1.5"}, {}, 150, 65, id="ratio-above-one-allowed"),
        pytest.param(
            {},
            {
                ANNOTATION_NODE_COLOCATION_STRATEGY: json.dumps(
                    {"cpuReclaimThresholdPercent": -5, "memoryReclaimThresholdPercent": 1}
                )
            },
            60,
            65,
            id="invalid-annotation-ignored-whole",
        ),
        pytest.param(
            {}, {ANNOTATION_NODE_COLOCATION_STRATEGY: "{"}, 60, 65, id="annotation-not-json"
        ),
        pytest.param(
            {}, {ANNOTATION_NODE_COLOCATION_STRATEGY: "[]"}, 60, 65, id="annotation-not-object"
        ),
    ],
)
def test_merge_precedence(
    labels: dict[str, str], annotations: dict[str, str], cpu: int, memory: int
) -> None:
    strategy = strategy_for_node(parse_colocation_config(CONFIG), node(labels, annotations))
    assert strategy.cpu_reclaim_threshold_percent == cpu
    assert strategy.memory_reclaim_threshold_percent == memory
    assert strategy.enable is True


def test_ignored_node_metadata_is_noted() -> None:
    notes: list[str] = []
    labels = {LABEL_CPU_RECLAIM_RATIO: "half", LABEL_MID_STATIC_CPU_RESERVED_RATIO: "1.5"}
    annotations = {ANNOTATION_NODE_COLOCATION_STRATEGY: '{"degradeTimeMinutes": 0}'}
    strategy = strategy_for_node(parse_colocation_config(CONFIG), node(labels, annotations), notes)
    assert strategy.mid_static_cpu_reserved_percent == 0
    assert strategy.degrade_time_minutes == 15
    assert len(notes) == 3
    assert any("degradeTimeMinutes" in n for n in notes)
    assert any("mid_static" in n or "midStatic" in n for n in notes)


def test_mid_static_labels() -> None:
    labels = {
        LABEL_MID_STATIC_CPU_RESERVED_RATIO: "0.2",
        LABEL_MID_STATIC_MEMORY_RESERVED_RATIO: "0.25",
    }
    strategy = strategy_for_node(ColocationConfig(), node(labels))
    assert (
        strategy.mid_static_cpu_reserved_percent,
        strategy.mid_static_memory_reserved_percent,
    ) == (20, 25)


def test_node_config_disables_and_extensions_merge() -> None:
    strategy = strategy_for_node(parse_colocation_config(CONFIG), node({"pool": "off"}))
    assert strategy.enable is False
    assert strategy.extensions == {"a": 1, "b": 2}
    assert strategy.cpu_reclaim_threshold_percent == 60  # unset fields keep the cluster value


def test_annotation_can_enable_a_node() -> None:
    annotations = {ANNOTATION_NODE_COLOCATION_STRATEGY: '{"enable": true}'}
    assert strategy_for_node(ColocationConfig(), node(annotations=annotations)).enable is True
