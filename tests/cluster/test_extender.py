"""koord-scheduler's extender called by the real kube-scheduler with the chart's configuration
(filter, prioritize and bind, nodeCacheCapable): LoadAware keeps a pod off a hot node, and a
BE pod off a node whose p95 is over its aggregated threshold though its latest usage is low, a
koord-prod pod judged on the prod pods' usage (prodUsageThresholds) rather than the node's, an
LSR pod gets its CPUs at bind and koordlet pins them, GPU pods get device-allocated against a Device
as Koordinator's DeviceShare accounts it, and with the extender down the chart's ignorable
false holds pods back. The second node (othernode.py) has no kubelet: its binds are what is
checked."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.device import GPUInfo, build_device, carry_transition_times
from koordapi.quantity import milli_value, parse_quantity
from tests.cluster import workload
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE
from tests.cluster.othernode import OtherNode
from tests.e2e.harness import images

OTHER = "koord-node-b"
TAINT = {"key": "koordinator-py.io/extender-test", "value": "true", "effect": "NoSchedule"}
NAMESPACE_UNDER_TEST = "extender-test"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
GI = 2**30


@pytest.fixture(scope="module")
def other(cluster: Cluster) -> Iterator[OtherNode]:
    cluster.apply(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE_UNDER_TEST}}}")
    node = OtherNode(cluster, OTHER, taints=[TAINT]).start()
    try:
        cluster.wait_for(f"{OTHER} Ready", lambda: cluster.get(f"/api/v1/nodes/{OTHER}"))
        yield node
    finally:
        node.stop()
        cluster.kubectl("delete", "namespace", NAMESPACE_UNDER_TEST, "--wait=false")


def pod(
    name: str,
    *,
    requests: dict[str, str],
    labels: dict[str, str] | None = None,
    node: str | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "tolerations": [{**TAINT, "operator": "Equal"}],
        "containers": [
            {
                "name": name,
                "image": images.WORKLOAD.ref,
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": {"requests": requests, "limits": requests},
            }
        ],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE_UNDER_TEST, "labels": labels or {}},
        "spec": spec,
    }


def create(cluster: Cluster, body: dict[str, Any]) -> None:
    cluster.api("POST", f"/api/v1/namespaces/{NAMESPACE_UNDER_TEST}/pods", body)


def get(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.get(f"/api/v1/namespaces/{NAMESPACE_UNDER_TEST}/pods/{name}"))


def bound(cluster: Cluster, name: str) -> dict[str, Any] | None:
    found = get(cluster, name)
    return found if found["spec"].get("nodeName") else None


def unschedulable(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The pod's PodScheduled condition once kube-scheduler has given up on an attempt."""
    for condition in get(cluster, name)["status"].get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return dict(condition)
    return None


def bound_by_extender(cluster: Cluster, found: dict[str, Any], node: str) -> bool:
    return any(
        "kind=bound" in line and f"value={node} " in line
        for line in workload.bind_lines(cluster, found)
    )


