"""koord-scheduler with what a Koordinator v1.8 user has: its Deployment's command line, its
chart's KubeSchedulerConfiguration, its feature gates and its metric names.

The lists below are written from Koordinator v1.8.0's sources (named at each) and the
kube-scheduler options it embeds, not from this project's code.
"""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from koordapi import goflags, keys
from scheduler import cli, features, schedulerconfig
from scheduler.extender import StaticClusterView, filter
from scheduler.metrics import NOT_MEASURED, SchedulerMetrics
from scheduler.server import ExtenderServer
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually
from tests.unit.scheduler.objects import (
    NOW,
    device,
    gpu_entry,
    gpu_pod,
    make_metric,
    make_node,
    make_pod,
)

ROOT = Path(__file__).resolve().parents[3]


def words(text: str) -> list[str]:
    """A list written one name a word."""
    return text.split()


# pkg/features/scheduler_features.go (defaultSchedulerFeatureGates) and features.go
# (transformerFeatureGates, registered into the scheduler's gate too): name, default.
KOORDINATOR_GATES = {
    "CompatibleCSIStorageCapacity": False,
    "DisableCSIStorageCapacityInformer": False,
    "CompatiblePodDisruptionBudget": False,
    "DisablePodDisruptionBudgetInformer": False,
    "DisableDynamicResourceAllocationInformer": False,
    "ResizePod": False,
    "MultiQuotaTree": False,
    "ElasticQuotaIgnorePodOverhead": False,
    "ElasticQuotaIgnoreTerminatingPod": False,
    "ElasticQuotaImmediateIgnoreTerminatingPod": False,
    "ElasticQuotaGuaranteeUsage": False,
    "DisableDefaultQuota": False,
    "SupportParentQuotaSubmitPod": False,
    "LazyReservationRestore": False,
    "OmitNodeLabelsForReservation": False,
    "SkipReservationFitsNode": False,
    "DevicePluginAdaption": False,
    "CleanExpiredReservationAllocated": False,
    "DynamicSchedulerCheck": True,
    "CSIStorageCapacity": True,
    "GenericEphemeralVolume": True,
    "PodDisruptionBudget": True,
    "SyncBarrier": False,
}
TRANSFORMER_GATES = {
    "PriorityTransformer": False,
    "PreemptionPolicyTransformer": False,
    "ReplaceResourcesTransformer": False,
}

# Every flag of Koordinator v1.8's koord-scheduler: cmd/koord-scheduler (insecure serving,
# sync barrier), pkg/scheduler/frameworkext, and kube-scheduler's options (misc, deprecated,
# k8s.io/apiserver secure serving, authentication, authorization; component-base leader
# election, feature gate/compatibility, metrics, logs; klog's -v).
KOORDINATOR_FLAGS = words(
    "address port sync-barrier-pod-namespace sync-barrier-pod-name sync-hard-timeout "
    "debug-scores debug-filters debug-diagnosis debug-diagnosis-blocking "
    "debug-diagnosis-queue-size debug-diagnosis-worker-count controller-plugins "
    "enable-network-topology-manager scheduler-monitor-period scheduling-timeout "
    "scheduling-drop-unhandled-timeout "
    "config write-config-to master "
    "profiling contention-profiling kubeconfig kube-api-content-type kube-api-qps "
    "kube-api-burst pod-max-in-unschedulable-pods-duration "
    "bind-address secure-port disable-http2-serving cert-dir tls-cert-file "
    "tls-private-key-file tls-cipher-suites tls-curve-preferences tls-min-version "
    "tls-sni-cert-key http2-max-streams-per-connection permit-port-sharing "
    "permit-address-sharing "
    "requestheader-username-headers requestheader-uid-headers requestheader-group-headers "
    "requestheader-extra-headers-prefix requestheader-client-ca-file "
    "requestheader-allowed-names client-ca-file authentication-kubeconfig "
    "authentication-token-webhook-cache-ttl authentication-skip-lookup "
    "authentication-tolerate-lookup-failure "
    "authorization-kubeconfig authorization-webhook-cache-authorized-ttl "
    "authorization-webhook-cache-unauthorized-ttl authorization-always-allow-paths "
    "leader-elect leader-elect-lease-duration leader-elect-renew-deadline "
    "leader-elect-retry-period leader-elect-resource-lock leader-elect-resource-name "
    "leader-elect-resource-namespace "
    "emulated-version min-compatibility-version feature-gates "
    "show-hidden-metrics-for-version allow-metric-labels allow-metric-labels-manifest "
    "disabled-metrics "
    "logging-format v vmodule log-flush-frequency log-text-split-stream "
    "log-text-info-buffer-size log-json-split-stream log-json-info-buffer-size"
)

