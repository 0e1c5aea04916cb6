"""prodReclaimableMetric in the NodeMetric report, the --prediction-* flags, and what the
kubelet's pod list gives the predictor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.nodemetric import read_node_metric
from koordlet import cli
from koordlet.cluster.kubelet import spec_facts
from koordlet.metriccache import MetricCache, Sample
from koordlet.nodemetric import build_status
from koordlet.prediction.peak import RECLAIMABLE_CPU, RECLAIMABLE_MEMORY, PeakPredictor
from koordlet.prediction.server import CPU_BUCKETS, MEMORY_BUCKETS, ServerSettings
from koordlet.states.nodeconfig import NodeConfig
from koordlet.states.pods import KnownPod, PodStore
from nri_plugin import api
from runtimehooks.request import PodSpecFacts
from tests.unit.commandline import refusal

NOW = 1_800_000_000.0
GI, MI = 1 << 30, 1 << 20


def store() -> PodStore:
    pods = PodStore()
    for uid, qos in (("u-web", "LS"), ("u-job", "BE"), ("u-idle", "LS")):
        pod = api.PodSandbox(id=uid, name=uid[2:], uid=uid, namespace="default")
        pod.labels[keys.LABEL_QOS_CLASS] = qos
        pod.linux.cgroup_parent = f"/kubepods/pod{uid}"
        pods.put_pod(pod)
    return pods


def cache() -> MetricCache:
    c = MetricCache()
    samples = []
    for i in range(300):
        ts = NOW - 299 + i
        samples += [
            Sample("node_cpu_usage", {}, ts, 1.5),
            Sample("node_memory_usage", {}, ts, 4 * GI),
            Sample("sys_cpu_usage", {}, ts, 0.25),
            Sample("sys_memory_usage", {}, ts, GI),
            Sample("pod_cpu_usage", {"pod_uid": "u-web"}, ts, 0.5),
            Sample("pod_memory_usage", {"pod_uid": "u-web"}, ts, 256 * MI),
            Sample("pod_cpu_usage", {"pod_uid": "u-job"}, ts, 0.75),
            Sample("pod_memory_usage", {"pod_uid": "u-job"}, ts, 512 * MI),
        ]
    c.append(samples)
    return c


def test_the_report_carries_the_prediction_for_the_pods_it_lists() -> None:
    seen: list[str] = []

    def reclaimable(pods: list[KnownPod], now: float) -> tuple[int, int]:
        seen.extend(p.request.uid for p in pods)
        assert now == NOW
        return 1375, 1_452_015_616

    status = build_status(cache(), store(), NOW, durations=(300,), reclaimable=reclaimable)
    assert status["prodReclaimableMetric"] == {
        "resource": {"resources": {"cpu": "1375m", "memory": "1452015616"}}
    }
    assert sorted(seen) == ["u-job", "u-web"]  # u-idle has no usage: not listed, not predicted
    assert read_node_metric({"status": status}).prod_reclaimable == (1375, 1_452_015_616)


def test_without_a_prediction_the_report_has_no_prod_reclaimable() -> None:
    status = build_status(cache(), store(), NOW, reclaimable=lambda pods, now: None)
    assert "prodReclaimableMetric" not in status
    assert read_node_metric({"status": status}).prod_reclaimable is None
    assert "prodReclaimableMetric" not in build_status(cache(), store(), NOW)


def end_of_bucket(cores: float) -> int:
    return int(CPU_BUCKETS.start(CPU_BUCKETS.find(cores) + 1) * 1000)


def end_of_bucket_memory(amount: float) -> int:
    return int(MEMORY_BUCKETS.start(MEMORY_BUCKETS.find(amount) + 1))


def test_one_training_pass_then_the_report_has_koordinators_prod_reclaimable(
    tmp_path: Path,
) -> None:
    pods = store()
    pods.put_specs(
        {
            "u-web": PodSpecFacts(cpu_request=2000, memory_request=GI, created=NOW - 7200),
            "u-job": PodSpecFacts(cpu_request=1000, memory_request=GI, created=NOW - 7200),
        }
    )
    recorded: dict[str, tuple[int, int]] = {}
    predictor = PeakPredictor(
        cache(),
        tmp_path,
        ServerSettings(5.0, 3600.0, 3600.0, 600.0, 60.0, 12),
        cold_start=60.0,
        safety_margin_percent=10,
        node=lambda: NodeConfig(allocatable={"cpu": 8000, "memory": 16 * GI}),
        record=recorded.__setitem__,
        clock=lambda: NOW,
    )
    assert build_status(predictor.server.cache, pods, NOW).get("prodReclaimableMetric") is None
    assert predictor.prod_reclaimable(pods, NOW) is None  # not trained: no system model

    predictor.run_pass(pods.snapshot())

    status = build_status(predictor.server.cache, pods, NOW, reclaimable=predictor.prod_reclaimable)
    # per pod (u-web, the only prod pod with usage): 2000m - p95 * 1.1
    web_peak = int(end_of_bucket(0.5) * 1.1)
    by_pod = 2000 - web_peak
    # per class: 2000m - (system + prod class + no-class (one 0 sample: bucket 0's end)) * 1.1
    class_peak = int((end_of_bucket(0.25) + end_of_bucket(0.5) + end_of_bucket(0)) * 1.1)
    by_class = 2000 - class_peak
    assert recorded["podReclaimablePredictor"][0] == by_pod
    assert recorded["priorityReclaimablePredictor"][0] == by_class
    memory_by_pod = GI - int(end_of_bucket_memory(256 * MI) * 1.1)
    assert recorded["podReclaimablePredictor"][1] == memory_by_pod
    expected_cpu = min(by_pod, by_class)
    got = read_node_metric({"status": status}).prod_reclaimable
    assert got is not None and got[0] == expected_cpu
    assert status["prodReclaimableMetric"]["resource"]["resources"]["cpu"] == f"{expected_cpu}m"
    # the pass kept its prediction in the metric cache too (for koordctl whatif)
    kept = predictor.server.cache
    assert kept.last(RECLAIMABLE_CPU, {}, NOW, 0) == expected_cpu / 1000
    assert kept.last(RECLAIMABLE_MEMORY, {}, NOW, 0) == got[1]
    predictor.close()


def test_the_prediction_flags_set_the_config() -> None:
    args, _ = cli.parse_args(
        [
            "--prediction-training-interval=2s",
            "--prediction-cold-start-duration=7s",
            "--prediction-safety-margin-percent=35",
            "--prediction-cpu-histogram-decay-halflife=45m",
            "--prediction-memory-histogram-decay-halflife=3h",
            "--prediction-model-expiration-duration=17m",
            "--prediction-model-checkpoint-interval=90s",
            "--prediction-model-checkpoint-max-per-step=3",
        ]
    )
    config = cli.config_from_args(args)
    assert config.prediction_training_interval == 2
    assert config.prediction_cold_start == 7
    assert config.prediction_safety_margin_percent == 35
    assert config.prediction_cpu_half_life == 2700
    assert config.prediction_memory_half_life == 3 * 3600
    assert config.prediction_model_expiration == 17 * 60
    assert config.prediction_checkpoint_interval == 90
    assert config.prediction_checkpoint_max_per_step == 3
    assert config.ignored_flags == ()


@pytest.mark.parametrize(
    "flag",
    [
        "--prediction-training-interval=0s",
        "--prediction-cpu-histogram-decay-halflife=-90",
        "--prediction-memory-histogram-decay-halflife=0",
    ],
)
def test_a_training_interval_or_half_life_of_zero_or_less_is_refused(flag: str) -> None:
    said = refusal(cli.build_parser, [flag])
    name, value = flag.split("=")
    assert f"argument {name}: '{value}' is not more than 0" in said


def test_the_checkpoint_path_flag_is_accepted_and_named_as_without_effect() -> None:
    translated = cli.translate(["--prediction-checkpoint-filepath=/ckpt"])
    assert "prediction.db" in translated.ignored["prediction-checkpoint-filepath"]


def kubelet_pod(meta: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"uid": "u1", "name": "web", "namespace": "default", **meta},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1250m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "3", "memory": "100Mi"}}},
            ]
        },
        "status": {"phase": phase},
    }


@pytest.mark.parametrize(
    ("meta", "phase", "created", "terminating"),
    [
        ({"creationTimestamp": "2027-01-15T06:00:00Z"}, "Running", NOW - 7200, False),
        (
            {
                "creationTimestamp": "2027-01-15T06:00:00Z",
                "deletionTimestamp": "2027-01-15T08:00:00Z",
            },
            "Running",
            NOW - 7200,
            True,
        ),
        ({}, "Succeeded", None, True),
        ({"creationTimestamp": "yesterday"}, "Pending", None, False),
    ],
)
def test_the_kubelets_pod_list_gives_requests_creation_and_termination(
    meta: dict[str, Any], phase: str, created: float | None, terminating: bool
) -> None:
    facts = spec_facts(kubelet_pod(meta, phase))
    assert facts.cpu_request == 4250  # b's request defaults to its limit
    assert facts.created == created
    assert facts.terminating is terminating
