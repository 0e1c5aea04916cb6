"""Koordinator v1.8's whole values file installs, and each of its keys does what it does in
Koordinator's chart or is named in NOTES with why it has no effect here.

tests/data/koordinator-v1.8-values.yaml holds every key of Koordinator's chart with its default;
it is rendered as it is, and with unusual values for the keys this chart honours (UNUSUAL), so
that each key's effect shows in the rendered objects. The scheduler's and the descheduler's
keys are test_scheduler.py's and test_descheduler.py's. tests/data/all-optional-values.yaml
(every optional part of ours on) renders too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from tests.unit.charts import helm
from tests.unit.charts.conftest import KOORDINATOR_VALUES

ALL_OPTIONAL = yaml.safe_load(
    (helm.ROOT / "tests" / "data" / "all-optional-values.yaml").read_text()
)
NAMESPACE = "koordinator-system"  # the release namespace of every render here (Render's)

MANAGER_NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "node.example.org/ctl", "operator": "Exists"}]}
        ]
    }
}
KOORDLET_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "node.example.org/pool", "operator": "In", "values": ["colo-3"]}
                    ]
                }
            ]
        }
    }
}
# Koordinator's chart leaves out the webhooks whose gates these turn off.
GATES_OFF = (
    "PodMutatingWebhook=false, PodValidatingWebhook=False,ConfigMapValidatingWebhook=false,"
    "ElasticMutatingWebhook=false,ElasticValidatingWebhook=FALSE"
)
TOLERATIONS = [{"key": "node.example.org/ctl", "operator": "Exists", "effect": "NoExecute"}]

# Koordinator's keys with values other than its defaults, over its file.
UNUSUAL: Mapping[str, Any] = {
    "crds": {
        "nodemetrics": False,
        "devices": False,
        "reservations": False,
        "podgroups": False,
        "recommendations": False,
    },
    "installation": {"namespace": "koord-colo-ns", "roleListGroups": ["apps"]},
    "featureGates": "PodValidatingWebhook=true,ColocationProfileSkipMutatingResources=true",
    "imageRepositoryHost": "mirror.example.org:5443/",
    "imagePullSecrets": [{"name": "pull-cred-7"}],
    "koordlet": {
        "image": {"repository": "koordinator-py/koordlet", "tag": "0.1.0-rc7"},
        "resources": {
            "limits": {"cpu": "350m", "memory": "384Mi"},
            "requests": {"cpu": "35m", "memory": "96Mi"},
        },
        "features": "BECPUEvict=true,PSICollector=true",
        "log": {"level": "2"},
        "hostDirs": {
            "kubeletConfigDir": "/opt/k8s-conf/",
            "kubeletLibDir": "/data/kubelet/",
            "koordProxyRegisterDir": "/opt/hooks.d/",
            "koordletSockDir": "/run/koord-sock",
            "predictionCheckpointDir": "/run/koord-sock/ckpt",
            "koordletTSDBDir": "/data/koordlet-tsdb/",
            "podResourcesProxyPath": "/run/koord-sock/podres/",
        },
        "runtimeClassName": "runc-qos",
        "nodeAffinity": KOORDLET_AFFINITY,
        "metrics": {"port": 9417},
        "enableServiceMonitor": True,
    },
    "manager": {
        "log": {"level": "1"},
        "replicas": 3,
        "image": {"repository": "mirrors/koord-manager", "tag": "7.7.7"},
        "webhook": {"port": 9443},
        "metrics": {"addr": "127.0.0.1", "port": 8089},
        "healthProbe": {"port": 8011},
        "resyncPeriod": "45s",
        "resources": {"limits": {"cpu": "1300m", "memory": "1100Mi"}},
        "hostNetwork": True,
        "nodeAffinity": MANAGER_NODE_AFFINITY,
        "nodeSelector": {"node.example.org/ctl": "yes"},
        "tolerations": TOLERATIONS,
    },
    "webhookConfiguration": {
        "failurePolicy": {"pods": "Fail", "elasticquotas": "Fail"},
        "timeoutSeconds": 7,
    },
    "serviceAccount": {"annotations": {"iam.example.org/role": "koord-17"}},
    "deviceDaemon": {"log": {"level": "6"}},
}

# Every key of Koordinator's file that this module covers, with the test that shows its effect
# (the scheduler's and descheduler's are test_scheduler.py's and test_descheduler.py's).
COVERED = {
    **{f"crds.{k}": "test_crds" for k in KOORDINATOR_VALUES["crds"]},
    "installation.namespace": "test_installation_keys_are_named",
    "installation.roleListGroups": "test_installation_keys_are_named",
    "featureGates": "test_feature_gates_switch_the_webhooks",
    "imageRepositoryHost": "test_images_are_what_koordinators_chart_renders",
    "imagePullSecrets": "test_image_pull_secrets",
    "koordlet.image.repository": "test_images_are_what_koordinators_chart_renders",
    "koordlet.image.tag": "test_images_are_what_koordinators_chart_renders",
    "koordlet.resources.limits.cpu": "test_koordlet_takes_koordinators_keys",
    "koordlet.resources.limits.memory": "test_koordlet_takes_koordinators_keys",
    "koordlet.resources.requests.cpu": "test_koordlet_takes_koordinators_keys",
    "koordlet.resources.requests.memory": "test_koordlet_takes_koordinators_keys",
    "koordlet.features": "test_koordlet_takes_koordinators_keys",
    "koordlet.log.level": "test_koordlet_takes_koordinators_keys",
    **{
        f"koordlet.hostDirs.{k}": "test_host_dirs_are_mounted_where_koordinators_are"
        for k in KOORDINATOR_VALUES["koordlet"]["hostDirs"]
    },
    "koordlet.runtimeClassName": "test_koordlet_takes_koordinators_keys",
    "koordlet.nodeAffinity": "test_koordlet_node_affinity_is_the_pods_affinity",
    "koordlet.metrics.port": "test_koordlet_takes_koordinators_keys",
    "koordlet.enableServiceMonitor": "test_koordlet_service_monitor",
    "manager.log.level": "test_manager_takes_koordinators_keys",
    "manager.replicas": "test_manager_takes_koordinators_keys",
    "manager.image.repository": "test_images_are_what_koordinators_chart_renders",
    "manager.image.tag": "test_images_are_what_koordinators_chart_renders",
    "manager.webhook.port": "test_manager_takes_koordinators_keys",
    "manager.metrics.addr": "test_manager_takes_koordinators_keys",
    "manager.metrics.port": "test_manager_takes_koordinators_keys",
    "manager.healthProbe.port": "test_manager_takes_koordinators_keys",
    "manager.resyncPeriod": "test_manager_takes_koordinators_keys",
    "manager.resources.limits.cpu": "test_manager_takes_koordinators_keys",
    "manager.resources.limits.memory": "test_manager_takes_koordinators_keys",
    "manager.resources.requests.cpu": "test_manager_takes_koordinators_keys",
    "manager.resources.requests.memory": "test_manager_takes_koordinators_keys",
    "manager.hostNetwork": "test_manager_takes_koordinators_keys",
    "manager.nodeAffinity": "test_manager_takes_koordinators_keys",
    "manager.nodeSelector": "test_manager_takes_koordinators_keys",
    "manager.tolerations": "test_manager_takes_koordinators_keys",
    **{
        f"webhookConfiguration.failurePolicy.{k}": "test_webhook_configuration"
        for k in KOORDINATOR_VALUES["webhookConfiguration"]["failurePolicy"]
    },
    "webhookConfiguration.timeoutSeconds": "test_webhook_configuration",
    "serviceAccount.annotations": "test_service_account_annotations",
    **{
        f"deviceDaemon.{k}": "test_device_daemon_is_named"
        for k in ("image.repository", "image.tag", "log.level", "nodeAffinity")
    },
    **{
        f"deviceDaemon.resources.{k}": "test_device_daemon_is_named"
        for k in ("limits.cpu", "limits.memory", "requests.cpu", "requests.memory")
    },
}


def leaf_keys(values: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted path of every leaf (a non-map, or an empty map) of ``values``."""
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            yield from leaf_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


