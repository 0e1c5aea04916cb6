"""The NodeMetric status reporter against the in-process fake API server."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

import pytest

from koordapi.duration import parse_go_duration
from koordlet.cluster import cancel_and_wait
from koordlet.cluster.reporter import (
    DEFAULT_DURATIONS,
    NodeMetricReporter,
    ReportPolicy,
    policy_from,
)
from koordlet.metriccache import MetricCache
from koordlet.metriccache.store import Sample
from koordlet.nodemetric import build_status
from tests.fakekube import FakeKubeAPI

NODE = "n1"
NOW = 1_800_000_000.0
STATUS_PATH = r"/nodemetrics/n1/status$"


def node_metric(policy: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {"metricCollectPolicy": policy} if policy is not None else {}
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": NODE},
        "spec": spec,
    }


def filled_cache() -> MetricCache:
    cache = MetricCache(None)
    samples = []
    for i in range(600):  # one sample a second for the last ten minutes
        ts = NOW - 600 + i
        samples += [
            Sample("node_cpu_usage", {}, ts, 2.0 + (i % 10) / 10),
            Sample("node_memory_usage", {}, ts, 8 * 2**30),
            Sample("sys_cpu_usage", {}, ts, 0.4),
            Sample("sys_memory_usage", {}, ts, 2**30),
        ]
    cache.append(samples)
    return cache


class Counting:
    """A build function whose reports are numbered, to tell the newest one."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, tuple[int, ...]]] = []

    def __call__(self, aggregate: int, durations: Sequence[int]) -> dict[str, Any]:
        self.calls.append((aggregate, tuple(durations)))
        n = len(self.calls)
        return {
            "updateTime": f"2027-01-01T00:00:{n:02d}Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{n}m"}}},
            "podsMetric": [],
        }


def pending(reporter: NodeMetricReporter) -> dict[str, Any] | None:
    return reporter.pending


async def synced(reporter: NodeMetricReporter) -> asyncio.Task[None]:
    task = asyncio.create_task(reporter.informer.run())
    await asyncio.wait_for(reporter.informer.wait_synced(), 2)
    return task


async def stop(task: asyncio.Task[None]) -> None:
    await cancel_and_wait(task)


