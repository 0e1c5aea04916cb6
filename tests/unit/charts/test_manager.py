"""koord-manager in the chart: Deployment, RBAC, webhooks and their certificate, the CRD.

Rendered by Helm's engine with the scenarios of conftest.py; the Deployment's arguments are
parsed by koord-manager's own parser, and the generated certificate is checked the way the API
server checks it (a CA from caBundle that signed a serving certificate for the Service's names).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import dataclasses
import datetime
import io
import socket
import ssl
import tomllib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from manager.app import Manager, ManagerOptions
from manager.cli import build_parser, options_from_args
from manager.selectors import matches
from tests.fakekube import FakeKubeAPI, RecordedRequest
from tests.unit.charts import helm
from tests.unit.charts.conftest import (
    CHART_VALUES,
    CUSTOM_MANAGER_AFFINITY,
    CUSTOM_NODE_SELECTOR,
    CUSTOM_RESOURCES,
    CUSTOM_TOLERATIONS,
    EXISTING_CA_PEM,
    SCENARIOS,
    Outcome,
    component_objects,
    effective,
    release_of,
    scenarios_where,
)

NAMESPACE = "koordinator-system"  # helm.Render's default
# The manager's objects in the default release, named as Koordinator's chart names them.
MANAGER = "koord-manager"
WEBHOOK_SERVICE = "koordinator-webhook-service"
WEBHOOK_CERTS = "koordinator-webhook-certs"
KINDS_WITH_CA_BUNDLE = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
MANAGER_ROLE = "koord-manager-role"
CONFIG_ROLE = "koord-manager-config-role"
LEASE_ROLE = "koord-leader-election-role"
KOORDLET_IMAGE = "koordinator-py/koordlet:0.1.0"

MANAGER_CLUSTER_RULES = [
    {
        "apiGroups": [""],
        "resources": ["nodes", "pods", "namespaces"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    # patch: a gang member's gate; create, delete: a Reservation's reserve pod
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},  # quota reclaim
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},  # on pods
    {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["priorityclasses"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["slo.koordinator.sh"],
        "resources": ["nodemetrics", "nodeslos"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["devices"],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["config.koordinator.sh"],
        "resources": ["clustercolocationprofiles"],
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
    # Reservations read and updated, their status written through /status, deleted a while
    # after they end.
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["reservations"],
        "verbs": ["get", "list", "watch", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["scheduling.koordinator.sh"],
        "resources": ["reservations/status"],
        "verbs": ["update", "patch"],
    },
    # certificates.autoRenew (the default): the caBundle of its own configurations, by name
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["mutatingwebhookconfigurations"],
        "resourceNames": ["koordinator-mutating-webhook-configuration"],
        "verbs": ["get", "update"],
    },
    {
        "apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations"],
        "resourceNames": ["koordinator-validating-webhook-configuration"],
        "verbs": ["get", "update"],
    },
]
MANAGER_CONFIG_RULES = [
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["koordinator-webhook-certs"],
        "verbs": ["get", "update"],
    },
]
MANAGER_LEASE_RULES = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    }
]

# Koordinator's apis/config/v1alpha1/cluster_colocation_profile_types.go.
PROFILE_SPEC_FIELDS = {
    "namespaceSelector",
    "selector",
    "probability",
    "qosClass",
    "priorityClassName",
    "koordinatorPriority",
    "labels",
    "annotations",
    "labelKeysMapping",
    "annotationKeysMapping",
    "labelSuffixes",
    "schedulerName",
    "patch",
}


WITH_MANAGER = scenarios_where("manager", lambda m: m["enabled"])
WITH_WEBHOOKS = scenarios_where("manager", lambda m: m["enabled"] and m["webhook"]["enabled"])
GENERATED_CERTS = scenarios_where(
    "manager",
    lambda m: (
        m["enabled"]
        and m["webhook"]["enabled"]
        and not m["webhook"]["certificates"]["existingSecret"]
    ),
)


def manager_objects(release: helm.Release, kind: str | None = None) -> list[dict[str, Any]]:
    return component_objects(release, "manager", kind)


def manager_deployment(release: helm.Release) -> dict[str, Any]:
    (deployment,) = manager_objects(release, "Deployment")
    return deployment


def pod_spec(release: helm.Release) -> dict[str, Any]:
    return cast(dict[str, Any], manager_deployment(release)["spec"]["template"]["spec"])


def manager_container(release: helm.Release) -> dict[str, Any]:
    (container,) = pod_spec(release)["containers"]
    assert container["name"] == "manager"
    return cast(dict[str, Any], container)


def parse_manager_args(args: list[str]) -> argparse.Namespace:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return build_parser().parse_args(args)
        except SystemExit:
            pytest.fail(f"koord-manager refuses the chart's arguments {args}: {err.getvalue()}")


def manager_options(release: helm.Release) -> ManagerOptions:
    return options_from_args(parse_manager_args(manager_container(release)["args"]))


def certificate_secret(release: helm.Release) -> str:
    """The Secret koord-manager keeps (--webhook-cert-secret), else the one it mounts."""
    kept = manager_options(release).webhook_cert_secret
    if kept:
        return kept
    (volume,) = [v for v in pod_spec(release)["volumes"] if "secret" in v]
    return str(volume["secret"]["secretName"])


def container_port(release: helm.Release, name: str) -> int:
    (port,) = [p for p in manager_container(release)["ports"] if p["name"] == name]
    return int(port["containerPort"])


def webhooks(release: helm.Release) -> dict[str, dict[str, Any]]:
    """Every webhook entry of both configurations, by name."""
    found = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in release.find(kind)["webhooks"]:
            assert hook["name"] not in found
            found[hook["name"]] = hook
    return found


def load_pem(data: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(data))


def rules_of(release: helm.Release, kind: str, name: str) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], release.find(kind, name)["rules"])


# -- the Deployment ----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", WITH_MANAGER)
def test_manager_accepts_the_arguments_and_they_are_the_charts(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    values = effective(SCENARIOS[scenario])
    m = values["manager"]
    container = manager_container(release)
    assert container["command"] == ["koord-manager"]
    options = manager_options(release)
    assert options.config_namespace == NAMESPACE
    assert options.slo_config_name == values["sloConfig"]["name"]
    assert options.leader_elect is m["leaderElection"]["enabled"]
    assert options.leader_election_namespace == NAMESPACE
    assert options.leader_election_id == m["leaderElection"]["id"]
    assert options.workers == m["workers"]
    assert options.metrics_addr == f":{m['metrics']['port']}"
    assert container_port(release, "metrics") == m["metrics"]["port"]
    if m["webhook"]["enabled"]:
        assert options.webhook_port == m["webhook"]["port"] == container_port(release, "webhook")
    else:
        assert options.webhook_port is None
    assert manager_deployment(release)["spec"]["replicas"] == m["replicas"]


@pytest.mark.parametrize("scenario", WITH_WEBHOOKS)
def test_the_certificate_secret_is_mounted_at_the_webhook_cert_dir(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    certificates = effective(SCENARIOS[scenario])["manager"]["webhook"]["certificates"]
    renew = certificates["autoRenew"] and not certificates["existingSecret"]
    pod = pod_spec(release)
    options = manager_options(release)
    cert_dir = PurePosixPath(options.webhook_cert_dir)
    (mount,) = [
        m
        for m in manager_container(release)["volumeMounts"]
        if PurePosixPath(m["mountPath"]) == cert_dir
    ]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    if renew:  # koord-manager writes the pair there itself, from the Secret
        assert volume["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Mi"}
        assert mount["readOnly"] is False
        secret_name = options.webhook_cert_secret
    else:
        assert options.webhook_cert_secret == ""
        assert mount["readOnly"] is True
        # The files are group-readable by fsGroup, which the non-root user is in.
        assert volume["secret"]["defaultMode"] == 0o440
        assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
        secret_name = volume["secret"]["secretName"]
    if certificates["existingSecret"]:
        assert secret_name == certificates["existingSecret"]
        assert not manager_objects(release, "Secret")
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
            hooks = webhooks(release)
            (service,) = {h["clientConfig"]["service"]["name"] for h in hooks.values()}
            assert options.webhook_service_name == service
            assert {
                options.mutating_webhook_configuration,
                options.validating_webhook_configuration,
            } == {release.find(kind)["metadata"]["name"] for kind in KINDS_WITH_CA_BUNDLE}


def test_manager_pod_is_non_root_read_only_probed_and_spread(default: helm.Release) -> None:
    deployment = default.find("Deployment", MANAGER)
    pod = pod_spec(default)
    container = manager_container(default)
    assert container["image"] == KOORDLET_IMAGE  # the koordlet image: it has koord-manager
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert deployment["spec"]["replicas"] == 2
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
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert term["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == term["labelSelector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == "manager"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "tolerations" not in pod


def test_custom_values_reach_the_manager(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "custom")
    deployment = release.find("Deployment", "qos-koord-manager")  # fullnameOverride's prefix
    pod = pod_spec(release)
    container = manager_container(release)
    assert container["image"] == "registry.example.com/koord-manager:dev"
    assert container["imagePullPolicy"] == "Always"  # koordlet's, not set for the manager
    assert container["resources"] == CUSTOM_RESOURCES
    assert container["args"][-1] == "--kubeconfig=/etc/kube/config"
    assert manager_options(release).leader_election_id == "qos-manager"
    assert parse_manager_args(container["args"]).log_level == "debug"
    assert {"name": "PYTHONFAULTHANDLER", "value": "1"} in container["env"]
    assert pod["tolerations"] == CUSTOM_TOLERATIONS
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", **CUSTOM_NODE_SELECTOR}
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    # The user's node affinity, and the chart's spreading beside it.
    assert pod["affinity"]["nodeAffinity"] == CUSTOM_MANAGER_AFFINITY["nodeAffinity"]
    assert "podAntiAffinity" in pod["affinity"]
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"] == {"example.com/team": "sre"}
    assert template["labels"]["example.com/tier"] == "control"
    hooks = webhooks(release)
    assert {h["failurePolicy"] for n, h in hooks.items() if "pod" in n} == {"Fail"}
    assert hooks["vconfigmap.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert {h["timeoutSeconds"] for h in hooks.values()} == {10}
    excluded = hooks["mpod.koordinator.sh"]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert excluded == ["kube-system", "monitoring", NAMESPACE]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert release.find(kind)["metadata"]["annotations"] == {"example.com/owner": "sre"}
    service = release.find("Service", f"qos-{WEBHOOK_SERVICE}")
    assert service["spec"]["ports"][0]["port"] == 443
    assert container_port(release, "webhook") == 10250
    cert = load_pem(release.find("Secret", f"qos-{WEBHOOK_CERTS}")["data"]["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"qos-{WEBHOOK_SERVICE}.koordinator-system.svc.example.internal" in (
        names.get_values_for_type(x509.DNSName)
    )
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert abs(lifetime - datetime.timedelta(days=365)) < datetime.timedelta(days=1)


def test_manager_image_is_the_one_the_containerfile_builds() -> None:
    pyproject = tomllib.loads((helm.ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["koord-manager"] == "manager.cli:main"
    containerfile = (helm.ROOT / "Containerfile").read_text()
    assert "COPY manager/ manager/" in containerfile
    image = CHART_VALUES["manager"]["image"]
    assert image == {"repository": "", "tag": "", "pullPolicy": ""}  # koordlet's


# -- webhooks ----------------------------------------------------------------------------------


def test_webhook_configurations_call_the_managers_paths(default: helm.Release) -> None:
    hooks = webhooks(default)
    paths = {name: hook["clientConfig"]["service"]["path"] for name, hook in hooks.items()}
    assert paths == {
        "mpod.koordinator.sh": "/mutate-pod",
        "vpod.koordinator.sh": "/validate-pod",
        "vconfigmap.koordinator.sh": "/validate-configmap",
        "melasticquota.koordinator.sh": "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        "velasticquota.koordinator.sh": "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
    }
    for hook in hooks.values():
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            WEBHOOK_SERVICE,
            NAMESPACE,
            443,
        )
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["timeoutSeconds"] == 10  # the API server's default (values.yaml says why)
    rules = {name: hook["rules"] for name, hook in hooks.items()}
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "Namespaced"}
    configmaps = pods | {"resources": ["configmaps"]}
    assert rules["mpod.koordinator.sh"] == [{"operations": ["CREATE"], **pods}]
    assert rules["vpod.koordinator.sh"] == [{"operations": ["CREATE", "UPDATE"], **pods}]
    assert rules["vconfigmap.koordinator.sh"] == [
        {"operations": ["CREATE", "UPDATE"], **configmaps}
    ]
    quotas = {
        "apiGroups": ["scheduling.sigs.k8s.io"],
        "apiVersions": ["v1alpha1"],
        "resources": ["elasticquotas"],
        "scope": "Namespaced",
    }
    assert rules["melasticquota.koordinator.sh"] == [{"operations": ["CREATE"], **quotas}]
    assert rules["velasticquota.koordinator.sh"] == [
        {"operations": ["CREATE", "UPDATE", "DELETE"], **quotas}
    ]
    # Koordinator's chart: a manager that is down never blocks pods; the ConfigMap check fails
    # closed.
    assert hooks["mpod.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert hooks["vpod.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert hooks["vconfigmap.koordinator.sh"]["failurePolicy"] == "Fail"
    # the ElasticQuota webhooks: Koordinator's webhookConfiguration.failurePolicy.elasticquotas
    # default, and its selector (every namespace but those labelled control-plane)
    for name in ("melasticquota.koordinator.sh", "velasticquota.koordinator.sh"):
        assert hooks[name]["failurePolicy"] == "Ignore"
        assert hooks[name]["namespaceSelector"] == {
            "matchExpressions": [{"key": "control-plane", "operator": "DoesNotExist"}]
        }


def test_pod_webhooks_skip_kube_system_and_the_managers_namespace(default: helm.Release) -> None:
    hooks = webhooks(default)
    for name in ("mpod.koordinator.sh", "vpod.koordinator.sh"):
        assert hooks[name]["namespaceSelector"] == {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", NAMESPACE],
                }
            ]
        }


def test_configmap_webhook_sees_only_the_config_namespace(default: helm.Release) -> None:
    hook = webhooks(default)["vconfigmap.koordinator.sh"]
    options = manager_options(default)
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "In",
                "values": [options.config_namespace],
            }
        ]
    }
    # The ConfigMap it guards is the chart's, in that namespace, and carries the label the
    # webhook's objectSelector asks for (other ConfigMaps there are never held up).
    config = default.find("ConfigMap", options.slo_config_name)
    assert config["metadata"]["namespace"] == options.config_namespace
    wanted = hook["objectSelector"]["matchLabels"]
    assert wanted and matches(hook["objectSelector"], config["metadata"]["labels"])
    assert not matches(hook["objectSelector"], {"app": "grafana"})


def test_koordinators_priority_classes_are_created(default: helm.Release) -> None:
    values = {pc["metadata"]["name"]: pc["value"] for pc in default.all("PriorityClass")}
    expected = {"koord-prod": 9000, "koord-mid": 7000, "koord-batch": 5000, "koord-free": 3000}
    assert values == expected


@pytest.mark.parametrize("scenario", WITH_WEBHOOKS)
def test_webhook_service_reaches_the_webhook_port(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    (name,) = {h["clientConfig"]["service"]["name"] for h in webhooks(release).values()}
    service = release.find("Service", name)
    assert service["metadata"]["namespace"] == NAMESPACE
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    assert port["targetPort"] == "webhook"
    assert container_port(release, "webhook") == manager_options(release).webhook_port
    pod_labels = manager_deployment(release)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


@pytest.mark.parametrize("scenario", GENERATED_CERTS)
def test_generated_ca_signed_a_serving_certificate_for_the_service(
    outcomes: dict[str, Outcome], scenario: str
) -> None:
    release = release_of(outcomes, scenario)
    hooks = webhooks(release)
    (bundle,) = {h["clientConfig"]["caBundle"] for h in hooks.values()}  # one CA for all
    ca = load_pem(bundle)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca is True
    (service,) = {h["clientConfig"]["service"]["name"] for h in hooks.values()}
    secret = release.find("Secret", certificate_secret(release))
    assert secret["data"]["ca.crt"] == bundle
    cert = load_pem(secret["data"]["tls.crt"])
    cert.verify_directly_issued_by(ca)  # raises unless the CA signed it
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    domain = effective(SCENARIOS[scenario])["manager"]["webhook"]["certificates"]["clusterDomain"]
    assert names.get_values_for_type(x509.DNSName) == [
        service,
        f"{service}.{NAMESPACE}",
        f"{service}.{NAMESPACE}.svc",  # the name the API server checks
        f"{service}.{NAMESPACE}.svc.{domain}",
    ]
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages
    key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    assert key.public_key().public_bytes(encoding, public) == cert.public_key().public_bytes(
        encoding, public
    )


def test_an_existing_secret_and_its_ca_replace_the_generated_pair(
    outcomes: dict[str, Outcome],
) -> None:
    release = release_of(outcomes, "existing-secret")
    assert not manager_objects(release, "Secret")
    for hook in webhooks(release).values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == EXISTING_CA_PEM
    (volume,) = [v for v in pod_spec(release)["volumes"] if "secret" in v]
    assert volume["secret"]["secretName"] == "koord-manager-tls"


@pytest.fixture(scope="module")
def edge_cases() -> dict[str, helm.Release]:
    """Values that only render, or fail, in one way each."""
    certificates = {"existingSecret": "koord-manager-tls"}
    encoded = base64.b64encode(EXISTING_CA_PEM.encode()).decode()
    cases: dict[str, Mapping[str, Any]] = {
        "base64-ca": {"certificates": {**certificates, "caBundle": encoded}},
        "no-ca": {"certificates": certificates},
        "cert-manager": {
            "certificates": certificates,
            "annotations": {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/koord-manager"},
        },
    }
    requests = [helm.Render(helm.CHART, {"manager": {"webhook": v}}) for v in cases.values()]
    requests.append(
        helm.Render(helm.CHART, {"manager": {"replicas": 2, "leaderElection": {"enabled": False}}})
    )
    results = helm.run(*requests)
    assert all(isinstance(r, helm.Release) for r in results)
    return dict(
        zip([*cases, "replicas-without-leader"], cast(list[helm.Release], results), strict=True)
    )


def test_a_base64_ca_bundle_is_taken_as_is(edge_cases: dict[str, helm.Release]) -> None:
    release = edge_cases["base64-ca"]
    assert not release.error
    for hook in webhooks(release).values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == EXISTING_CA_PEM


def test_an_existing_secret_without_its_ca_is_refused(edge_cases: dict[str, helm.Release]) -> None:
    assert "manager.webhook.certificates.caBundle" in edge_cases["no-ca"].error


def test_cert_managers_ca_injector_may_fill_the_ca_bundle(
    edge_cases: dict[str, helm.Release],
) -> None:
    release = edge_cases["cert-manager"]
    assert not release.error
    for hook in webhooks(release).values():
        assert "caBundle" not in hook["clientConfig"]
    annotation = {"cert-manager.io/inject-ca-from": f"{NAMESPACE}/koord-manager"}
    assert release.find("ValidatingWebhookConfiguration")["metadata"]["annotations"] == annotation


def test_replicas_without_leader_election_are_refused(edge_cases: dict[str, helm.Release]) -> None:
    assert "manager.leaderElection.enabled" in edge_cases["replicas-without-leader"].error


def test_without_webhooks_the_manager_runs_its_controllers_only(
    outcomes: dict[str, Outcome],
) -> None:
    release = release_of(outcomes, "no-webhooks")
    assert not release.all("MutatingWebhookConfiguration")
    assert not release.all("ValidatingWebhookConfiguration")
    assert not manager_objects(release, "Secret")
    assert not manager_objects(release, "Service")
    container = manager_container(release)
    assert "--disable-webhooks" in container["args"]
    assert not any(
        a.startswith(("--webhook-port", "--webhook-cert-dir")) for a in container["args"]
    )
    assert [p["name"] for p in container["ports"]] == ["metrics"]
    assert not any("secret" in v for v in pod_spec(release)["volumes"])
    options = manager_options(release)
    assert options.webhook_port is None and options.leader_elect is False
    # No leader election: no Lease Role.
    roles = [r["metadata"]["name"] for r in manager_objects(release, "Role")]
    assert roles == [CONFIG_ROLE]


def test_a_disabled_manager_leaves_nothing_of_its_own(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "manager-disabled")
    assert not manager_objects(release)
    assert sorted(d["metadata"]["name"] for d in release.all("Deployment")) == [
        "koord-descheduler",
        "koord-kube-scheduler",
        "koord-scheduler",
    ]
    assert not release.all("MutatingWebhookConfiguration")
    assert not release.all("ValidatingWebhookConfiguration")
    assert release.find("DaemonSet")  # koordlet stays
    assert "koord-manager" not in release.notes


# -- RBAC --------------------------------------------------------------------------------------


def test_rbac_is_exactly_what_the_manager_reads_and_writes(default: helm.Release) -> None:
    account = default.find("ServiceAccount", MANAGER)
    assert account["metadata"]["namespace"] == NAMESPACE
    assert pod_spec(default)["serviceAccountName"] == MANAGER
    subject = [{"kind": "ServiceAccount", "name": MANAGER, "namespace": NAMESPACE}]
    assert rules_of(default, "ClusterRole", MANAGER_ROLE) == MANAGER_CLUSTER_RULES
    binding = default.find("ClusterRoleBinding", "koord-manager-rolebinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": MANAGER_ROLE,
    }
    assert binding["subjects"] == subject
    options = manager_options(default)
    roles = {
        CONFIG_ROLE: (MANAGER_CONFIG_RULES, options.config_namespace),
        LEASE_ROLE: (MANAGER_LEASE_RULES, options.leader_election_namespace),
    }
    assert {r["metadata"]["name"] for r in manager_objects(default, "Role")} == set(roles)
    for name, (rules, namespace) in roles.items():
        role = default.find("Role", name)
        assert role["metadata"]["namespace"] == namespace
        assert role["rules"] == rules
        binding = default.find("RoleBinding", name.replace("-role", "-rolebinding"))
        assert binding["metadata"]["namespace"] == namespace
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": name,
        }
        assert binding["subjects"] == subject


def test_bring_your_own_account_runs_the_manager(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "bring-your-own")
    assert pod_spec(release)["serviceAccountName"] == "koord-manager"


# -- the ClusterColocationProfile CRD ----------------------------------------------------------


def test_cluster_colocation_profile_crd_is_koordinators(default: helm.Release) -> None:
    name = "clustercolocationprofiles.config.koordinator.sh"
    crd = default.find("CustomResourceDefinition", name)  # a template of the release
    spec = crd["spec"]
    assert spec["group"] == "config.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "ClusterColocationProfile",
        "listKind": "ClusterColocationProfileList",
        "plural": "clustercolocationprofiles",
        "singular": "clustercolocationprofile",
    }
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    fields = schema["properties"]["spec"]["properties"]
    assert set(fields) == PROFILE_SPEC_FIELDS
    assert fields["patch"]["x-kubernetes-preserve-unknown-fields"] is True
    assert fields["probability"]["x-kubernetes-int-or-string"] is True
    assert {"LSE", "LSR", "LS", "BE", "SYSTEM"} <= set(fields["qosClass"]["enum"])
    assert fields["koordinatorPriority"]["type"] == "integer"
    for selector in ("namespaceSelector", "selector"):
        assert set(fields[selector]["properties"]) == {"matchLabels", "matchExpressions"}
    for mapping in ("labels", "annotations", "labelKeysMapping", "annotationKeysMapping"):
        assert fields[mapping]["additionalProperties"] == {"type": "string"}
    assert schema["properties"]["status"] == {"type": "object"}


def pruned(value: Any, schema: Mapping[str, Any], where: str) -> Any:
    """``value`` as the API server stores it under a structural ``schema``: unknown fields
    pruned; AssertionError where a type or an enum refuses it. The subset of OpenAPI the
    chart's CRDs use."""
    if schema.get("x-kubernetes-int-or-string"):
        assert isinstance(value, int | str) and not isinstance(value, bool), where
        return value
    if "enum" in schema:
        assert value in schema["enum"], where
    kind = schema["type"]
    if kind == "object":
        assert isinstance(value, dict), where
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return value
        if "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            return {k: pruned(v, extra, f"{where}.{k}") for k, v in value.items()}
        fields = schema.get("properties", {})
        return {k: pruned(v, fields[k], f"{where}.{k}") for k, v in value.items() if k in fields}
    if kind == "array":
        assert isinstance(value, list), where
        return [pruned(v, schema["items"], f"{where}[]") for v in value]
    python_type = {"string": str, "integer": int, "boolean": bool}[kind]
    assert isinstance(value, python_type), where
    return value


