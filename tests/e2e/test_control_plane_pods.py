"""The chart's koord-manager and koord-scheduler Deployments, run from the image set-up built,
as the kubelet would run them, against an API server over the network.

Both run from the koordlet image (the Containerfile installs all the console scripts), so they
differ from koordlet's pod in what the image must support: non-root (user and group 65532),
a read-only root filesystem with an emptyDir at /tmp, every capability dropped, no privilege
escalation, containerd's default seccomp profile, their certificates kept from a Secret into
an emptyDir by the components themselves (certificates.autoRenew), the LoadAware arguments
from a ConfigMap, their own network
namespace (a CNI bridge of the test's own: harness/podnet.py) and the in-cluster service
account. The API server is koordkube's FakeKubeAPI behind HTTPS on the bridge's address
(harness/apiserver.py), holding what ``helm install`` would create; it answers only the token
projected into the pods. What is checked is what a cluster would need from each pod: the
kubelet's probes answer on the pod's address, the components read and write the API through
the service account (koord-manager takes its Lease and writes NodeSLO and batch resources;
koord-scheduler's informers see the NodeMetrics), and the HTTPS endpoints answer with the
chart's certificates for the Services' names (the admission webhook, the extender).
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from koordapi import keys
from koordapi.quantity import value
from koordkube.resources import SLO_GROUP
from tests.e2e.harness.apiserver import ApiServer
from tests.e2e.harness.chartpods import (
    container_log,
    http_get,
    image_present,
    import_image,
    wait_for,
)
from tests.e2e.harness.node import Node
from tests.e2e.harness.podnet import PodNetwork, plugin_dir
from tests.e2e.harness.podspec import KubeletPod, ServiceAccount, run_as_kubelet
from tests.e2e.harness.timing import scaled
from tests.fakekube import KINDS, FakeKubeAPI, Kind
from tests.unit.charts import helm

NAMESPACE = "koordinator-system"
# Kinds ``helm install`` would create that the fake serves (the rest: RBAC, Services, ...).
# The certificate Secrets and the webhook configurations: koord-manager and koord-scheduler
# keep their serving certificates from those Secrets (certificates.autoRenew) into emptyDirs.
SERVED = (
    "ConfigMap",
    "PriorityClass",
    "ClusterColocationProfile",
    "Secret",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
)
# koord-descheduler reads the workloads' expected replicas from these
APPS = (
    Kind("apps", "v1", "ReplicaSet", "replicasets", True, status=True),
    Kind("apps", "v1", "StatefulSet", "statefulsets", True, status=True),
)
# One replica each; the descheduler's LowNodeLoad on, quick to act (a node above 50 % cpu in
# one round is hot), every 2 s; its jobs evict directly (no kube-scheduler or extender here to
# place a ReservationFirst job's Reservation: the cluster tier runs those).
VALUES = {
    "manager": {"replicas": 1},
    "descheduler": {
        "replicas": 1,
        "deschedulingInterval": "2s",
        "migrationController": {"args": {"defaultJobMode": "EvictDirectly"}},
        "lowNodeLoad": {
            "enabled": True,
            "args": {
                "lowThresholds": {"cpu": 20, "memory": 20},
                "highThresholds": {"cpu": 50, "memory": 80},
                "anomalyCondition": {"consecutiveAbnormalities": 1},
            },
        },
    },
}


def now_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(name: str) -> dict[str, Any]:
    amount = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(amount), "allocatable": dict(amount)},
    }


def node_metric(name: str, cpu: str) -> dict[str, Any]:
    """A fresh report of ``cpu`` cores and 4Gi in use on the node."""
    usage = {"resources": {"cpu": cpu, "memory": "4Gi"}}
    system = {"resources": {"cpu": "100m", "memory": "512Mi"}}
    return {
        "apiVersion": f"{SLO_GROUP}/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": {
            "updateTime": now_stamp(),
            "nodeMetric": {"nodeUsage": usage, "systemUsage": system},
            "podsMetric": [],
        },
    }


@dataclass
class Cluster:
    """A node with a pod network, an API server on it, and the chart rendered for both."""

    node: Node
    fake: FakeKubeAPI
    api: ApiServer
    release: helm.Release
    pod_root: Path

    def run(self, deployment_name: str) -> tuple[KubeletPod, str, Path]:
        """The Deployment's pod started as the kubelet would: (pod, its address, its log)."""
        deployment = self.release.find("Deployment", deployment_name)
        account = ServiceAccount(self.api.host, self.api.port, self.api.ca_pem, self.api.token)
        name = f"{deployment_name}-{uuid.uuid4().hex[:10]}"
        pod = run_as_kubelet(
            deployment["spec"]["template"],
            name=name,
            namespace=NAMESPACE,
            node_name="e2e-node",
            pod_dir=self.pod_root / name,
            objects=self.release.objects,
            service_account=account,
        )
        (container,) = pod.containers
        assert image_present(self.node, container.image), f"{container.image} is not on the node"
        pod_id = self.node.run_pod(pod.pod)
        self.node.run_container(pod_id, container)
        address = self.node.cri.pod_ip(pod_id)
        assert address, f"{name} got no address on the pod network"
        return pod, address, container_log(self.node, pod.pod.uid, container)

    def container(self, deployment_name: str) -> dict[str, Any]:
        deployment = self.release.find("Deployment", deployment_name)
        return dict(deployment["spec"]["template"]["spec"]["containers"][0])

    def port(self, deployment_name: str, port_name: str) -> int:
        ports = self.container(deployment_name)["ports"]
        return int(next(p["containerPort"] for p in ports if p["name"] == port_name))

    def webhook(self, name: str) -> tuple[str, str, ssl.SSLContext]:
        """How the API server calls the validating webhook ``name``: the Service's DNS name
        it checks the certificate for, the path, and the caBundle it trusts."""
        configuration = self.release.find("ValidatingWebhookConfiguration")
        (hook,) = [w for w in configuration["webhooks"] if w["name"] == name]
        client = hook["clientConfig"]
        service = client["service"]
        trust = base64.b64decode(client["caBundle"]).decode()
        server_name = f"{service['name']}.{service['namespace']}.svc"
        return server_name, service["path"], ssl.create_default_context(cadata=trust)

    def extender(self) -> tuple[str, str, ssl.SSLContext]:
        """How kube-scheduler calls the extender, from the chart's KubeSchedulerConfiguration:
        the server name it checks, the URL path of the filter verb, the CA it trusts."""
        (config,) = [
            yaml.safe_load(text)
            for cm in self.release.all("ConfigMap")
            for key, text in (cm.get("data") or {}).items()
            if key == "kube-scheduler-config.yaml"
        ]
        (extender,) = config["extenders"]
        tls = extender["tlsConfig"]
        path = f"{urlsplit(extender['urlPrefix']).path}/{extender['filterVerb']}"
        trust = base64.b64decode(tls["caData"]).decode()
        return tls["serverName"], path, ssl.create_default_context(cadata=trust)


