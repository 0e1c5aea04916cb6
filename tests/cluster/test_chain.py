"""The co-location chain on a real Kubernetes: koordlet's NodeMetric → batch allocatable that
koord-manager publishes on the Node → a batch Job admitted through a ClusterColocationProfile
by the API server calling koord-manager's webhook → placed by the chart's kube-scheduler
(profile koord-scheduler), which calls the koord-scheduler extender and lets it bind → run by
the kubelet on containerd, with koordlet's batch values in its cgroups (through NRI)."""

from __future__ import annotations

from tests.cluster import workload
from tests.cluster.cluster import NODE_NAME, Cluster

BATCH_CPU, BATCH_MEMORY = workload.BATCH_CPU, workload.BATCH_MEMORY


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

    node = cluster.wait_for(
        "batch-cpu and batch-memory in the Node's allocatable",
        lambda: workload.batch_node(cluster),
        timeout=180,
    )
    found = node["status"]["allocatable"]
    # Batch capacity is what the node's 2 cores and memory leave after its usage: more than
    # nothing, less than the whole node.
    assert 0 < int(found[BATCH_CPU]) < 2000
    assert 0 < int(found[BATCH_MEMORY]) < int(found["memory"].removesuffix("Ki")) * 1024
    assert node["status"]["capacity"][BATCH_CPU] == found[BATCH_CPU]


def test_a_batch_job_is_admitted_placed_through_the_extender_and_gets_batch_cgroup_values(
    cluster: Cluster,
) -> None:
    cluster.wait_for("batch resources on the Node", lambda: workload.batch_node(cluster), 180)
    cluster.apply(workload.PROFILE)
    cluster.apply(workload.LS_DEPLOYMENT)
    cluster.apply(workload.BATCH_JOB)

    pod = cluster.wait_for(
        "the batch Job's pod running", lambda: workload.running_job_pod(cluster), timeout=180
    )
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
    event = cluster.wait_for(
        "the pod's Scheduled event", lambda: workload.scheduled_event(cluster, pod)
    )
    assert workload.reporter(event) == "koord-scheduler", event
    bound = cluster.wait_for(
        "the extender's bind audit line",
        lambda: [
            line
            for line in workload.bind_lines(cluster, pod)
            if "kind=bound" in line and f"value={NODE_NAME} " in line
        ],
        timeout=30,
    )
    assert len(bound) == 1, bound

    # koordlet's hooks (over NRI) gave the container its batch values.
    assert workload.be_cgroup_values(pod) == workload.BE_VALUES
