"""koord-scheduler in the chart: the extender's Deployment, Service, RBAC and certificate, its
LoadAware arguments, and the KubeSchedulerConfiguration that points kube-scheduler at it.

Rendered by Helm's engine with the scenarios of conftest.py. The certificate is checked the way
kube-scheduler checks it: the extender's tlsConfig.caData must be the CA that signed a serving
certificate for tlsConfig.serverName, the host of its urlPrefix.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime
import io
import logging
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import trustme
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from koordapi import keys
from scheduler import cli as scheduler_cli
from scheduler.loadaware import LoadAwareArgs
from tests.fakekube import FakeKubeAPI
from tests.unit.charts import helm
from tests.unit.charts.conftest import (
    CHART_VALUES,
    CUSTOM_NODE_SELECTOR,
    CUSTOM_RESOURCES,
    CUSTOM_SCHEDULER_AFFINITY,
    CUSTOM_TOLERATIONS,
    EXISTING_CA_PEM,
    SCENARIOS,
    Outcome,
    component_objects,
    effective,
    release_of,
    scenarios_where,
)
from tests.unit.charts.test_chart import permission
from tests.unit.koordkube.fakes import eventually
from tests.unit.scheduler.objects import device, gpu_entry, gpu_pod, lsr_pod, make_node
from tests.unit.scheduler.test_server import SERVER_NAME, cluster, serving

NAMESPACE = "koordinator-system"  # helm.Render's default
# The extender's objects in the default release: koord-scheduler as Koordinator's chart names
# it, the others in its style.
SCHEDULER = "koord-scheduler"
SCHEDULER_ROLE = "koord-scheduler-role"
SCHEDULER_SERVICE = "koord-scheduler-service"
SCHEDULER_CERTS = "koord-scheduler-certs"
KUBE_SCHEDULER_CONFIG = "koord-scheduler-extender-config"
CONFIG_KEY = "kube-scheduler-config.yaml"
KOORDLET_IMAGE = "koordinator-py/koordlet:0.1.0"

# Least privilege: what the extender's informers, its bind and its events need.
SCHEDULER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    # update: the scheduling.koordinator.sh/resource-status and device-allocated annotations,
    # before binding (read, then written back with its resourceVersion: a PUT).
    # delete: a Reservation's reserve pod once the Reservation is placed (never bound);
    # patch: the reservation-released annotation (a refused pod tried again once room is freed).
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "update", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {
        "apiGroups": ["slo.koordinator.sh"],
        "resources": ["nodemetrics"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["devices"],
        "verbs": ["get", "list", "watch"],
    },
    # ElasticQuotas and PodGroups read, their status written through the object (no status
    # subresource in Koordinator's CRDs or the chart's) or /status (a CRD that has one).
    {
        "apiGroups": ["scheduling.sigs.k8s.io"],
        "resources": ["elasticquotas", "podgroups"],
        "verbs": ["get", "list", "watch", "update", "patch"],
    },
    {
        "apiGroups": ["scheduling.sigs.k8s.io"],
        "resources": ["elasticquotas/status", "podgroups/status"],
        "verbs": ["update", "patch"],
    },
    # Reservations read, their status written through /status (the CRD has the subresource).
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["reservations"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["reservations/status"],
        "verbs": ["update", "patch"],
    },
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]

# kube-scheduler's config/v1 Extender fields (controlplane-apis.md, 1.2).
EXTENDER_FIELDS = {
    "urlPrefix",
    "filterVerb",
    "prioritizeVerb",
    "preemptVerb",
    "bindVerb",
    "weight",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
}
BATCH_RESOURCES = [
    {"name": keys.BATCH_CPU, "ignoredByScheduler": False},
    {"name": keys.BATCH_MEMORY, "ignoredByScheduler": False},
]


WITH_SCHEDULER = scenarios_where("scheduler", lambda s: s["enabled"])
GENERATED_CERTS = scenarios_where(
    "scheduler", lambda s: s["enabled"] and not s["certificates"]["existingSecret"]
)
# The scenarios that set scheduler values, and the default.
SCHEDULER_SCENARIOS = [
    name for name, values in SCENARIOS.items() if name == "default" or "scheduler" in values
]


def scheduler_objects(release: helm.Release, kind: str | None = None) -> list[dict[str, Any]]:
    return component_objects(release, "scheduler", kind)


def scheduler_deployment(release: helm.Release) -> dict[str, Any]:
    (deployment,) = scheduler_objects(release, "Deployment")
    return deployment


def pod_spec(release: helm.Release) -> dict[str, Any]:
    return cast(dict[str, Any], scheduler_deployment(release)["spec"]["template"]["spec"])


def scheduler_container(release: helm.Release) -> dict[str, Any]:
    (container,) = pod_spec(release)["containers"]
    assert container["name"] == "scheduler"
    return cast(dict[str, Any], container)


def container_port(release: helm.Release, name: str) -> int:
    (port,) = [p for p in scheduler_container(release)["ports"] if p["name"] == name]
    return int(port["containerPort"])


def parse_scheduler_args(args: list[str]) -> argparse.Namespace:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return scheduler_cli.build_parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"koord-scheduler refuses the chart's arguments {args}: {err.getvalue()}")


def scheduler_args(release: helm.Release) -> argparse.Namespace:
    return parse_scheduler_args(scheduler_container(release)["args"])


def kube_scheduler_config(release: helm.Release, name: str = KUBE_SCHEDULER_CONFIG) -> Any:
    config_map = release.find("ConfigMap", name)
    assert config_map["metadata"]["namespace"] == NAMESPACE
    assert set(config_map["data"]) == {CONFIG_KEY}
    return yaml.safe_load(config_map["data"][CONFIG_KEY])


def extender_of(release: helm.Release, name: str = KUBE_SCHEDULER_CONFIG) -> dict[str, Any]:
    (extender,) = kube_scheduler_config(release, name)["extenders"]
    return cast(dict[str, Any], extender)


def extender_of_any(release: helm.Release) -> dict[str, Any]:
    """The extender of whichever extender-config ConfigMap the release has (its prefix)."""
    (config_map,) = [c for c in scheduler_objects(release, "ConfigMap") if CONFIG_KEY in c["data"]]
    return extender_of(release, config_map["metadata"]["name"])


def ca_pem(extender: Mapping[str, Any]) -> bytes:
    """The PEM CA of an extender's tlsConfig.caData (base64 in YAML)."""
    return base64.b64decode(extender["tlsConfig"]["caData"], validate=True)


