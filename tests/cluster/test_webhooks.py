"""koord-manager's admission webhooks called by the real API server over TLS with the caBundle
koord-manager keeps: what the validating webhooks deny is refused, a renewal of the serving
certificate while pods are being created loses no admission, and with koord-manager down the
chart's failurePolicy holds (pods Ignore: created unmutated; the ConfigMap check Fail)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from koordkube import certs
from tests.cluster import sloconfig, workload
from tests.cluster.cluster import Cluster, ClusterError
from tests.cluster.helm import NAMESPACE
from tests.cluster.product import WEBHOOK_PORT, manager_pods, serving_managers
from tests.e2e.harness import images


@pytest.fixture(autouse=True)
def managers_serving(cluster: Cluster) -> list[dict[str, Any]]:
    """Every koord-manager replica serving before a test calls the webhooks: an earlier test
    may have killed one or restarted the API server, and a call the API server sends to a
    replica not yet listening is refused (pods: admitted unmutated, failurePolicy Ignore)."""
    return cluster.wait_for(
        "every koord-manager replica serving", lambda: serving_managers(cluster), 180
    )


def pod(name: str, labels: dict[str, str], cpu: str, extra: dict[str, str] | None = None) -> Any:
    requests = {"cpu": cpu, "memory": "32Mi", **(extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": images.WORKLOAD.ref,
                    "command": ["sleep", "60"],
                    "resources": {"requests": requests, "limits": requests},
                }
            ]
        },
    }


def dry_run_create(cluster: Cluster, namespace: str, body: Any) -> Any:
    """Create with ``dryRun=All``: admission runs, webhooks included, nothing is stored."""
    return cluster.api("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", body)


def refusal(call: Any) -> str:
    """The message of the Status the API server refused ``call`` with."""
    with pytest.raises(ClusterError) as refused:
        call()
    text = str(refused.value)
    return str(json.loads(text[text.index("{") :])["message"])


def test_the_api_server_refuses_what_koord_managers_validating_webhooks_deny(
    cluster: Cluster,
) -> None:
    lsr = pod("half-core", {"koordinator.sh/qosClass": "LSR"}, "1500m")
    message = refusal(lambda: dry_run_create(cluster, "default", lsr))
    assert 'admission webhook "vpod.koordinator.sh" denied the request' in message, message
    assert "must request an integer number of CPUs, requests total 1500m" in message

    batch = pod("ls-batch", {"koordinator.sh/qosClass": "LS"}, "100m", {workload.BATCH_CPU: "250"})
    message = refusal(lambda: dry_run_create(cluster, "default", batch))
    assert "vpod.koordinator.sh" in message and "must be BE" in message, message

    # An invalid slo-controller-config never gets in; the stored one is unchanged.
    before = sloconfig.read(cluster)
    doc = json.loads(before["resource-threshold-config"])
    doc["clusterStrategy"]["cpuSuppressThresholdPercent"] = 317
    message = refusal(
        lambda: cluster.api(
            "PATCH",
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{sloconfig.NAME}",
            {"data": {"resource-threshold-config": json.dumps(doc)}},
            content_type="application/merge-patch+json",
        )
    )
    assert 'admission webhook "vconfigmap.koordinator.sh" denied the request' in message, message
    assert "317" in message
    assert sloconfig.read(cluster) == before


def test_the_qos_class_of_a_created_pod_cannot_change(cluster: Cluster) -> None:
    body = pod("keeps-its-class", {"koordinator.sh/qosClass": "LS"}, "50m")
    body["spec"]["nodeSelector"] = {"koordinator-py.io/no-such-node": "true"}  # stays Pending
    cluster.api("POST", "/api/v1/namespaces/default/pods", body)
    path = "/api/v1/namespaces/default/pods/keeps-its-class"
    try:
        relabel = {"metadata": {"labels": {"koordinator.sh/qosClass": "BE"}}}
        patch = "application/merge-patch+json"
        message = refusal(lambda: cluster.api("PATCH", path, relabel, patch))
        assert "field is immutable (was LS, now BE)" in message, message
        assert cluster.get(path)["metadata"]["labels"]["koordinator.sh/qosClass"] == "LS"
    finally:
        cluster.api("DELETE", path)


# -- a renewal under load --------------------------------------------------------------------


def cert_secret(cluster: Cluster) -> dict[str, Any]:
    secrets = cluster.get(f"/api/v1/namespaces/{NAMESPACE}/secrets")["items"]
    (secret,) = [s for s in secrets if s["metadata"]["name"].endswith("webhook-certs")]
    return dict(secret)


def secret_pem(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def served_certificate(cluster: Cluster, ip: str) -> bytes:
    """The certificate a replica's webhook server presents (no verification: read it)."""

    def handshake() -> bytes:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with (
            socket.create_connection((ip, WEBHOOK_PORT), timeout=5) as raw,
            context.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return ssl.DER_cert_to_PEM_cert(der).encode()

    return cluster.in_netns(handshake)


class Creator:
    """Pods created (dry run) in the colocation namespace, one after another, from a thread."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.results: list[Any] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            body = pod(f"renewal-{i}", {}, "100m")
            try:
                self.results.append(dry_run_create(self.cluster, workload.BATCH_NAMESPACE, body))
            except ClusterError as err:
                self.results.append(err)

    def __enter__(self) -> Creator:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def mutated(result: Any) -> bool:
    return (
        isinstance(result, dict)
        and result["metadata"].get("labels", {}).get("koordinator.sh/qosClass") == "BE"
        and result["spec"].get("priorityClassName") == "koord-batch"
    )


def test_pods_created_while_the_serving_certificate_is_renewed_are_all_admitted(
    cluster: Cluster, managers_serving: list[dict[str, Any]]
) -> None:
    cluster.apply(workload.PROFILE)
    secret = cert_secret(cluster)
    ca_cert, ca_key = secret_pem(secret, certs.CA_CERT), secret_pem(secret, certs.CA_KEY)
    old = secret_pem(secret, certs.TLS_CERT)
    names = certs.certificate_names(old)
    # A pair from the same CA that ends in 40 days: within the six months in which
    # koord-manager renews, as if it had served for a year.
    now = dt.datetime.now(dt.UTC)
    short, short_key = certs.issue(ca_cert, ca_key, names, now, dt.timedelta(days=40))
    data = dict(secret["data"])
    for key, value in ((certs.SERVER_CERT, short), (certs.TLS_CERT, short),
                       (certs.SERVER_KEY, short_key), (certs.TLS_KEY, short_key)):  # fmt: skip
        data[key] = base64.b64encode(value).decode()
    ips = [p["status"]["podIP"] for p in managers_serving]

    with Creator(cluster) as creator:
        cluster.wait_for("pods admitted before the renewal", lambda: len(creator.results) >= 5)
        path = f"/api/v1/namespaces/{NAMESPACE}/secrets/{secret['metadata']['name']}"
        cluster.api("PUT", path, {**secret, "data": data})

        def renewed() -> bytes | None:
            cert = secret_pem(cert_secret(cluster), certs.TLS_CERT)
            fresh = certs.not_after(cert) > now + dt.timedelta(days=300)
            return cert if fresh and cert != old else None

        pair = cluster.wait_for("koord-manager's renewed pair in the Secret", renewed, 150)
        cluster.wait_for(
            "every replica serving the renewed pair",
            lambda: all(served_certificate(cluster, ip) == pair for ip in ips),
            timeout=150,
        )
        done = len(creator.results)
        cluster.wait_for(
            "pods admitted after the renewal", lambda: len(creator.results) >= done + 5
        )
    assert certs.not_after(pair) > now + dt.timedelta(days=300)
    lost = [r for r in creator.results if not mutated(r)]
    assert not lost, (len(creator.results), lost[:3])
    # the caBundle is still the CA (a serving-pair renewal keeps it)
    config = cluster.get("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")[
        "items"
    ]
    bundles = {w["clientConfig"]["caBundle"] for c in config for w in c["webhooks"]
               if w["name"] == "mpod.koordinator.sh"}  # fmt: skip
    assert bundles == {base64.b64encode(ca_cert).decode()}


# -- koord-manager down ----------------------------------------------------------------------


@pytest.fixture
def manager_down(cluster: Cluster) -> Iterator[None]:
    deployment = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/koord-manager"
    replicas = cluster.get(deployment)["spec"]["replicas"]
    scale = f"{deployment}/scale"
    patch = "application/merge-patch+json"
    cluster.api("PATCH", scale, {"spec": {"replicas": 0}}, content_type=patch)
    try:
        cluster.wait_for("no koord-manager pod left", lambda: not manager_pods(cluster), 120)
        yield
    finally:
        cluster.api("PATCH", scale, {"spec": {"replicas": replicas}}, content_type=patch)
        cluster.wait_for(
            "koord-manager available again",
            lambda: cluster.get(deployment)["status"].get("availableReplicas") == replicas,
            timeout=180,
        )


def test_with_koord_manager_down_the_charts_failure_policies_hold(
    cluster: Cluster, manager_down: None
) -> None:
    cluster.apply(workload.PROFILE)
    # pods: Ignore — created, without the profile (no one to apply it)
    created = dry_run_create(cluster, workload.BATCH_NAMESPACE, pod("unmutated", {}, "100m"))
    assert "koordinator.sh/qosClass" not in created["metadata"].get("labels", {})
    assert created["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "100m"
    # the slo-controller-config check: Fail — refused while no replica answers
    before = sloconfig.read(cluster)
    message = refusal(
        lambda: cluster.api(
            "PATCH",
            f"/api/v1/namespaces/{NAMESPACE}/configmaps/{sloconfig.NAME}",
            {"data": {"colocation-config": before["colocation-config"] + " "}},
            content_type="application/merge-patch+json",
        )
    )
    assert 'failed calling webhook "vconfigmap.koordinator.sh"' in message, message
    assert sloconfig.read(cluster) == before
