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
    pod = workload.run_colocated_workload(cluster)
    workload.assert_colocated(cluster, pod)