def test_the_crd_keeps_every_field_of_a_profile(default: helm.Release) -> None:
    """A profile using every field survives the API server's pruning whole: the manager's
    webhook sees what the user wrote; a field Koordinator does not have is pruned."""
    (crd,) = [c for c in default.crds if c["spec"]["group"] == "config.koordinator.sh"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    profile = {
        "namespaceSelector": {"matchLabels": {"koordinator.sh/enable-colocation": "true"}},
        "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["spark"]}]},
        "probability": "50%",
        "qosClass": "BE",
        "priorityClassName": "koord-batch",
        "koordinatorPriority": 1000,
        "labels": {"koordinator.sh/mutated": "true"},
        "annotations": {"koordinator.sh/intercepted": "true"},
        "labelKeysMapping": {"app": "koordinator.sh/app"},
        "annotationKeysMapping": {"team": "koordinator.sh/team"},
        "labelSuffixes": {"app": "-batch"},
        "schedulerName": "koord-scheduler",
        "patch": {"spec": {"terminationGracePeriodSeconds": 30, "tolerations": [{"key": "x"}]}},
    }
    assert set(profile) == PROFILE_SPEC_FIELDS
    assert pruned(profile, schema, "spec") == profile
    assert pruned({**profile, "probability": 50}, schema, "spec")["probability"] == 50
    assert "bogus" not in pruned({**profile, "bogus": 1}, schema, "spec")
    with pytest.raises(AssertionError, match="qosClass"):
        pruned({"qosClass": "Guaranteed"}, schema, "spec")


# -- monitoring and notes ----------------------------------------------------------------------


def test_service_monitor_scrapes_every_manager_replica(outcomes: dict[str, Outcome]) -> None:
    release = release_of(outcomes, "monitoring")
    monitor = release.find("ServiceMonitor", "koord-manager-service-monitor")
    service = release.find("Service", "koord-manager-service")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["interval"]) == (
        "metrics",
        "/metrics",
        "15s",
    )
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert manager_options(release).metrics_addr == ":9090"
    pod_labels = manager_deployment(release)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    # The webhook Service matches the selector too, but has no port named metrics.
    webhook = release.find("Service", WEBHOOK_SERVICE)
    assert "metrics" not in [p["name"] for p in webhook["spec"]["ports"]]


