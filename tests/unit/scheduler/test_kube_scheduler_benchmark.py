"""benchmarks/kube_scheduler_extender.py's pure parts: the p99 it reads from kube-scheduler's
histogram, and the configurations and objects it hands kube-scheduler and koord-scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmarks import kube_scheduler_extender as bench
from koordapi import keys
from scheduler import deviceshare, schedulerconfig

# Two profiles' scheduled series are summed; the error series and another metric are not.
EXPOSITION = """\
# HELP scheduler_scheduling_attempt_duration_seconds [STABLE] Scheduling attempt latency
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="a",result="scheduled"} 1
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.002",profile="a",result="scheduled"} 7
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.004",profile="a",result="scheduled"} 30
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="a",result="scheduled"} 31
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="b",result="scheduled"} 2
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.002",profile="b",result="scheduled"} 3
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.004",profile="b",result="scheduled"} 7
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="b",result="scheduled"} 9
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="a",result="error"} 500
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="a",result="error"} 900
scheduler_scheduling_attempt_duration_seconds_sum{profile="a",result="scheduled"} 0.07
scheduler_schedule_attempts_total{profile="a",result="scheduled"} 31
"""


def test_histogram_sums_the_matching_series_bucket_by_bucket() -> None:
    buckets = bench.histogram(EXPOSITION, bench.ATTEMPT, {"result": "scheduled"})
    assert buckets == [(0.001, 3.0), (0.002, 10.0), (0.004, 37.0), (float("inf"), 40.0)]


def test_quantile_interpolates_within_the_bucket_as_histogram_quantile() -> None:
    buckets = bench.histogram(EXPOSITION, bench.ATTEMPT, {"result": "scheduled"})
    # rank 20 of 40 falls in (0.002, 0.004], 10 of its 27 samples in
    assert bench.quantile(0.5, buckets) == pytest.approx(0.002 + 0.002 * 10 / 27)
    # rank 1.2 in the first bucket, from 0
    assert bench.quantile(0.03, buckets) == pytest.approx(0.001 * 1.2 / 3)
    # rank 39.6 is past the last finite bound: that bound, as Prometheus answers
    assert bench.quantile(0.99, buckets) == 0.004


def test_quantile_of_no_samples_is_none() -> None:
    assert bench.quantile(0.99, []) is None
    assert bench.quantile(0.99, [(0.5, 0.0), (float("inf"), 0.0)]) is None
    assert bench.histogram(EXPOSITION, bench.ATTEMPT, {"result": "unschedulable"}) == []


# kube-scheduler's kubescheduler.config.k8s.io/v1 Extender and ExtenderTLSConfig fields.
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
    "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
    "ignorable",
}  # fmt: skip
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData",
              "caData"}  # fmt: skip


def test_the_extender_configuration_round_trips_with_kube_schedulers_fields(
    tmp_path: Path,
) -> None:
    entry = bench.extender_entry("https://127.0.0.1:10443/scheduler", tmp_path / "ca.crt", "ks")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(bench.scheduler_config(tmp_path / "kc", entry)))
    config = yaml.safe_load(path.read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"]["qps"] == bench.CLIENT_QPS
    (read,) = config["extenders"]
    assert set(read) <= EXTENDER_FIELDS
    assert set(read["tlsConfig"]) <= TLS_FIELDS
    assert read["bindVerb"] == "bind" and read["nodeCacheCapable"] is True
    assert "managedResources" not in read  # the chart's allPods: every pod reaches it
    alone = bench.scheduler_config(tmp_path / "kc", None)
    assert "extenders" not in alone
    assert {k: v for k, v in config.items() if k != "extenders"} == alone


def test_koord_scheduler_takes_device_share_args_from_its_config(tmp_path: Path) -> None:
    path = tmp_path / "koord.yaml"
    path.write_text(yaml.safe_dump(bench.koord_scheduler_config()))
    read = schedulerconfig.read(str(path))
    assert any(t.startswith("DeviceShareArgs") for t in read.taken), read.taken
    assert read.scheduler_name == "default-scheduler"


def test_every_twentieth_pod_asks_for_a_gpu_share_the_extender_accepts() -> None:
    pods = [bench.pod("ns", i) for i in range(41)]
    with_gpu = [i for i, p in enumerate(pods) if deviceshare.gpu_request(p) is not None]
    assert with_gpu == [19, 39]
    request = deviceshare.gpu_request(pods[19])
    assert isinstance(request, deviceshare.GPURequest), request
    assert all(p["spec"]["schedulerName"] == "default-scheduler" for p in pods)


def test_every_tenth_node_offers_four_gpus() -> None:
    nodes = bench.node_objects(23, seed=5)
    offering = [i for i, (n, _) in enumerate(nodes)
                if keys.GPU_CORE in n["status"]["allocatable"]]  # fmt: skip
    assert offering == [0, 10, 20]
    node, metric = nodes[10]
    assert node["status"]["allocatable"][keys.GPU_CORE] == "400"
    assert "uid" not in node["metadata"]
    assert metric["nodeMetric"]["nodeUsage"]["resources"]["cpu"].endswith("m")
    assert len(bench.gpus("n")) == 4


def test_the_peer_scheduler_gets_run_as_client_and_run_bs_load_aware_arguments(
    tmp_path: Path,
) -> None:
    loadaware = yaml.safe_load(bench.VALUES.read_text())["scheduler"]["loadAware"]
    config = bench.peer_scheduler_config(tmp_path / "kc", loadaware)
    alone = bench.scheduler_config(tmp_path / "kc", None)
    assert config["clientConnection"] == alone["clientConnection"]
    assert config["leaderElection"] == {"leaderElect": False}
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == bench.pod("ns", 0)["spec"]["schedulerName"]
    args = {c["name"]: c["args"] for c in profile["pluginConfig"]}
    assert args["LoadAwareScheduling"]["usageThresholds"] == loadaware["usageThresholds"]
    assert args["LoadAwareScheduling"]["nodeMetricExpirationSeconds"] == 180
    assert args["LoadAwareScheduling"]["filterExpiredNodeMetrics"] is True
    assert args["DeviceShare"]["kind"] == "DeviceShareArgs"
    plugins = profile["plugins"]
    for point in ("filter", "score", "reserve"):
        names = [p["name"] for p in plugins[point]["enabled"]]
        assert {"LoadAwareScheduling", "DeviceShare"} <= set(names), point
    weights = {p["name"]: p["weight"] for p in plugins["score"]["enabled"]}
    assert weights["Reservation"] == 5000 and weights["LoadAwareScheduling"] == 1
    binders = [{"name": "Reservation"}, {"name": "DefaultBinder"}]
    assert plugins["bind"] == {"disabled": [{"name": "*"}], "enabled": binders}


def test_the_ratio_of_two_runs_is_none_without_a_rate() -> None:
    assert bench.ratio({"pods_per_s": 150.0}, {"pods_per_s": 100.0}) == 1.5
    assert bench.ratio({"pods_per_s": None}, {"pods_per_s": 100.0}) is None
