"""koord-manager as Koordinator v1.8's own chart runs it: its Deployment's args and environment,
its gate table, and the certificate it keeps when the chart gives none.

The data below is written by us from Koordinator's sources (the files named at each), not
copied: names, defaults and values are the facts a user's manifests carry over.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509

from koordapi.features import MANAGER_GATES, manager_gate_states, manager_gates_unfollowed
from manager import cli
from manager.app import Manager
from tests.fakekube import FakeKubeAPI
from tests.unit.manager.webhooks import builders

# koord-manager's gates in Koordinator v1.8.0: pkg/features/features.go (defaultFeatureGates,
# defaultDeschedulerFeatureGates, transformerFeatureGates, all added to utilfeature's
# DefaultMutableFeatureGate, the one cmd/koord-manager/main.go parses): name -> (default, beta).
KOORDINATOR_MANAGER_GATES: dict[str, tuple[bool, bool]] = {
    "PodMutatingWebhook": (True, True),
    "PodValidatingWebhook": (True, True),
    "ElasticMutatingWebhook": (True, True),
    "ElasticValidatingWebhook": (True, True),
    "NodeMutatingWebhook": (False, False),
    "NodeValidatingWebhook": (False, False),
    "ConfigMapValidatingWebhook": (False, False),
    "ReservationMutatingWebhook": (False, False),
    "WebhookFramework": (True, True),
    "ColocationProfileSkipMutatingResources": (False, False),
    "ColocationProfileSkipValidatingPriority": (False, False),
    "MultiQuotaTree": (False, False),
    "ElasticQuotaIgnorePodOverhead": (False, False),
    "ElasticQuotaGuaranteeUsage": (False, False),
    "ElasticQuotaEnableUpdateResourceKey": (False, False),
    "ElasticQuotaEvaluationTransformPod": (False, False),
    "DisableDefaultQuota": (False, False),
    "SupportParentQuotaSubmitPod": (False, False),
    "EnableQuotaAdmission": (False, False),
    "EnableSyncGPUSharedResource": (False, False),
    "ColocationProfileController": (False, False),
    "ValidatePodDeviceResource": (False, False),
    "EnablePodEnhancedValidator": (False, False),
    "DisablePVCReservation": (False, True),
    "PriorityTransformer": (False, False),
    "PreemptionPolicyTransformer": (False, False),
    "ReplaceResourcesTransformer": (False, False),
}

# Koordinator v1.8.0's chart (koordinator-sh/charts versions/v1.8.0/templates/koord-manager.yaml)
# with its default values: the container's args and environment.
DEPLOYMENT_ARGS = [
    "--enable-leader-election",
    "--metrics-addr=:8080",
    "--health-probe-addr=:8000",
    "--logtostderr=true",
    "--leader-election-namespace=koordinator-system",
    "--v=4",
    "--feature-gates=",
    "--sync-period=0",
    "--config-namespace=koordinator-system",
]
NAMESPACE = "koordinator-system"
DEPLOYMENT_ENV = {
    "POD_NAMESPACE": NAMESPACE,  # fieldRef metadata.namespace
    "WEBHOOK_PORT": "9876",
    "WEBHOOK_CONFIGURATION_FAILURE_POLICY_PODS": "Ignore",
}
SECRET = "koordinator-webhook-certs"  # created empty by the chart (webhookSecretData)
SERVICE = "koordinator-webhook-service"
MUTATING = "koordinator-mutating-webhook-configuration"
VALIDATING = "koordinator-validating-webhook-configuration"


def test_the_gate_table_is_koordinators() -> None:
    ours = {name: (gate.default, gate.beta) for name, gate in MANAGER_GATES.items()}
    assert ours == KOORDINATOR_MANAGER_GATES


def test_a_gate_is_said_only_where_its_state_differs_from_what_the_manager_does() -> None:
    # Koordinator's defaults: the ConfigMap webhook is off there but served here whenever the
    # configuration names it (the ElasticQuota webhooks' gates are followed)
    assert sorted(manager_gates_unfollowed({})) == ["ConfigMapValidatingWebhook"]
    # AllBeta=false turns the beta Pod webhook gates off (served here all the same); a gate
    # named wins over its stage's AllBeta or AllAlpha
    said = manager_gates_unfollowed(
        {"AllBeta": False, "ConfigMapValidatingWebhook": True, "MultiQuotaTree": True}
    )
    assert sorted(said) == ["MultiQuotaTree", "PodMutatingWebhook", "PodValidatingWebhook"]
    assert said["PodMutatingWebhook"].startswith("PodMutatingWebhook=false: /mutate-pod ")
    states = manager_gate_states({"AllAlpha": True, "ReplaceResourcesTransformer": False})
    assert states["NodeMutatingWebhook"] and not states["ReplaceResourcesTransformer"]
    assert not states["DisablePVCReservation"]  # beta: AllAlpha leaves it


def test_webhook_framework_off_runs_no_webhooks() -> None:
    args, _ = cli.parse_args(["--feature-gates=WebhookFramework=false"], environ={})
    assert cli.options_from_args(args).webhook_port is None
    args, _ = cli.parse_args(["--feature-gates=AllBeta=false"], environ={})
    assert cli.options_from_args(args).webhook_port is None  # WebhookFramework is beta
    args, _ = cli.parse_args(["--feature-gates=AllBeta=false,WebhookFramework=true"], environ={})
    assert cli.options_from_args(args).webhook_port == 9876


def test_koordinators_webhook_environment_sets_the_flags_defaults() -> None:
    environ = {
        "WEBHOOK_PORT": "9443",
        "WEBHOOK_CERT_DIR": "/run/certs",
        "SECRET_NAME": "my-certs",
        "SERVICE_NAME": "my-webhooks",
        "MUTATING_WEBHOOK_NAME": "my-mutating",
        "VALIDATING_WEBHOOK_NAME": "",  # empty is unset, as in Koordinator
    }
    options = cli.options_from_args(cli.parse_args([], environ=environ)[0])
    assert (options.webhook_port, options.webhook_cert_dir) == (9443, Path("/run/certs"))
    assert (options.webhook_cert_secret, options.webhook_service_name) == (
        "my-certs",
        "my-webhooks",
    )
    assert options.mutating_webhook_configuration == "my-mutating"
    assert options.validating_webhook_configuration == VALIDATING
    # a flag given wins over the environment
    given = cli.parse_args(["--webhook-port=10250"], environ=environ)[0]
    assert cli.options_from_args(given).webhook_port == 10250
    with pytest.raises(SystemExit):
        cli.parse_args([], environ={"WEBHOOK_PORT": "nine"})


def test_koordinators_flags_and_environment_not_followed_are_one_warning() -> None:
    parsed = cli.parse_command_line(
        [*DEPLOYMENT_ARGS, "--namespace=team-a", "-rest-config-qps", "45"],
        environ={**DEPLOYMENT_ENV, "WEBHOOK_HOST": "10.0.0.7"},
    )
    assert parsed.flags == ["namespace", "rest-config-qps"]
    assert parsed.env == ["WEBHOOK_HOST"]
    warning = parsed.warning()
    assert warning is not None
    for named in (
        "--namespace (",
        "--rest-config-qps (",
        "$WEBHOOK_HOST (",
        "ConfigMapValidatingWebhook",
    ):
        assert named in warning
    assert "logtostderr" not in warning  # klog's, and what this manager does anyway
    assert all("rest-config-qps" not in note for note in parsed.notes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def webhook(name: str, path: str) -> dict[str, Any]:
    """A webhook as Koordinator's chart writes it (webhookconfiguration.yaml): caBundle "Cg=="."""
    return {
        "name": name,
        "clientConfig": {
            "caBundle": "Cg==",
            "service": {"name": SERVICE, "namespace": NAMESPACE, "path": path},
        },
        "admissionReviewVersions": ["v1", "v1beta1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["pods"],
            }
        ],
    }