@pytest.fixture
def cluster(fresh_node: Node, tmp_path: Path) -> Iterator[Cluster]:
    if not helm.available():
        pytest.skip(helm.INSTALL_HINT)
    if plugin_dir() is None:
        pytest.fail("no CNI plugins (containernetworking-plugins): run scripts/setup.sh")
    import_image(fresh_node)
    network = PodNetwork.create(fresh_node)
    try:
        fake = FakeKubeAPI(kinds=(*KINDS, *APPS))
        release = helm.render(helm.CHART, VALUES)
        fake.seed(*(o for o in release.objects if o["kind"] in SERVED))
        with ApiServer(fake, network.host_address) as api:
            yield Cluster(fresh_node, fake, api, release, tmp_path / "pods")
            problems = fresh_node.teardown()  # while the network is there for CNI's DEL
            assert not problems, problems
            assert api.unauthorized == 0, "a request came without the projected token"
    finally:
        fresh_node.teardown()
        leftovers = network.remove()
        assert not leftovers, leftovers


def https_post(
    address: str, port: int, path: str, body: Any, *, context: ssl.SSLContext, server_name: str
) -> Any:
    """POST JSON over HTTPS to the pod at ``address``, checking its certificate against
    ``server_name`` (the Service's DNS name it was issued for), as the API server and
    kube-scheduler do when they call through the Service."""

    class ToPod(http.client.HTTPSConnection):
        def connect(self) -> None:
            raw = socket.create_connection((address, port), timeout=scaled(10))
            self.sock = context.wrap_socket(raw, server_hostname=server_name)

    connection = ToPod(server_name, port, context=context, timeout=scaled(10))
    try:
        headers = {"Content-Type": "application/json"}
        connection.request("POST", path, body=json.dumps(body), headers=headers)
        reply = connection.getresponse()
        assert reply.status == 200, (reply.status, reply.read()[:500])
        return json.loads(reply.read())
    finally:
        connection.close()


