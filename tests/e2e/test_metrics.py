"""koordlet's collectors on the real node: a busy container shows up, attributed to its pod."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import koordctl as ctl
from koordapi import keys
from koordctl import client
from koordlet.koordseries import NOT_MEASURED
from koordlet.metrics import MILLISECOND_HISTOGRAMS
from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import scaled
from tests.unit.koordlet.upstream_metrics import UPSTREAM

BUSY_LOOP = ["/bin/sh", "-c", "while :; do :; done"]


@pytest.fixture
def koordlet(node: Node) -> Iterator[KoordletProcess]:
    with KoordletProcess(node, args=("--collect-res-used-interval", "1s")) as running:
        yield running


def pod_usage(koordlet: KoordletProcess, uid: str) -> dict[str, Any] | None:
    pods = client.fetch(f"127.0.0.1:{koordlet.port}", "/api/v1/pods")
    return next((p for p in pods if p["uid"] == uid), None)


def test_a_busy_container_shows_in_koordctl_and_metrics_with_its_pod(
    node: Node, koordlet: KoordletProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    busy = PodSpec.new(name="busy", qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
    idle = PodSpec.new(name="idle", qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
    busy_id = node.run_pod(busy)
    node.run_container(busy_id, ContainerSpec("spin", command=BUSY_LOOP))
    node.run_container(node.run_pod(idle), ContainerSpec("sleep"))

    def busy_cpu() -> float:
        found = pod_usage(koordlet, busy.uid)
        return (found or {}).get("usage", {}).get("cpu") or 0.0

    koordlet.wait_until(lambda: busy_cpu() > 0.5, timeout=20, what="busy pod above 0.5 core")

    # The idle pod's own start-up (runc, the shell) can still be in its last rate on a slow
    # machine; once past, it stays under a tenth of a core.
    koordlet.wait_until(
        lambda: ((pod_usage(koordlet, idle.uid) or {}).get("usage", {}).get("cpu") or 0.0) < 0.1,
        timeout=20,
        what="idle pod under 0.1 core",
    )
    busy_pod = pod_usage(koordlet, busy.uid)
    idle_pod = pod_usage(koordlet, idle.uid)
    assert busy_pod is not None and idle_pod is not None
    assert busy_pod["qos"] == "LS"
    (spin,) = [c for c in busy_pod["containers"] if c["name"] == "spin"]
    assert spin["usage"]["cpu"] > 0.5  # the container, not just the pod
    assert (idle_pod["usage"]["cpu"] or 0.0) < 0.1
    assert koordlet.metric("koordlet_pod_used_cpu_cores", pod_uid=busy.uid) > 0.5
    assert koordlet.metric("koordlet_node_used_cpu_cores") > 0.5
    assert koordlet.metric("koordlet_collector_up", collector="pods") == 1

    assert ctl.main(["pods", "--addr", f"127.0.0.1:{koordlet.port}"]) == 0
    assert f"default/{busy.name}" in capsys.readouterr().out
    assert ctl.main(["top", "--once", "--addr", f"127.0.0.1:{koordlet.port}"]) == 0
    top = capsys.readouterr().out
    busy_row = next(line for line in top.splitlines() if f"default/{busy.name}" in line)
    assert float(busy_row.split()[2]) > 0.5


def test_the_node_metric_report_is_written_in_standalone_mode(
    node: Node, koordlet: KoordletProcess
) -> None:
    report = Path(node.containerd.layout.base) / "nodemetric.json"

    def node_cpu() -> bool:  # the first report may come before the first samples
        with contextlib.suppress(OSError, ValueError, KeyError):  # not there, or half there
            usage = json.loads(report.read_text())["status"]["nodeMetric"]["nodeUsage"]
            return "cpu" in usage.get("resources", {})
        return False

    koordlet.wait_until(node_cpu, timeout=20, what="a NodeMetric report with the node's CPU")
    status = json.loads(report.read_text())["status"]
    assert set(status) >= {"updateTime", "nodeMetric", "podsMetric"}
    assert status["nodeMetric"]["nodeUsage"]["resources"]["cpu"].endswith("m")


def test_metrics_pass_promtool(koordlet: KoordletProcess) -> None:
    promtool = paths.require(paths.PROMTOOL, "promtool")
    koordlet.wait_until(lambda: koordlet.metric("koordlet_collector_up", collector="node") == 1)
    text = koordlet.metrics_text()
    result = subprocess.run(
        [str(promtool), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=scaled(30),
        check=False,
    )
    # Koordinator's *_milliseconds histograms are the only names promtool may flag (their unit)
    allowed = {
        f'{name} use base unit "seconds" instead of "milliseconds"'
        for name in MILLISECOND_HISTOGRAMS
    }
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert [line for line in problems if line not in allowed] == []


def test_cpu_pressure_of_a_crowded_container_is_its_pods_psi(node: Node) -> None:
    # Twice as many spinning loops as the node has CPUs (koordlet's cpuset hook gives an LS
    # container the whole share pool, whatever its own cpuset): each loop is runnable and waiting
    # half of the time, so the pod's cpu.pressure "some" climbs towards 100 %; an idle pod's
    # stays near 0.
    args = ("--feature-gates", "PSICollector=true", "--psi-collector-interval", "1s")
    with KoordletProcess(node, args=args) as koordlet:
        crowded = PodSpec.new(qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
        idle = PodSpec.new(qos="burstable", labels={keys.LABEL_QOS_CLASS: "LS"})
        loops = 2 * (os.cpu_count() or 1)
        spin = f"for i in $(seq {loops - 1}); do (while :; do :; done) & done; while :; do :; done"
        crowded_id = node.run_pod(crowded)
        node.run_container(crowded_id, ContainerSpec("spin", command=["/bin/sh", "-c", spin]))
        node.run_container(node.run_pod(idle), ContainerSpec("sleep"))

        def cpu_some(uid: str) -> float:
            # The last sample of the last 10 s: koordlet shares the saturated CPUs with the
            # loops, so in a slow VM its 1 s passes can be seconds apart.
            found = client.fetch(
                f"127.0.0.1:{koordlet.port}",
                "/api/v1/query?metric=pod_psi&window=10s&agg=last&label.psi_resource_type=cpu"
                f"&label.psi_degree=some&label.pod_uid={uid}",
            )
            return float(found[0]["last"]) if found else -1.0

        koordlet.wait_until(lambda: cpu_some(crowded.uid) > 20, 30, "crowded pod's cpu pressure")
        # The idle pod's own start (runc, its sleep) waited for the saturated CPUs too, and its
        # average decays from there: on a slow machine (a VM under emulation) it can still be
        # above 10 % when the crowded pod's passes 20 %. Both are read in the same poll, so the
        # idle pod's is low while the crowded pod's stays high.
        koordlet.wait_until(
            lambda: 0 <= cpu_some(idle.uid) < 10 and cpu_some(crowded.uid) > 20,
            30,
            "idle pod's pressure low while the crowded pod's stays high",
        )


# -- Koordinator's metric names on a real scrape ------------------------------------------------

CENSUS_SLO = """\
resourceUsedThresholdWithBE:
  enable: true
  cpuSuppressPolicy: cpuset
  cpuSuppressThresholdPercent: 100
