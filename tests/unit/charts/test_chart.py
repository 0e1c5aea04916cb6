"""The Helm chart charts/koordinator-py, linted and rendered by Helm's engine (conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast

import pytest
import yaml

from koordapi.features import DEFAULTS as FEATURE_GATES
from koordapi.nodeslo import NodeSLOSpec
from koordkube.eviction import EvictionAPI
from koordlet.cli import build_parser, config_from_args
from koordlet.cluster import cancel_and_wait
from koordlet.cluster.nodeconfig import NodeConfigInformer
from koordlet.cluster.reporter import NodeMetricReporter
from koordlet.cluster.topology import TopologyPublisher
from tests.fakekube import FakeKubeAPI
from tests.unit.charts import helm
from tests.unit.charts.conftest import (
    CUSTOM_NODE_SELECTOR,
    CUSTOM_RESOURCES,
    CUSTOM_TOLERATIONS,
    CUSTOM_UPDATE_STRATEGY,
    Outcome,
)

CHART_VALUES: dict[str, Any] = yaml.safe_load((helm.CHART / "values.yaml").read_text())
# The koordlet's objects in the default release, named as Koordinator's chart names them.
KOORDLET = "koordlet"
KOORDLET_ROLE = "koordlet-role"
KOORDLET_METRICS = "koordlet-service"

# Host path -> where the koordlet container sees it.
HOST_MOUNTS = {
    "/sys/fs/cgroup": "/host-cgroup",
    "/sys": "/host-sys",
    "/proc": "/host-proc",
    "/var/run/nri": "/host-var-run/nri",
    "/var/run/containerd": "/host-var-run/containerd",
    "/var/lib/koordlet": "/var/lib/koordlet",
    # the metric cache (koordlet.hostDirs.koordletTSDBDir), at Koordinator's path
    "/var/lib/koordlet/metric-data/": "/metric-data/",
    "/dev": "/dev",
}
# koordlet.ebpf.enabled: tracefs where bcc looks for it, the kernel headers bcc compiles with.
EBPF_MOUNTS = {
    "/sys/kernel/tracing": "/sys/kernel/tracing",
    "/lib/modules": "/lib/modules",
    "/usr/src": "/usr/src",
}

KOORDLET_RULES = [
    {"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {
        "apiGroups": ["slo.koordinator.sh"],
        "resources": ["nodeslos"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["slo.koordinator.sh"],
        "resources": ["nodemetrics", "nodemetrics/status"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["devices"],
        "verbs": ["get", "list", "watch", "create", "update", "patch"],
    },
]

# apis/configuration/slo_controller_config.go in Koordinator.
KOORDINATOR_SLO_KEYS = {
    "colocation-config",
    "resource-threshold-config",
    "resource-qos-config",
    "cpu-burst-config",
    "system-config",
    "host-application-config",
    "cpu-normalization-config",
    "resource-amplification-config",
}
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
)


def effective(outcome: Outcome) -> dict[str, Any]:
    """The chart's values with the scenario's merged over them."""
    return helm.merge_values(CHART_VALUES, outcome.values)


def koordlet_container(release: helm.Release) -> dict[str, Any]:
    (container,) = release.find("DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert container["name"] == "koordlet"
    return cast(dict[str, Any], container)


def mounts(release: helm.Release) -> dict[str, dict[str, Any]]:
    """Host path -> {"mountPath", "readOnly", "type"} of each hostPath volume mounted."""
    pod = release.find("DaemonSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    found = {}
    for mount in koordlet_container(release)["volumeMounts"]:
        if mount["name"] not in volumes:
            continue  # not the host's (the metric cache's tmpfs)
        host = volumes[mount["name"]]
        found[host["path"]] = {
            "mountPath": mount["mountPath"],
            "readOnly": mount.get("readOnly", False),
            "type": host.get("type", ""),
        }
    return found


def parse_koordlet_args(args: list[str]) -> Any:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return build_parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"koordlet refuses the chart's arguments {args}: {err.getvalue()}")


# -- Helm's verdict ----------------------------------------------------------------------------


def test_helm_lints_every_scenario_without_errors_or_warnings(outcome: Outcome) -> None:
    problems = outcome.lint.errors + outcome.lint.warnings
    assert outcome.lint.charts_linted == 1
    assert not problems, (
        f"helm lint: {[str(p) for p in problems]} (the library gives no text; helm install "
        f"said: {outcome.release.error or 'nothing'})"
    )


def test_helm_installs_every_scenario(outcome: Outcome) -> None:
    assert outcome.release.objects
    assert "koordlet runs as DaemonSet" in outcome.release.notes


def test_chart_is_v2_and_its_app_version_is_the_projects() -> None:
    chart = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())
    pyproject = tomllib.loads((helm.ROOT / "pyproject.toml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["name"] == "koordinator-py"
    assert chart["appVersion"] == pyproject["project"]["version"]


def test_every_object_carries_the_standard_labels(outcome: Outcome) -> None:
    for obj in outcome.release.objects:
        labels = obj["metadata"]["labels"]
        where = f"{obj['kind']} {obj['metadata']['name']}"
        assert all(key in labels for key in STANDARD_LABELS), f"{where}: {labels}"
        assert labels["app.kubernetes.io/name"] == "koordinator-py", where
        assert labels["app.kubernetes.io/instance"] == "koordinator", where
        assert labels["app.kubernetes.io/version"] == "0.1.0", where
        assert labels["app.kubernetes.io/managed-by"] == "Helm", where


# -- the koordlet DaemonSet --------------------------------------------------------------------


def test_koordlet_runs_privileged_in_the_hosts_pid_namespace(default: helm.Release) -> None:
    pod = default.find("DaemonSet")["spec"]["template"]["spec"]
    container = koordlet_container(default)
    assert pod["hostPID"] is True
    assert pod["hostNetwork"] is True
    assert pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert container["securityContext"] == {"privileged": True}
    assert container["command"] == ["koordlet"]
    assert container["image"] == "koordinator-py/koordlet:0.1.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_koordlet_mounts_the_host_paths_it_reads_and_writes(default: helm.Release) -> None:
    found = mounts(default)
    assert {host: m["mountPath"] for host, m in found.items()} == HOST_MOUNTS | EBPF_MOUNTS
    assert found["/lib/modules"]["readOnly"] and found["/usr/src"]["readOnly"]
    assert not any(found[host]["readOnly"] for host in HOST_MOUNTS)
    assert found["/var/lib/koordlet"]["type"] == "DirectoryOrCreate"


def test_node_name_comes_from_the_downward_api(outcome: Outcome) -> None:
    env = koordlet_container(outcome.release)["env"]
    assert env[0] == {
        "name": "NODE_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    }


def test_koordlet_accepts_the_arguments_and_they_point_into_the_mounts(outcome: Outcome) -> None:
    container = koordlet_container(outcome.release)
    config = config_from_args(parse_koordlet_args(container["args"]))
    inside = {m["mountPath"]: host for host, m in mounts(outcome.release).items()}

    def on_host(path: Path) -> str:
        """The host path behind ``path`` in the container; fails if no mount covers it."""
        posix = PurePosixPath(path)
        for mount_path, host in sorted(inside.items(), key=lambda m: -len(m[0])):
            if posix == PurePosixPath(mount_path) or PurePosixPath(mount_path) in posix.parents:
                return str(PurePosixPath(host) / posix.relative_to(mount_path))
        pytest.fail(f"{path} is in no mount of the koordlet container")

    assert on_host(config.cgroup_root) == "/sys/fs/cgroup"
    assert on_host(config.sys_root) == "/sys"
    assert on_host(config.proc_root) == "/proc"
    assert on_host(config.resctrl_root) == "/sys/fs/resctrl"
    assert on_host(config.nri_socket) == "/var/run/nri/nri.sock"
    assert on_host(config.cri_socket) == "/var/run/containerd/containerd.sock"
    assert on_host(config.dev_root) == "/dev"  # the host's, with nodes made after the start
    for state in (config.tsdb_path, config.node_metric_file):
        if state is not None:
            assert on_host(state).startswith("/var/lib/koordlet/")
    assert config.node_slo_file is None  # in a cluster: the NodeSLO from the API
    port = effective(outcome)["koordlet"]["metrics"]["port"]
    assert config.metrics_addr == f":{port}"
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]


def test_feature_gates_reach_koordlet_and_are_its_own(outcome: Outcome) -> None:
    gates = effective(outcome)["koordlet"].get("featureGates") or {}
    args = koordlet_container(outcome.release)["args"]
    config = config_from_args(parse_koordlet_args(args))
    assert set(gates) <= set(FEATURE_GATES)
    assert dict(config.feature_gates.overrides) == gates
    assert any(a.startswith("--feature-gates=") for a in args) == bool(gates)


def test_custom_values_reach_the_daemonset(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["custom"].release
    daemonset = release.find("DaemonSet", "qos-koordlet")  # fullnameOverride's prefix
    pod = daemonset["spec"]["template"]["spec"]
    container = koordlet_container(release)
    assert pod["tolerations"] == CUSTOM_TOLERATIONS
    # Helm merges maps: the chart's default selector stays beside the custom one.
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", **CUSTOM_NODE_SELECTOR}
    assert "nodeAffinity" in pod["affinity"]
    assert container["resources"] == CUSTOM_RESOURCES
    assert daemonset["spec"]["updateStrategy"] == CUSTOM_UPDATE_STRATEGY
    assert pod["hostNetwork"] is False and "dnsPolicy" not in pod
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert container["image"] == "registry.example.com/koordlet:dev"
    assert container["imagePullPolicy"] == "Always"
    assert {"name": "PYTHONFAULTHANDLER", "value": "1"} in container["env"]
    assert daemonset["spec"]["template"]["metadata"]["annotations"] == {"example.com/team": "sre"}
    assert daemonset["spec"]["template"]["metadata"]["labels"]["example.com/tier"] == "node"
    args = container["args"]
    assert "--log-level=debug" in args
    assert "--tsdb-max-bytes=209715200" in args  # a whole number, not 2.097152e+08
    assert not any(a.startswith("--node-metric-file") for a in args)  # null drops a flag
    assert args[-2:] == ["--cpu-suppress-min-cpus=4", "--only-evict-by-api=true"]
    # No eBPF mounts.
    assert set(mounts(release)) == set(HOST_MOUNTS)


def test_default_scheduling_reaches_every_linux_node(default: helm.Release) -> None:
    daemonset = default.find("DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["priorityClassName"] == "system-node-critical"
    assert daemonset["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector.items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()


# -- RBAC and the service account --------------------------------------------------------------


def test_rbac_is_exactly_what_koordlet_reads_and_writes(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["default"].release
    role = release.find("ClusterRole", KOORDLET_ROLE)
    binding = release.find("ClusterRoleBinding", "koordlet-rolebinding")
    account = release.find("ServiceAccount", KOORDLET)
    pod = release.find("DaemonSet")["spec"]["template"]["spec"]
    assert role["rules"] == KOORDLET_RULES
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": account["metadata"]["name"],
            "namespace": "koordinator-system",
        }
    ]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def permission(verb: str, path: str) -> tuple[str, str, str]:
    """(API group, resource[/subresource], verb) of a recorded request, as RBAC sees it."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    return group, "/".join([rest[0], *rest[2:3]]), verb


