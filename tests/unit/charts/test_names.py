"""Object names: Koordinator's, a fullnameOverride prefix for a second release, and a render
that refers only to what it holds.

Koordinator's chart (v1.8.0) names its objects without the release; so does this one, where it
has the same object, and names its own in that style. Every name the chart derives (helpers,
the daemons' arguments, the webhook configurations, the extender's URL, NOTES.txt) must follow,
so the render must hold every Service, ServiceAccount, Secret, ConfigMap and role it points at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.e2e.harness.podspec import run_as_kubelet
from tests.unit.charts import helm
from tests.unit.charts.conftest import SCENARIOS, Outcome, effective

# (kind, name) of the objects Koordinator's chart has too, under its names.
KOORDINATOR_NAMES = {
    ("DaemonSet", "koordlet"),
    ("ServiceAccount", "koordlet"),
    ("ClusterRole", "koordlet-role"),
    ("ClusterRoleBinding", "koordlet-rolebinding"),
    ("Service", "koordlet-service"),
    ("ServiceMonitor", "koordlet-service-monitor"),
    # Koordinator's pod-monitors template (its monitorEnabled keys, or monitoring's)
    ("PodMonitor", "koord-descheduler-metrics-podmonitor"),
    ("PodMonitor", "koord-scheduler-metrics-podmonitor"),
    ("Deployment", "koord-manager"),
    ("ServiceAccount", "koord-manager"),
    ("ClusterRole", "koord-manager-role"),
    ("ClusterRoleBinding", "koord-manager-rolebinding"),
    ("Role", "koord-leader-election-role"),
    ("RoleBinding", "koord-leader-election-rolebinding"),
    ("Service", "koordinator-webhook-service"),
    ("Secret", "koordinator-webhook-certs"),
    ("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration"),
    ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration"),
    ("Deployment", "koord-scheduler"),
    ("ServiceAccount", "koord-scheduler"),
    ("ClusterRole", "koord-scheduler-role"),
    ("ClusterRoleBinding", "koord-scheduler-rolebinding-custom"),
    ("ConfigMap", "koord-scheduler-config"),
    ("ConfigMap", "slo-controller-config"),
    ("PriorityClass", "koord-prod"),
    ("PriorityClass", "koord-mid"),
    ("PriorityClass", "koord-batch"),
    ("PriorityClass", "koord-free"),
    ("CustomResourceDefinition", "nodeslos.slo.koordinator.sh"),
    ("CustomResourceDefinition", "nodemetrics.slo.koordinator.sh"),
    ("CustomResourceDefinition", "clustercolocationprofiles.config.koordinator.sh"),
    ("CustomResourceDefinition", "podmigrationjobs.scheduling.koordinator.sh"),
    ("CustomResourceDefinition", "devices.scheduling.koordinator.sh"),
    ("CustomResourceDefinition", "elasticquotas.scheduling.sigs.k8s.io"),
    ("CustomResourceDefinition", "podgroups.scheduling.sigs.k8s.io"),
    ("CustomResourceDefinition", "reservations.scheduling.koordinator.sh"),
    ("Deployment", "koord-descheduler"),
    ("ServiceAccount", "koord-descheduler"),
    ("ClusterRole", "koord-descheduler-role"),
    ("ClusterRoleBinding", "koord-descheduler-rolebinding"),
    ("ConfigMap", "koord-descheduler-config"),
}
# Ours, in the same style: the chart's kube-scheduler and koord-scheduler's Service,
# certificate and files, the manager's config Role and metrics objects, the dashboard.
OUR_NAMES = {
    ("Role", "koord-manager-config-role"),
    ("RoleBinding", "koord-manager-config-rolebinding"),
    ("Service", "koord-manager-service"),
    ("ServiceMonitor", "koord-manager-service-monitor"),
    ("ConfigMap", "koordlet-dashboard"),
    ("PrometheusRule", "koordlet-rules"),  # ours
    ("Service", "koord-scheduler-service"),
    ("Secret", "koord-scheduler-certs"),
    ("Role", "koord-scheduler-certs-role"),
    ("RoleBinding", "koord-scheduler-certs-rolebinding"),
    ("ConfigMap", "koord-scheduler-loadaware-config"),
    ("ConfigMap", "koord-scheduler-extender-config"),
    ("Deployment", "koord-kube-scheduler"),
    ("ServiceAccount", "koord-kube-scheduler"),
    ("ClusterRoleBinding", "koord-kube-scheduler-rolebinding"),
    ("ClusterRoleBinding", "koord-kube-scheduler-rolebinding-volume"),
    ("RoleBinding", "koord-kube-scheduler-auth-reader-rolebinding"),
    ("Role", "koord-kube-scheduler-lease-role"),
    ("RoleBinding", "koord-kube-scheduler-lease-rolebinding"),
    ("Role", "koord-descheduler-leader-election"),  # Koordinator grants the Lease cluster-wide
    ("RoleBinding", "koord-descheduler-leader-election"),
}
# Names no prefix touches: shared by every release (PriorityClasses a profile names, CRDs), or
# given in values (sloConfig.name).
UNPREFIXED_KINDS = {"PriorityClass", "CustomResourceDefinition"}
SLO_CONFIG = ("ConfigMap", "slo-controller-config")
# Roles that Kubernetes has: bindings may name them.
BUILTIN_ROLES = {
    ("ClusterRole", "system:kube-scheduler"),
    ("ClusterRole", "system:volume-scheduler"),
    ("Role", "extension-apiserver-authentication-reader"),
}

SECOND = {"fullnameOverride": "second", "crds": {"managed": False}}
SECOND_NAMESPACE = "other-system"


def second_release(first: helm.Release, values: Mapping[str, Any]) -> helm.Render:
    """A release "second" in another namespace of a cluster that holds ``first``."""
    return helm.Render(
        helm.CHART,
        values,
        release="second",
        namespace=SECOND_NAMESPACE,
        existing=tuple(first.created),
    )


@pytest.fixture(scope="module")
def second(outcomes: dict[str, Outcome]) -> dict[str, helm.Release]:
    """The second release: with SECOND's values, and without either of them (controls)."""
    first = outcomes["default"].release
    names = ["prefixed", "no-prefix", "crds-managed"]
    results = helm.run(
        second_release(first, SECOND),
        second_release(first, {"crds": {"managed": False}}),
        second_release(first, {"fullnameOverride": "second"}),
    )
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(names, results, strict=True))  # type: ignore[arg-type]


