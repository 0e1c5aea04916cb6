"""The co-located workload the cluster tier and ``make cluster`` run: an LS web Deployment and
a batch Job turned BE by a ClusterColocationProfile (Koordinator's own example's shape: the
profile sets the QoS class, the koord-batch priority and schedulerName koord-scheduler, and
koord-manager's webhook moves the Job's cpu and memory into batch-cpu and batch-memory), and
what the tests and ``make cluster`` ask the cluster about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE
from tests.e2e.harness import images

CGROUP = Path("/sys/fs/cgroup")
BATCH_CPU, BATCH_MEMORY = "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"
BATCH_NAMESPACE = "batch-jobs"
JOB = "crunch"
WEB = "web"

PROFILE = f"""
apiVersion: v1
kind: Namespace
metadata:
  name: {BATCH_NAMESPACE}
  labels: {{koordinator.sh/enable-colocation: "true"}}
---
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata: {{name: batch-jobs}}
spec:
  namespaceSelector: {{matchLabels: {{koordinator.sh/enable-colocation: "true"}}}}
  qosClass: BE
  priorityClassName: koord-batch
  schedulerName: koord-scheduler
"""

# 150m/1300m and 192Mi/448Mi: BE values koordlet sets from them are unlike anything the
# kubelet would give a BestEffort pod (shares 2, no quota, no memory limit). The request is
# small: batch-cpu on a busy 2-core node, where the whole cluster counts as system usage, can
# be a few hundred milli-CPUs.
BATCH_CPU_REQUEST, BATCH_CPU_LIMIT = 150, 1300  # milli
BATCH_MEMORY_REQUEST, BATCH_MEMORY_LIMIT = 192 * 2**20, 448 * 2**20

# The workload's containers run sleep as PID 1, which ignores SIGTERM: a removal would wait out
# the default 30 s grace period.
GRACE = 1

BATCH_JOB = f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: {JOB}, namespace: {BATCH_NAMESPACE}}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: {GRACE}
      containers:
        - name: {JOB}
          image: {images.WORKLOAD.ref}
          imagePullPolicy: Never
          command: ["sleep", "3600"]
          resources:
            requests: {{cpu: {BATCH_CPU_REQUEST}m, memory: {BATCH_MEMORY_REQUEST // 2**20}Mi}}
            limits: {{cpu: {BATCH_CPU_LIMIT}m, memory: {BATCH_MEMORY_LIMIT // 2**20}Mi}}
"""

LS_DEPLOYMENT = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {WEB}, namespace: default}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {WEB}}}}}
  template:
    metadata: {{labels: {{app: {WEB}, koordinator.sh/qosClass: LS}}}}
    spec:
      terminationGracePeriodSeconds: {GRACE}
      containers:
        - name: {WEB}
          image: {images.WORKLOAD.ref}
          imagePullPolicy: Never
          command: ["sleep", "3600"]
          resources:
            requests: {{cpu: 300m, memory: 48Mi}}
            limits: {{cpu: 600m, memory: 48Mi}}
"""


def job_pod(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Job's pod among ``items`` (a pod list of the batch namespace), if there is one."""
    found = [p for p in items if p["metadata"].get("labels", {}).get("job-name") == JOB]
    return found[0] if found else None


def container_id(pod: dict[str, Any]) -> str | None:
    """The running container's id (containerd://<id> in the pod's status), else None."""
    for status in pod.get("status", {}).get("containerStatuses", []):
        if "running" in status.get("state", {}) and status.get("containerID"):
            return str(status["containerID"]).partition("://")[2]
    return None


def be_pod(name: str) -> str:
    """A bare pod in the batch namespace, the Job's resources: the profile makes it BE."""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {BATCH_NAMESPACE}}}
