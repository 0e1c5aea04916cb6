"""koord-manager's batch resources on the real Node as the high-priority load changes, and
the chart's kube-scheduler keeping a BE pod that asks for more than is left Pending."""

from __future__ import annotations

import json
from typing import Any

from koordapi.explanation import ANNOTATION_NODE_RESOURCE_EXPLANATION as EXPLANATION
from koordapi.quantity import parse_quantity
from tests.cluster import sloconfig, workload
from tests.cluster.cluster import NODE_NAME, Cluster
from tests.e2e.harness import images

LS_NAMESPACE = "default"
# An LS pod's memory request the node's batch-memory must give up: more than the 10 %
# (resourceDiffThreshold) of batch-memory that is written at once, an unusual amount.
LS_REQUEST = 3 * 2**30 + 7 * 2**20


def batch_memory_by_request(cluster: Cluster) -> int | None:
    """batch-memory as last written by koord-manager under the request policy (its
    explanation annotation on the Node says which policy computed it), else None."""
    node = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    record = json.loads(node["metadata"].get("annotations", {}).get(EXPLANATION, "{}"))
    how = record.get("resources", {}).get(workload.BATCH_MEMORY, "")
    if "(request policy)" not in how:
        return None
    return int(parse_quantity(node["status"]["allocatable"][workload.BATCH_MEMORY]))


def ls_pod(name: str, memory: int) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {LS_NAMESPACE}, labels: {{koordinator.sh/qosClass: LS}}}}
spec:
  containers:
    - name: {name}
      image: {images.WORKLOAD.ref}
      imagePullPolicy: Never
      command: ["sleep", "3600"]
      resources: {{requests: {{cpu: 10m, memory: "{memory}"}}}}
"""


def test_batch_memory_gives_way_to_an_ls_pods_request_and_comes_back(cluster: Cluster) -> None:
    cluster.wait_for("batch resources on the Node", lambda: workload.batch_node(cluster), 180)
    with sloconfig.kept(cluster):
        # The request policy: capacity - margin - reserved - high-priority requests, which
        # moves by exactly what an LS pod requests (the usage policy moves with the machine).
        # Every change written (not only a move past 10 %), so the switch shows at once.
        sloconfig.change(
            cluster, "colocation-config",
            {"memoryCalculatePolicy": "request", "resourceDiffThreshold": 0.001},
            cluster_strategy=False,
        )  # fmt: skip
        before = cluster.wait_for(
            "batch-memory by the request policy", lambda: batch_memory_by_request(cluster), 120
        )
        cluster.apply(ls_pod("big-request", LS_REQUEST))
        try:
            during = cluster.wait_for(
                "batch-memory less the LS pod's request",
                lambda: (m := batch_memory_by_request(cluster)) and m < before and m,
                timeout=120,
            )
            assert before - during == LS_REQUEST
        finally:
            cluster.kubectl("delete", "pod", "-n", LS_NAMESPACE, "big-request", "--wait=false")
        cluster.wait_for(
            "batch-memory back", lambda: batch_memory_by_request(cluster) == before, 120
        )


def unschedulable(pod: dict[str, Any]) -> dict[str, Any] | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return dict(condition)
    return None


def test_a_be_pod_asking_for_more_batch_cpu_than_is_left_stays_pending(cluster: Cluster) -> None:
    node = cluster.wait_for("batch resources on the Node", lambda: workload.batch_node(cluster))
    allocatable = int(parse_quantity(node["status"]["allocatable"][workload.BATCH_CPU]))
    cluster.apply(workload.PROFILE)
    # 1900m of cpu, moved into batch-cpu by the profile: more than the node's 60 % of 2 cores
    # could ever leave.
    manifest = (
        workload.be_pod("too-big")
        .replace(f"cpu: {workload.BATCH_CPU_REQUEST}m", "cpu: 1900m")
        .replace(f"cpu: {workload.BATCH_CPU_LIMIT}m", "cpu: 1900m")
    )
    cluster.apply(manifest)
    path = f"/api/v1/namespaces/{workload.BATCH_NAMESPACE}/pods/too-big"
    try:
        condition = cluster.wait_for(
            "the BE pod unschedulable", lambda: unschedulable(cluster.get(path)), timeout=60
        )
        pod = cluster.get(path)
        assert pod["spec"]["containers"][0]["resources"]["requests"][workload.BATCH_CPU] == "1900"
        assert allocatable < 1900
        assert condition["reason"] == "Unschedulable"
        assert f"Insufficient {workload.BATCH_CPU}" in condition["message"], condition
        assert "nodeName" not in pod["spec"]
        events = cluster.kubectl_json("get", "events", "-n", workload.BATCH_NAMESPACE)["items"]
        failed = [
            e
            for e in events
            if e.get("reason") == "FailedScheduling"
            and e["involvedObject"].get("uid") == pod["metadata"]["uid"]
        ]
        assert failed and workload.reporter(failed[0]) == "koord-scheduler", failed
    finally:
        cluster.kubectl("delete", "pod", "-n", workload.BATCH_NAMESPACE, "too-big", "--wait=false")