def load_pem(data: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(data))


def mounted_secret(release: helm.Release) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the volume, its mount) of the certificate Secret."""
    (volume,) = [v for v in pod_spec(release)["volumes"] if "secret" in v]
    (mount,) = [
        m for m in scheduler_container(release)["volumeMounts"] if m["name"] == volume["name"]
    ]
    return volume, mount


def certificate_secret(release: helm.Release) -> str:
    """The Secret koord-scheduler keeps its pair in (--cert-secret), else the one it mounts."""
    kept = scheduler_args(release).cert_secret
    if kept:
        namespace, _, name = kept.partition("/")
        assert namespace == NAMESPACE
        return str(name)
    volume, _ = mounted_secret(release)
    return str(volume["secret"]["secretName"])


# -- Helm's verdict ----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCHEDULER_SCENARIOS)
def test_helm_lints_and_installs_the_scheduler_values(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    outcome = outcomes[scenario]
    problems = outcome.lint.errors + outcome.lint.warnings
    assert not problems, [str(p) for p in problems]
    release = release_of(outcomes, scenario)
    assert bool(scheduler_objects(release)) is effective(outcome.values)["scheduler"]["enabled"]


# -- the Deployment ----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", WITH_SCHEDULER)
def test_scheduler_accepts_the_arguments_and_they_are_the_charts(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    s = effective(SCENARIOS[scenario])["scheduler"]
    container = scheduler_container(release)
    assert container["command"] == ["koord-scheduler"]
    args = scheduler_args(release)
    assert int(args.secure_port) == s["securePort"] == container_port(release, "https")
    assert str(args.url_prefix) == "/" + s["urlPrefix"].strip("/")
    # Koordinator's port, where given, else ours: where the process serves the probes
    probes = scheduler_cli.probes_address(scheduler_cli.options_from_args(args))
    assert probes.rpartition(":")[2] == str(container_port(release, "metrics"))
    assert container_port(release, "metrics") == (s["port"] or s["metrics"]["port"])
    assert str(args.log_level) == s["logLevel"]
    if not s["extraArgs"]:
        assert args.kubeconfig is None  # in-cluster
    assert scheduler_deployment(release)["spec"]["replicas"] == s["replicas"]
    # No leader election: every replica answers.
    assert not any("leader" in a for a in container["args"])


@pytest.mark.parametrize("scenario", WITH_SCHEDULER)
def test_the_certificate_secret_is_mounted_at_the_cert_dir(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    certificates = effective(SCENARIOS[scenario])["scheduler"]["certificates"]
    renew = certificates["autoRenew"] and not certificates["existingSecret"]
    pod = pod_spec(release)
    args = scheduler_args(release)
    cert_dir = PurePosixPath(str(args.cert_dir))
    (mount,) = [
        m
        for m in scheduler_container(release)["volumeMounts"]
        if PurePosixPath(m["mountPath"]) == cert_dir
    ]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    if renew:  # koord-scheduler issues the pair there itself, from the Secret's CA
        assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Mi"}
        assert mount["readOnly"] is False
        services = {svc["metadata"]["name"] for svc in scheduler_objects(release, "Service")}
        assert args.cert_service in services
    else:
        assert args.cert_secret == ""
        assert mount["readOnly"] is True
        # The files are group-readable by fsGroup, which the non-root user is in.
        assert volume["secret"]["defaultMode"] == 0o440
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    secret_name = certificate_secret(release)
    if certificates["existingSecret"]:
        assert secret_name == certificates["existingSecret"]
        assert not scheduler_objects(release, "Secret")
    else:
        secret = release.find("Secret", secret_name)
        assert secret["type"] == "kubernetes.io/tls"
        assert {"tls.crt", "tls.key"} <= set(secret["data"])
        # with autoRenew the CA's key too, under Koordinator's names, matching the CA
        assert ("ca-key.pem" in secret["data"]) is renew
        if renew:
            ca = load_pem(secret["data"]["ca-cert.pem"])
            ca_key = serialization.load_pem_private_key(
                base64.b64decode(secret["data"]["ca-key.pem"]), None
            )
            assert ca_key.public_key() == ca.public_key()


@pytest.mark.parametrize("scenario", WITH_SCHEDULER)
def test_the_loadaware_arguments_are_the_load_aware_config_file(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    wanted = effective(SCENARIOS[scenario])["scheduler"]["loadAware"]
    path = PurePosixPath(str(scheduler_args(release).load_aware_config))
    (mount,) = [
        m
        for m in scheduler_container(release)["volumeMounts"]
        if PurePosixPath(m["mountPath"]) == path.parent
    ]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod_spec(release)["volumes"] if v["name"] == mount["name"]]
    config_map = release.find("ConfigMap", volume["configMap"]["name"])
    # beside it, the --config file only where Koordinator's scheduler.deviceShare is given
    config = scheduler_args(release).config
    assert set(config_map["data"]) == {path.name} | (
        {PurePosixPath(config).name} if config else set()
    )
    loaded = yaml.safe_load(config_map["data"][path.name])
    assert loaded == wanted
    LoadAwareArgs.from_koordinator(loaded)  # raises on what LoadAware would refuse


def test_the_default_loadaware_arguments_are_the_specified_ones(default: helm.Release) -> None:
    (text,) = default.find("ConfigMap", "koord-scheduler-loadaware-config")["data"].values()
    assert yaml.safe_load(text) == {
        "usageThresholds": {"cpu": 65, "memory": 95},
        "nodeMetricExpirationSeconds": 180,
        "resourceWeights": {"cpu": 1, "memory": 1},
        "estimatedScalingFactors": {"cpu": 85, "memory": 70},
    }
    args = LoadAwareArgs.from_koordinator(yaml.safe_load(text))
    assert (args.cpu_threshold, args.memory_threshold) == (65, 95)
    assert args.node_metric_expiration_seconds == 180
    assert (args.cpu_weight, args.memory_weight) == (1, 1)
    assert (args.cpu_scaling_factor, args.memory_scaling_factor) == (85, 70)


def test_a_loadaware_change_rolls_the_pods(outcomes: dict[str, Outcome]) -> None:
    """The arguments are read at start: the pod template carries their checksum."""

    def checksum(scenario: str) -> str:
        template = scheduler_deployment(release_of(outcomes, scenario))["spec"]["template"]
        return cast(str, template["metadata"]["annotations"]["checksum/loadaware-config"])

    assert checksum("default") == checksum("scheduler-batch-only")  # the same arguments
    assert checksum("default") != checksum("custom")


def test_scheduler_pod_is_non_root_read_only_probed_and_spread(default: helm.Release) -> None:
    deployment = default.find("Deployment", SCHEDULER)
    pod = pod_spec(default)
    container = scheduler_container(default)
    assert container["image"] == KOORDLET_IMAGE  # the koordlet image: it has koord-scheduler
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == SCHEDULER
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Python's scratch space on a read-only root filesystem.
    (tmp,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert {"name": tmp["name"], "emptyDir": {}} in pod["volumes"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    (spread,) = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = spread["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == term["labelSelector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert selector["app.kubernetes.io/component"] == "scheduler"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "tolerations" not in pod
    assert container["resources"] == CHART_VALUES["scheduler"]["resources"]


def test_custom_values_reach_the_scheduler(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "custom")
    deployment = release.find("Deployment", "qos-koord-scheduler")  # fullnameOverride's prefix
    pod = pod_spec(release)
    container = scheduler_container(release)
    assert container["image"] == "registry.example.com/koord-scheduler:dev"
    assert container["imagePullPolicy"] == "Always"  # koordlet's, not set for the scheduler
    assert container["resources"] == CUSTOM_RESOURCES
    assert container["args"][-1] == "--kubeconfig=/etc/kube/config"
    args = scheduler_args(release)
    assert str(args.kubeconfig) == "/etc/kube/config"
    assert str(args.url_prefix) == "/koord/extender"  # slashes normalised
    # port is Koordinator's plain-HTTP port: it takes metrics.port's place
    assert args.port == 9443 == container_port(release, "metrics")
    assert container_port(release, "https") == CHART_VALUES["scheduler"]["securePort"]
    assert {"name": "PYTHONFAULTHANDLER", "value": "1"} in container["env"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["tolerations"] == CUSTOM_TOLERATIONS
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", **CUSTOM_NODE_SELECTOR}
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["affinity"] == CUSTOM_SCHEDULER_AFFINITY  # the user's anti-affinity, alone
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"]["example.com/team"] == "sre"
    assert template["labels"]["example.com/tier"] == "control"
    extender = extender_of(release, f"qos-{KUBE_SCHEDULER_CONFIG}")
    server_name = f"qos-{SCHEDULER_SERVICE}.{NAMESPACE}.svc"
    assert extender["urlPrefix"] == f"https://{server_name}:443/koord/extender"
    assert extender["tlsConfig"]["serverName"] == server_name
    assert (extender["weight"], extender["httpTimeout"], extender["ignorable"]) == (3, "2s", True)
    assert "bindVerb" not in extender
    cert = load_pem(release.find("Secret", f"qos-{SCHEDULER_CERTS}")["data"]["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{server_name}.example.internal" in names.get_values_for_type(x509.DNSName)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert abs(lifetime - datetime.timedelta(days=365)) < datetime.timedelta(days=1)


def test_scheduler_image_is_the_one_the_containerfile_builds() -> None:
    pyproject = tomllib.loads((helm.ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["koord-scheduler"] == "scheduler.cli:main"
    assert "COPY scheduler/ scheduler/" in (helm.ROOT / "Containerfile").read_text()
    image = CHART_VALUES["scheduler"]["image"]
    assert image == {"repository": "", "tag": "", "pullPolicy": ""}  # koordlet's


# -- the Service -------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", WITH_SCHEDULER)
def test_the_service_maps_443_to_the_extender_port(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    host = urlsplit(extender_of_any(release)["urlPrefix"])
    service_name, namespace, svc = str(host.hostname).split(".")
    assert svc == "svc"
    service = release.find("Service", service_name)
    assert service["metadata"]["namespace"] == namespace == NAMESPACE
    assert service["spec"]["type"] == "ClusterIP"
    # one kube-scheduler's calls all reach one replica, whose decisions count at once
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    assert host.port == 443
    assert container_port(release, "https") == int(scheduler_args(release).secure_port)
    pod_labels = scheduler_deployment(release)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "scheduler"


# -- RBAC --------------------------------------------------------------------------------------


def test_rbac_is_exactly_what_the_scheduler_reads_and_writes(default: helm.Release) -> None:
    account = default.find("ServiceAccount", SCHEDULER)
    assert account["metadata"]["namespace"] == NAMESPACE
    assert pod_spec(default)["serviceAccountName"] == SCHEDULER
    assert default.find("ClusterRole", SCHEDULER_ROLE)["rules"] == SCHEDULER_RULES
    # Koordinator's name for the binding of koord-scheduler-role.
    binding = default.find("ClusterRoleBinding", "koord-scheduler-rolebinding-custom")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": SCHEDULER_ROLE,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE}
    ]
    # Namespaced: only its certificate Secret (autoRenew), by name; no leader-election Lease.
    (role,) = scheduler_objects(default, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [certificate_secret(default)],
            "verbs": ["get", "update"],
        }
    ]
    (binding,) = scheduler_objects(default, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SCHEDULER, "namespace": NAMESPACE}
    ]


def test_bring_your_own_account_runs_the_scheduler(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "bring-your-own")
    assert pod_spec(release)["serviceAccountName"] == "koord-scheduler"
    assert not scheduler_objects(release, "ServiceAccount")
    assert not scheduler_objects(release, "ClusterRole")


# -- the KubeSchedulerConfiguration ------------------------------------------------------------


@pytest.mark.parametrize("scenario", WITH_SCHEDULER)
def test_kube_scheduler_configuration_calls_the_extender(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    s = effective(SCENARIOS[scenario])["scheduler"]
    e = s["extender"]
    (config_map,) = [c for c in scheduler_objects(release, "ConfigMap") if CONFIG_KEY in c["data"]]
    prefix = scheduler_deployment(release)["metadata"]["name"].removesuffix(SCHEDULER)
    assert config_map["metadata"]["name"] == f"{prefix}{KUBE_SCHEDULER_CONFIG}"
    config = kube_scheduler_config(release, config_map["metadata"]["name"])
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"] == {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    (extender,) = config["extenders"]
    assert set(extender) <= EXTENDER_FIELDS
    service = scheduler_objects(release, "Service")[0]["metadata"]["name"]
    server_name = f"{service}.{NAMESPACE}.svc"
    prefix = str(scheduler_args(release).url_prefix)
    assert extender["urlPrefix"] == f"https://{server_name}:443{prefix}"
    assert (extender["filterVerb"], extender["prioritizeVerb"]) == ("filter", "prioritize")
    assert extender.get("bindVerb") == ("bind" if e["bind"] else None)
    assert "preemptVerb" not in extender
    assert extender["weight"] == e["weight"] > 0
    assert extender["nodeCacheCapable"] is e["nodeCacheCapable"] is True
    assert extender["httpTimeout"] == e["httpTimeout"]
    assert extender["ignorable"] is e["ignorable"]
    assert extender["enableHTTPS"] is True
    assert set(extender["tlsConfig"]) == {"serverName", "caData"}
    assert extender["tlsConfig"]["serverName"] == server_name
    assert ca_pem(extender).startswith(b"-----BEGIN CERTIFICATE-----")
    if e["allPods"]:
        assert "managedResources" not in extender  # every pod reaches the extender
    else:
        assert extender["managedResources"] == BATCH_RESOURCES


def test_the_default_extender_sees_every_pod_and_binds(default: helm.Release) -> None:
    extender = extender_of(default)
    assert extender == {
        "urlPrefix": f"https://{SCHEDULER_SERVICE}.{NAMESPACE}.svc:443/scheduler",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "bindVerb": "bind",
        "weight": 1,
        "nodeCacheCapable": True,
        "httpTimeout": "5s",
        "ignorable": False,
        "enableHTTPS": True,
        "tlsConfig": {
            "serverName": f"{SCHEDULER_SERVICE}.{NAMESPACE}.svc",
            "caData": extender["tlsConfig"]["caData"],
        },
    }


def test_a_batch_only_extender_manages_the_batch_resources(outcomes: dict[str, Outcome]) -> None:
    extender = extender_of(release_of(outcomes, "scheduler-batch-only"))
    assert extender["managedResources"] == [
        {"name": "kubernetes.io/batch-cpu", "ignoredByScheduler": False},
        {"name": "kubernetes.io/batch-memory", "ignoredByScheduler": False},
    ]
    assert extender["bindVerb"] == "bind"


@pytest.mark.parametrize("scenario", GENERATED_CERTS)
def test_ca_data_is_the_ca_that_signed_the_serving_certificate(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    extender = extender_of_any(release)
    ca = x509.load_pem_x509_certificate(ca_pem(extender))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    secret = release.find("Secret", certificate_secret(release))
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca_pem(extender)
    cert = load_pem(secret["data"]["tls.crt"])
    cert.verify_directly_issued_by(ca)  # raises unless the CA signed it
    service = str(urlsplit(extender["urlPrefix"]).hostname).split(".")[0]
    domain = effective(SCENARIOS[scenario])["scheduler"]["certificates"]["clusterDomain"]
    names = [
        service,
        f"{service}.{NAMESPACE}",
        f"{service}.{NAMESPACE}.svc",  # tlsConfig.serverName
        f"{service}.{NAMESPACE}.svc.{domain}",
    ]
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == names
    assert extender["tlsConfig"]["serverName"] in names
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    assert key.public_key().public_bytes(encoding, public) == cert.public_key().public_bytes(
        encoding, public
    )
    assert secret["metadata"]["annotations"]["koordinator-py.io/dns-names"] == ",".join(names)


@dataclass
class TLSEnd:
    """One end of an in-memory TLS connection."""

    tls: ssl.SSLObject
    incoming: ssl.MemoryBIO
    outgoing: ssl.MemoryBIO
    done: bool = False


def tls_end(context: ssl.SSLContext, server_side: bool, hostname: str | None = None) -> TLSEnd:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_side=server_side, server_hostname=hostname)
    return TLSEnd(tls, incoming, outgoing)


def handshake(client: TLSEnd, server: TLSEnd) -> None:
    """A TLS handshake between two in-memory ends; raises what either end refuses."""
    for _ in range(10):
        for end in (client, server):
            if not end.done:
                with contextlib.suppress(ssl.SSLWantReadError):
                    end.tls.do_handshake()
                    end.done = True
        server.incoming.write(client.outgoing.read())
        client.incoming.write(server.outgoing.read())
        if client.done and server.done:
            return
    raise AssertionError("the handshake did not finish")


def test_kube_scheduler_would_trust_the_extenders_certificate(
    default: helm.Release, tmp_path: Path
) -> None:
    """A client set up from the extender's tlsConfig (caData, serverName), as kube-scheduler
    sets up its transport, completes a TLS handshake with a server that has the Secret's
    tls.crt and tls.key; under another name it refuses the certificate."""
    secret = default.find("Secret", certificate_secret(default))
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    extender = extender_of(default)
    client_context = ssl.create_default_context(cadata=ca_pem(extender).decode())
    server_name = extender["tlsConfig"]["serverName"]
    handshake(tls_end(client_context, False, server_name), tls_end(server_context, True))
    with pytest.raises(ssl.SSLCertVerificationError):
        elsewhere = f"elsewhere.{NAMESPACE}.svc"
        handshake(tls_end(client_context, False, elsewhere), tls_end(server_context, True))


def test_an_existing_secret_and_its_ca_replace_the_generated_pair(
    outcomes: dict[str, Outcome],
) -> None:
    release = release_of(outcomes, "existing-secret")
    assert not scheduler_objects(release, "Secret")
    volume, _ = mounted_secret(release)
    assert volume["secret"]["secretName"] == "koord-scheduler-tls"
    assert ca_pem(extender_of(release)).decode() == EXISTING_CA_PEM


@pytest.fixture(scope="module")
def edge_cases() -> dict[str, helm.Release]:
    """Values that only render, or fail, in one way each; the upgrades run without the manager
    (whose generated pair changes on every upgrade, which the fake cluster refuses to patch)."""
    existing = {"existingSecret": "koord-scheduler-tls"}
    encoded = base64.b64encode(EXISTING_CA_PEM.encode()).decode()
    no_manager = {"manager": {"enabled": False}}
    cases: dict[str, helm.Render] = {
        "base64-ca": helm.Render(
            helm.CHART, {"scheduler": {"certificates": {**existing, "caBundle": encoded}}}
        ),
        "no-ca": helm.Render(helm.CHART, {"scheduler": {"certificates": existing}}),
        "no-weight": helm.Render(helm.CHART, {"scheduler": {"extender": {"weight": 0}}}),
        "upgraded": helm.Render(helm.CHART, no_manager, upgrades=(no_manager,)),
        "renamed": helm.Render(
            helm.CHART,
            no_manager,
            upgrades=({**no_manager, "scheduler": {"certificates": {"clusterDomain": "x.y"}}},),
        ),
    }
    results = helm.run(*cases.values())
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(cases, cast(list[helm.Release], results), strict=True))


def test_a_base64_ca_bundle_is_taken_as_is(edge_cases: dict[str, helm.Release]) -> None:
    release = edge_cases["base64-ca"]
    assert not release.error
    assert ca_pem(extender_of(release)).decode() == EXISTING_CA_PEM


def test_an_existing_secret_without_its_ca_is_refused(edge_cases: dict[str, helm.Release]) -> None:
    assert "scheduler.certificates.caBundle" in edge_cases["no-ca"].error


def test_an_extender_without_weight_is_refused(edge_cases: dict[str, helm.Release]) -> None:
    assert "scheduler.extender.weight" in edge_cases["no-weight"].error


def test_an_upgrade_keeps_the_certificate_kube_scheduler_trusts(
    edge_cases: dict[str, helm.Release],
) -> None:
    """kube-scheduler has the CA in its own configuration: an upgrade must not change it. The
    fake cluster refuses PATCH, so the upgrade succeeding shows nothing changed."""
    release = edge_cases["upgraded"]
    assert not release.error
    installed, upgraded = release.revisions
    for kind in ("Secret", "ConfigMap"):
        before = [o for o in installed if o["kind"] == kind]
        assert before and before == [o for o in upgraded if o["kind"] == kind]


def test_new_dns_names_get_a_new_certificate(edge_cases: dict[str, helm.Release]) -> None:
    """With other names the kept pair would not do: the upgrade generates a new one (and the
    fake cluster refuses the patch that would store it)."""
    release = edge_cases["renamed"]
    assert len(release.revisions) == 1
    assert SCHEDULER_CERTS in release.error and "PATCH is not served" in release.error


# -- without the scheduler, and the notes ------------------------------------------------------


def test_a_disabled_scheduler_leaves_nothing_of_its_own(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "scheduler-disabled")
    assert not scheduler_objects(release)
    assert sorted(d["metadata"]["name"] for d in release.all("Deployment")) == [
        "koord-descheduler",
        "koord-manager",
    ]
    assert "koord-scheduler" not in release.notes
    assert not [c for c in release.all("ClusterRole") if c["metadata"]["name"] == SCHEDULER_ROLE]


def test_notes_say_how_to_use_the_extender(default: helm.Release) -> None:
    notes = default.notes
    assert f"deployment/{SCHEDULER}" in notes
    assert f"get configmap {KUBE_SCHEDULER_CONFIG}" in notes
    assert r"{.data.kube-scheduler-config\.yaml}" in notes
    assert "--config=" in notes and "extenders" in notes
    assert f"{SCHEDULER_SERVICE}.{NAMESPACE}.svc" in notes


# -- the scheduler named koord-scheduler (scheduler.kubeScheduler) -----------------------------

KUBE_SCHEDULER = "koord-kube-scheduler"


def manager_schedulers(release: helm.Release) -> str:
    (deployment,) = component_objects(release, "manager", "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (arg,) = [a for a in container["args"] if a.startswith("--schedulers=")]
    return str(arg.removeprefix("--schedulers="))


def test_pods_asking_for_koord_scheduler_have_a_scheduler(default: helm.Release) -> None:
    deployment = default.find("Deployment", KUBE_SCHEDULER)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # the stock image of the cluster's version (helm.Render's kube_version)
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.31.0"
    (config_arg,) = [a for a in container["command"] if a.startswith("--config=")]
    config_path = PurePosixPath(config_arg.removeprefix("--config="))
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert mount["name"] == volume["name"] and config_path.parent == PurePosixPath(
        mount["mountPath"]
    )
    config_map = default.find("ConfigMap", volume["configMap"]["name"])
    config = yaml.safe_load(config_map["data"][config_path.name])
    assert config["kind"] == "KubeSchedulerConfiguration"
    # one profile: a default-scheduler here would race the cluster's own for the same pods
    assert config["profiles"] == [{"schedulerName": "koord-scheduler"}]
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceName": "koord-scheduler",
        "resourceNamespace": NAMESPACE,
    }
    assert "clientConnection" not in config  # in-cluster credentials
    # the very extender operators would merge, certificate included
    assert config["extenders"] == [extender_of(default)]
    assert manager_schedulers(default) == "default-scheduler,koord-scheduler"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {
        p["httpGet"]["scheme"] for p in (container["livenessProbe"], container["readinessProbe"])
    } == {"HTTPS"}


def test_the_kube_scheduler_may_do_what_kube_scheduler_does_and_keep_its_lease(
    default: helm.Release,
) -> None:
    account = default.find("ServiceAccount", KUBE_SCHEDULER)["metadata"]["name"]
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    bound = {
        b["roleRef"]["name"]: b
        for b in default.all("ClusterRoleBinding") + default.all("RoleBinding")
        if b["subjects"] == subject
    }
    assert set(bound) == {
        "system:kube-scheduler",
        "system:volume-scheduler",
        "extension-apiserver-authentication-reader",
        f"{KUBE_SCHEDULER}-lease-role",
    }
    assert bound["extension-apiserver-authentication-reader"]["metadata"]["namespace"] == (
        "kube-system"
    )
    lease = default.find("Role", f"{KUBE_SCHEDULER}-lease-role")
    assert lease["metadata"]["namespace"] == NAMESPACE
    assert lease["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["koord-scheduler"],
            "verbs": ["get", "update"],
        },
    ]


def test_without_the_kube_scheduler_the_manager_knows_the_others(
    outcomes: dict[str, Outcome],
) -> None:
    release = release_of(outcomes, "kube-scheduler-off")
    assert not component_objects(release, "kube-scheduler")
    assert scheduler_deployment(release)  # the extender stays, to be merged
    assert manager_schedulers(release) == "default-scheduler,batch-scheduler"


@pytest.fixture(scope="module")
def serving_certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, trustme.CA]:
    """The extender's serving certificate, as tests/unit/scheduler/test_server.py makes it."""
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("certs")
    cert = ca.issue_cert(SERVER_NAME)
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    return folder, ca