def ready(address: str, pod: KubeletPod, container: str) -> bool:
    probes = pod.probes[container]
    return all(http_get(address, p.port, p.path)[0] == 200 for p in probes.values())


def test_chart_manager_runs_from_the_image_with_its_service_account_and_webhook(
    cluster: Cluster,
) -> None:
    fake, api = cluster.fake, cluster.api
    api.call(fake.seed, node_object("node-a"), node_metric("node-a", "2"))
    pod, address, log = cluster.run("koord-manager")
    assert pod.containers[0].run_as_user == 65532 and pod.containers[0].readonly_rootfs

    # the kubelet's liveness and readiness probes (/healthz, /readyz: caches synced)
    wait_for(lambda: ready(address, pod, "manager"), 60, "koord-manager's probes", log)

    # the leader's Lease, held by this pod (its hostname is the pod's name)
    def leads() -> bool:
        lease = api.call(fake.get, "Lease", "koord-manager", NAMESPACE)
        holder = str(((lease or {}).get("spec") or {}).get("holderIdentity", ""))
        return holder.startswith(pod.pod.name + "_")

    wait_for(leads, 60, "the Lease koord-manager held by the pod", log)
    # at the chart's log level, the API requests behind that Lease are not logged one by one
    assert api.call(fake.calls, None, "/leases")
    assert "HTTP Request:" not in log.read_text()

    # its controllers write through the API: the node's NodeSLO and its batch resources
    def written() -> bool:
        node = api.call(fake.get, "Node", "node-a") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return api.call(fake.get, "NodeSLO", "node-a") is not None and (
            keys.BATCH_CPU in allocatable
        )

    wait_for(written, 60, "NodeSLO node-a and batch-cpu on node-a", log)
    node = api.call(fake.get, "Node", "node-a") or {}
    # milli-cores: some of the 8 cores (8000), never all: the reclaim margin stays
    batch_cpu = value(node["status"]["allocatable"][keys.BATCH_CPU])
    assert 0 < batch_cpu < 8000, batch_cpu

    # the ConfigMap validating webhook, called as the API server would: over HTTPS, trusting
    # the webhook configuration's caBundle for the Service's name
    server_name, path, trust = cluster.webhook("vconfigmap.koordinator.sh")
    port = cluster.port("koord-manager", "webhook")
    bad = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NAMESPACE},
        "data": {"colocation-config": "{"},
    }
    review: dict[str, Any] = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": NAMESPACE,
            "name": "slo-controller-config",
            "operation": "UPDATE",
            "object": bad,
            "oldObject": bad,
        },
    }
    answer = https_post(address, port, path, review, context=trust, server_name=server_name)
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["allowed"] is False
    assert "colocation-config" in answer["response"]["status"]["message"]
    # the pair it served came from the Secret, by its service account (certificates.autoRenew)
    secret = f"/namespaces/{NAMESPACE}/secrets/koordinator-webhook-certs$"
    assert api.call(fake.calls, "get", secret)