def delete(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.kubectl("delete", "pod", "-n", NAMESPACE_UNDER_TEST, name,
                        "--grace-period=0", "--force", "--wait=false", check=False)  # fmt: skip


def metric_of(cluster: Cluster, node: str) -> dict[str, Any]:
    path = f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{node}"
    return dict(cluster.get(path)["status"]["nodeMetric"]["nodeUsage"]["resources"])


def test_load_aware_keeps_a_pod_off_the_hot_node(cluster: Cluster, other: OtherNode) -> None:
    # 64Gi: more memory than the real node has, so only the other node fits by its requests,
    # and LoadAware's filter alone decides whether it may go there.
    large = {"cpu": "20m", "memory": "64Gi"}
    try:
        create(cluster, pod("to-the-idle-node", requests=large))
        first = cluster.wait_for("the first pod bound", lambda: bound(cluster, "to-the-idle-node"))
        assert first["spec"]["nodeName"] == OTHER
        cluster.wait_for(
            "the extender's bind", lambda: bound_by_extender(cluster, first, OTHER), 30
        )

        # Its memory use past the chart's 95 %: LoadAware's filter takes it out.
        other.usage = (50, 250 * GI)
        cluster.wait_for(
            f"{OTHER}'s NodeMetric reporting it hot",
            lambda: int(parse_quantity(metric_of(cluster, OTHER)["memory"])) == 250 * GI,
            timeout=60,
        )
        create(cluster, pod("off-the-hot-node", requests=large))
        condition = cluster.wait_for(
            "the second pod unschedulable", lambda: unschedulable(cluster, "off-the-hot-node")
        )
        assert "node(s) memory usage exceed threshold" in condition["message"], condition
        assert "nodeName" not in get(cluster, "off-the-hot-node")["spec"]
    finally:
        other.usage = (50, 200 * 2**20)
        delete(cluster, "to-the-idle-node", "off-the-hot-node")


NODE_METRIC = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
MERGE = "application/merge-patch+json"


def set_p95(cluster: Cluster, cores: int | None) -> None:
    """OTHER's NodeMetric reporting a p95 cpu usage of ``cores`` over 5 minutes beside the
    idle latest usage the heartbeat keeps writing (its merge patches leave this key alone);
    None removes the aggregates."""
    usages = None
    if cores is not None:
        p95 = {"resources": {"cpu": str(cores), "memory": "1Gi"}}
        usages = [{"duration": "5m0s", "usage": {"p95": p95}}]
    body = {"status": {"nodeMetric": {"aggregatedNodeUsages": usages}}}
    cluster.api("PATCH", f"{NODE_METRIC}/{OTHER}/status", body, MERGE)


def reported_p95(cluster: Cluster) -> int | None:
    status = cluster.get(f"{NODE_METRIC}/{OTHER}")["status"]["nodeMetric"]
    for entry in status.get("aggregatedNodeUsages") or []:
        if entry["duration"] == "5m0s":
            return milli_value(entry["usage"]["p95"]["resources"]["cpu"])
    return None


def set_thresholds(cluster: Cluster, thresholds: dict[str, Any] | None) -> None:
    """OTHER's usage-thresholds annotation; None removes it."""
    text = None if thresholds is None else json.dumps(thresholds)
    body = {"metadata": {"annotations": {keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS: text}}}
    cluster.api("PATCH", f"/api/v1/nodes/{OTHER}", body, MERGE)


def batch_memory(cluster: Cluster, node: str) -> int:
    allocatable = cluster.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
    return int(parse_quantity(allocatable.get(workload.BATCH_MEMORY, "0")))


def test_load_aware_keeps_a_be_pod_off_a_node_whose_p95_is_over_its_threshold(
    cluster: Cluster, other: OtherNode
) -> None:
    """Koordinator's aggregated usage thresholds, set for OTHER by its usage-thresholds
    annotation (Koordinator's per-node form of the args' ``aggregated``, which spares this
    tier two helm upgrades; the args from the chart's loadAware values are unit-tested): cpu
    p95 over 5 minutes at most 45 %. OTHER's latest usage stays 50m of 64 cores throughout."""
    be = {workload.BATCH_CPU: "2000", workload.BATCH_MEMORY: "16Gi"}  # estimated 1.7 cores
    labels = {keys.LABEL_QOS_CLASS: "BE"}
    aggregated = {"usageThresholds": {"cpu": 45}, "usageAggregationType": "p95"}
    try:
        # 16Gi of batch-memory each: only OTHER (64 cores, 256Gi) has room for them
        cluster.wait_for(
            f"koord-manager's batch resources on {OTHER}",
            lambda: batch_memory(cluster, OTHER) >= 40 * GI,
            timeout=60,
        )
        set_thresholds(
            cluster, {"aggregatedUsage": {**aggregated, "usageAggregatedDuration": "5m"}}
        )
        set_p95(cluster, 20)  # 20 + 1.7 of 64 cores: 34 %
        under = pod("be-under-p95", requests=be, labels=labels, priority_class="koord-batch")
        create(cluster, under)
        first = cluster.wait_for("the first BE pod bound", lambda: bound(cluster, "be-under-p95"))
        assert first["spec"]["nodeName"] == OTHER

        set_p95(cluster, 40)  # 40 + 1.7 + 1.7 of 64 cores: 68 %
        cluster.wait_for("OTHER's p95 at 40 cores", lambda: reported_p95(cluster) == 40000)
        assert milli_value(metric_of(cluster, OTHER)["cpu"]) == 50  # the latest: idle
        over = pod("be-over-p95", requests=be, labels=labels, priority_class="koord-batch")
        create(cluster, over)
        condition = cluster.wait_for(
            "the second BE pod unschedulable", lambda: unschedulable(cluster, "be-over-p95")
        )
        assert "node(s) cpu aggregated usage exceed threshold" in condition["message"], condition
        assert "nodeName" not in get(cluster, "be-over-p95")["spec"]
    finally:
        set_thresholds(cluster, None)
        set_p95(cluster, None)
        delete(cluster, "be-under-p95", "be-over-p95")


def reported_pods(cluster: Cluster) -> list[dict[str, Any]]:
    return list(cluster.get(f"{NODE_METRIC}/{OTHER}")["status"].get("podsMetric") or [])


def test_load_aware_judges_a_prod_pod_on_the_prod_pods_usage(
    cluster: Cluster, other: OtherNode
) -> None:
    """Koordinator's prodUsageThresholds, set for OTHER by its usage-thresholds annotation
    (cpu: 65 % of the node's usage, 45 % of its prod pods' usage): with OTHER at 75 %, a
    non-prod pod is kept off, while a koord-prod pod is judged on what podsMetric reports for
    the prod pods there (plus the prod estimates not in it yet), and placed until that is over."""
    prod = {"cpu": "2", "memory": "1Gi"}  # 2 cpus: only OTHER (64 cores) has room for them
    labels = {keys.LABEL_QOS_CLASS: "LS"}

    def prod_pod(name: str) -> dict[str, Any]:
        return pod(name, requests=prod, labels=labels, priority_class="koord-prod")

    def prod_using(cores: int) -> list[dict[str, Any]]:
        usage = {"resources": {"cpu": str(cores), "memory": "1Gi"}}
        return [{"namespace": NAMESPACE_UNDER_TEST, "name": "prod-running", "podUsage": usage,
                 "priority": "koord-prod", "qos": "LS"}]  # fmt: skip

    def reported(cores: int) -> bool:
        found = reported_pods(cluster)
        busy = milli_value(metric_of(cluster, OTHER)["cpu"]) == 48000
        return busy and [milli_value(p["podUsage"]["resources"]["cpu"]) for p in found] == [
            cores * 1000
        ]

    try:
        create(cluster, prod_pod("prod-running"))
        running = cluster.wait_for(
            "the first prod pod bound", lambda: bound(cluster, "prod-running")
        )
        assert running["spec"]["nodeName"] == OTHER
        other.usage, other.pods_metric = (48000, 200 * 2**20), prod_using(20)
        set_thresholds(
            cluster, {"usageThresholds": {"cpu": 65}, "prodUsageThresholds": {"cpu": 45}}
        )
        cluster.wait_for(f"{OTHER} at 48 cores, 20 of them prod", lambda: reported(20), 60)

        # a BestEffort pod (koord-batch by its QoS): judged on the node's 75 %
        create(cluster, pod("not-prod", requests={}, node=OTHER))
        condition = cluster.wait_for(
            "the non-prod pod unschedulable", lambda: unschedulable(cluster, "not-prod")
        )
        assert "node(s) cpu usage exceed threshold" in condition["message"], condition
        # prod: 20 + 2 x 0.85 of 64 cores is 34 %, under 45 %, whatever the node's usage
        create(cluster, prod_pod("prod-fits"))
        fits = cluster.wait_for("the prod pod bound", lambda: bound(cluster, "prod-fits"))
        assert fits["spec"]["nodeName"] == OTHER

        # prod at 30 cores: 30 + prod-fits' estimate (not in podsMetric) + 1.7 = 52 % > 45 %
        other.pods_metric = prod_using(30)
        cluster.wait_for(f"{OTHER}'s prod pods at 30 cores", lambda: reported(30), 60)
        create(cluster, prod_pod("prod-over"))
        condition = cluster.wait_for(
            "the prod pod over the prod threshold unschedulable",
            lambda: unschedulable(cluster, "prod-over"),
        )
        assert "node(s) cpu usage exceed threshold" in condition["message"], condition
        assert "nodeName" not in get(cluster, "prod-over")["spec"]
    finally:
        other.usage, other.pods_metric = (50, 200 * 2**20), []
        set_thresholds(cluster, None)
        delete(cluster, "prod-running", "not-prod", "prod-fits", "prod-over")


def container_cgroup(found: dict[str, Any], controller: str) -> str:
    uid, cid = found["metadata"]["uid"], workload.container_id(found)
    # requests = limits: a Guaranteed pod, straight under kubepods
    return f"/sys/fs/cgroup/{controller}/{CGROUP_ROOT}/kubepods/pod{uid}/{cid}"


def test_an_lsr_pod_gets_its_cpus_at_bind_and_koordlet_pins_them(
    cluster: Cluster, other: OtherNode
) -> None:
    lsr = pod(
        "pinned",
        requests={"cpu": "1", "memory": "48Mi"},
        labels={keys.LABEL_QOS_CLASS: "LSR"},
        node=NODE_NAME,
        priority_class="koord-prod",
    )
    create(cluster, lsr)
    try:
        found = cluster.wait_for(
            "the LSR pod running",
            lambda: workload.running_pod(cluster, NAMESPACE_UNDER_TEST, "pinned"),
            timeout=120,
        )
        status = json.loads(found["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_STATUS])
        cpuset = status["cpuset"]
        assert cpuset in ("0", "1"), status  # one whole CPU of the node's two
        assert bound_by_extender(cluster, found, NODE_NAME)
        path = container_cgroup(found, "cpuset") + "/cpuset.cpus"
        pinned = cluster.wait_for(
            "koordlet's cpuset on the container",
            lambda: (v := Path(path).read_text().strip()) == cpuset and v,
            timeout=60,
        )
        assert pinned == cpuset
    finally:
        delete(cluster, "pinned")


def test_gpu_pods_get_packed_healthy_cards_and_the_rest_wait(
    cluster: Cluster, other: OtherNode
) -> None:
    uid = cluster.get(f"/api/v1/nodes/{OTHER}")["metadata"]["uid"]
    # NUMA node 0: minors 0 and 3 under one PCIe root; NUMA node 1: minors 1 and 2 under
    # another (2 unhealthy), minor 4 under a third.
    gpus = [
        GPUInfo("GPU-7a1", 0, 23 * GI, "0000:3b:00.0", 0, "pci0000:3a", "NVIDIA A10"),
        GPUInfo("GPU-7a2", 1, 23 * GI, "0000:af:00.0", 1, "pci0000:ae", "NVIDIA A10"),
        GPUInfo("GPU-7a3", 2, 23 * GI, "0000:b0:00.0", 1, "pci0000:ae", "NVIDIA A10",
                healthy=False, reason="Xid79"),
        GPUInfo("GPU-7a4", 3, 23 * GI, "0000:3c:00.0", 0, "pci0000:3a", "NVIDIA A10"),
        GPUInfo("GPU-7a5", 4, 23 * GI, "0000:d8:00.0", 1, "pci0000:d7", "NVIDIA A10"),
    ]  # fmt: skip
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    device = carry_transition_times({}, build_device(OTHER, uid, gpus, []), now)
    cluster.api("POST", DEVICES, device)  # as koordlet reports it
    names = ["gpu-pair", "gpu-a", "gpu-b", "gpu-c"]
    try:
        node = cluster.wait_for(
            "koord-manager's GPU resources on the node",
            lambda: (
                (n := cluster.get(f"/api/v1/nodes/{OTHER}"))["status"]["allocatable"].get(
                    keys.GPU_CORE
                )
                and n
            ),
            timeout=60,
        )
        # four healthy cards: 400 % of gpu-core; the unhealthy one is not offered
        assert node["status"]["allocatable"][keys.GPU_CORE] == "400"
        # Two cards: the deepest scope that has two free is the PCIe root of minors 0 and 3.
        create(cluster, pod("gpu-pair", requests={"koordinator.sh/gpu": "200"}, node=OTHER))
        pair = cluster.wait_for("the pair bound", lambda: bound(cluster, "gpu-pair"))
        cards = json.loads(pair["metadata"]["annotations"][keys.ANNOTATION_DEVICE_ALLOCATED])
        assert sorted(card["minor"] for card in cards["gpu"]) == [0, 3]
        singles = names[1:]
        for name in singles:
            create(cluster, pod(name, requests={"koordinator.sh/gpu": "100"}, node=OTHER))

        def placed() -> tuple[list[dict[str, Any]], str] | None:
            found = [get(cluster, n) for n in singles]
            bound_pods = [p for p in found if p["spec"].get("nodeName")]
            waiting = [p["metadata"]["name"] for p in found if not p["spec"].get("nodeName")]
            if len(bound_pods) == 2 and len(waiting) == 1 and unschedulable(cluster, waiting[0]):
                return bound_pods, waiting[0]
            return None

        bound_pods, waiting = cluster.wait_for("two GPU pods bound, one waiting", placed, 90)
        minors = []
        for found in bound_pods:
            assert found["spec"]["nodeName"] == OTHER
            annotations = found["metadata"]["annotations"]
            (card,) = json.loads(annotations[keys.ANNOTATION_DEVICE_ALLOCATED])["gpu"]
            minors.append(card["minor"])
            assert card["resources"][keys.GPU_CORE] == "100"
        # each one of the healthy cards the pair does not hold; never the unhealthy minor 2
        assert sorted(minors) == [1, 4]
        condition = unschedulable(cluster, waiting)
        assert condition is not None and condition["reason"] == "Unschedulable", condition
    finally:
        delete(cluster, *names)
        cluster.api("DELETE", f"{DEVICES}/{OTHER}")


def test_with_the_extender_down_pods_wait_as_ignorable_false_promises(
    cluster: Cluster, other: OtherNode
) -> None:
    deployment = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/koord-scheduler"
    replicas = cluster.get(deployment)["spec"]["replicas"]
    scale, patch = f"{deployment}/scale", "application/merge-patch+json"
    selector = "app.kubernetes.io/component%3Dscheduler"

    def scheduler_pods() -> list[Any]:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={selector}"
        return list(cluster.get(path)["items"])

    cluster.api("PATCH", scale, {"spec": {"replicas": 0}}, content_type=patch)
    try:
        cluster.wait_for("no koord-scheduler pod left", lambda: not scheduler_pods(), 120)
        create(cluster, pod("waits", requests={"cpu": "20m", "memory": "16Mi"}))
        condition = cluster.wait_for(
            "the pod's failed scheduling attempt", lambda: unschedulable(cluster, "waits"), 60
        )
        # kube-scheduler's call to the extender's filter failed: no answer
        assert "koord-scheduler-service" in condition["message"], condition
        assert "/filter" in condition["message"], condition
        assert "nodeName" not in get(cluster, "waits")["spec"]
    finally:
        cluster.api("PATCH", scale, {"spec": {"replicas": replicas}}, content_type=patch)
    try:
        # Back: the pod leaves kube-scheduler's queue and is placed through the extender.
        placed = cluster.wait_for("the pod bound", lambda: bound(cluster, "waits"), 240)
        node = placed["spec"]["nodeName"]
        cluster.wait_for("the extender's bind", lambda: bound_by_extender(cluster, placed, node))
    finally:
        delete(cluster, "waits")