def extender_calls(certs: tuple[Path, trustme.CA]) -> list[tuple[str, str]]:
    """(verb, path) of every request koord-scheduler makes: its informers, filter and
    prioritize, an LSR pod's bind (its CPUs) and a GPU pod's (its device allocation), as
    tests/unit/scheduler/test_server.py serves them on the in-process fake API server."""

    async def scenario() -> list[tuple[str, str]]:
        api = cluster()
        api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=4)})
        api.seed({"apiVersion": "v1", "kind": "Node", **make_node("gpu")})
        api.seed(device("gpu", [gpu_entry(0, memory="16Gi")]))
        api.seed({"apiVersion": "v1", "kind": "Pod", **gpu_pod({keys.NVIDIA_GPU: "1"}, "ml")})
        async with serving(api, certs) as (client, view):
            await eventually(lambda: view.device("gpu") is not None)
            await eventually(lambda: view.pod("default", "ml") is not None)
            nodes = {"Pod": lsr_pod("db", cpus=4), "NodeNames": ["node-1", "node-2"]}
            await client.post("filter", nodes)
            await client.post("prioritize", nodes)
            for pod, node in (("db", "node-2"), ("ml", "gpu")):
                args = {"PodName": pod, "PodNamespace": "default", "PodUID": f"uid-{pod}"}
                assert await client.post("bind", {**args, "Node": node}) == {"Error": ""}
        writes = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        return [(r.verb or writes.get(r.method, "get"), r.path) for r in api.requests]

    return asyncio.run(scenario())