def names_of(release: helm.Release) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in release.objects}


# -- Koordinator's names -----------------------------------------------------------------------


def test_objects_are_named_as_koordinators_chart_names_them(
    outcomes: dict[str, Outcome],
) -> None:
    """Everything the chart can render (the monitoring scenario adds the metrics Services,
    ServiceMonitors and the dashboard to the default's) is named as listed."""
    assert names_of(outcomes["monitoring"].release) == KOORDINATOR_NAMES | OUR_NAMES
    monitoring_only = {
        ("Service", "koordlet-service"),
        ("ServiceMonitor", "koordlet-service-monitor"),
        ("Service", "koord-manager-service"),
        ("ServiceMonitor", "koord-manager-service-monitor"),
        ("ConfigMap", "koordlet-dashboard"),
        ("PrometheusRule", "koordlet-rules"),
        ("PodMonitor", "koord-descheduler-metrics-podmonitor"),
        ("PodMonitor", "koord-scheduler-metrics-podmonitor"),
    }
    everything = KOORDINATOR_NAMES | OUR_NAMES
    assert names_of(outcomes["default"].release) == everything - monitoring_only


def test_a_prefix_goes_before_every_derived_name(
    outcomes: dict[str, Outcome], second: dict[str, helm.Release]
) -> None:
    """fullnameOverride=second: every name the chart derives, prefixed; the shared ones as
    they are (the CRDs and PriorityClasses are the first release's, so not rendered)."""
    release = second["prefixed"]
    assert not release.error, release.error
    first = names_of(outcomes["default"].release)
    prefixed = {(kind, f"second-{name}") for kind, name in first if kind not in UNPREFIXED_KINDS}
    prefixed.remove(("ConfigMap", "second-slo-controller-config"))
    assert names_of(release) == prefixed | {SLO_CONFIG}


# -- a second release in the same cluster ------------------------------------------------------


def test_a_second_release_with_a_prefix_installs_beside_the_first(
    second: dict[str, helm.Release],
) -> None:
    release = second["prefixed"]
    assert not release.error, release.error
    # The first release's PriorityClasses and CRDs serve both.
    assert not release.all("PriorityClass") and not release.all("CustomResourceDefinition")
    assert release.find("DaemonSet", "second-koordlet")["metadata"]["namespace"] == (
        SECOND_NAMESPACE
    )


def test_without_the_prefix_the_cluster_wide_names_collide(
    second: dict[str, helm.Release],
) -> None:
    error = second["no-prefix"].error
    assert "exists and cannot be imported into the current release" in error
    cluster_wide = {
        name
        for kind, name in KOORDINATOR_NAMES | OUR_NAMES
        if kind.startswith(("Cluster", "Mutating", "Validating"))
    }
    assert any(f'"{name}"' in error for name in cluster_wide), error


