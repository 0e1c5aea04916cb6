"""koordlet's peak prediction on the real node: a prod service that peaks every 30 s, its
prodReclaimable in the NodeMetric following the peaks, and koord-manager's mid-cpu on the Node
never promising what the peaks take back.

The service requests most of what is left of the node's cpu and runs one busy thread for 12 s
of every 30 s once the test says so (a file in a hostPath folder), so the same pod is first idle,
then peaky; a BE pod computes beside it all along. The tier runs koordlet with a short training
interval and cold start (product.VALUES); everything else is Koordinator's defaults (p95 of cpu,
a 10 % safety margin)."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import pytest

from koordapi.quantity import parse_quantity
from tests.cluster import product
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.workload import BATCH_NAMESPACE, CGROUP, PROFILE, running_pod
from tests.e2e.harness import images

pytestmark = pytest.mark.cluster_tier("2.1")  # one tier is enough: koordlet and manager alike

NAMESPACE = "default"
NAME = "peaks"
NODE_METRIC = f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE_NAME}"
MID_CPU = "kubernetes.io/mid-cpu"
MOST_REQUEST = 1650  # milli-cores, at most: well above what one busy thread takes
PEAK, PERIOD = 12, 30  # seconds busy, of every PERIOD
BE_WORKER = f"""
apiVersion: v1
kind: Pod
metadata: {{name: be-worker, namespace: {BATCH_NAMESPACE}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: worker
      image: {images.WORKLOAD.ref}
      imagePullPolicy: Never
      command: ["sh", "-c", "while :; do :; done"]
      resources: {{requests: {{cpu: 150m, memory: 32Mi}}, limits: {{cpu: 400m, memory: 64Mi}}}}
"""


def free_cpu(cluster: Cluster) -> int:
    """The node's allocatable cpu less what its pods request, in milli-cores."""
    node = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    free = int(parse_quantity(node["status"]["allocatable"]["cpu"]) * 1000)
    pods = cluster.get(f"/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE_NAME}")["items"]
    for pod in pods:
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in pod["spec"]["containers"]:
            request = container.get("resources", {}).get("requests", {}).get("cpu")
            free -= int(parse_quantity(request) * 1000) if request else 0
    return free


def service(trigger: Path, request: int) -> str:
    script = (
        "while [ ! -e /trigger/go ]; do sleep 1; done;"
        f" while :; do timeout {PEAK} sh -c 'while :; do :; done'; sleep {PERIOD - PEAK}; done"
    )
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {NAME}, namespace: {NAMESPACE}, labels: {{koordinator.sh/qosClass: LS}}}}
spec:
  schedulerName: koord-scheduler
  containers:
    - name: {NAME}
      image: {images.WORKLOAD.ref}
      imagePullPolicy: Never
      command: ["sh", "-c", {json.dumps(script)}]
      resources: {{requests: {{cpu: {request}m, memory: 32Mi}}}}
      volumeMounts: [{{name: trigger, mountPath: /trigger}}]
  volumes: [{{name: trigger, hostPath: {{path: {trigger}, type: Directory}}}}]