def koordlet_calls() -> list[tuple[str, str]]:
    """(verb, path) of every request koordlet makes in a cluster: its NodeSLO and Node
    watched, its NodeMetric watched and its status reported (created when missing), an
    eviction; recorded by the in-process fake API server."""

    async def scenario() -> list[tuple[str, str]]:
        fake = FakeKubeAPI()
        fake.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        api = fake.kube_api()
        config = NodeConfigInformer(api, "node-1")
        reporter = NodeMetricReporter(
            api, "node-1", lambda *_: {"nodeMetric": {}}, fallback_interval=0.05, min_interval=0
        )
        tasks = [asyncio.create_task(config.run()), asyncio.create_task(reporter.run())]
        deadline = asyncio.get_running_loop().time() + 10
        while reporter.reports < 2 and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        publisher = TopologyPublisher(api, "node-1", '{"detail": []}', config.nodes)
        assert await publisher.publish_once()
        eviction = EvictionAPI(api)
        await eviction.evict_async("default", "batch-0", "uid-1")
        await cancel_and_wait(*tasks)
        assert reporter.reports >= 2 and reporter.created
        # A route the fake does not serve (pods/eviction) is recorded without a verb.
        writes = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        return [(r.verb or writes.get(r.method, "get"), r.path) for r in fake.requests]

    return asyncio.run(scenario())