def test_rbac_allows_every_call_the_extender_makes(
    default: helm.Release, serving_certs: tuple[Path, trustme.CA]
) -> None:
    allowed = {
        (group, resource, verb)
        for rule in default.find("ClusterRole", SCHEDULER_ROLE)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    calls = extender_calls(serving_certs)
    made = {permission(verb, path) for verb, path in calls}
    # the binds reached their writes (not a vacuous pass)
    assert ("", "pods", "update") in made and ("", "pods/binding", "create") in made
    assert ("scheduling.koordinator.sh", "devices", "watch") in made
    for verb, path in calls:
        assert permission(verb, path) in allowed, f"{verb} {path} is not allowed"


def test_the_extender_keeps_its_certificate_with_the_charts_secret_and_role(
    default: helm.Release, tmp_path: Path
) -> None:
    """koord-scheduler's --cert-secret as the chart passes it, on the fake API server holding
    the chart's Secret emptied of its pair: it issues a pair from the chart's CA into the
    Secret and --cert-dir, kube-scheduler's tlsConfig (caData, serverName) accepts it, and each
    call is one the chart's Role grants, by name."""
    options = scheduler_cli.options_from_args(scheduler_args(default))
    options = dataclasses.replace(options, cert_dir=tmp_path)
    name = certificate_secret(default)
    secret = default.find("Secret", name)
    emptied = {**secret, "data": {k: v for k, v in secret["data"].items() if k.startswith("ca")}}
    api = FakeKubeAPI()
    api.seed(emptied)

    async def scenario() -> bytes:
        background: list[asyncio.Task[None]] = []
        keeper = await scheduler_cli.keep_certificate(api.kube_api(), options, tmp_path, background)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        body, _ = scheduler_cli.with_certificate((b"", "text/plain"), keeper)
        return body

    exposition = asyncio.run(asyncio.wait_for(scenario(), 30)).decode()
    assert 'koord_scheduler_certificate_events_total{event="issued"} 1' in exposition
    assert 'koord_scheduler_certificate_events_total{event="failed"} 0' in exposition
    kept = api.get("Secret", name, NAMESPACE)
    assert kept is not None
    issued = x509.load_pem_x509_certificate(base64.b64decode(kept["data"]["tls.crt"]))
    end = f"{issued.not_valid_after_utc.timestamp():.0f}"
    assert f"koord_scheduler_certificate_not_after_timestamp_seconds {end}\n" in exposition
    assert base64.b64decode(kept["data"]["tls.crt"]) == (tmp_path / "tls.crt").read_bytes()
    assert kept["data"]["ca.crt"] == secret["data"]["ca.crt"]  # the CA kube-scheduler holds
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    extender = extender_of(default)
    client_context = ssl.create_default_context(cadata=ca_pem(extender).decode())
    server_name = extender["tlsConfig"]["serverName"]
    handshake(tls_end(client_context, False, server_name), tls_end(server_context, True))
    (role,) = scheduler_objects(default, "Role")
    (rule,) = role["rules"]
    calls = [(r.verb, r.path) for r in api.requests]
    assert ("update", f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}") in calls
    for verb, path in calls:
        assert path == f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}", path
        assert verb in rule["verbs"] and rule["resourceNames"] == [name]