"""


def reported(cluster: Cluster, after: float) -> tuple[float, int] | None:
    """(updateTime, prodReclaimable cpu in milli-cores) of a NodeMetric report made after
    ``after`` (seconds since the epoch) that carries one."""
    status = cluster.get(NODE_METRIC).get("status", {})
    reclaimable = status.get("prodReclaimableMetric", {}).get("resource", {}).get("resources")
    if not reclaimable or "updateTime" not in status:
        return None
    updated = datetime.datetime.fromisoformat(status["updateTime"].replace("Z", "+00:00"))
    if updated.timestamp() <= after:
        return None
    return updated.timestamp(), int(parse_quantity(reclaimable.get("cpu", "0")) * 1000)


class Usage:
    """The pod's cpu usage, read from its cgroup (v1 cpuacct) by the test itself: the largest
    rate over any 2 s since the peaks began."""

    def __init__(self, pod: dict[str, Any]) -> None:
        cgroup = f"{CGROUP_ROOT}/kubepods/burstable/pod{pod['metadata']['uid']}"
        self.file = CGROUP / "cpuacct" / cgroup / "cpuacct.usage"
        self.last: tuple[float, int] | None = None
        self.peak = 0.0

    def sample(self) -> None:
        now, used = time.monotonic(), int(self.file.read_text())
        if self.last is not None and now - self.last[0] >= 2:
            rate = (used - self.last[1]) / 1e9 / (now - self.last[0])
            self.peak = max(self.peak, rate)
            self.last = (now, used)
        elif self.last is None:
            self.last = (now, used)


def mid_cpu(cluster: Cluster) -> int | None:
    node = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    value = node["status"]["allocatable"].get(MID_CPU)
    return None if value is None else int(parse_quantity(value))


def test_prod_reclaimable_follows_the_peaks_and_mid_cpu_never_promises_them(
    cluster: Cluster,
) -> None:
    trigger = cluster.base / "peaks-trigger"
    trigger.mkdir(exist_ok=True)
    (trigger / "go").unlink(missing_ok=True)
    cluster.apply(PROFILE)
    cluster.apply(BE_WORKER)
    request = min(MOST_REQUEST, free_cpu(cluster) - 50)
    # the node-wide predictor (prod requests - (system p95 + prod p95) x 1.1) has room to show
    # the peaks only when the service's request is well above one busy thread
    assert request >= 1300, f"only {request}m of cpu left on the node for the service"
    cluster.apply(service(trigger, request))
    try:
        pod = cluster.wait_for(
            "the peaky service running", lambda: running_pod(cluster, NAMESPACE, NAME), 120
        )
        cluster.wait_for(
            "the BE worker running", lambda: running_pod(cluster, BATCH_NAMESPACE, "be-worker"), 120
        )
        # idle: a report trained on it past its cold start
        settled = time.time() + product.PREDICTION_COLD_START + 2 * product.PREDICTION_TRAINING
        _, before = cluster.wait_for(
            "a NodeMetric report with prodReclaimable while the service is idle",
            lambda: reported(cluster, settled),
            product.REPORT_INTERVAL * 3 + 30,
        )

        usage = Usage(pod)
        (trigger / "go").touch()
        peaks_begun = time.time()

        def after_two_peaks() -> tuple[float, int] | None:
            usage.sample()
            return reported(cluster, peaks_begun + PERIOD + PEAK + 3)

        _, after = cluster.wait_for(
            "a NodeMetric report after two peaks", after_two_peaks, 2 * PERIOD + 120
        )
        peak = int(usage.peak * 1000)
        print(f"prodReclaimable cpu idle {before}m, peaky {after}m; observed peak {peak}m")
        assert peak > 500, f"the busy thread never ran: peak {peak}m"
        # What the peaks take back is not reclaimable (Koordinator: request - p95 x 1.1, and the
        # node-wide priority predictor's min); an average would have left request - ~0.4 x peak.
        assert after <= request - 0.9 * peak, (after, request, peak)
        assert before - after >= peak // 3, (before, after, peak)

        # koord-manager's mid-cpu: min(prodReclaimable, node unused) + 0 % of unallocated,
        # re-written once the NodeMetric changed by more than resourceDiffThreshold.
        def mid_at_most_after() -> tuple[int] | None:
            found = mid_cpu(cluster)
            return (found,) if found is not None and found <= after else None

        (mid,) = cluster.wait_for(
            f"mid-cpu on the Node at most the peaky prodReclaimable {after}m",
            mid_at_most_after,
            120,
        )
        assert mid <= request - 0.9 * peak, (mid, request, peak)
    finally:
        cluster.kubectl("delete", "pod", "-n", NAMESPACE, NAME, "--wait=false", check=False)
        cluster.kubectl("delete", "pod", "-n", BATCH_NAMESPACE, "be-worker", "--wait=false")
        (trigger / "go").unlink(missing_ok=True)