def test_rbac_allows_every_call_koordlet_makes(default: helm.Release) -> None:
    allowed = {
        (group, resource, verb)
        for rule in default.find("ClusterRole", KOORDLET_ROLE)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    calls = koordlet_calls()
    made = {permission(verb, path) for verb, path in calls}
    assert ("slo.koordinator.sh", "nodemetrics/status", "patch") in made
    assert ("", "pods/eviction", "create") in made
    assert ("", "nodes", "patch") in made
    for verb, path in calls:
        assert permission(verb, path) in allowed, f"{verb} {path} is not allowed"
    # The kubelet authorizes GET /pods/ on its authenticated port as nodes/proxy get.
    assert ("", "nodes/proxy", "get") in allowed


def test_bring_your_own_account_and_rbac(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["bring-your-own"].release
    assert not release.all("ServiceAccount")  # none of the five components' own
    assert not release.all("ClusterRole") and not release.all("ClusterRoleBinding")
    assert not release.all("Role") and not release.all("RoleBinding")
    # No slo-controller-config; the schedulers' and the descheduler's own configurations stay.
    assert {
        c["metadata"]["labels"]["app.kubernetes.io/component"] for c in release.all("ConfigMap")
    } == {"scheduler", "kube-scheduler", "descheduler"}
    pod = release.find("DaemonSet")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "koordlet"
    assert not any(a.startswith("--feature-gates") for a in koordlet_container(release)["args"])


# -- the slo-controller-config ConfigMap -------------------------------------------------------


def slo_config(release: helm.Release) -> dict[str, Any]:
    config = release.find("ConfigMap", "slo-controller-config")
    assert config["metadata"]["namespace"] == "koordinator-system"
    return {key: json.loads(value) for key, value in config["data"].items()}


def test_slo_config_has_koordinators_name_and_keys(default: helm.Release) -> None:
    data = slo_config(default)
    assert set(data) == {
        "colocation-config",
        "resource-threshold-config",
        "resource-qos-config",
        "cpu-burst-config",
        "system-config",
    }
    assert data["colocation-config"]["enable"] is True
    assert data["colocation-config"]["metricAggregatePolicy"] == {"durations": ["5m", "10m", "30m"]}
    assert data["resource-threshold-config"]["clusterStrategy"]["enable"] is True
    assert data["cpu-burst-config"]["clusterStrategy"]["cfsQuotaBurstPeriodSeconds"] == -1


@pytest.mark.parametrize("scenario", ["default", "monitoring", "custom"])
def test_slo_config_strategies_are_valid_nodeslo_specs(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    """Each strategy's clusterStrategy is the NodeSLO section it becomes: koordlet's model
    of a NodeSLO must accept it with no unknown keys."""
    outcome = outcomes[scenario]
    data = slo_config(outcome.release)
    assert set(data) <= KOORDINATOR_SLO_KEYS
    sections = {
        "resource-threshold-config": "resourceUsedThresholdWithBE",
        "resource-qos-config": "resourceQOSStrategy",
        "cpu-burst-config": "cpuBurstStrategy",
        "system-config": "systemStrategy",
    }
    spec = {
        section: data[key]["clusterStrategy"] for key, section in sections.items() if key in data
    }
    assert spec, "no strategy in the ConfigMap"
    assert NodeSLOSpec.parse(spec).unknown_keys == ()


def test_slo_config_keys_follow_values(outcomes: dict[str, Outcome]) -> None:
    data = slo_config(outcomes["custom"].release)
    assert "system-config" not in data  # null drops a key
    assert data["host-application-config"] == {"applications": []}
    threshold = data["resource-threshold-config"]["clusterStrategy"]
    assert threshold["cpuSuppressThresholdPercent"] == 50
    assert threshold["enable"] is True  # merged over the chart's values


# -- CRDs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CRDCase:
    kind: str
    plural: str
    spec_fields: frozenset[str]
    status_fields: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return f"{self.plural}.slo.koordinator.sh"


# Koordinator's apis/slo/v1alpha1: nodemetric_types.go and nodeslo_types.go.
CRDS = [
    pytest.param(
        CRDCase(
            "NodeMetric",
            "nodemetrics",
            frozenset({"metricCollectPolicy"}),
            frozenset(
                {
                    "updateTime",
                    "nodeMetric",
                    "podsMetric",
                    "hostApplicationMetric",
                    "prodReclaimableMetric",
                    "prodPeakMetric",
                }
            ),
        ),
        id="nodemetric",
    ),
    pytest.param(
        CRDCase(
            "NodeSLO",
            "nodeslos",
            frozenset(
                {
                    "resourceUsedThresholdWithBE",
                    "resourceQOSStrategy",
                    "cpuBurstStrategy",
                    "systemStrategy",
                    "extensions",
                    "hostApplications",
                }
            ),
        ),
        id="nodeslo",
    ),
]


def created_before_the_workloads(release: helm.Release, kind: str, name: str) -> bool:
    """Whether Helm created ``kind``/``name`` before every DaemonSet and Deployment (whose pods
    watch the CRDs' kinds from their start)."""
    created = [(o["kind"], o["metadata"]["name"]) for o in release.created]
    workloads = [i for i, (k, _) in enumerate(created) if k in ("DaemonSet", "Deployment")]
    return bool(workloads) and created.index((kind, name)) < min(workloads)


@pytest.mark.parametrize("case", CRDS)
def test_crds_are_koordinators_and_helm_creates_them_before_the_workloads(
    default: helm.Release, case: CRDCase
) -> None:
    assert created_before_the_workloads(default, "CustomResourceDefinition", case.name)
    crd = default.find("CustomResourceDefinition", case.name)  # a template of the release
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    spec = crd["spec"]
    assert spec["group"] == "slo.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": case.kind,
        "listKind": f"{case.kind}List",
        "plural": case.plural,
        "singular": case.plural.removesuffix("s"),
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert set(schema["properties"]["spec"]["properties"]) == case.spec_fields
    assert set(schema["properties"]["status"].get("properties", {})) == case.status_fields


# -- monitoring --------------------------------------------------------------------------------


def test_service_monitor_and_dashboard_are_off_by_default(default: helm.Release) -> None:
    assert not default.all("ServiceMonitor")
    assert not default.all("PrometheusRule")
    # The manager's webhook Service and the scheduler's HTTPS Service: no metrics Service for
    # koordlet or the manager.
    assert sorted(s["metadata"]["name"] for s in default.all("Service")) == [
        "koord-scheduler-service",
        "koordinator-webhook-service",
    ]
    assert sorted(c["metadata"]["name"] for c in default.all("ConfigMap")) == [
        "koord-descheduler-config",
        "koord-scheduler-config",
        "koord-scheduler-extender-config",
        "koord-scheduler-loadaware-config",
        "slo-controller-config",
    ]


def test_service_monitor_scrapes_every_koordlet(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["monitoring"].release
    monitor = release.find("ServiceMonitor", "koordlet-service-monitor")
    service = release.find("Service", KOORDLET_METRICS)
    daemonset = release.find("DaemonSet")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["koordinator-system"]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics"
    assert endpoint["interval"] == "15s"
    assert endpoint["relabelings"][0]["targetLabel"] == "host"
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9400, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_grafana_dashboard_ships_in_a_labelled_configmap(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["monitoring"].release
    (dashboard,) = [c for c in release.all("ConfigMap") if "koordlet.json" in c["data"]]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "QoS"}
    shipped = json.loads(dashboard["data"]["koordlet.json"])
    assert shipped == json.loads((helm.CHART / "dashboards" / "koordlet.json").read_text())


def test_the_recording_rules_ship_in_a_prometheus_rule(outcomes: dict[str, Outcome]) -> None:
    release = outcomes["monitoring"].release
    rule = release.find("PrometheusRule", "koordlet-rules")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    rules_file = yaml.safe_load((helm.CHART / "rules" / "koordinator-names.rules.yaml").read_text())
    assert rule["spec"]["groups"] == rules_file["groups"]
    records = {r["record"] for r in rule["spec"]["groups"][0]["rules"]}
    assert "koordlet_pod_eviction" in records