def test_chart_scheduler_runs_from_the_image_and_filters_over_https(cluster: Cluster) -> None:
    fake, api = cluster.fake, cluster.api
    # node-hot's 7 of 8 cores are past LoadAware's default 65 % cpu threshold
    api.call(fake.seed, node_object("node-hot"), node_metric("node-hot", "7"))
    api.call(fake.seed, node_object("node-cold"), node_metric("node-cold", "1"))
    pod, address, log = cluster.run("koord-scheduler")
    wait_for(lambda: ready(address, pod, "scheduler"), 60, "koord-scheduler's probes", log)

    # filter, called as kube-scheduler would with the chart's extender configuration
    server_name, path, trust = cluster.extender()
    port = cluster.port("koord-scheduler", "https")
    incoming = {
        "metadata": {"name": "web", "namespace": "default", "uid": str(uuid.uuid4())},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }
    request = {"Pod": incoming, "Nodes": None, "NodeNames": ["node-hot", "node-cold"]}
    reply = https_post(address, port, path, request, context=trust, server_name=server_name)
    assert reply["NodeNames"] == ["node-cold"], reply
    assert reply["FailedNodes"] == {"node-hot": "node(s) cpu usage exceed threshold"}
    assert api.call(fake.calls, "get", f"/namespaces/{NAMESPACE}/secrets/koord-scheduler-certs$")


def ready_node(name: str) -> dict[str, Any]:
    node = node_object(name)
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def web_pod(name: str, node: str) -> dict[str, Any]:
    """A pod of ReplicaSet web (4 replicas) using one of its node's 8 cores."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-web"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "ownerReferences": [owner | {"controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pods_metric(name: str, pods: list[dict[str, Any]], cpu: str) -> dict[str, Any]:
    metric = node_metric(name, cpu)
    metric["status"]["podsMetric"] = [
        {
            "namespace": "default",
            "name": p["metadata"]["name"],
            "podUsage": {"resources": {"cpu": "1", "memory": "1Gi"}},
        }
        for p in pods
    ]
    return metric


def test_chart_descheduler_runs_from_the_image_and_moves_a_pod_off_a_hot_node(
    cluster: Cluster,
) -> None:
    fake, api = cluster.fake, cluster.api
    # node-hot: 5 pods of one core each (62.5 % of 8 cores, past the 50 % threshold);
    # node-cold: one (12.5 %, under the low threshold of 20 %)
    hot = [web_pod(f"web-{i}", "node-hot") for i in range(5)]
    cold = [web_pod("web-5", "node-cold")]
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default", "uid": "rs-web"},
        "spec": {"replicas": 6},
    }
    api.call(
        fake.seed,
        replica_set,
        ready_node("node-hot"),
        ready_node("node-cold"),
        *hot,
        *cold,
        pods_metric("node-hot", hot, "5"),
        pods_metric("node-cold", cold, "1"),
    )
    pod, address, log = cluster.run("koord-descheduler")
    wait_for(lambda: ready(address, pod, "descheduler"), 60, "koord-descheduler's probes", log)

    def lease_holder() -> str:
        lease = api.call(fake.get, "Lease", "koord-descheduler", NAMESPACE) or {}
        return str((lease.get("spec") or {}).get("holderIdentity", ""))

    wait_for(lambda: lease_holder().startswith(pod.pod.name), 60, "the Lease", log)

    # LowNodeLoad's round asks for a pod of node-hot to move; the migration controller evicts
    # it through the Eviction API and the job ends Succeeded
    def succeeded() -> list[dict[str, Any]]:
        jobs = api.call(fake.objects, "PodMigrationJob")
        return [j for j in jobs if (j.get("status") or {}).get("phase") == "Succeeded"]

    wait_for(lambda: bool(succeeded()), 90, "a PodMigrationJob Succeeded", log)
    (job, *_) = succeeded()
    moved = job["spec"]["podRef"]["name"]
    assert moved.startswith("web-") and moved != "web-5"  # from node-hot
    assert job["spec"]["mode"] == "EvictDirectly"
    assert "LowNodeLoad" in job["metadata"]["annotations"]["koordinator.sh/evict-trigger"]
    assert api.call(fake.get, "Pod", moved, "default") is None  # evicted
    evictions = api.call(fake.calls, "create", "/pods/[^/]+/eviction$")
    assert evictions and not api.call(fake.calls, "delete", "/pods/")
