"""The chart installed by Helm on a real cluster: every product pod placed by kube-scheduler
and run by the kubelet, koordlet registered with the node's containerd over NRI."""

from __future__ import annotations

from typing import Any

from tests.cluster.cluster import NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE
from tests.cluster.workload import reporter

DEPLOYMENTS = ("koord-manager", "koord-scheduler", "koord-descheduler", "koord-kube-scheduler")


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_every_product_pod_is_placed_by_kube_scheduler_and_run_by_the_kubelet(
    cluster: Cluster,
) -> None:
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    for name in DEPLOYMENTS:
        deployment = cluster.get(f"{apps}/deployments/{name}")
        wanted = deployment["spec"]["replicas"]
        assert wanted >= 1
        assert deployment["status"].get("availableReplicas") == wanted, (name, deployment["status"])
    daemonset = cluster.get(f"{apps}/daemonsets/koordlet")
    assert daemonset["status"]["numberReady"] == daemonset["status"]["desiredNumberScheduled"] == 1

    pods = cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    assert len(pods) == 1 + sum(
        cluster.get(f"{apps}/deployments/{n}")["spec"]["replicas"] for n in DEPLOYMENTS
    )
    events = cluster.kubectl_json("get", "events", "-n", NAMESPACE)["items"]
    scheduled = {
        e["involvedObject"]["uid"]: reporter(e) for e in events if e.get("reason") == "Scheduled"
    }
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == NODE_NAME, name
        assert ready(pod), (name, pod["status"])
        # the cluster's own kube-scheduler placed it (a DaemonSet's pods too, since 1.12)
        assert scheduled.get(pod["metadata"]["uid"]) == "default-scheduler", (name, scheduled)


def test_koordlet_registers_with_the_nodes_containerd_over_nri(cluster: Cluster) -> None:
    containerd = cluster.node_containerd
    containerd.wait_for_log("synchronizing plugin 00-koordlet_nri", timeout=60)

    def registered() -> str | None:
        text = cluster.kubectl("logs", "-n", NAMESPACE, "daemonset/koordlet", "--tail=-1")
        return text if "registered NRI plugin 00-koordlet_nri" in text else None

    log = cluster.wait_for("koordlet's registration line", registered, timeout=60)
    assert "Traceback" not in log