@pytest.fixture(scope="module")
def releases() -> dict[str, helm.Release]:
    """Koordinator's file as it is, with UNUSUAL over it, with koordlet.nodeAffinity written as
    a NodeAffinity, and the all-optional file."""
    renders = {
        "koordinator": KOORDINATOR_VALUES,
        "unusual": helm.merge_values(KOORDINATOR_VALUES, UNUSUAL),
        "node-affinity-form": helm.merge_values(
            KOORDINATOR_VALUES, {"koordlet": {"nodeAffinity": MANAGER_NODE_AFFINITY}}
        ),
        "all-optional": ALL_OPTIONAL,
        "gates-off": helm.merge_values(KOORDINATOR_VALUES, {"featureGates": GATES_OFF}),
    }
    results = helm.run(*(helm.Render(helm.CHART, values) for values in renders.values()))
    found = {}
    for name, result in zip(renders, results, strict=True):
        assert isinstance(result, helm.Release)
        assert not result.error, f"{name}: helm install failed: {result.error}"
        found[name] = result
    return found


def pod(release: helm.Release, kind: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = release.find(kind, name)["spec"]["template"]["spec"]
    return spec


def ignored(release: helm.Release) -> list[str]:
    """The NOTES lines naming Koordinator's keys without effect."""
    head = "Values of Koordinator's chart that have no effect here:\n"
    if head not in release.notes:
        return []
    lines = release.notes.split(head, 1)[1].splitlines()
    return [line[2:] for line in lines if line.startswith("- ")]


def named(release: helm.Release, key: str) -> str:
    """The one NOTES line that names ``key``."""
    found = [line for line in ignored(release) if re.search(rf"(^|, ){re.escape(key)}[:,]", line)]
    assert len(found) == 1, f"{key} in {ignored(release)}"
    return found[0]


# -- the whole file ----------------------------------------------------------------------------


def test_the_file_holds_every_key_of_koordinators_chart() -> None:
    covered_here = {k for k in leaf_keys(KOORDINATOR_VALUES) if not k.startswith("scheduler.")}
    covered_here -= {k for k in covered_here if k.startswith("descheduler.")}
    assert covered_here == set(COVERED)
    # Koordinator v1.8.0's values.yaml has 104 leaves; 19 are the scheduler's, 15 the
    # descheduler's.
    assert len(list(leaf_keys(KOORDINATOR_VALUES))) == 104
    assert len(COVERED) == 104 - 19 - 15
    for test in set(COVERED.values()):
        assert callable(globals().get(test)), test


def test_koordinators_file_installs(releases: dict[str, helm.Release]) -> None:
    release = releases["koordinator"]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in release.objects}
    assert ("DaemonSet", "koordlet") in kinds
    assert ("Deployment", "koord-manager") in kinds
    assert ("Deployment", "koord-scheduler") in kinds
    assert ("Deployment", "koord-descheduler") in kinds