# -- Koordinator's scheduler keys --------------------------------------------------------------

# Koordinator v1.8.0's chart values (koordinator-sh/charts versions/v1.8.0/values.yaml), its
# scheduler section with other values than its defaults: a user's values carried over.
KOORDINATOR: dict[str, Any] = {
    "scheduler": {
        "log": {"level": "5"},
        "replicas": 3,
        "image": {"repository": "koordinator-sh/koord-scheduler", "tag": "v1.8.0"},
        "port": 10263,
        "featureGates": "SyncBarrier=true,ResizePod=true",
        # Kubernetes 1.22's and older's (the render's is 1.31): unread, as in Koordinator's
        "compatible122FeatureGates": "CompatibleCSIStorageCapacity=true",
        "compatibleBelow122FeatureGates": "DisableCSIStorageCapacityInformer=true",
        "enableJobPreemption": True,
        "deviceShare": {
            "gpuShareUnsupportedModels": [
                {"vendor": "huawei", "model": "Ascend-310P3-300I-DUO"},
                {"vendor": "acme", "model": "X-17"},
            ]
        },
        "resources": {
            "limits": {"cpu": "1300m", "memory": "3Gi"},
            "requests": {"cpu": "700m", "memory": "384Mi"},
        },
        "hostNetwork": True,
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["sched"]}]}
                ]
            }
        },
        "nodeSelector": {"zone": "z9"},
        "tolerations": [{"key": "sched", "operator": "Exists", "effect": "NoSchedule"}],
        "monitorEnabled": True,
    }
}


