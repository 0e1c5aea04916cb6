"""Gang scheduling on the real cluster, with real Jobs from the controller-manager: koord-manager's
webhook gates every member, its gang controller lets a gang go only when all of it fits (then
kube-scheduler and the extender place each member), a waiting member says why in a
FailedScheduling Event, and a PodGroup's status follows its members.

Control-plane behaviour only (nothing here depends on the node's containerd): it runs in the
containerd 1.7 tier; the 2.1 tier runs test_quota's reclaim instead (the two tiers' budgets).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from koordapi.quantity import milli_value
from tests.cluster import product
from tests.cluster.cluster import Cluster
from tests.e2e.harness import images

pytestmark = pytest.mark.cluster_tier("1.7")  # control plane only: run once

NS = "gang-test"
PODS = f"/api/v1/namespaces/{NS}/pods"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODGROUPS = f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NS}/podgroups"
GATE = "scheduling.koordinator.sh/gang"


def container(cpu: int) -> dict[str, Any]:
    requests = {"cpu": f"{cpu}m", "memory": "16Mi"}
    return {
        "name": "c",
        "image": images.WORKLOAD.ref,
        "imagePullPolicy": "Never",
        "command": ["sleep", "3600"],
        "resources": {"requests": requests, "limits": requests},
    }


def job(name: str, members: int, cpu: int, meta: dict[str, Any]) -> dict[str, Any]:
    """A Job of ``members`` pods started together, each asking ``cpu`` milli-cores."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parallelism": members,
            "completions": members,
            "backoffLimit": 0,
            "template": {
                "metadata": meta,
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [container(cpu)],
                },
            },
        },
    }


def gang_annotations(name: str, minimum: int) -> dict[str, Any]:
    return {
        "annotations": {
            "gang.scheduling.koordinator.sh/name": name,
            "gang.scheduling.koordinator.sh/min-available": str(minimum),
        }
    }


def members(cluster: Cluster, job_name: str) -> list[dict[str, Any]]:
    found = cluster.get(f"{PODS}?labelSelector=job-name={job_name}")["items"]
    return [p for p in found if "deletionTimestamp" not in p["metadata"]]


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def all_created(cluster: Cluster, job_name: str, count: int) -> list[dict[str, Any]] | None:
    pods = members(cluster, job_name)
    return pods if len(pods) == count else None


def all_bound(cluster: Cluster, job_name: str, count: int) -> list[dict[str, Any]] | None:
    pods = members(cluster, job_name)
    return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else None


def told(cluster: Cluster, pod: str, text: str) -> str | None:
    """The message of koord-manager's FailedScheduling Event on ``pod`` holding ``text``."""
    events = cluster.kubectl_json(
        "get", "events", "-n", NS, f"--field-selector=involvedObject.name={pod}"
    )["items"]
    for event in events:
        source = event.get("reportingComponent") or (event.get("source") or {}).get("component")
        manager = event["reason"] == "FailedScheduling" and source == "koord-manager"
        if manager and text in event["message"]:
            return str(event["message"])
    return None


def free_cpu(cluster: Cluster) -> int:
    """The node's allocatable cpu less what the pods bound to it ask (milli-cores), once no
    pod is on its way out."""
    cluster.wait_for("no pod terminating", lambda: product.nothing_terminating(cluster), 120)
    (node,) = cluster.get("/api/v1/nodes")["items"]
    used = 0
    for pod in cluster.get("/api/v1/pods")["items"]:
        if pod["spec"].get("nodeName") != node["metadata"]["name"]:
            continue
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"]["containers"]:
            used += milli_value((c.get("resources", {}).get("requests") or {}).get("cpu", "0"))
    return milli_value(node["status"]["allocatable"]["cpu"]) - used


@pytest.fixture(scope="module")
def namespace(cluster: Cluster) -> Any:
    cluster.wait_for(
        "every koord-manager replica serving", lambda: product.serving_managers(cluster)
    )
    cluster.apply(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}")
    yield NS
    # the Jobs and their pods first (an Event about a pod of a namespace being deleted is
    # refused: test_audit counts every refusal), then the namespace, waited for: the next
    # tests size their pods by the node's free room
    cluster.kubectl(
        "delete", "jobs", "--all", "-n", NS, "--cascade=foreground", "--timeout=120s",
        check=False,
    )  # fmt: skip
    cluster.kubectl("delete", "namespace", NS, "--timeout=120s")


