"""Run-queue latency for Prometheus (the exposition), the status API's ``inspect`` view and its
route, on a collector state and a metric cache filled by hand."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from koordlet.executor import Executor
from koordlet.inspect.exposition import TOP_SLOT, SchedLatencyExposition
from koordlet.inspect.schedlat import PodLatency, SchedLatencyState
from koordlet.metriccache import MetricCache, Sample
from koordlet.metrics import MILLISECOND_HISTOGRAMS, KoordletMetrics
from koordlet.server import StatusServer
from koordlet.states.pods import PodStore
from koordlet.states.topology import Topology
from koordlet.statusapi import CPI_FRESH_SECONDS, KoordletViews
from runtimehooks.rules import KernelFeatures

NOW = 1_800_000_000.0
PROMTOOL = Path(__file__).resolve().parents[3] / ".cache/prometheus/usr/bin/promtool"
POD = "koordlet_pod_runqueue_latency_seconds"
QOS = "koordlet_qos_runqueue_latency_seconds"
QUANTILE = "koordlet_pod_runqueue_latency_quantile_seconds"


def latency_state() -> SchedLatencyState:
    """web (LS): 98 waits of 8-16 us and 2 of 4-8 ms; api (LS): 10 of 32-64 us; job (BE): no
    waits in the window, and one 2^25 us wait in its total, above the top bucket."""
    web = PodLatency(
        "u-web", "web", "default", "LS", window={3: 98, 12: 2}, total={3: 980, 12: 20},
        containers={"main": {3: 90, 12: 2}, "sidecar": {3: 8}},
    )  # fmt: skip
    api = PodLatency("u-api", "api", "default", "LS", window={5: 10}, total={5: 100})
    job = PodLatency("u-job", "job", "batch", "BE", window={}, total={8: 50, 25: 1})
    return SchedLatencyState(
        ts=NOW,
        window_seconds=10.0,
        pods={p.uid: p for p in (web, api, job)},
        classes={"LS": {3: 98, 12: 2, 5: 10}, "BE": {}},
        node={1: 40},
    )


# -- exposition --------------------------------------------------------------------------------


def scrape(exposition: SchedLatencyExposition) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(exposition)
    return registry


def pod_labels(uid: str, name: str, namespace: str, qos: str) -> dict[str, str]:
    return {"node": "n1", "pod_name": name, "pod_namespace": namespace, "pod_uid": uid, "qos": qos}


WEB = pod_labels("u-web", "web", "default", "LS")
JOB = pod_labels("u-job", "job", "batch", "BE")


def test_pod_histogram_buckets_are_the_log2_slots_in_seconds_and_cumulative() -> None:
    registry = scrape(SchedLatencyExposition("n1", latency_state))

    (family,) = [m for m in registry.collect() if m.name == POD]
    assert family.type == "histogram"
    web_buckets = [
        (s.labels["le"], s.value)
        for s in family.samples
        if s.name == f"{POD}_bucket" and s.labels["pod_uid"] == "u-web"
    ]
    assert len(web_buckets) == TOP_SLOT + 2  # slots 0..22 and +Inf
    bounds = [le for le, _ in web_buckets]
    assert bounds[:4] == ["2e-06", "4e-06", "8e-06", "1.6e-05"]  # 2^(s+1) us
    assert bounds[-2:] == ["8.388608", "+Inf"]
    counts = dict(web_buckets)
    assert counts["8e-06"] == 0  # slot 3 is [8, 16) us: not below 8 us
    assert counts["1.6e-05"] == 980
    assert counts["0.004096"] == 980  # slot 12 is [4096, 8192) us
    assert counts["0.008192"] == 1000
    assert counts["+Inf"] == 1000
    assert [v for _, v in web_buckets] == sorted(v for _, v in web_buckets)
    assert registry.get_sample_value(f"{POD}_count", WEB) == 1000
    # midpoints: 12 us for slot 3, 6144 us for slot 12
    assert registry.get_sample_value(f"{POD}_sum", WEB) == pytest.approx(
        (980 * 12 + 20 * 6144) / 1e6
    )


def test_waits_above_the_top_bucket_count_only_in_inf() -> None:
    registry = scrape(SchedLatencyExposition("n1", latency_state))

    assert registry.get_sample_value(f"{POD}_bucket", {**JOB, "le": "8.388608"}) == 50
    assert registry.get_sample_value(f"{POD}_bucket", {**JOB, "le": "+Inf"}) == 51
    assert registry.get_sample_value(f"{POD}_count", JOB) == 51


def test_class_histogram_adds_up_its_pods_and_keeps_those_that_left() -> None:
    state = latency_state()
    exposition = SchedLatencyExposition("n1", lambda: state)
    registry = scrape(exposition)
    ls = {"node": "n1", "qos": "LS"}

    assert registry.get_sample_value(f"{QOS}_count", ls) == 1100  # web 1000 + api 100
    assert registry.get_sample_value(f"{QOS}_bucket", {**ls, "le": "1.6e-05"}) == 980
    assert registry.get_sample_value(f"{QOS}_bucket", {**ls, "le": "6.4e-05"}) == 1080
    assert registry.get_sample_value(f"{QOS}_count", {"node": "n1", "qos": "BE"}) == 51

    # api leaves and web waits 5 more times: the class counts never go down
    del state.pods["u-api"]
    state.pods["u-web"].total[3] += 5
    assert registry.get_sample_value(f"{POD}_count", {**WEB}) == 1005
    assert registry.get_sample_value(f"{QOS}_count", ls) == 1105
    assert registry.get_sample_value(f"{QOS}_bucket", {**ls, "le": "6.4e-05"}) == 1085
    assert (
        registry.get_sample_value(f"{POD}_count", pod_labels("u-api", "api", "default", "LS"))
        is None
    )


def test_quantiles_are_over_the_latest_window_and_only_for_pods_that_waited() -> None:
    registry = scrape(SchedLatencyExposition("n1", latency_state))

    (family,) = [m for m in registry.collect() if m.name == QUANTILE]
    assert family.type == "summary"  # Prometheus keeps the quantile label for summaries
    p50 = registry.get_sample_value(QUANTILE, {**WEB, "quantile": "0.5"})
    p99 = registry.get_sample_value(QUANTILE, {**WEB, "quantile": "0.99"})
    assert p50 == pytest.approx((8 + 8 * 50 / 98) / 1e6)  # rank 50 of 98 in [8, 16) us
    assert p99 == pytest.approx(6144 / 1e6)  # rank 99: halfway into [4096, 8192) us
    assert registry.get_sample_value(QUANTILE, {**JOB, "quantile": "0.5"}) is None
    assert registry.get_sample_value(f"{QUANTILE}_count", JOB) == 51  # cumulative, as summaries


@pytest.mark.parametrize(
    "state",
    [pytest.param(lambda: None, id="none"), pytest.param(SchedLatencyState, id="empty")],
)
def test_no_state_gives_no_series(state: Callable[[], SchedLatencyState | None]) -> None:
    registry = scrape(SchedLatencyExposition("n1", state))

    families = list(registry.collect())
    assert {f.name for f in families} == {POD, QOS, QUANTILE}
    assert [s for f in families for s in f.samples] == []


def test_exposition_passes_promtool() -> None:
    if not PROMTOOL.exists():
        pytest.skip(f"promtool not found at {PROMTOOL} (scripts/setup.sh installs it)")
    metrics = KoordletMetrics("n1")
    metrics.registry.register(SchedLatencyExposition("n1", latency_state))
    metrics.observe_write("cpu.shares", "applied", 0.0001)  # both units of a write
    text = generate_latest(metrics.registry).decode()
    assert f"{QUANTILE}{{" in text and f"{QOS}_bucket{{" in text

    result = subprocess.run(
        [str(PROMTOOL), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    # Koordinator's *_milliseconds histograms are the only names promtool may flag (their unit)
    allowed = {
        f'{name} use base unit "seconds" instead of "milliseconds"'
        for name in MILLISECOND_HISTOGRAMS
    }
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert [line for line in problems if line not in allowed] == []


# -- the inspect view --------------------------------------------------------------------------


def usage_cache(now: float = NOW) -> MetricCache:
    psi = {"psi_resource_type": "cpu", "psi_precision": "avg10"}
    cache = MetricCache()
    cache.append(
        [
            Sample("pod_cpu_usage", {"pod_uid": "u-web"}, now - 1, 1.5),
            Sample("pod_cpu_throttled", {"pod_uid": "u-web"}, now - 1, 0.25),
            Sample("pod_psi", {"pod_uid": "u-web", **psi, "psi_degree": "some"}, now - 5, 12.5),
            Sample("pod_psi", {"pod_uid": "u-web", **psi, "psi_degree": "full"}, now - 5, 3.0),
            Sample("pod_psi", {"pod_uid": "u-api", **psi, "psi_degree": "full"}, now - 5, 1.0),
            Sample("pod_cpu_usage", {"pod_uid": "u-job"}, now - 60, 3.0),  # stale
        ]
    )
    cpi = []
    for cid, cycles, instructions, age in (
        ("c-main", 300.0, 100.0, 30),
        ("c-side", 100.0, 100.0, 30),
        ("c-job", 900.0, 100.0, CPI_FRESH_SECONDS + 1),  # stale: no CPI for job
    ):
        uid = "u-job" if cid == "c-job" else "u-web"
        labels = {"pod_uid": uid, "container_id": cid}
        for field, value in (
            ("cycles", cycles),
            ("instructions", instructions),
            ("cpi", cycles / instructions),
        ):
            cpi.append(Sample("container_cpi", {**labels, "cpi_field": field}, now - age, value))
    cache.append(cpi)
    return cache


def make_views(
    state: Callable[[], SchedLatencyState] | None = latency_state,
    health: Mapping[str, Any] | None = None,
) -> KoordletViews:
    return KoordletViews(
        node_name="n1",
        pods=PodStore(),
        cache=usage_cache(),
        executor=Executor(Path("/nonexistent")),
        topology=Topology(frozenset({0, 1}), {0: frozenset({0, 1})}, {0: 0}, 8 << 30),
        kernel=KernelFeatures(),
        health=lambda: health or {"schedlat": {"unavailable": "", "passes": 3}},
        schedlat=state,
        clock=lambda: NOW,
    )


def test_inspect_lists_latency_next_to_usage_throttling_psi_and_cpi() -> None:
    data = make_views().inspect()

    assert data is not None
    assert (data["available"], data["reason"], data["window_seconds"]) == (True, "", 10.0)
    rows = {p["name"]: p for p in data["pods"]}
    web = rows["web"]
    assert (web["uid"], web["namespace"], web["qos"], web["waits"]) == (
        "u-web",
        "default",
        "LS",
        100,
    )
    assert web["runq_p50_us"] == pytest.approx(8 + 8 * 50 / 98)
    assert web["runq_p99_us"] == pytest.approx(6144)
    assert (web["cpu_cores"], web["throttled"]) == (1.5, 0.25)
    assert web["psi_cpu_some_avg10"] == 12.5  # cpu "some", not "full"
    assert web["cpi"] == pytest.approx(2.0)  # (300 + 100) cycles / (100 + 100) instructions
    job = rows["job"]
    assert (job["runq_p50_us"], job["runq_p99_us"], job["waits"]) == (None, None, 0)
    assert (job["cpu_cores"], job["psi_cpu_some_avg10"], job["cpi"]) == (None, None, None)
    assert rows["api"]["psi_cpu_some_avg10"] is None  # only a "full" line
    assert data["classes"]["BE"] == {"p50_us": None, "p99_us": None, "waits": 0}
    assert data["classes"]["LS"]["waits"] == 110
    node = data["node"]  # 40 waits of 2-4 us outside any pod
    assert (node["waits"], node["p50_us"]) == (40, pytest.approx(3.0))
    assert node["p99_us"] == pytest.approx(2 + 2 * 39.6 / 40)
    json.dumps(data)  # the server sends it as it is


def test_inspect_one_pod_by_uid_namespace_name_or_name() -> None:
    views = make_views()

    for key in ("u-web", "default/web", "web"):
        found = views.inspect(key)
        assert found is not None, key
        assert found["uid"] == "u-web"
    assert views.inspect("nope") is None
    assert views.inspect("batch/web") is None


def test_inspect_pod_has_both_histograms_and_its_containers() -> None:
    found = make_views().inspect("web")

    assert found is not None
    window = found["histogram"]["window"]
    assert [s["slot"] for s in window] == list(range(3, 13))  # empty slots between included
    assert window[0] == {"slot": 3, "low_us": 8.0, "high_us": 16.0, "count": 98}
    assert [s["count"] for s in window[1:-1]] == [0] * 8
    assert window[-1] == {"slot": 12, "low_us": 4096.0, "high_us": 8192.0, "count": 2}
    assert sum(s["count"] for s in found["histogram"]["total"]) == 1000
    assert [c["name"] for c in found["containers"]] == ["main", "sidecar"]
    sidecar = found["containers"][1]
    assert sidecar["waits"] == 8 and sidecar["p99_us"] < 16
    assert found["containers"][0]["p99_us"] > 4096
    assert found["cpi"] == pytest.approx(2.0) and found["window_seconds"] == 10.0


def test_inspect_with_the_gate_off_says_so() -> None:
    data = make_views(state=None).inspect()

    assert data is not None
    assert data["available"] is False
    assert "SchedLatencyCollector" in data["reason"] and "--feature-gates" in data["reason"]
    assert data["pods"] == []


def test_inspect_of_an_unavailable_collector_gives_its_reason_even_for_a_pod() -> None:
    reason = "run-queue latency off: not root: loading BPF programs needs CAP_BPF and CAP_PERFMON"
    views = make_views(health={"schedlat": {"unavailable": reason}})

    for found in (views.inspect(), views.inspect("web"), views.inspect("nope")):
        assert found is not None
        assert (found["available"], found["reason"]) == (False, reason)


def test_empty_histograms_give_no_slots() -> None:
    state = SchedLatencyState(pods={"u": PodLatency("u", "idle", "default", "BE")})

    found = make_views(state=lambda: state).inspect("idle")

    assert found is not None
    assert found["histogram"] == {"window": [], "total": []}
    assert (found["runq_p99_us"], found["waits"]) == (None, 0)


# -- the route ---------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[StatusServer]:
    srv = StatusServer("127.0.0.1", 0, KoordletMetrics("n1").registry, make_views())
    srv.start()
    yield srv
    srv.stop()


def get(srv: StatusServer, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_inspect_route_serves_the_table_and_one_pod(server: StatusServer) -> None:
    status, data = get(server, "/api/v1/inspect")
    assert status == 200
    assert set(data) >= {"available", "reason", "window_seconds", "pods", "classes", "node"}
    assert {p["uid"] for p in data["pods"]} == {"u-web", "u-api", "u-job"}

    status, pod = get(server, "/api/v1/inspect?pod=default%2Fweb")
    assert status == 200
    assert pod["uid"] == "u-web" and pod["histogram"]["window"][0]["count"] == 98


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        pytest.param("/api/v1/inspect?pod=nope", 404, "no pod 'nope' on this node", id="unknown"),
        pytest.param("/api/v1/inspect?pdo=web", 400, "unknown parameter 'pdo'", id="typo"),
        pytest.param("/api/v1/inspect?pod=a&pod=b", 400, "more than once", id="two-pods"),
    ],
)
def test_inspect_route_refuses_with_a_json_error(
    server: StatusServer, path: str, code: int, message: str
) -> None:
    status, body = get(server, path)

    assert status == code
    assert message in body["error"]


def test_no_created_series_as_in_koordinators_scrape() -> None:
    metrics = KoordletMetrics("n1")
    metrics.hook_failures.labels("n1", "GroupIdentity", "err").inc()
    text = generate_latest(metrics.registry).decode()
    assert "koordlet_runtime_hook_failures_total{" in text
    assert "_created" not in text