@pytest.fixture(scope="module")
def koordinator() -> dict[str, helm.Release]:
    """Koordinator's keys; enableJobPreemption false with an empty deviceShare and port 0;
    port and securePort the same."""
    cases: dict[str, helm.Render] = {
        "koordinator": helm.Render(helm.CHART, KOORDINATOR),
        "no-job-preemption": helm.Render(
            helm.CHART,
            {"scheduler": {"enableJobPreemption": False, "deviceShare": {}, "port": 0}},
        ),
        "one-port": helm.Render(helm.CHART, {"scheduler": {"port": 10443}}),
    }
    results = helm.run(*cases.values())
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(zip(cases, cast(list[helm.Release], results), strict=True))


def mounted_file(release: helm.Release, path: str) -> str:
    """The text of the ConfigMap file the scheduler container sees at ``path``."""
    folder = PurePosixPath(path).parent
    (mount,) = [
        m
        for m in scheduler_container(release)["volumeMounts"]
        if PurePosixPath(m["mountPath"]) == folder
    ]
    (volume,) = [v for v in pod_spec(release)["volumes"] if v["name"] == mount["name"]]
    data = release.find("ConfigMap", volume["configMap"]["name"])["data"]
    return cast(str, data[PurePosixPath(path).name])


def test_koordinators_scheduler_keys_are_honoured(koordinator: dict[str, helm.Release]) -> None:
    release = koordinator["koordinator"]
    assert not release.error, release.error
    given = KOORDINATOR["scheduler"]
    deployment = release.find("Deployment", SCHEDULER)
    pod = pod_spec(release)
    container = scheduler_container(release)
    assert deployment["spec"]["replicas"] == given["replicas"]
    assert container["image"] == "koordinator-sh/koord-scheduler:v1.8.0"
    assert container["resources"] == given["resources"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["affinity"]["nodeAffinity"] == given["nodeAffinity"]
    assert "podAntiAffinity" in pod["affinity"]  # the spreading one stays beside it
    # Helm merges the map over ours (kubernetes.io/os: linux stays)
    assert given["nodeSelector"].items() <= pod["nodeSelector"].items()
    assert pod["tolerations"] == given["tolerations"]
    args = scheduler_args(release)
    assert args.log_level == "debug"  # log.level 5: klog's V(4) and above is debug
    # port: Koordinator's plain-HTTP healthz and metrics port, which the probes use
    assert args.port == given["port"] == container_port(release, "metrics")
    options = scheduler_cli.options_from_args(args)
    assert scheduler_cli.probes_address(options) == f"0.0.0.0:{given['port']}"
    assert container["readinessProbe"]["httpGet"]["port"] == "metrics"
    assert container_port(release, "https") == CHART_VALUES["scheduler"]["securePort"]
    # featureGates reach koord-scheduler, which names those on at start-up; the 1.22 ones not
    said = options.feature_gates.unimplemented()
    assert {"SyncBarrier", "ResizePod"} <= said.keys()
    assert not options.feature_gates.enabled("CompatibleCSIStorageCapacity")
    assert not options.feature_gates.enabled("DisableCSIStorageCapacityInformer")


def test_koordinators_device_share_args_reach_the_extender(
    koordinator: dict[str, helm.Release], tmp_path: Path
) -> None:
    """The files the container sees, read by koord-scheduler's own start-up: DeviceShareArgs
    from --config, the LoadAware arguments still from scheduler.loadAware."""
    release = koordinator["koordinator"]
    options = scheduler_cli.options_from_args(scheduler_args(release))
    assert options.config and options.load_aware_config
    local = {}
    for flag_value in (options.config, options.load_aware_config):
        path = tmp_path / PurePosixPath(flag_value).name
        path.write_text(mounted_file(release, flag_value))
        local[flag_value] = str(path)
    local_options = dataclasses.replace(
        options,
        config=local[options.config],
        load_aware_config=local[options.load_aware_config],
    )
    config = scheduler_cli.plugin_config(local_options, logging.getLogger("test"))
    models = KOORDINATOR["scheduler"]["deviceShare"]["gpuShareUnsupportedModels"]
    assert config.extender.deviceshare.unsupported_models == {
        (m["vendor"], m["model"]) for m in models
    }
    assert config.taken == ("DeviceShareArgs (profile koord-scheduler)",)
    assert config.scheduler_name == CHART_VALUES["scheduler"]["kubeScheduler"]["schedulerName"]
    # the LoadAware arguments are scheduler.loadAware's, as without deviceShare
    loadaware = CHART_VALUES["scheduler"]["loadAware"]
    assert config.extender.loadaware.cpu_threshold == loadaware["usageThresholds"]["cpu"]
    assert (
        config.extender.loadaware.node_metric_expiration_seconds
        == (loadaware["nodeMetricExpirationSeconds"])
    )


def test_koordinators_monitor_scrapes_the_extenders_metrics_port(
    koordinator: dict[str, helm.Release], default: helm.Release
) -> None:
    release = koordinator["koordinator"]
    monitor = release.find("PodMonitor", "koord-scheduler-metrics-podmonitor")
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["port"] in {p["name"] for p in scheduler_container(release)["ports"]}
    assert container_port(release, endpoint["port"]) == KOORDINATOR["scheduler"]["port"]
    labels = release.find("Deployment", SCHEDULER)["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert not [m for m in default.all("PodMonitor") if "scheduler" in m["metadata"]["name"]]


def test_the_kube_scheduler_goes_where_koordinators_node_affinity_says(
    koordinator: dict[str, helm.Release], default: helm.Release
) -> None:
    """Koordinator's koord-scheduler is the kube-scheduler and the extender here: nodeAffinity
    places both, as nodeSelector and tolerations do; hostNetwork is the extender's only."""
    given = KOORDINATOR["scheduler"]
    pod = koordinator["koordinator"].find("Deployment", KUBE_SCHEDULER)["spec"]["template"]["spec"]
    assert pod["affinity"] == {"nodeAffinity": given["nodeAffinity"]}
    assert pod["tolerations"] == given["tolerations"]
    assert given["nodeSelector"].items() <= pod["nodeSelector"].items()
    assert "hostNetwork" not in pod
    plain = default.find("Deployment", KUBE_SCHEDULER)["spec"]["template"]["spec"]
    assert "affinity" not in plain


def test_only_job_preemption_is_named_as_without_effect(
    koordinator: dict[str, helm.Release],
) -> None:
    notes = koordinator["koordinator"].notes
    (line,) = [line for line in notes.splitlines() if line.startswith("- scheduler.")]
    assert line.startswith("- scheduler.enableJobPreemption: ")
    assert "DefaultPreemption" in line
    # false is what kube-scheduler does here: honoured, so not named
    release = koordinator["no-job-preemption"]
    assert not release.error, release.error
    assert "scheduler.enableJobPreemption" not in release.notes


def test_without_koordinators_keys_the_scheduler_is_as_before(
    koordinator: dict[str, helm.Release], default: helm.Release
) -> None:
    """Not given (or given as their defaults: an empty deviceShare, port 0), Koordinator's keys
    change nothing: ours serve the probes, no --config, no gates, the pod network."""
    for release in (default, koordinator["no-job-preemption"]):
        args = scheduler_args(release)
        assert args.port is None and args.config is None
        assert str(args.metrics_addr) == f":{CHART_VALUES['scheduler']['metrics']['port']}"
        assert container_port(release, "metrics") == CHART_VALUES["scheduler"]["metrics"]["port"]
        assert not any(
            a.startswith("--feature-gates") for a in scheduler_container(release)["args"]
        )
        assert "hostNetwork" not in pod_spec(release)
        assert "nodeAffinity" not in pod_spec(release)["affinity"]
        config_map = release.find("ConfigMap", "koord-scheduler-loadaware-config")
        assert list(config_map["data"]) == ["loadaware.yaml"]


def test_the_same_port_twice_is_refused(koordinator: dict[str, helm.Release]) -> None:
    error = koordinator["one-port"].error
    assert "scheduler.port" in error and "scheduler.securePort" in error