def test_all_optional_file_installs_every_optional_part(releases: dict[str, helm.Release]) -> None:
    release = releases["all-optional"]
    services = {s["metadata"]["name"] for s in release.all("Service")}
    assert {"koordlet-service", "koord-manager-service", "koordinator-webhook-service"} <= services
    dashboard = release.find("ConfigMap", "koordlet-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    (config,) = release.find("ConfigMap", "koord-descheduler-config")["data"].values()
    assert "LowNodeLoad" in config and "dryRun: false" in config
    kinds = {o["kind"] for o in release.objects}
    assert {"DaemonSet", "Deployment", "MutatingWebhookConfiguration", "Lease"} - kinds == {"Lease"}
    assert not release.all("ServiceMonitor") and not release.all("PrometheusRule")
    assert ignored(release) == []  # ours only: nothing of Koordinator's to name


# -- images ------------------------------------------------------------------------------------


def test_images_are_what_koordinators_chart_renders(releases: dict[str, helm.Release]) -> None:
    # As it is: HOST/REPOSITORY:TAG, Koordinator's images.
    koordinator = releases["koordinator"]
    for kind, name, repository in (
        ("DaemonSet", "koordlet", "koordinator-sh/koordlet"),
        ("Deployment", "koord-manager", "koordinator-sh/koord-manager"),
        ("Deployment", "koord-scheduler", "koordinator-sh/koord-scheduler"),
        ("Deployment", "koord-descheduler", "koordinator-sh/koord-descheduler"),
    ):
        image = pod(koordinator, kind, name)["containers"][0]["image"]
        assert image == f"registry.cn-beijing.aliyuncs.com/{repository}:v1.8.0"
    # A host with a trailing slash, and other repositories and tags.
    unusual = releases["unusual"]
    koordlet = pod(unusual, "DaemonSet", "koordlet")["containers"][0]["image"]
    assert koordlet == "mirror.example.org:5443/koordinator-py/koordlet:0.1.0-rc7"
    manager = pod(unusual, "Deployment", "koord-manager")["containers"][0]["image"]
    assert manager == "mirror.example.org:5443/mirrors/koord-manager:7.7.7"


def test_our_own_image_is_never_behind_koordinators_host() -> None:
    values = {"imageRepositoryHost": "registry.cn-beijing.aliyuncs.com"}
    bare = {"koordlet": {"image": {"tag": "0.0.9"}}}
    given = {"koordlet": {"image": {"repository": "team/koordlet"}}}
    results = helm.run(
        helm.Render(helm.CHART, values),
        helm.Render(helm.CHART, {**values, **bare}),
        helm.Render(helm.CHART, {**values, **given}),
        helm.Render(helm.CHART, given),
    )
    images = []
    for release in results:
        assert isinstance(release, helm.Release) and not release.error, release
        images.append(pod(release, "DaemonSet", "koordlet")["containers"][0]["image"])
    app_version = yaml.safe_load((helm.CHART / "Chart.yaml").read_text())["appVersion"]
    assert images == [
        f"koordinator-py/koordlet:{app_version}",
        "koordinator-py/koordlet:0.0.9",
        f"registry.cn-beijing.aliyuncs.com/team/koordlet:{app_version}",
        f"team/koordlet:{app_version}",
    ]


def test_image_pull_secrets(releases: dict[str, helm.Release]) -> None:
    # Koordinator's {} is no secret; a list reaches every pod.
    assert "imagePullSecrets" not in pod(releases["koordinator"], "DaemonSet", "koordlet")
    for kind, name in (("DaemonSet", "koordlet"), ("Deployment", "koord-manager")):
        secrets = pod(releases["unusual"], kind, name)["imagePullSecrets"]
        assert secrets == [{"name": "pull-cred-7"}]


# -- crds, installation, deviceDaemon ----------------------------------------------------------


def test_crds(releases: dict[str, helm.Release]) -> None:
    def crds(release: helm.Release) -> set[str]:
        kind = "CustomResourceDefinition"
        return {c["metadata"]["name"].split(".")[0] for c in release.all(kind)}

    ours = {
        "clustercolocationprofiles",
        "devices",
        "nodemetrics",
        "nodeslos",
        "podmigrationjobs",
        "elasticquotas",
        "podgroups",
        "reservations",
    }
    assert crds(releases["koordinator"]) == ours
    off = {"nodemetrics", "devices", "podgroups", "reservations"}
    assert crds(releases["unusual"]) == ours - off
    others = sorted(set(KOORDINATOR_VALUES["crds"]) - ours - {"managed"})
    line = named(releases["koordinator"], f"crds.{others[0]}")
    assert line.startswith(", ".join(f"crds.{k}" for k in others) + ": this chart has no such CRD")
    # the ones switched off are not named
    on = [k for k in others if k != "recommendations"]
    line = named(releases["unusual"], f"crds.{on[0]}")
    assert line.startswith(", ".join(f"crds.{k}" for k in on) + ": ")


def test_installation_keys_are_named(releases: dict[str, helm.Release]) -> None:
    # Koordinator's namespace is the release's here: honoured, not named.
    lines = ignored(releases["koordinator"])
    assert not [line for line in lines if "installation.namespace" in line]
    line = named(releases["unusual"], "installation.namespace")
    assert f"the release namespace {NAMESPACE}, not in koord-colo-ns" in line
    assert "helm install -n koord-colo-ns --create-namespace" in line
    for release in (releases["koordinator"], releases["unusual"]):
        assert "Koordinator v1.8's chart either" in named(release, "installation.roleListGroups")


def test_device_daemon_is_named(releases: dict[str, helm.Release]) -> None:
    for release in (releases["koordinator"], releases["unusual"]):
        assert "no koord-device-daemon" in named(release, "deviceDaemon")
        names = {d["metadata"]["name"] for d in release.all("DaemonSet")}
        assert names == {"koordlet"}


# -- koordlet ----------------------------------------------------------------------------------


def test_koordlet_takes_koordinators_keys(releases: dict[str, helm.Release]) -> None:
    spec = pod(releases["unusual"], "DaemonSet", "koordlet")
    (container,) = spec["containers"]
    assert container["resources"] == UNUSUAL["koordlet"]["resources"]
    args = container["args"]
    assert "--feature-gates=BECPUEvict=true,PSICollector=true" in args
    assert args[-1] == "--log-level=info"  # klog's 2: below 4, after the flags
    assert spec["runtimeClassName"] == "runc-qos"
    assert "--addr=:9417" in args
    assert container["ports"] == [{"name": "metrics", "containerPort": 9417, "protocol": "TCP"}]
    # Koordinator's defaults: klog 4 is debug; the chart's gates when features is empty
    default = pod(releases["koordinator"], "DaemonSet", "koordlet")["containers"][0]["args"]
    assert default[-1] == "--log-level=debug"
    assert "--feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true" in default
    assert "runtimeClassName" not in pod(releases["koordinator"], "DaemonSet", "koordlet")


def volume_mounts(release: helm.Release) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Volume name -> (the koordlet container's mount, the pod's volume)."""
    spec = pod(release, "DaemonSet", "koordlet")
    volumes = {v["name"]: v for v in spec["volumes"]}
    return {m["name"]: (m, volumes[m["name"]]) for m in spec["containers"][0]["volumeMounts"]}


def test_host_dirs_are_mounted_where_koordinators_are(releases: dict[str, helm.Release]) -> None:
    # Koordinator's volume names and mount paths (its koordlet.yaml), each from its key.
    where = {
        "kubeletConfigDir": ("host-kubernetes", "/etc/kubernetes/"),
        "kubeletLibDir": ("host-kubelet-rootdir", "/var/lib/kubelet"),
        "koordProxyRegisterDir": ("host-etc-hookserver", "/host-etc-hookserver/"),
        "koordletSockDir": ("host-var-run-koordlet", "/host-var-run-koordlet/"),
        "predictionCheckpointDir": ("host-koordlet-checkpoint-dir", "/prediction-checkpoints"),
        "podResourcesProxyPath": ("pod-resources-proxy", "/var/run/koordlet/pod-resources/"),
        "koordletTSDBDir": ("metric-db-path", "/metric-data/"),
    }
    assert set(where) == set(KOORDINATOR_VALUES["koordlet"]["hostDirs"])
    for name in ("koordinator", "unusual"):
        dirs = helm.merge_values(KOORDINATOR_VALUES, UNUSUAL if name == "unusual" else {})
        mounts = volume_mounts(releases[name])
        for key, (volume, mount_path) in where.items():
            mount, source = mounts[volume]
            assert mount["mountPath"] == mount_path, key
            given = dirs["koordlet"]["hostDirs"][key]
            if given:
                assert source["hostPath"]["path"] == given, key
            else:  # Koordinator's tmpfs for an empty koordletTSDBDir
                assert key == "koordletTSDBDir"
                assert source["emptyDir"] == {"medium": "Memory", "sizeLimit": "150Mi"}
        args = pod(releases[name], "DaemonSet", "koordlet")["containers"][0]["args"]
        assert "--tsdb-path=/metric-data/" in args
    # none of them is mounted with our defaults but the metric cache, on the node's disk
    default = {
        v["name"]: v for v in pod(releases["all-optional"], "DaemonSet", "koordlet")["volumes"]
    }
    assert {volume for volume, _ in where.values()} & set(default) == {"metric-db-path"}
    assert default["metric-db-path"]["hostPath"]["path"] == "/var/lib/koordlet/metric-data/"


def test_koordlet_node_affinity_is_the_pods_affinity(releases: dict[str, helm.Release]) -> None:
    # Koordinator renders koordlet.nodeAffinity as the pod's whole affinity.
    assert pod(releases["unusual"], "DaemonSet", "koordlet")["affinity"] == KOORDLET_AFFINITY
    # a NodeAffinity written there, as manager.nodeAffinity takes it, is taken as one
    affinity = pod(releases["node-affinity-form"], "DaemonSet", "koordlet")["affinity"]
    assert affinity == {"nodeAffinity": MANAGER_NODE_AFFINITY}
    assert "affinity" not in pod(releases["koordinator"], "DaemonSet", "koordlet")


def test_koordlet_service_monitor(releases: dict[str, helm.Release]) -> None:
    unusual = releases["unusual"]
    service = unusual.find("Service", "koordlet-service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["port"] == 9417
    monitor = unusual.find("ServiceMonitor", "koordlet-service-monitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    koordinator = releases["koordinator"]
    assert not koordinator.all("ServiceMonitor")
    assert "koordlet-service" not in {s["metadata"]["name"] for s in koordinator.all("Service")}


# -- koord-manager -----------------------------------------------------------------------------


def test_manager_takes_koordinators_keys(releases: dict[str, helm.Release]) -> None:
    deployment = releases["unusual"].find("Deployment", "koord-manager")
    assert deployment["spec"]["replicas"] == 3
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    args = container["args"]
    for arg in (
        "--log-level=info",  # klog's 1
        "--webhook-port=9443",
        "--metrics-addr=127.0.0.1:8089",
        "--health-probe-addr=:8011",
        "--sync-period=45s",
        f"--feature-gates={UNUSUAL['featureGates']}",
    ):
        assert arg in args
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": 8089, "webhook": 9443, "health": 8011}
    # the probes on the health port: the metrics address is the loopback's
    assert container["livenessProbe"]["httpGet"]["port"] == "health"
    assert container["readinessProbe"]["httpGet"]["port"] == "health"
    assert container["resources"]["limits"] == {"cpu": "1300m", "memory": "1100Mi"}
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["affinity"]["nodeAffinity"] == MANAGER_NODE_AFFINITY
    assert "podAntiAffinity" in spec["affinity"]  # spread, as Koordinator's
    assert spec["nodeSelector"]["node.example.org/ctl"] == "yes"
    assert spec["tolerations"] == TOLERATIONS
    # Koordinator's defaults
    default = pod(releases["koordinator"], "Deployment", "koord-manager")
    args = default["containers"][0]["args"]
    assert "--metrics-addr=:8080" in args and "--health-probe-addr=:8000" in args
    assert "--log-level=debug" in args and "--sync-period=0" in args
    assert "hostNetwork" not in default and "nodeAffinity" not in default["affinity"]
    assert default["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}


def webhooks(release: helm.Release) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for configuration in release.all(kind):
            found |= {hook["name"]: hook for hook in configuration["webhooks"]}
    return found


def test_webhook_configuration(releases: dict[str, helm.Release]) -> None:
    unusual = webhooks(releases["unusual"])
    assert unusual["mpod.koordinator.sh"]["failurePolicy"] == "Fail"
    assert unusual["vpod.koordinator.sh"]["failurePolicy"] == "Fail"
    # failurePolicy.elasticquotas: both ElasticQuota webhooks, as in Koordinator's chart
    assert unusual["melasticquota.koordinator.sh"]["failurePolicy"] == "Fail"
    assert unusual["velasticquota.koordinator.sh"]["failurePolicy"] == "Fail"
    assert {hook["timeoutSeconds"] for hook in unusual.values()} == {7}
    koordinator = webhooks(releases["koordinator"])
    assert koordinator["mpod.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert koordinator["melasticquota.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert koordinator["velasticquota.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert {hook["timeoutSeconds"] for hook in koordinator.values()} == {30}
    keys = [
        f"webhookConfiguration.failurePolicy.{k}" for k in ("nodeStatus", "nodes", "reservations")
    ]
    line = named(releases["koordinator"], keys[0])
    assert line.startswith(", ".join(keys) + ": koord-manager here serves no Node")
    assert "elasticquotas" not in "".join(ignored(releases["koordinator"]))
    # UNUSUAL gives pods only (merged over the file: the others are still there)
    assert named(releases["unusual"], keys[0]) == line


def test_service_account_annotations(releases: dict[str, helm.Release]) -> None:
    # on koord-manager's account, as in Koordinator's chart; not on the others
    accounts = {a["metadata"]["name"]: a for a in releases["unusual"].all("ServiceAccount")}
    assert accounts["koord-manager"]["metadata"]["annotations"] == {
        "iam.example.org/role": "koord-17"
    }
    assert "annotations" not in accounts["koordlet"]["metadata"]
    default = releases["koordinator"].find("ServiceAccount", "koord-manager")
    assert "annotations" not in default["metadata"]


def test_feature_gates_switch_the_webhooks(releases: dict[str, helm.Release]) -> None:
    # koord-manager's --feature-gates, as written
    args = pod(releases["gates-off"], "Deployment", "koord-manager")["containers"][0]["args"]
    assert f"--feature-gates={GATES_OFF}" in args
    # the configurations stay (koord-manager keeps their caBundle), without those webhooks
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert releases["gates-off"].find(kind)["webhooks"] == []
    # empty (Koordinator's default) or =true: every webhook
    for name in ("koordinator", "unusual"):
        assert set(webhooks(releases[name])) == {
            "mpod.koordinator.sh",
            "vpod.koordinator.sh",
            "vconfigmap.koordinator.sh",
            "melasticquota.koordinator.sh",
            "velasticquota.koordinator.sh",
        }