def test_a_strict_gang_of_four_on_room_for_three_runs_none_until_room_is_made(
    cluster: Cluster, namespace: str
) -> None:
    free = free_cpu(cluster)
    size = min(free // 6, 170) // 10 * 10
    assert size >= 50, f"only {free}m free on the node"
    # the filler leaves room for three and a half members
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler", "namespace": NS},
        "spec": {
            "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [container(free - size * 7 // 2)],
        },
    }
    cluster.api("POST", PODS, filler)
    cluster.wait_for(
        "the filler bound", lambda: cluster.get(f"{PODS}/filler")["spec"].get("nodeName"), 90
    )

    cluster.api("POST", JOBS, job("train", 4, size, gang_annotations("train", 4)))
    pods = cluster.wait_for("the Job's four members", lambda: all_created(cluster, "train", 4), 60)
    assert all(gated(p) for p in pods), [p["spec"].get("schedulingGates") for p in pods]
    # the controller's pass that posted this decided to hold the gang: nothing of it is bound
    message = cluster.wait_for(
        "the gang's reason on a member",
        lambda: told(
            cluster, pods[0]["metadata"]["name"], 'GangGroup "gang-test/train" gets rejected'
        ),
        60,
    )
    assert "Insufficient cpu" in message and "alreadyWaitForBound: 3" in message, message
    assert not any(p["spec"].get("nodeName") for p in members(cluster, "train"))
    # what a user runs to ask why: koordctl, with the cluster's kubeconfig
    name = pods[0]["metadata"]["name"]
    why = subprocess.run(
        ["nsenter", f"--net={cluster.netns_path}", str(Path(sys.executable).parent / "koordctl"),
         "quota", "why", f"{NS}/{name}", f"--kubeconfig={cluster.admin_kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert why.returncode == 0, why.stderr
    assert f"scheduling gate {GATE}: " in why.stdout, why.stdout
    assert why.stdout.rstrip().endswith(f"waiting because: {message}"), why.stdout

    cluster.api("DELETE", f"{PODS}/filler")
    cluster.wait_for("all four members bound", lambda: all_bound(cluster, "train", 4), 120)
    # gone before the next test sizes its gangs by the free room (foreground: the Job goes
    # after its pods)
    cluster.kubectl("delete", "job", "train", "-n", NS, "--cascade=foreground", "--timeout=120s")


def test_of_two_gangs_that_fit_alone_but_not_together_one_runs_and_the_other_waits_whole(
    cluster: Cluster, namespace: str
) -> None:
    free = free_cpu(cluster)
    # three members each: 3 x 0.3 free fit, and so do 3 x 0.28 free; both (1.74 free) do not
    first, second = free * 3 // 10, free * 28 // 100
    cluster.api("POST", JOBS, job("alpha", 3, first, gang_annotations("alpha", 3)))
    cluster.wait_for("gang alpha bound", lambda: all_bound(cluster, "alpha", 3), 120)

    podgroup = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "beta", "namespace": NS},
        "spec": {"minMember": 3},
    }
    cluster.api("POST", PODGROUPS, podgroup)
    meta = {"labels": {"pod-group.scheduling.sigs.k8s.io": "beta"}}
    cluster.api("POST", JOBS, job("beta", 3, second, meta))
    pods = cluster.wait_for("gang beta's members", lambda: all_created(cluster, "beta", 3), 60)
    cluster.wait_for(
        "gang beta's reason",
        lambda: told(
            cluster, pods[-1]["metadata"]["name"], 'GangGroup "gang-test/beta" gets rejected'
        ),
        60,
    )
    beta = members(cluster, "beta")
    assert all(gated(p) and not p["spec"].get("nodeName") for p in beta)  # whole, none placed
    status = cluster.get(f"{PODGROUPS}/beta").get("status", {})
    assert status.get("phase") == "Scheduling" and status.get("scheduled") == 0, status

    cluster.kubectl("delete", "job", "alpha", "-n", NS, "--cascade=foreground", "--wait=false")
    cluster.wait_for(
        "gang beta bound once alpha is gone", lambda: all_bound(cluster, "beta", 3), 150
    )

    def settled() -> dict[str, Any] | None:
        found = cluster.get(f"{PODGROUPS}/beta").get("status", {})
        return found if found.get("phase") in ("Scheduled", "Running") else None

    status = cluster.wait_for("PodGroup beta Scheduled or Running", settled, 60)
    assert status["scheduled"] == 3, status