def test_the_status_has_koordinators_field_names_and_the_specs_policy() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        policy = {
            "aggregateDurationSeconds": 60,
            "reportIntervalSeconds": 45,
            "nodeAggregatePolicy": {"durations": ["5m0s", "10m"]},
        }
        fake.seed(node_metric(policy))
        cache = filled_cache()

        def build(aggregate: int, durations: Sequence[int]) -> dict[str, Any]:
            return build_status(cache, [], NOW, aggregate_seconds=aggregate, durations=durations)

        reporter = NodeMetricReporter(fake.kube_api(), NODE, build)
        watching = await synced(reporter)
        try:
            assert reporter.policy() == ReportPolicy(45.0, 60, (300, 600))
            assert await reporter.report_once()
        finally:
            await stop(watching)
        stored = fake.get("NodeMetric", NODE)
        assert stored is not None
        assert stored["spec"] == {"metricCollectPolicy": policy}  # the status patch only
        status = stored["status"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", status["updateTime"])
        metric = status["nodeMetric"]
        assert metric["nodeUsage"]["resources"]["memory"] == str(8 * 2**30)
        assert re.fullmatch(r"\d+m", metric["nodeUsage"]["resources"]["cpu"])
        assert metric["systemUsage"] == {"resources": {"cpu": "400m", "memory": str(2**30)}}
        aggregated = metric["aggregatedNodeUsages"]
        assert [a["duration"] for a in aggregated] == ["5m0s", "10m0s"]
        for entry in aggregated:
            assert set(entry["usage"]) == {"avg", "p50", "p90", "p95", "p99"}
            assert set(entry["usage"]["p95"]["resources"]) == {"cpu", "memory"}
        assert aggregated[0]["usage"]["p99"]["resources"]["cpu"] == "2900m"
        assert status["podsMetric"] == []
        (patch,) = fake.calls("patch", STATUS_PATH)
        assert patch.content_type.startswith("application/merge-patch+json")
        assert set(patch.body) == {"status"}
        assert fake.calls("list", "/nodemetrics")[0].params["fieldSelector"] == "metadata.name=n1"

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_policy_falls_back_and_is_clamped() -> None:
    assert policy_from(None, 7.0) == ReportPolicy(7.0, 300, DEFAULT_DURATIONS)
    assert policy_from(node_metric(), 7.0).interval == 7.0
    assert policy_from(node_metric({"reportIntervalSeconds": 5}), 60).interval == 30.0
    assert policy_from(node_metric({"reportIntervalSeconds": 5}), 60, min_interval=1).interval == 5
    assert policy_from(node_metric({"aggregateDurationSeconds": 10}), 60).aggregate_seconds == 60
    bad = node_metric({"nodeAggregatePolicy": {"durations": ["30m", "soon", "1h0m0s"]}})
    assert policy_from(bad, 60).durations == (1800, 3600)
    assert parse_go_duration("5m0s") == 300
    assert parse_go_duration("1.5h") == 5400
    assert parse_go_duration("300s") == 300
    with pytest.raises(ValueError, match="not a duration"):
        parse_go_duration("5 minutes")


def test_a_failed_report_is_replaced_by_the_newest_at_the_next_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node_metric())
        build = Counting()
        reporter = NodeMetricReporter(fake.kube_api(), NODE, build)
        fake.fail("patch", STATUS_PATH, 500, times=2)
        assert not await reporter.report_once()
        assert reporter.pending is not None
        assert reporter.pending["updateTime"].endswith(":01Z")
        assert not await reporter.report_once()
        fake.fail("patch", STATUS_PATH, 429)
        assert not await reporter.report_once()
        assert await reporter.report_once()
        assert pending(reporter) is None
        assert reporter.reports == 1
        stored = fake.get("NodeMetric", NODE)
        assert stored is not None
        assert stored["status"]["updateTime"].endswith(":04Z")  # the newest, not the first
        assert len(fake.calls("patch", STATUS_PATH)) == 4

    with caplog.at_level(logging.WARNING, logger="koordlet.cluster.reporter"):
        asyncio.run(asyncio.wait_for(scenario(), 10))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2  # once for the 500s, once for the 429
    assert "500" in warnings[0]
    assert "429" in warnings[1]


def test_a_missing_node_metric_is_created_with_an_empty_spec() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        reporter = NodeMetricReporter(fake.kube_api(), NODE, Counting())
        assert await reporter.report_once()
        assert reporter.created
        stored = fake.get("NodeMetric", NODE)
        assert stored is not None
        assert stored["spec"] == {}
        assert stored["status"]["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "1m"}}
        assert len(fake.calls("create", "/nodemetrics")) == 1

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_loop_follows_the_spec_and_survives_the_api_going_away() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node_metric({"reportIntervalSeconds": 3}))
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)
            await asyncio.sleep(0.01)

        build = Counting()
        reporter = NodeMetricReporter(
            fake.kube_api(), NODE, build, fallback_interval=99, min_interval=1, sleep=sleep
        )
        ticks = 0

        async def other_task() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        fake.disconnect("patch", STATUS_PATH, times=3)
        other = asyncio.create_task(other_task())
        task = asyncio.create_task(reporter.run())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if reporter.reports >= 2:
                break
        assert not task.done()  # errors never leave the task
        await stop(task)
        assert not other.done()
        await stop(other)
        assert reporter.reports >= 2
        assert ticks > 10
        assert 3.0 in waits
        stored = fake.get("NodeMetric", NODE)
        assert stored is not None
        newest = f"{len(build.calls) - 1:02d}Z", f"{len(build.calls):02d}Z"
        assert stored["status"]["updateTime"].endswith(newest)

    asyncio.run(asyncio.wait_for(scenario(), 10))
