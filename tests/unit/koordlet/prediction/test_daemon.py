"""The daemon's wiring: its Config's --prediction-* settings reach the predictor, a pass (what
``train_predictor`` runs in a worker thread) feeds the NodeMetric report of both modes (the
cluster reporter's ``build_node_metric`` and the status API's), the gauges, and the
checkpoints beside the metric cache."""

from __future__ import annotations

import time
from pathlib import Path

from koordapi import keys
from koordapi.features import FeatureGates
from koordlet.config import Config
from koordlet.daemon import Koordlet
from koordlet.metriccache import Sample
from koordlet.prediction.checkpoint import FILE_NAME, CheckpointStore
from nri_plugin import api
from runtimehooks.request import PodSpecFacts

UID = "7d1c3a52-0000-4000-8000-00000000abcd"
GI, MI = 1 << 30, 1 << 20


def test_a_training_pass_gives_both_reports_prod_reclaimable(tmp_path: Path) -> None:
    (tmp_path / "cgroup" / "cpu" / "kubepods").mkdir(parents=True)
    (tmp_path / "nodeslo.yaml").write_text("node:\n  allocatable: {cpu: '12', memory: 48Gi}\n")
    config = Config(
        node_name="unit-node",
        cgroup_root=tmp_path / "cgroup",
        cgroup_driver="cgroupfs",
        resctrl_root=tmp_path / "sys" / "resctrl",
        node_slo_file=tmp_path / "nodeslo.yaml",
        metrics_addr="",
        tsdb_path=tmp_path / "metric-data",
        node_metric_file=None,
        feature_gates=FeatureGates.parse("SchedLatencyCollector=false"),
        prediction_training_interval=3.0,
        prediction_cold_start=20.0,
        prediction_safety_margin_percent=0,
        prediction_checkpoint_max_per_step=50,
    )
    daemon = Koordlet(config)
    try:
        assert daemon.predictor.server.settings.training_interval == 3.0
        pod = api.PodSandbox(id="sandbox-1", name="web", uid=UID, namespace="shop")
        pod.labels[keys.LABEL_QOS_CLASS] = "LS"
        pod.linux.cgroup_parent = f"/kubepods/burstable/pod{UID}"
        daemon.pods.put_pod(pod)
        now = time.time()
        daemon.pods.put_specs(
            {UID: PodSpecFacts(cpu_request=3000, memory_request=2 * GI, created=now - 60)}
        )
        samples = []
        for ago in range(3):
            ts = now - ago
            samples += [
                Sample("pod_cpu_usage", {"pod_uid": UID}, ts, 0.8),
                Sample("pod_memory_usage", {"pod_uid": UID}, ts, 400 * MI),
                Sample("node_cpu_usage", {}, ts, 1.4),
                Sample("node_memory_usage", {}, ts, 3 * GI),
                Sample("sys_cpu_usage", {}, ts, 0.6),
                Sample("sys_memory_usage", {}, ts, GI),
            ]
        daemon.cache.append(samples)
        assert "prodReclaimableMetric" not in daemon.build_node_metric(300, (300,))

        daemon.predictor.run_pass(daemon.pods.snapshot())

        reported = daemon.build_node_metric(300, (300,))["prodReclaimableMetric"]
        assert daemon.views.node_metric()["prodReclaimableMetric"] == reported
        cpu = reported["resource"]["resources"]["cpu"]
        # the class estimate is the smaller: 3000m less the system's 0.6 and the prod class'
        # 0.8 cores, each a little (up to 6 % here) higher: its bucket's end; and the no-class' 25m
        assert 3000 - 1.06 * 1400 - 25 <= int(cpu.removesuffix("m")) <= 3000 - 1400
        metrics = daemon.metrics.registry
        got = metrics.get_sample_value(
            "koordlet_node_predicted_resource_reclaimable",
            {"node": "unit-node", "predictor": "minPredictor", "resource": "cpu", "unit": "core"},
        )
        assert got == int(cpu.removesuffix("m")) / 1000
        status = metrics.get_sample_value(
            "koordlet_node_resource_priority_reclaimable_status",
            {"node": "unit-node", "priority": "koord-prod"},
        )
        assert status == 0
        saved = CheckpointStore(tmp_path / "metric-data" / FILE_NAME).restore()
        assert UID in {s.uid for s in saved}  # the due checkpoints of the pass
    finally:
        daemon.predictor.close()
        daemon.cache.close()
