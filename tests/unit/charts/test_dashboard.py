"""The koordlet Grafana dashboard queries only what koordlet really exports."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from koordlet.collectors.base import CollectorRunner
from koordlet.healthseries import HealthCollector
from koordlet.inspect.exposition import SchedLatencyExposition
from koordlet.koordseries import KoordinatorSeries, Sources
from koordlet.metriccache import MetricCache
from koordlet.metrics import MILLISECOND_HISTOGRAMS, KoordletMetrics
from koordlet.states.pods import PodStore
from koordlet.states.unsupported import UnsupportedFieldsReport
from runtimehooks.rules import Rules
from tests.unit.charts import helm

DASHBOARD = helm.CHART / "dashboards" / "koordlet.json"
METRIC = re.compile(r"\bkoordlet_[a-z0-9_]+\b")
BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
# The series a family of each type exposes, as prometheus_client writes them.
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "info": ("_info",),
}


def series_of(name: str, kind: str, labels: tuple[str, ...]) -> dict[str, set[str]]:
    found = {}
    for suffix in SUFFIXES[kind]:
        extra = {"le"} if suffix == "_bucket" else set()
        if kind == "summary" and suffix == "":
            extra = {"quantile"}
        found[name + suffix] = set(labels) | extra
    return found


def exported() -> dict[str, set[str]]:
    """Series name -> label names, from a registry built the way koordlet's daemon builds it
    (KoordletMetrics plus the per-scrape collectors: HealthCollector, SchedLatencyExposition,
    KoordinatorSeries and the NodeSLO unsupported-fields report)."""
    metrics = KoordletMetrics("node-1")
    cache = MetricCache()
    try:
        health = HealthCollector("node-1", CollectorRunner([], cache), cache, PodStore())
        schedlat = SchedLatencyExposition("node-1", lambda: None)
        sources = Sources(pods=list, cache=cache, allocatable=dict, rules=Rules, oom_scores={})
        koordinator = KoordinatorSeries(metrics, sources)
        unsupported = UnsupportedFieldsReport("node-1")
        per_scrape = (health, schedlat, koordinator, unsupported)
        wrappers = [m for m in vars(metrics).values() if isinstance(m, MetricWrapperBase)]
        families = [(m._name, str(m._type), tuple(m._labelnames)) for m in wrappers]
        for collector in per_scrape:
            families += [
                (f.name, f.type, tuple(getattr(f, "_labelnames", ()))) for f in collector.collect()
            ]
        for collector in per_scrape:
            metrics.registry.register(collector)
        registered = {f.name for f in metrics.registry.collect()}
        # One sample in each of koordlet's own metrics, then a real scrape of the registry:
        # the series names derived below are the ones the exposition writes.
        for metric in wrappers:
            labels = ["x"] * len(metric._labelnames)
            child = metric.labels(*labels) if labels else metric
            if isinstance(child, Histogram):
                child.observe(0.1)
            elif isinstance(child, Counter | Gauge):
                child.inc()
        scrape = generate_latest(metrics.registry).decode()
    finally:
        cache.close()
    assert {name for name, _, _ in families} == registered, "a family is missing from the list"
    series: dict[str, set[str]] = {}
    for family in families:
        series |= series_of(*family)
    scraped = {
        re.split(r"[{ ]", line)[0] for line in scrape.splitlines() if not line.startswith("#")
    }
    own = set().union(*(series_of(m._name, str(m._type), ()) for m in wrappers))
    # the per-scrape collectors write some series with nothing to report (a count of 0)
    built = set(series) - own
    assert own == {s for s in scraped if not s.endswith("_created")} - built
    return series


def targets(dashboard: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(panel title, target) of every query, rows' nested panels included."""
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner["title"], target


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded = json.loads(DASHBOARD.read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def series() -> dict[str, set[str]]:
    return exported()


def test_every_query_names_series_koordlet_exports(
    dashboard: dict[str, Any], series: dict[str, set[str]]
) -> None:
    used = set()
    for title, target in targets(dashboard):
        names = set(METRIC.findall(target["expr"]))
        assert names, f"panel {title!r} queries no koordlet series: {target['expr']}"
        unknown = names - set(series)
        assert not unknown, f"panel {title!r} uses series koordlet does not export: {unknown}"
        used |= names
    variables = dashboard["templating"]["list"]
    for variable in variables:
        if variable["type"] == "query":
            assert set(METRIC.findall(variable["definition"])) <= set(series)
    # Every family shows up somewhere (a new metric should get a panel), but for Koordinator's
    # *_milliseconds histograms: the same timings as the *_seconds ones the panels show, kept
    # for Koordinator's own dashboards.
    families = {re.sub(r"_(bucket|sum|count|total|info)$", "", s) for s in series}
    shown = {re.sub(r"_(bucket|sum|count|total|info)$", "", s) for s in used}
    assert families - shown == set(MILLISECOND_HISTOGRAMS)


def test_grouping_and_legend_labels_exist_on_the_queried_series(
    dashboard: dict[str, Any], series: dict[str, set[str]]
) -> None:
    for title, target in targets(dashboard):
        labels = set().union(*(series[n] for n in METRIC.findall(target["expr"])))
        for group in BY.findall(target["expr"]):
            wanted = {label.strip() for label in group.split(",") if label.strip()}
            assert wanted <= labels, f"panel {title!r} groups by unknown labels: {wanted - labels}"
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert legend <= labels, f"panel {title!r} legend names unknown labels: {legend - labels}"


def test_dashboard_has_unique_panel_ids_and_a_node_variable(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "koordinator-py-koordlet"
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", "node"]
    for title, target in targets(dashboard):
        assert 'node=~"$node"' in target["expr"], f"panel {title!r} ignores the node variable"
        assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