node:
  allocatable:
    kubernetes.io/batch-cpu: "3500"
    kubernetes.io/batch-memory: 6Gi
"""
# Koordinator's series that need what this test does not make happen; each is shown by the
# test named (the unit census, tests/unit/koordlet/test_koordseries.py, has them all).
ONLY_WHEN = {
    "koordlet_pod_eviction": "an eviction: test_qos_manager.py's BE memory hog",
    "koordlet_pod_eviction_detail": "an eviction: test_qos_manager.py's BE memory hog",
    "koordlet_core_sched_cookie_manage_status": "a core-scheduling pod on a kernel with it",
    "koordlet_kubelet_request_duration_seconds": "cluster mode: test_kubelet.py",
    "koordlet_container_scaled_cfs_burst_us": "a cpuBurstStrategy: test_qos_manager.py",
    "koordlet_container_scaled_cfs_quota_us": "a cpuBurstStrategy: test_qos_manager.py",
}
# Those that need something of this machine, by the collector that must be up for them.
NEEDS_COLLECTOR = {"koordlet_container_cpi": "cpi", "koordlet_pod_psi": "psi"}


def families(text: str) -> dict[str, tuple[str, set[str]]]:
    out = {}
    for family in text_string_to_metric_families(text):
        if family.samples:
            labels = {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}
            out[family.name] = (family.type, labels)
    return out


def test_koordinators_metric_names_are_in_a_real_scrape_or_said_why_not(node: Node) -> None:
    gates = "PSICollector=true,CPICollector=true,OOMScoreAdj=true"
    args = (
        "--collect-res-used-interval", "1s", "--psi-collector-interval", "1s",
        "--feature-gates", gates,
        # a peak-prediction pass before the reports, for the predictor's gauges
        "--prediction-training-interval", "1s",
    )  # fmt: skip
    with KoordletProcess(node, node_slo=CENSUS_SLO, args=args) as koordlet:
        requests = {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: "256Mi"}
        batch = {"main": {"requests": requests, "limits": {keys.BATCH_CPU: "1k"}}}
        pod = PodSpec.new(
            name="census",
            qos="besteffort",
            labels={keys.LABEL_QOS_CLASS: "BE"},
            annotations={
                keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": batch}),
                keys.ANNOTATION_OOM_SCORE_ADJ: "600",
            },
        )
        node.run_container(node.run_pod(pod), ContainerSpec("main", command=BUSY_LOOP))
        report = Path(node.containerd.layout.base) / "nodemetric.json"

        waited = [
            "koordlet_node_metric_node_usage",
            "koordlet_node_metric_system_usage",
            "koordlet_be_suppress_be_used_cpu_cores",
            "koordlet_container_oom_score_adj",
            "koordlet_node_predicted_resource_reclaimable",
        ]
        psi = ["koordlet_pod_psi", "koordlet_container_psi"]  # where PSI works here
        missing: list[str] = []

        def reported() -> bool:
            psi_up = koordlet.metric("koordlet_collector_up", collector="psi") == 1
            got = families(koordlet.metrics_text())
            missing[:] = [name for name in waited + psi * psi_up if name not in got]
            return not missing

        koordlet.wait_until(report.exists, timeout=20, what="a NodeMetric report")
        with contextlib.suppress(TimeoutError):
            koordlet.wait_until(reported, timeout=30, what=", ".join(waited))
        assert missing == [], koordlet.log_text()[-3000:]
        text = koordlet.metrics_text()
        up = {c: koordlet.metric("koordlet_collector_up", collector=c) for c in ("cpi", "psi")}
    exported = families(text)
    absent, wrong = [], []
    for name, (kind, labels) in UPSTREAM.items():
        if name in NOT_MEASURED:
            assert name not in exported, name
            continue
        if name not in exported:
            needs = NEEDS_COLLECTOR.get(name.replace("koordlet_container_psi", "koordlet_pod_psi"))
            if name in ONLY_WHEN or (needs is not None and up[needs] != 1):
                continue
            absent.append(name)
            continue
        got_kind, got_labels = exported[name]
        if got_kind != kind or not set(labels) <= got_labels:
            wrong.append((name, kind, labels, got_kind, sorted(got_labels)))
    assert not absent, (absent, up)
    assert wrong == []
    uid = {"pod_uid": pod.uid, "container_name": "main"}
    assert koordlet_value(text, "koordlet_container_oom_score_adj", uid) == 600
    requests = {**uid, "resource": keys.BATCH_CPU, "unit": "integer"}
    assert koordlet_value(text, "koordlet_container_resource_requests", requests) == 500
    allocatable = {"resource": keys.BATCH_MEMORY, "unit": "byte"}
    assert koordlet_value(text, "koordlet_node_resource_allocatable", allocatable) == 6 << 30


def koordlet_value(text: str, name: str, labels: dict[str, str]) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None
