"""The co-location chain on a real Kubernetes: koordlet's NodeMetric → batch allocatable that
koord-manager publishes on the Node → a batch Job admitted through a ClusterColocationProfile
by the API server calling koord-manager's webhook → placed by the chart's kube-scheduler
(profile koord-scheduler), which calls the koord-scheduler extender and lets it bind → run by
the kubelet on containerd, with koordlet's batch values in its cgroups (through NRI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster import workload
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE

CGROUP = Path("/sys/fs/cgroup")
BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"


def allocatable(cluster: Cluster) -> dict[str, str]:
    node = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    return dict(node["status"]["allocatable"])


def test_koordlet_reports_a_nodemetric_and_koord_manager_publishes_batch_resources(
    cluster: Cluster,
) -> None:
    metric = cluster.wait_for(
        "koordlet's NodeMetric with the node's usage",
        lambda: cluster.get(f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE_NAME}")["status"][
            "nodeMetric"
        ]["nodeUsage"]["resources"],
        timeout=180,
    )
    assert "cpu" in metric and "memory" in metric
    # koord-manager rendered the node's NodeSLO from the chart's slo-controller-config
    slo = cluster.get(f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{NODE_NAME}")
    thresholds = slo["spec"]["resourceUsedThresholdWithBE"]
    assert (
        thresholds["cpuSuppressThresholdPercent"],
        thresholds["memoryEvictThresholdPercent"],
    ) == (65, 70)

    def published() -> dict[str, str] | None:
        found = allocatable(cluster)
        return found if found.get(BATCH_CPU) and found.get(BATCH_MEMORY) else None

    found = cluster.wait_for(
        "batch-cpu and batch-memory in the Node's allocatable", published, timeout=180
    )
    # Batch capacity is what the node's 2 cores and memory leave after its usage: more than
    # nothing, less than the whole node.
    assert 0 < int(found[BATCH_CPU]) < 2000
    assert 0 < int(found[BATCH_MEMORY]) < int(found["memory"].removesuffix("Ki")) * 1024
    node = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    assert node["status"]["capacity"][BATCH_CPU] == found[BATCH_CPU]


def reporter(event: dict[str, Any]) -> str:
    """Who reported an Event (events.k8s.io's reportingController, core's source)."""
    return str(event.get("reportingComponent") or event.get("source", {}).get("component"))


def scheduled_event(cluster: Cluster, pod: dict[str, Any]) -> dict[str, Any] | None:
    events = cluster.kubectl_json("get", "events", "-n", pod["metadata"]["namespace"])["items"]
    for event in events:
        involved = event.get("involvedObject", {})
        if event.get("reason") == "Scheduled" and involved.get("uid") == pod["metadata"]["uid"]:
            return dict(event)
    return None


def test_a_batch_job_is_admitted_placed_through_the_extender_and_gets_batch_cgroup_values(
    cluster: Cluster,
) -> None:
    cluster.wait_for(
        "batch-cpu in the Node's allocatable",
        lambda: allocatable(cluster).get(BATCH_CPU),
        timeout=180,
    )
    cluster.apply(workload.PROFILE)
    cluster.apply(workload.LS_DEPLOYMENT)
    cluster.apply(workload.BATCH_JOB)
    namespace = workload.BATCH_NAMESPACE

    def running_pod() -> dict[str, Any] | None:
        pods = cluster.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        pod = workload.job_pod(pods)
        return pod if pod and workload.container_id(pod) else None

    pod = cluster.wait_for("the batch Job's pod running", running_pod, timeout=180)
    spec = pod["spec"]
    # koord-manager's mutating webhook, called by the API server, applied the profile.
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    assert spec["priorityClassName"] == "koord-batch"
    assert spec["schedulerName"] == "koord-scheduler"
    resources = spec["containers"][0]["resources"]
    assert resources["requests"][BATCH_CPU] == str(workload.BATCH_CPU_REQUEST)
    assert resources["limits"][BATCH_CPU] == str(workload.BATCH_CPU_LIMIT)
    assert "cpu" not in resources["requests"] and "memory" not in resources["limits"]
    assert pod["status"]["qosClass"] == "BestEffort"

    # Placed by the chart's kube-scheduler (profile koord-scheduler), bound by the extender.
    assert spec["nodeName"] == NODE_NAME
    event = cluster.wait_for("the pod's Scheduled event", lambda: scheduled_event(cluster, pod))
    assert reporter(event) == "koord-scheduler", event
    target = f"target={namespace}/{pod['metadata']['name']} value={NODE_NAME}"
    bound = cluster.wait_for(
        "the extender's bind audit line",
        lambda: any(
            "extender bind" in line and "kind=bound" in line and target in line
            for line in cluster.kubectl(
                "logs", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=scheduler",
                "--tail=-1", "--prefix=false",
            ).splitlines()
        ),
        timeout=30,
    )  # fmt: skip
    assert bound

    # koordlet's hooks (over NRI) gave the container its batch values; the kubelet alone would
    # have given this BestEffort pod cpu.shares 2, no quota and no memory limit.
    uid, cid = pod["metadata"]["uid"], workload.container_id(pod)
    container = f"{CGROUP_ROOT}/kubepods/besteffort/pod{uid}/{cid}"
    shares = int((CGROUP / "cpu" / container / "cpu.shares").read_text())
    quota = int((CGROUP / "cpu" / container / "cpu.cfs_quota_us").read_text())
    period = int((CGROUP / "cpu" / container / "cpu.cfs_period_us").read_text())
    memory = int((CGROUP / "memory" / container / "memory.limit_in_bytes").read_text())
    # 150m → 150 x 1024 / 1000 shares; 1300m → 1.3 periods of quota; 448Mi.
    assert (shares, quota, period, memory) == (153, 130000, 100000, 448 * 2**20)