def test_notes_say_how_to_check_the_manager(default: helm.Release) -> None:
    assert f"deployment/{MANAGER}" in default.notes
    assert WEBHOOK_SERVICE in default.notes


# -- the chart's manager, run -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def permission(request: RecordedRequest) -> tuple[str | None, str, str, str]:
    """(namespace or None, API group, resource[/subresource], verb) of a request, as RBAC
    sees it."""
    parts = request.path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    return namespace, group, "/".join([rest[0], *rest[2:3]]), request.verb


def object_name(request: RecordedRequest) -> str | None:
    """The object a request names (None for a list, a watch or a create)."""
    parts = request.path.split("?")[0].strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    return rest[1] if len(rest) > 1 and request.verb not in ("list", "watch", "create") else None


def allows(
    release: helm.Release,
    namespace: str | None,
    group: str,
    resource: str,
    verb: str,
    *,
    name: str | None = None,
) -> bool:
    """Whether a rule of the release grants the call; a rule with resourceNames only for
    requests naming one of them."""
    granted: list[tuple[str | None, dict[str, Any]]] = [
        (None, rule) for rule in rules_of(release, "ClusterRole", MANAGER_ROLE)
    ]
    granted += [
        (role["metadata"]["namespace"], rule)
        for role in release.all("Role")
        for rule in role["rules"]
    ]
    return any(
        (where is None or where == namespace)
        and group in rule["apiGroups"]
        and resource in rule["resources"]
        and verb in rule["verbs"]
        and ("resourceNames" not in rule or name in rule["resourceNames"])
        for where, rule in granted
    )