def test_a_second_release_leaves_the_crds_to_the_first(second: dict[str, helm.Release]) -> None:
    """crds.managed=false is needed: the CRDs are the first release's."""
    error = second["crds-managed"].error
    assert "exists and cannot be imported into the current release" in error
    assert "CustomResourceDefinition" in error


# -- the render refers only to what it holds ---------------------------------------------------


def external_names(values: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of what the values say exists outside the chart."""
    v = effective(values)
    found = set()
    for account in (
        v["koordlet"]["serviceAccount"],
        v["manager"]["serviceAccount"],
        v["scheduler"]["serviceAccount"],
        v["scheduler"]["kubeScheduler"]["serviceAccount"],
        v["descheduler"]["serviceAccount"],
    ):
        if not account["create"]:
            found.add(("ServiceAccount", account["name"] or "default"))
    for secret in (v["manager"]["webhook"]["certificates"], v["scheduler"]["certificates"]):
        if secret["existingSecret"]:
            found.add(("Secret", secret["existingSecret"]))
    if not v["sloConfig"]["create"]:
        found.add(("ConfigMap", v["sloConfig"]["name"]))
    return found


def dangling(release: helm.Release, values: Mapping[str, Any]) -> list[str]:
    """Every reference in the render to an object that neither the render nor (by the values)
    the cluster holds: "<what refers>: <kind> <namespace>/<name>"."""
    held = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in release.objects
    }
    outside = external_names(values)
    missing: list[str] = []

    def need(where: str, kind: str, namespace: str, name: str) -> None:
        if (kind, namespace, name) not in held and (kind, name) not in outside:
            missing.append(f"{where}: {kind} {namespace}/{name}")

    for obj in release.objects:
        kind, meta = obj["kind"], obj["metadata"]
        namespace = meta.get("namespace", "")
        where = f"{kind} {meta['name']}"
        if kind in ("DaemonSet", "Deployment"):
            pod = obj["spec"]["template"]["spec"]
            need(where, "ServiceAccount", namespace, pod.get("serviceAccountName", "default"))
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    need(where, "Secret", namespace, volume["secret"]["secretName"])
                if "configMap" in volume:
                    need(where, "ConfigMap", namespace, volume["configMap"]["name"])
            for arg in (a for c in pod["containers"] for a in c.get("args", [])):
                # the Secrets the components keep their certificates in, read through the API
                flag, _, value = arg.partition("=")
                if flag == "--webhook-cert-secret":
                    need(where, "Secret", namespace, value)
                if flag == "--cert-secret":
                    secret_namespace, _, name = value.partition("/")
                    need(where, "Secret", secret_namespace, name)
                if flag.endswith("-webhook-configuration"):
                    hooks = "Mutating" if flag.startswith("--mutating") else "Validating"
                    need(where, f"{hooks}WebhookConfiguration", "", value)
        if kind.endswith("WebhookConfiguration"):
            for hook in obj["webhooks"]:
                service = hook["clientConfig"]["service"]
                need(where, "Service", service["namespace"], service["name"])
                found = held.get(("Service", service["namespace"], service["name"]))
                if found and service["port"] not in [p["port"] for p in found["spec"]["ports"]]:
                    missing.append(f"{where}: port {service['port']} of {service['name']}")
        if kind.endswith("RoleBinding"):
            ref = obj["roleRef"]
            ref_namespace = namespace if ref["kind"] == "Role" else ""
            if (ref["kind"], ref["name"]) not in BUILTIN_ROLES:
                need(where, ref["kind"], ref_namespace, ref["name"])
            for subject in obj["subjects"]:
                need(where, "ServiceAccount", subject["namespace"], subject["name"])
        if kind == "ConfigMap":
            for text in obj.get("data", {}).values():
                config = yaml.safe_load(text) if "KubeSchedulerConfiguration" in text else None
                for extender in (config or {}).get("extenders", []):
                    host = urlsplit(extender["urlPrefix"]).hostname or ""
                    name, service_namespace, svc = host.split(".")
                    assert svc == "svc", host
                    need(where, "Service", service_namespace, name)
                    if extender["tlsConfig"]["serverName"] != host:
                        missing.append(f"{where}: serverName is not {host}")
        if kind == "ServiceMonitor":
            selector = obj["spec"]["selector"]["matchLabels"]
            ports = {e["port"] for e in obj["spec"]["endpoints"]}
            scraped = [
                s
                for s in release.all("Service")
                if s["metadata"]["namespace"] in obj["spec"]["namespaceSelector"]["matchNames"]
                and selector.items() <= s["metadata"]["labels"].items()
                and ports <= {p["name"] for p in s["spec"]["ports"]}
            ]
            if not scraped:
                missing.append(f"{where}: no Service with port(s) {ports} it selects")
        if kind == "Service":
            pods = [
                w["spec"]["template"]
                for w in release.all("DaemonSet") + release.all("Deployment")
                if w["metadata"]["namespace"] == namespace
                and obj["spec"]["selector"].items()
                <= w["spec"]["template"]["metadata"]["labels"].items()
            ]
            named = {
                p["name"]
                for pod in pods
                for c in pod["spec"]["containers"]
                for p in c.get("ports", [])
            }
            for port in obj["spec"]["ports"]:
                if not pods or port["targetPort"] not in named:
                    missing.append(f"{where}: no pod port {port['targetPort']} behind it")
    return missing


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_reference_in_the_render_resolves(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    outcome = outcomes[scenario]
    assert not outcome.release.error, outcome.release.error
    assert dangling(outcome.release, outcome.values) == []


def test_every_reference_of_the_prefixed_release_resolves(
    second: dict[str, helm.Release],
) -> None:
    assert dangling(second["prefixed"], SECOND) == []


def test_a_dangling_reference_is_found(outcomes: dict[str, Outcome]) -> None:
    """The check itself: the default render less one object each reference needs."""
    release = outcomes["default"].release
    for kind, name in [
        ("Service", "koordinator-webhook-service"),
        ("Service", "koord-scheduler-service"),
        ("ServiceAccount", "koordlet"),
        ("Secret", "koord-scheduler-certs"),
        ("Secret", "koordinator-webhook-certs"),
        ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration"),
        ("ConfigMap", "koord-scheduler-config"),
        ("ClusterRole", "koord-manager-role"),
        ("ConfigMap", "koord-descheduler-config"),
        ("ServiceAccount", "koord-descheduler"),
    ]:
        objects = tuple(
            o for o in release.objects if (o["kind"], o["metadata"]["name"]) != (kind, name)
        )
        assert len(objects) == len(release.objects) - 1
        found = dangling(helm.Release(objects=objects), {})
        assert found and all(f"{kind} " in f and name in f for f in found), found


def test_notes_name_what_the_release_holds(
    outcomes: dict[str, Outcome], second: dict[str, helm.Release]
) -> None:
    """The kubectl commands of NOTES.txt name objects of the render, and with a prefix every
    prefixed name in it does."""
    default = outcomes["default"].release
    commands = re.findall(
        r"\b(daemonset|deployment)/([-a-z0-9]+)|get (configmap|service) ([-a-z0-9]+)",
        default.notes,
    )
    kinds = {"daemonset": "DaemonSet", "deployment": "Deployment"}
    kinds |= {"configmap": "ConfigMap", "service": "Service"}
    named = {(kinds[a or c], b or d) for a, b, c, d in commands}
    assert ("DaemonSet", "koordlet") in named and len(named) >= 5
    assert named <= names_of(default)
    release = second["prefixed"]
    prefixed = set(re.findall(r"second-[-a-z0-9]*[a-z0-9]", release.notes))
    assert len(prefixed) >= 6
    assert prefixed <= {name for _, name in names_of(release)}


# -- what tests/e2e/test_daemonset.py takes from the chart -------------------------------------


def test_the_e2e_test_finds_the_koordlet_daemonset_and_runs_its_pod(tmp_path: Path) -> None:
    """tests/e2e/test_daemonset.py renders the chart with a metrics port, takes its one
    DaemonSet and runs the pod template as the kubelet would (harness/podspec.py): the same
    here, the host's folders under tmp_path, up to the CRI calls."""
    port = 19316
    release = helm.render(helm.CHART, {"koordlet": {"metrics": {"port": port}}})
    daemonset = release.find("DaemonSet")
    assert daemonset["metadata"]["name"] == "koordlet"
    template = daemonset["spec"]["template"]
    for volume in template["spec"]["volumes"]:
        host = volume.get("hostPath", {})
        if host.get("type") == "Directory":  # a node has these; the kubelet checks
            (tmp_path / "host" / host["path"].lstrip("/")).mkdir(parents=True, exist_ok=True)
    pod = run_as_kubelet(
        template,
        name=f"{daemonset['metadata']['name']}-x7k2p",
        namespace=daemonset["metadata"]["namespace"],
        node_name="e2e-node",
        pod_dir=tmp_path / "pod",
        host_paths={"/": tmp_path / "host"},
    )
    assert (pod.pod.name, pod.pod.namespace) == ("koordlet-x7k2p", "koordinator-system")
    (container,) = pod.containers
    assert container.command == ["koordlet"]
    assert {probe.port for probe in pod.probes[container.name].values()} == {port}
    assert container.envs["NODE_NAME"] == "e2e-node"
