"""The product as the cluster tier and ``make cluster`` install it: the image side-loaded into
the node's containerd (no registry answers here) and the chart installed by Helm."""

from __future__ import annotations

import socket
from typing import Any

from tests.cluster import helm
from tests.cluster.cluster import CGROUP_ROOT, Cluster
from tests.e2e.harness import paths

KOORDLET_IMAGE = paths.IMAGES_DIR / "koordlet.tar"
MANAGER = f"/apis/apps/v1/namespaces/{helm.NAMESPACE}/deployments/koord-manager"
MANAGER_PODS = "app.kubernetes.io/component%3Dmanager"
WEBHOOK_PORT = 9876  # the chart's manager.webhook.port
# What the tier sets beyond the chart's defaults: koordlet must find the kubelet's QoS cgroups
# under its cgroup root; koord-manager is told the chart's kube-scheduler is the one running
# schedulerName koord-scheduler. LoadAware's CPU filter is off (a threshold of 0; memory's
# stays at 95 %): on this 2-core node the whole cluster is the node's load, and a busy machine
# (a build, a test run beside it) puts CPU usage past any threshold, so the batch Job would
# wait in kube-scheduler's queue ("cpu usage exceed threshold", seen here) for minutes.
# koordlet's NodeMetric report interval: Koordinator's floor, not the chart's 60 s, so that
# the tests that wait for reports wait half as long.
REPORT_INTERVAL = 30
# koordlet's peak prediction trains every 5 s (Koordinator: 1 min) and counts a pod after 10 s
# (Koordinator: 24 h), so that test_prediction sees a prediction follow a service's peaks
# within a few minutes.
PREDICTION_TRAINING, PREDICTION_COLD_START = 5, 10
# The control plane's replicas ask for 25m each instead of 100m: on the 2-core node, an LSR
# pod's whole CPU must fit beside them and the tests' own pods.
SMALL = {"requests": {"cpu": "25m"}}
VALUES: dict[str, Any] = {
    "koordlet": {
        "flags": {
            "cgroup-kube-dir": f"{CGROUP_ROOT}/kubepods/",
            "prediction-training-interval": f"{PREDICTION_TRAINING}s",
            "prediction-cold-start-duration": f"{PREDICTION_COLD_START}s",
        }
    },
    "manager": {
        "knownSchedulers": ["koord-scheduler"],
        "resources": SMALL,
        # quota reclaim on (Koordinator's default is off), after 5 s over the runtime
        "elasticQuotaArgs": {"monitorAllQuotas": True, "delayEvictTime": "5s"},
    },
    "sloConfig": {"data": {"colocation-config": {"metricReportIntervalSeconds": REPORT_INTERVAL}}},
    "scheduler": {
        "loadAware": {"usageThresholds": {"cpu": 0, "memory": 95}},
        "resources": SMALL,
        "kubeScheduler": {"resources": SMALL},
    },
    "descheduler": {"resources": SMALL},
}


def install(cluster: Cluster, values: dict[str, object] | None = None) -> None:
    """Side-load the image (no registry answers here) and ``helm install`` the chart."""
    cluster.node_containerd.ctr("images", "import", str(KOORDLET_IMAGE))
    helm.run(
        cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "install",
        values=values if values is not None else VALUES, timeout=300,
    )  # fmt: skip


def manager_pods(cluster: Cluster) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{helm.NAMESPACE}/pods?labelSelector={MANAGER_PODS}"
    return list(cluster.get(path)["items"])


def ready_managers(cluster: Cluster) -> list[dict[str, Any]] | None:
    """koord-manager's pods once every replica the Deployment wants is ready (an earlier test
    may have killed one)."""
    wanted = cluster.get(MANAGER)["spec"]["replicas"]
    pods = [p for p in manager_pods(cluster) if "deletionTimestamp" not in p["metadata"]]
    ready = len(pods) == wanted and all(
        p["status"].get("podIP")
        and any(c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", []))
        for p in pods
    )  # fmt: skip
    return pods if ready else None


def serving_managers(cluster: Cluster) -> list[dict[str, Any]] | None:
    """koord-manager's pods once every replica is ready and its webhook port takes a
    connection. A pod's Ready condition alone can be stale: a leader that lost its Lease while
    the API server was away exits, and the kubelet posts its restart only once it answers."""
    pods = ready_managers(cluster)
    if pods is None:
        return None

    def listening() -> bool:
        for p in pods:
            try:
                socket.create_connection((p["status"]["podIP"], WEBHOOK_PORT), timeout=5).close()
            except OSError:
                return False
        return True

    return pods if cluster.in_netns(listening) else None


def nothing_terminating(cluster: Cluster) -> bool:
    """No pod of the cluster is on its way out: what the pods ask of the node is settled (an
    earlier test's namespace deleted with --wait=false lets its pods go in the background, and
    until its namespace is gone a pod of it may not be marked yet)."""
    namespaces = cluster.get("/api/v1/namespaces")["items"]
    if any(n.get("status", {}).get("phase") == "Terminating" for n in namespaces):
        return False
    pods = cluster.get("/api/v1/pods")["items"]
    return not any("deletionTimestamp" in p["metadata"] for p in pods)


def restart_apiserver(cluster: Cluster) -> None:
    """Restart the API server and wait until every koord-manager replica serves the webhooks
    again. The API server stays away about 20 s (it outlives SIGTERM that long here), longer
    than koord-manager's renew deadline of 10 s: its leader exits, as Koordinator's does, and
    its webhook server with it; until the new process listens, the API server's calls to that
    replica are refused (a ConfigMap write fails, failurePolicy Fail; a pod is admitted
    unmutated, Ignore)."""
    cluster.restart_apiserver()
    cluster.wait_for("every koord-manager replica serving", lambda: serving_managers(cluster), 180)