def charts_objects() -> list[dict[str, Any]]:
    """What Koordinator's chart creates for koord-manager's webhooks, with default values."""
    template = {"template": ""}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": MUTATING, "annotations": template},
            "webhooks": [
                webhook("mpod-create.koordinator.sh", "/mutate-pod"),
                webhook(
                    "melasticquota.koordinator.sh",
                    "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                ),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": VALIDATING, "annotations": template},
            "webhooks": [webhook("vpod.koordinator.sh", "/validate-pod")],
        },
    ]


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    """Wait for a state the manager reaches (a positive condition, never a fixed sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_the_manager_runs_with_koordinators_deployment_and_keeps_its_own_certificate(
    tmp_path: Path,
) -> None:
    """Started with exactly the args and environment of Koordinator's Deployment against the
    chart's empty Secret and webhook configurations, koord-manager does not exit: it fills the
    Secret, sets both configurations' caBundle, serves the webhooks over TLS with that
    certificate and answers readyz on --health-probe-addr."""
    parsed = cli.parse_command_line(DEPLOYMENT_ARGS, environ=DEPLOYMENT_ENV)
    options = cli.options_from_args(parsed.args)
    # what Koordinator's args and env mean, before the ports are made free ones
    assert (options.metrics_addr, options.health_probe_addr) == (":8080", ":8000")
    assert (options.webhook_port, options.webhook_cert_secret) == (9876, "")
    assert options.leader_elect and options.leader_election_namespace == NAMESPACE
    assert (options.config_namespace, options.sync_period) == (NAMESPACE, 0.0)
    assert parsed.args.log_level == "debug"
    # Other tests on this machine hold ports: the same settings on free ones, and a cert dir of
    # this test's own (Koordinator's pod has an empty one at the default path).
    metrics_port, probe_port = free_port(), free_port()
    options = dataclasses.replace(
        options,
        metrics_addr=f"127.0.0.1:{metrics_port}",
        health_probe_addr=f"127.0.0.1:{probe_port}",
        webhook_port=0,
        webhook_cert_dir=tmp_path / "certs",
    )
    options = cli.certificate_source(options)  # no files: Koordinator's Secret
    assert options.webhook_cert_secret == SECRET
    api = FakeKubeAPI()
    api.seed(*charts_objects())
    manager = Manager(api.kube_api(), options, ignored_flags=parsed.flags)
    host = f"{SERVICE}.{NAMESPACE}.svc"

    def filled() -> bool:
        secret = api.get("Secret", SECRET, NAMESPACE)
        return bool(secret and (secret.get("data") or {}).get("tls.crt"))

    async def scenario() -> tuple[bytes, bytes, str, str]:
        task = asyncio.create_task(manager.run())
        try:
            # leading: the certificate kept, the webhooks served, the caches synced, the Lease
            await asyncio.wait_for(manager.leading.wait(), 20)
            assert filled()
            secret = api.get("Secret", SECRET, NAMESPACE) or {}
            ca_pem = base64.b64decode(secret["data"]["ca-cert.pem"])
            cert_pem = base64.b64decode(secret["data"]["tls.crt"])
            tls = ssl.create_default_context(cadata=ca_pem.decode())
            assert manager.webhooks is not None
            base = f"https://127.0.0.1:{manager.webhooks.bound_port}"
            async with aiohttp.ClientSession() as session:
                review = builders.review(builders.pod())
                async with session.post(
                    f"{base}/validate-pod", json=review, ssl=tls, server_hostname=host
                ) as reply:
                    assert reply.status == 200
                    answer = await reply.json()
                assert answer["response"]["allowed"] is True
                # the pair served is the one in the Secret
                _, writer = await asyncio.open_connection(
                    "127.0.0.1", manager.webhooks.bound_port, ssl=tls, server_hostname=host
                )
                der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
                writer.close()
                await writer.wait_closed()
                assert x509.load_der_x509_certificate(der) == x509.load_pem_x509_certificate(
                    cert_pem
                )
                async with session.get(f"http://127.0.0.1:{probe_port}/readyz") as reply:
                    ready = f"{reply.status} {await reply.text()}"
                async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as reply:
                    metrics = await reply.text()
            assert not task.done()  # it runs: no exit for want of a certificate
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return ca_pem, cert_pem, ready, metrics

    ca_pem, cert_pem, ready, metrics = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert ready.startswith("200")
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == cert_pem
    names = x509.load_pem_x509_certificate(cert_pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert host in names.value.get_values_for_type(x509.DNSName)
    for kind, name in (("MutatingWebhookConfiguration", MUTATING), (VALIDATING_KIND, VALIDATING)):
        stored = api.get(kind, name)
        assert stored is not None
        bundles = {base64.b64decode(h["clientConfig"]["caBundle"]) for h in stored["webhooks"]}
        assert bundles == {ca_pem}, kind
    # the gates whose default state is not what this manager does, as a metric
    gate = 'koord_manager_feature_gate_unimplemented{gate="ConfigMapValidatingWebhook"} 1.0'
    assert gate in metrics
    assert "koord_manager_flag_unimplemented{" not in metrics  # none of its flags is ignored


VALIDATING_KIND = "ValidatingWebhookConfiguration"