spec:
  containers:
    - name: {name}
      image: {images.WORKLOAD.ref}
      imagePullPolicy: Never
      command: ["sleep", "3600"]
      resources:
        requests: {{cpu: {BATCH_CPU_REQUEST}m, memory: {BATCH_MEMORY_REQUEST // 2**20}Mi}}
        limits: {{cpu: {BATCH_CPU_LIMIT}m, memory: {BATCH_MEMORY_LIMIT // 2**20}Mi}}
"""


def start_be_pod(cluster: Cluster, name: str) -> dict[str, Any]:
    """Create ``be_pod(name)`` (with the profile that makes it BE) and return it running."""
    cluster.apply(PROFILE)
    cluster.apply(be_pod(name))
    return cluster.wait_for(
        f"BE pod {name} running", lambda: running_pod(cluster, BATCH_NAMESPACE, name), 120
    )


def delete_be_pod(cluster: Cluster, name: str) -> None:
    cluster.kubectl("delete", "pod", "-n", BATCH_NAMESPACE, name, "--wait=false")


def running_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    pod: dict[str, Any] = cluster.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    return pod if container_id(pod) else None


def be_cgroup_values(pod: dict[str, Any]) -> tuple[int, int, int, int]:
    """cpu.shares, cpu.cfs_quota_us, cpu.cfs_period_us and memory.limit_in_bytes of a BE pod's
    running container (cgroup v1, the kubelet's cgroupfs layout under its cgroup root)."""
    uid, cid = pod["metadata"]["uid"], container_id(pod)
    container = f"{CGROUP_ROOT}/kubepods/besteffort/pod{uid}/{cid}"
    cpu, memory = CGROUP / "cpu" / container, CGROUP / "memory" / container
    return (
        int((cpu / "cpu.shares").read_text()),
        int((cpu / "cpu.cfs_quota_us").read_text()),
        int((cpu / "cpu.cfs_period_us").read_text()),
        int((memory / "memory.limit_in_bytes").read_text()),
    )


# What koordlet's hooks (over NRI) give the batch resources above; the kubelet alone would give
# a BestEffort pod cpu.shares 2, no quota and no memory limit. 150m → 150 x 1024 / 1000 shares;
# 1300m → 1.3 periods of quota; 448Mi.
BE_VALUES = (153, 130000, 100000, 448 * 2**20)


def batch_node(cluster: Cluster) -> dict[str, Any] | None:
    """The Node, once koord-manager has published batch-cpu and batch-memory on it."""
    node: dict[str, Any] = cluster.get(f"/api/v1/nodes/{NODE_NAME}")
    allocatable = node["status"]["allocatable"]
    return node if allocatable.get(BATCH_CPU) and allocatable.get(BATCH_MEMORY) else None


def running_job_pod(cluster: Cluster) -> dict[str, Any] | None:
    """The batch Job's pod once its container runs."""
    pod = job_pod(cluster.get(f"/api/v1/namespaces/{BATCH_NAMESPACE}/pods")["items"])
    return pod if pod and container_id(pod) else None


def reporter(event: dict[str, Any]) -> str:
    """Who reported an Event (events.k8s.io's reportingController, core's source)."""
    return str(event.get("reportingComponent") or event.get("source", {}).get("component"))


def scheduled_event(cluster: Cluster, pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's Scheduled Event, if there is one yet."""
    events = cluster.kubectl_json("get", "events", "-n", pod["metadata"]["namespace"])["items"]
    for event in events:
        involved = event.get("involvedObject", {})
        if event.get("reason") == "Scheduled" and involved.get("uid") == pod["metadata"]["uid"]:
            return dict(event)
    return None


def bind_lines(cluster: Cluster, pod: dict[str, Any]) -> list[str]:
    """koord-scheduler's "extender bind" audit lines about ``pod`` (every replica's log)."""
    target = f"target={pod['metadata']['namespace']}/{pod['metadata']['name']} "
    logs = cluster.kubectl(
        "logs", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=scheduler",
        "--tail=-1", "--prefix=false", check=False,
    )  # fmt: skip
    return [line for line in logs.splitlines() if "extender bind" in line and target in line]


def run_colocated_workload(cluster: Cluster) -> dict[str, Any]:
    """Start the co-located workload (profile, LS Deployment, batch Job) once the Node has
    batch resources; the Job's pod, running."""
    cluster.wait_for("batch resources on the Node", lambda: batch_node(cluster), 180)
    for manifest in (PROFILE, LS_DEPLOYMENT, BATCH_JOB):
        cluster.apply(manifest)
    return cluster.wait_for("the batch Job's pod running", lambda: running_job_pod(cluster), 180)


def assert_colocated(cluster: Cluster, pod: dict[str, Any]) -> None:
    """What the whole chain gave the batch Job's running pod: koord-manager's webhook applied
    the profile, the chart's kube-scheduler placed it through the extender, which bound it,
    and koordlet's hooks (over NRI) gave its container the batch values."""
    spec = pod["spec"]
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    assert spec["priorityClassName"] == "koord-batch"
    assert spec["schedulerName"] == "koord-scheduler"
    resources = spec["containers"][0]["resources"]
    assert resources["requests"][BATCH_CPU] == str(BATCH_CPU_REQUEST)
    assert resources["limits"][BATCH_CPU] == str(BATCH_CPU_LIMIT)
    assert "cpu" not in resources["requests"] and "memory" not in resources["limits"]
    assert pod["status"]["qosClass"] == "BestEffort"

    assert spec["nodeName"] == NODE_NAME
    event = cluster.wait_for("the pod's Scheduled event", lambda: scheduled_event(cluster, pod))
    assert reporter(event) == "koord-scheduler", event
    bound = cluster.wait_for(
        "the extender's bind audit line",
        lambda: [
            line
            for line in bind_lines(cluster, pod)
            if "kind=bound" in line and f"value={NODE_NAME} " in line
        ],
        timeout=30,
    )
    assert len(bound) == 1, bound
    assert be_cgroup_values(pod) == BE_VALUES


def remove_colocated_workload(cluster: Cluster) -> None:
    """Delete the Job and the LS Deployment and wait for their pods to go."""
    for kind, namespace, name in (("job", BATCH_NAMESPACE, JOB), ("deployment", "default", WEB)):
        cluster.kubectl("delete", kind, "-n", namespace, name, "--ignore-not-found", "--wait=false")

    def gone() -> bool:
        batch = cluster.get(f"/api/v1/namespaces/{BATCH_NAMESPACE}/pods")["items"]
        web = cluster.get("/api/v1/namespaces/default/pods?labelSelector=app%3D" + WEB)["items"]
        return job_pod(batch) is None and not web

    cluster.wait_for("the workload's pods gone", gone, timeout=120)