def seed_cluster(api: FakeKubeAPI, config_map: dict[str, Any]) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    usage = {"resources": {"cpu": "30", "memory": "200Gi"}}
    api.seed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1"},
            "status": {
                "capacity": {"cpu": "100", "memory": "400Gi"},
                "allocatable": {"cpu": "98", "memory": "390Gi"},
            },
        },
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "node-1"},
            "status": {
                "updateTime": stamp,
                "nodeMetric": {"nodeUsage": usage, "systemUsage": {"resources": {"cpu": "3"}}},
                "podsMetric": [],
            },
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}},
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "koord-batch"},
            "value": 5000,
        },
        {
            "apiVersion": "config.koordinator.sh/v1alpha1",
            "kind": "ClusterColocationProfile",
            "metadata": {"name": "batch"},
            "spec": {"selector": {"matchLabels": {"app": "spark"}}, "qosClass": "BE"},
        },
        config_map,
    )


def admission_review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b1c",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "operation": "UPDATE",
            "userInfo": {"username": "admin"},
            "object": obj,
            "oldObject": obj,
        },
    }


def test_the_manager_runs_with_the_charts_arguments_certificate_and_rbac(
    default: helm.Release, tmp_path: Path
) -> None:
    """koord-manager as the chart runs it, on the in-process fake API server: it keeps its
    serving certificate from the chart's Secret (certificates.autoRenew: the pair is issued
    from the chart's CA into the Secret and the emptyDir, a missing caBundle is set), serves
    its webhooks with it to a client that checks it as the API server does (caBundle,
    <service>.<namespace>.svc), accepts the chart's slo-controller-config, answers the probes,
    and every API call it makes is one the chart's RBAC allows, resourceNames included."""
    secret = default.find("Secret", WEBHOOK_CERTS)
    ca_pem = base64.b64decode(
        webhooks(default)["vconfigmap.koordinator.sh"]["clientConfig"]["caBundle"]
    )
    assert base64.b64decode(secret["data"]["ca-cert.pem"]) == ca_pem
    options = manager_options(default)
    assert options.webhook_cert_secret == WEBHOOK_CERTS
    metrics_port = free_port()
    cert_dir = tmp_path / "emptydir"  # the pod's empty volume: koord-manager fills it
    options = dataclasses.replace(
        options, webhook_port=0, webhook_cert_dir=cert_dir, metrics_addr=f"127.0.0.1:{metrics_port}"
    )
    config_map = default.find("ConfigMap", options.slo_config_name)
    api = FakeKubeAPI()
    seed_cluster(api, config_map)
    # What helm install created, but with no pair in the Secret and no caBundle on the
    # mutating webhook (as if someone emptied them): the manager must write both.
    without_pair = copy.deepcopy(secret)
    without_pair["data"] = {k: v for k, v in secret["data"].items() if k.startswith("ca")}
    mutating = copy.deepcopy(default.find("MutatingWebhookConfiguration"))
    for hook in mutating["webhooks"]:
        del hook["clientConfig"]["caBundle"]
    api.seed(without_pair, mutating, default.find("ValidatingWebhookConfiguration"))
    host = f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc"

    async def until(check: Any, timeout: float = 10.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not check():
            assert loop.time() < deadline, "condition not met in time"
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        manager = Manager(api.kube_api(), options)
        task = asyncio.create_task(manager.run())
        tls = ssl.create_default_context(cadata=ca_pem.decode())
        try:
            await until(manager.leading.is_set)
            await until(lambda: api.get("NodeSLO", "node-1") is not None)
            assert manager.webhooks is not None
            base = f"https://127.0.0.1:{manager.webhooks.bound_port}"
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{base}/healthz", ssl=tls, server_hostname=host) as reply:
                    assert reply.status == 200
                review = admission_review(config_map)
                async with session.post(
                    f"{base}/validate-configmap", json=review, ssl=tls, server_hostname=host
                ) as reply:
                    answer = await reply.json()
                assert answer["response"]["uid"] == "0b1c"
                assert answer["response"]["allowed"] is True
                for path in ("/healthz", "/readyz"):
                    async with session.get(f"http://127.0.0.1:{metrics_port}{path}") as reply:
                        assert reply.status == 200, path
            # An invalid key: a Warning Event about the ConfigMap, in its namespace.
            broken = copy.deepcopy(config_map)
            broken["data"]["cpu-burst-config"] = "{broken"
            api.seed(broken)
            await until(lambda: bool(api.objects("Event", NAMESPACE)))
            # A node that goes takes its NodeSLO and NodeMetric along.
            api.remove("Node", "node-1")
            await until(lambda: api.get("NodeSLO", "node-1") is None)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 60))
    kept = api.get("Secret", WEBHOOK_CERTS, NAMESPACE)
    assert kept is not None
    issued = base64.b64decode(kept["data"]["tls.crt"])
    assert (cert_dir / "tls.crt").read_bytes() == issued
    assert base64.b64decode(kept["data"]["ca-cert.pem"]) == ca_pem  # the chart's CA kept
    stored = api.get("MutatingWebhookConfiguration", mutating["metadata"]["name"])
    assert stored is not None
    assert {base64.b64decode(h["clientConfig"]["caBundle"]) for h in stored["webhooks"]} == {ca_pem}
    refused = [
        f"{r.verb} {r.path}"
        for r in api.requests
        if not allows(default, *permission(r), name=object_name(r))
    ]
    assert not refused, f"the chart's RBAC refuses {refused}"
    made = {permission(r) for r in api.requests}
    assert (NAMESPACE, "", "secrets", "update") in made
    assert (None, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update") in made
    assert (NAMESPACE, "coordination.k8s.io", "leases", "create") in made
    assert (None, "", "nodes/status", "patch") in made
    assert (NAMESPACE, "", "events", "create") in made
    assert (None, "slo.koordinator.sh", "nodeslos", "delete") in made


NO_WEBHOOKS = {"manager": {"webhook": {"enabled": False}}}


def test_priority_classes_the_cluster_has_are_left_alone_and_ours_kept() -> None:
    koordinators = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "koord-batch", "labels": {"app.kubernetes.io/name": "koordinator"}},
        "value": 5000,
    }
    other_release = {
        **koordinators,
        "metadata": {
            "name": "koord-prod",
            "annotations": {
                "meta.helm.sh/release-name": "koordinator",
                "meta.helm.sh/release-namespace": "elsewhere",
            },
        },
        "value": 9000,
    }
    fresh, upgraded = helm.run(
        helm.Render(helm.CHART, existing=(koordinators, other_release)),
        # the manager's webhook certificate is new on every upgrade, which the fake API server
        # cannot patch: without webhooks the upgrade re-renders everything else as it was
        helm.Render(helm.CHART, values=NO_WEBHOOKS, upgrades=(NO_WEBHOOKS,)),
    )
    assert isinstance(fresh, helm.Release) and isinstance(upgraded, helm.Release)
    assert not fresh.error
    assert {pc["metadata"]["name"] for pc in fresh.all("PriorityClass")} == {
        "koord-mid",
        "koord-free",
    }
    # an upgrade finds the install's own classes and keeps them in the release
    assert not upgraded.error
    assert {pc["metadata"]["name"] for pc in upgraded.all("PriorityClass")} == {
        "koord-prod",
        "koord-mid",
        "koord-batch",
        "koord-free",
    }
