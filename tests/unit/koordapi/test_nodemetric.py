"""The NodeMetric format both ways: what koordlet writes is what the manager and the scheduler
read, and a report they cannot use fails naming the path."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from koordapi import qos
from koordapi.nodemetric import (
    MetricError,
    cpu_quantity,
    host_apps_above,
    memory_quantity,
    read_node_metric,
    resource_map,
)

GI = 1 << 30


@pytest.mark.parametrize(
    ("cores", "text"),
    [
        pytest.param(1.25, "1250m", id="fraction"),
        pytest.param(0.0004, "0m", id="rounded-to-nearest"),
        pytest.param(0.0006, "1m", id="rounded-up-to-nearest"),
        pytest.param(-0.5, "0m", id="never-negative"),
    ],
)
def test_cpu_is_written_in_milli_cores(cores: float, text: str) -> None:
    assert cpu_quantity(cores) == text


def test_memory_is_written_in_whole_bytes() -> None:
    assert memory_quantity(1536.9) == "1536"
    assert memory_quantity(-1.0) == "0"


def test_resource_map_leaves_out_what_is_not_known() -> None:
    assert resource_map(2.0, None) == {"resources": {"cpu": "2000m"}}
    assert resource_map(None, None) == {"resources": {}}


def test_what_koordlet_writes_the_manager_reads() -> None:
    status = {
        "updateTime": "2026-07-24T10:00:00Z",
        "nodeMetric": {
            "nodeUsage": resource_map(12.5, 40 * GI),
            "systemUsage": resource_map(1.5, 3 * GI),
        },
        "podsMetric": [
            {"namespace": "a", "name": "web", "priority": "koord-prod", **_usage(0.25, GI)},
            {"namespace": "a", "name": "job", "priority": "koord-batch", **_usage(2.0, None)},
        ],
        "hostApplicationMetric": [
            {"name": "agent", "priority": "koord-prod", "usage": resource_map(0.5, GI)}
        ],
        "prodReclaimableMetric": {"resource": resource_map(6.0, 20 * GI)},
    }
    view = read_node_metric({"status": status})
    moment = datetime.datetime(2026, 7, 24, 10, tzinfo=datetime.UTC)
    assert view.update_time == moment.timestamp()
    assert view.node_usage == (12500, 40 * GI)
    assert view.system_usage == (1500, 3 * GI)
    assert view.pods == {"a/web": ("koord-prod", 250, GI), "a/job": ("koord-batch", 2000, None)}
    assert view.host_apps == (("koord-prod", (500, GI)),)
    assert view.prod_reclaimable == (6000, 20 * GI)


def _usage(cpu: float | None, memory: float | None) -> dict[str, Any]:
    return {"podUsage": resource_map(cpu, memory)}


def test_missing_parts_read_as_none() -> None:
    view = read_node_metric({"status": {"nodeMetric": {"nodeUsage": resource_map(1.0, None)}}})
    assert view.update_time is None
    assert view.node_usage is None  # memory missing
    assert view.pods == {}
    assert view.prod_reclaimable is None


@pytest.mark.parametrize(
    ("status", "where"),
    [
        pytest.param({"updateTime": "yesterday"}, "status.updateTime", id="time"),
        pytest.param(
            {"nodeMetric": {"systemUsage": {"resources": {"cpu": "-1", "memory": "0"}}}},
            "systemUsage",
            id="negative",
        ),
        pytest.param(
            {"nodeMetric": {"nodeUsage": {"resources": {"cpu": "lots", "memory": "1"}}}},
            "nodeUsage",
            id="malformed",
        ),
        pytest.param({"podsMetric": [{}, {"podUsage": "x"}]}, "podsMetric[1]", id="pod-shape"),
        pytest.param({"nodeMetric": ["x"]}, "status.nodeMetric", id="not-an-object"),
    ],
)
def test_unusable_reports_name_the_path(status: dict[str, Any], where: str) -> None:
    with pytest.raises(MetricError, match=re.escape(where)):
        read_node_metric({"status": status})


def test_host_applications_above_a_priority_count() -> None:
    status = {
        "hostApplicationMetric": [
            {"priority": "koord-prod", "usage": resource_map(1.0, GI)},
            {"priority": "koord-mid", "usage": resource_map(2.0, 2 * GI)},
            {"priority": "koord-free", "usage": resource_map(4.0, 4 * GI)},
            {"priority": "", "usage": resource_map(8.0, 8 * GI)},
        ]
    }
    view = read_node_metric({"status": status})
    assert host_apps_above(view, qos.BATCH) == (3000, 3 * GI)
    assert host_apps_above(view, qos.MID) == (1000, GI)
    assert host_apps_above(view, qos.PROD) == (0, 0)


def test_aggregated_node_usages_are_read_by_type_and_duration() -> None:
    """koordlet's aggregatedNodeUsages: one entry per duration (Go's "5m0s"), a ResourceMap
    per type; a resource left out reads as 0 and a type without resources is absent, as
    Koordinator's scheduler reads them."""
    status = {
        "nodeMetric": {
            "aggregatedNodeUsages": [
                {
                    "duration": "5m0s",
                    "usage": {
                        "p95": resource_map(7.125, 3 * GI),
                        "p50": {"resources": {"cpu": "2"}},
                        "p99": {"resources": {}},
                    },
                },
                {"duration": "1h0m0s", "usage": {"avg": resource_map(1.5, 9.0)}},
            ]
        }
    }
    view = read_node_metric({"status": status})
    assert view.aggregated == {
        ("p95", 300.0): (7125, 3 * GI),
        ("p50", 300.0): (2000, 0),
        ("avg", 3600.0): (1500, 9),
    }
    assert read_node_metric({"status": {"nodeMetric": {}}}).aggregated == {}


@pytest.mark.parametrize(
    ("entries", "where"),
    [
        pytest.param({"duration": "5m"}, "aggregatedNodeUsages: must be a list", id="not-a-list"),
        pytest.param(
            [{"duration": "five", "usage": {}}],
            "aggregatedNodeUsages[0].duration: not a duration",
            id="bad-duration",
        ),
        pytest.param(
            [{"duration": "5m", "usage": {"p95": {"resources": {"cpu": "-1"}}}}],
            "aggregatedNodeUsages[0].usage.p95: negative usage",
            id="negative",
        ),
    ],
)
def test_unusable_aggregates_name_the_path(entries: Any, where: str) -> None:
    with pytest.raises(MetricError, match=re.escape(where)):
        read_node_metric({"status": {"nodeMetric": {"aggregatedNodeUsages": entries}}})
