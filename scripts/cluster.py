"""`make cluster` and `make cluster-down`: the product on a real single-node Kubernetes.

``up`` starts the cluster tier's Kubernetes (tests/cluster/cluster.py: kube-apiserver,
kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS and a kubelet on a private
containerd with NRI, in a network namespace of its own), installs the chart with Helm, runs a
co-located workload (an LS Deployment and a batch Job that a ClusterColocationProfile makes BE),
and prints what happened: the node's batch allocatable and why, where each pod went and who
bound it, the BE container's cgroups, and ``koordctl top`` from koordlet. The cluster stays up:
``.cache/cluster/kubectl`` runs kubectl against it. ``down`` removes everything.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.cluster import helm, kubebuild, workload
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster, ClusterError
from tests.cluster.product import install
from tests.e2e.harness import paths

STATE_DIR = paths.CACHE / "cluster"
STATE = STATE_DIR / "cluster.json"
KUBECTL = STATE_DIR / "kubectl"
BATCH_CPU, BATCH_MEMORY = workload.BATCH_CPU, workload.BATCH_MEMORY
EXPLANATION = "koordinator-py.io/node-resource-explanation"


def say(text: str = "") -> None:
    print(text, flush=True)


def up() -> int:
    if STATE.exists():
        say(f"cluster: one is up already ({STATE}); make cluster-down first")
        return 1
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    cluster = Cluster.start(binary=kubebuild.ensure(say))
    cluster.save(STATE)
    took = time.monotonic() - start
    say(f"cluster: Kubernetes {kubebuild.VERSION} up in {took:.0f} s (node {NODE_NAME}, "
        f"containerd {cluster.containerd_version}, folder {cluster.base})")  # fmt: skip
    KUBECTL.write_text(
        "#!/bin/sh\n# kubectl against `make cluster`'s Kubernetes (its network namespace)\n"
        f"exec nsenter --net={cluster.netns_path} {cluster.binary} kubectl "
        f'--kubeconfig={cluster.admin_kubeconfig} "$@"\n'
    )
    KUBECTL.chmod(0o755)
    start = time.monotonic()
    install(cluster)
    say(f"cluster: chart {helm.CHART.name} installed by Helm in {time.monotonic() - start:.0f} s")
    say(cluster.kubectl("get", "pods", "-n", helm.NAMESPACE, "-o", "wide"))

    node = cluster.wait_for(
        "batch resources on the Node", lambda: workload.batch_node(cluster), timeout=300
    )
    say(f"NODE {NODE_NAME}  allocatable batch-cpu {node['status']['allocatable'][BATCH_CPU]}m "
        f"batch-memory {int(node['status']['allocatable'][BATCH_MEMORY]) >> 20}Mi "
        "(koord-manager, from koordlet's NodeMetric)")  # fmt: skip
    explained = json.loads(node["metadata"]["annotations"].get(EXPLANATION, "{}"))
    for line in explained.get("resources", {}).values():
        say(f"  {line}")
    say()

    job = workload.run_colocated_workload(cluster)
    web = cluster.wait_for("the web pod running", lambda: running_web(cluster), 180)
    say(f"{'POD':34} {'QOS':4} {'SCHEDULER':16} {'NODE':11} PLACED")
    for pod in (web, job):
        meta, spec = pod["metadata"], pod["spec"]
        qos = meta.get("labels", {}).get("koordinator.sh/qosClass", "-")
        say(f"{meta['namespace'] + '/' + meta['name']:34} {qos:4} {spec['schedulerName']:16} "
            f"{spec['nodeName']:11} {scheduled_message(cluster, pod)}")  # fmt: skip
    for line in workload.bind_lines(cluster, job):
        say(f"  koord-scheduler: {line.split(' ', 3)[-1]}")
    say()

    uid, cid = job["metadata"]["uid"], workload.container_id(job)
    container = f"{CGROUP_ROOT}/kubepods/besteffort/pod{uid}/{cid}"
    asked = job["spec"]["containers"][0]["resources"]
    say(f"BE container {workload.JOB}: asked {json.dumps(asked, sort_keys=True)}")
    for name in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "memory.limit_in_bytes"):
        hierarchy = name.split(".")[0]
        value = (Path("/sys/fs/cgroup") / hierarchy / container / name).read_text().strip()
        say(f"  /sys/fs/cgroup/{hierarchy}/{container[:48]}.../{name} = {value}")
    say()
    say(cluster.kubectl("exec", "-n", helm.NAMESPACE, "daemonset/koordlet", "--",
                        "koordctl", "top", "--once", check=False))  # fmt: skip
    say(f"cluster: up; explore it with {KUBECTL.relative_to(paths.REPO_ROOT)} "
        f"(e.g. get pods -A), kubeconfig {cluster.admin_kubeconfig} (inside the network "
        f"namespace {cluster.netns}); make cluster-down removes it")  # fmt: skip
    return 0


def running_web(cluster: Cluster) -> dict[str, Any] | None:
    pods = cluster.get("/api/v1/namespaces/default/pods?labelSelector=app%3Dweb")["items"]
    return next((p for p in pods if workload.container_id(p)), None)


def scheduled_message(cluster: Cluster, pod: dict[str, Any]) -> str:
    event = workload.scheduled_event(cluster, pod)
    if event is None:
        return "(no Scheduled event)"
    return f"{workload.reporter(event)}: {event.get('message', '')}"


def down() -> int:
    if not STATE.exists():
        say("cluster: none is up")
        return 0
    cluster = Cluster.load(STATE)
    problems = cluster.teardown()
    STATE.unlink()
    KUBECTL.unlink(missing_ok=True)
    if problems:
        say(f"cluster: removed, but these were left: {problems}")
        return 1
    say(f"cluster: removed ({cluster.base}, network namespace {cluster.netns}, cgroups "
        f"/{CGROUP_ROOT}, every process it started)")  # fmt: skip
    return 0


def main(argv: list[str]) -> int:
    if argv not in (["up"], ["down"]):
        print("usage: scripts/cluster.py up|down", file=sys.stderr)
        return 2
    try:
        return up() if argv == ["up"] else down()
    except (ClusterError, helm.HelmFailed, kubebuild.BuildError, paths.SetupMissing) as err:
        print(f"cluster: {err}", file=sys.stderr)
        if argv == ["up"] and STATE.exists():
            print("cluster: make cluster-down removes what was started", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