# pkg/scheduler/metrics/metrics.go and pkg/scheduler/plugins/elasticquota/metrics.go
KOORDINATOR_SERIES = words(
    "scheduler_scheduling_timeout scheduler_reservation_status_phase "
    "scheduler_reservation_resource scheduler_pod_scheduling_evaluated_nodes "
    "scheduler_pod_scheduling_feasible_nodes scheduler_elastic_quota_process_latency "
    "scheduler_secondary_device_not_well_planned scheduler_waiting_gang_group_number "
    "scheduler_next_pod_delete_from_queue_latency scheduler_elastic_quota_hook_plugin_latency "
    "scheduler_job_preemption_duration_seconds scheduler_elastic_quota_spec "
    "scheduler_elastic_quota_status scheduler_update_elastic_quota_status_duration_seconds"
)

# The shape of Koordinator v1.8.0's chart templates/koord-scheduler-config.yaml, written by us
# with unusual numbers; the ElasticQuota and Coscheduling args and the plugin sets are there
# to be accepted with no effect.
CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: koord-scheduler
  resourceNamespace: koordinator-system
profiles:
  - pluginConfig:
    - name: NodeResourcesFit
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: NodeResourcesFitArgs
        scoringStrategy: {type: LeastAllocated}
    - name: LoadAwareScheduling
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: LoadAwareSchedulingArgs
        filterExpiredNodeMetrics: false
        nodeMetricExpirationSeconds: 317
        resourceWeights: {cpu: 3, memory: 2}
        usageThresholds: {cpu: 37, memory: 91}
        estimatedScalingFactors: {cpu: 73, memory: 61}
        prodUsageThresholds: {cpu: 29}
        allowCustomizeEstimation: true
    - name: NodeNUMAResource
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: NodeNUMAResourceArgs
        defaultCPUBindPolicy: SpreadByPCPUs
        numaScoringStrategy: {type: MostAllocated}
    - name: ElasticQuota
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: ElasticQuotaArgs
        quotaGroupNamespace: koordinator-system
    - name: Coscheduling
      args: {enablePreemption: true, awareNetworkTopology: true}
    - name: DeviceShare
      args:
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: DeviceShareArgs
        gpuShareUnsupportedModels:
          - {vendor: huawei, model: Ascend-310P3-300I-DUO}
    plugins:
      filter:
        enabled: [{name: LoadAwareScheduling}, {name: DeviceShare}]
    schedulerName: koord-scheduler
"""

# Koordinator v1.8.0's chart, templates/koord-scheduler.yaml with its default values.
DEPLOYMENT_ARGS = [
    "--port={port}",
    "--authentication-skip-lookup=true",
    "--v=4",
    "--feature-gates=",
    "--config={config}",
    "--enable-network-topology-manager=true",
]


def test_the_gate_table_is_koordinators() -> None:
    assert len(KOORDINATOR_GATES) == 23
    table = {name: default for name, (default, _) in features.GATES.items()}
    assert table == KOORDINATOR_GATES | TRANSFORMER_GATES


def test_the_gates_on_are_said_with_their_reason() -> None:
    gates = features.SchedulerGates.parse(
        "CompatibleCSIStorageCapacity=true,PodDisruptionBudget=false"
    )
    said = gates.unimplemented()
    assert "CompatibleCSIStorageCapacity" in said and "PodDisruptionBudget" not in said
    assert "DynamicSchedulerCheck" in said  # on by default
    assert "ResizePod" not in said
    everything = features.SchedulerGates.parse("AllAlpha=true").unimplemented()
    assert set(everything) == {n for n in features.GATES if n != "PodDisruptionBudget"} | {
        "PodDisruptionBudget"
    }


@pytest.mark.parametrize("name", KOORDINATOR_FLAGS)
def test_each_koordinator_flag_is_accepted(name: str) -> None:
    value = {"feature-gates": "ResizePod=true", "v": "2", "port": "0", "secure-port": "9443"}
    _, ignored = cli.parse_args([f"--{name}={value.get(name, '7')}"])
    if name in cli.KOORDINATOR_ONLY or name in goflags.KLOG:
        assert ignored == [name]
    else:
        assert ignored == []


def test_help_names_the_flags_and_gates_with_no_effect(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    said = " ".join(capsys.readouterr().out.split())
    for name in ("authentication-skip-lookup", "enable-network-topology-manager", "SyncBarrier"):
        assert name in said


def test_the_configuration_gives_the_plugins_their_args_and_names_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "koord-scheduler.config"
    path.write_text(CONFIG)
    config = schedulerconfig.read(path)
    line = config.describe(str(path))
    taken, _, ignored = line.partition("accepted with no effect")
    for plugin in ("LoadAwareSchedulingArgs", "NodeNUMAResourceArgs", "DeviceShareArgs"):
        assert plugin in taken and plugin + " (" not in ignored
    for rest in ("leaderElection", "ElasticQuota args", "Coscheduling args", "NodeResourcesFit"):
        assert rest in ignored
    assert "LoadAwareSchedulingArgs.allowCustomizeEstimation" in ignored
    assert "prodUsageThresholds" not in ignored
    assert config.scheduler_name == "koord-scheduler"
    args = config.extender.loadaware
    assert (args.node_metric_expiration_seconds, args.cpu_threshold, args.cpu_weight) == (
        317,
        37,
        3,
    )
    assert not args.filter_expired_node_metrics
    assert (args.prod_cpu_threshold, args.prod_memory_threshold) == (29, 0)
    assert config.extender.cpubind.default_policy == "SpreadByPCPUs"
    assert config.extender.cpubind.numa_allocate_strategy == "MostAllocated"


def test_the_configurations_threshold_and_models_filter_nodes(tmp_path: Path) -> None:
    path = tmp_path / "c.json"  # JSON is read as well
    path.write_text(__import__("json").dumps(yaml.safe_load(CONFIG)))
    config = schedulerconfig.read(path).extender
    # 13 of 32 cores used: 40.6 %, over the file's 37 % but under Koordinator's default 65 %
    view = StaticClusterView(
        nodes=[make_node("warm")], node_metrics=[make_metric("warm", cpu="13", age=30)]
    )
    batch = make_pod("web", requests={"kubernetes.io/batch-cpu": "1000"}, priority=5500)
    args = {"Pod": batch, "NodeNames": ["warm"]}
    assert filter(args, view, NOW)["NodeNames"] == ["warm"]
    assert filter(args, view, NOW, config=config)["NodeNames"] == []
    # a koord-prod pod is judged on the prod pods' usage (prodUsageThresholds), none here
    prod = {"Pod": make_pod("api", requests={"cpu": "1"}), "NodeNames": ["warm"]}
    assert filter(prod, view, NOW, config=config)["NodeNames"] == ["warm"]
    # a pod sharing a GPU is kept off the model the file names, a whole-GPU pod is not
    labels = {
        "node.koordinator.sh/gpu-vendor": "huawei",
        "node.koordinator.sh/gpu-model": "Ascend-310P3-300I-DUO",
    }
    gpus = StaticClusterView(
        nodes=[make_node("npu", labels=labels)],
        node_metrics=[make_metric("npu", cpu="1", age=30)],
        devices=[device("npu", [gpu_entry(0), gpu_entry(1)])],
    )
    shared = gpu_pod({keys.GPU_SHARED: "1", keys.GPU_MEMORY_RATIO: "30"})
    whole = gpu_pod({keys.GPU: "100"}, name="whole")
    result = filter({"Pod": shared, "NodeNames": ["npu"]}, gpus, NOW, config=config)
    assert result["FailedAndUnresolvableNodes"] == {
        "npu": 'model "Ascend-310P3-300I-DUO" of vendor "huawei" does not support GPU Share'
    }
    assert filter({"Pod": shared, "NodeNames": ["npu"]}, gpus, NOW)["NodeNames"] == ["npu"]
    assert filter({"Pod": whole, "NodeNames": ["npu"]}, gpus, NOW, config=config)["NodeNames"] == [
        "npu"
    ]


def test_a_file_that_is_not_a_scheduler_configuration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(schedulerconfig.SchedulerConfigError, match="KubeSchedulerConfiguration"):
        schedulerconfig.read(path)


def test_the_census_covers_koordinators_14_series() -> None:
    assert len(KOORDINATOR_SERIES) == 14
    assert set(NOT_MEASURED) < set(KOORDINATOR_SERIES)
    exported = set(KOORDINATOR_SERIES) - set(NOT_MEASURED)
    text = SchedulerMetrics().exposition().decode()
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    assert exported <= families
    assert not set(NOT_MEASURED) & families
    doc = (ROOT / "docs" / "scheduler.md").read_text()
    for name in KOORDINATOR_SERIES:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}`")), "")
        state = row.split("|")[2].strip() if row else ""
        assert state == ("exported" if name in exported else "not measured"), name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_koordinators_deployment_args_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The Deployment's args exactly, the chart's configuration, the fake API server: it stays
    up, /healthz answers over HTTP on --port, the LoadAware args were taken and a filter call
    is measured under Koordinator's names."""
    config = tmp_path / "koord-scheduler.config"
    config.write_text(CONFIG)
    port, secure = free_port(), free_port()
    api = FakeKubeAPI()
    api.seed({"apiVersion": "v1", "kind": "Node", **make_node("warm")})
    monkeypatch.setattr("koordkube.client.build_client", lambda _kubeconfig: api.client())
    argv = [a.format(port=port, config=config) for a in DEPLOYMENT_ARGS]
    args, ignored = cli.parse_args([*argv, f"--secure-port={secure}"])
    assert args.log_level == "debug"
    servers: list[ExtenderServer] = []
    monkeypatch.setattr(
        "scheduler.server.ExtenderServer.start",
        _recording(ExtenderServer.start, servers),
    )

    async def scenario() -> None:
        main = asyncio.create_task(cli.serve(args, ignored))
        async with aiohttp.ClientSession() as session:

            async def healthy() -> bool:
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as reply:
                        return reply.status == 200
                except aiohttp.ClientError:
                    return False

            for _ in range(200):
                if main.done() or await healthy():
                    break
                await asyncio.sleep(0.05)
            assert not main.done(), main.result()
            assert await healthy()
            await eventually(lambda: bool(servers))
            assert servers[0].config.loadaware.cpu_threshold == 37
            async with session.get(f"http://127.0.0.1:{port}/metrics") as reply:
                text = await reply.text()
        assert (
            'koord_scheduler_flag_unimplemented{flag="enable-network-topology-manager"} 1.0' in text
        )
        assert (
            'koord_scheduler_feature_gate_unimplemented{gate="DynamicSchedulerCheck"} 1.0' in text
        )
        assert not main.done()
        main.cancel()
        await asyncio.gather(main, return_exceptions=True)

    caplog.set_level("INFO")
    asyncio.run(asyncio.wait_for(scenario(), 30))
    lines = [r.getMessage() for r in caplog.records]
    assert sum("plugin args taken" in line for line in lines) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "--authentication-skip-lookup" in warnings[0]


def _recording(start: Any, servers: list[ExtenderServer]) -> Any:
    async def record(self: ExtenderServer) -> None:
        servers.append(self)
        await start(self)

    return record


def test_a_filter_call_is_counted_in_koordinators_node_histograms() -> None:
    metrics = SchedulerMetrics(profile="koord-scheduler")
    metrics.filtered(evaluated=5, feasible=3)
    with metrics.timed("filter"):
        pass
    text = metrics.exposition().decode()
    assert "scheduler_pod_scheduling_evaluated_nodes_sum 5.0" in text
    assert "scheduler_pod_scheduling_feasible_nodes_sum 3.0" in text
    assert (
        'scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",'
        'profile="koord-scheduler",status="Success"} 1.0'
    ) in text
