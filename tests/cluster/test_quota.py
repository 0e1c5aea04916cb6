"""ElasticQuota on the real cluster: the chart's CRD takes Koordinator's quota, and a pod that
would take its quota past the runtime waits in kube-scheduler's queue with Koordinator's reason
(the extender refuses it on every node) until a pod of the quota ends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi.quantity import milli_value
from tests.cluster import product
from tests.cluster.cluster import Cluster, ClusterError
from tests.cluster.helm import NAMESPACE
from tests.e2e.harness import images

NAMESPACE_UNDER_TEST = "quota-test"
QUOTA = "team-q"
PODS = f"/api/v1/namespaces/{NAMESPACE_UNDER_TEST}/pods"
QUOTA_PATH = (
    f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NAMESPACE_UNDER_TEST}/elasticquotas/{QUOTA}"
)
RUNTIME = "quota.scheduling.koordinator.sh/runtime"


def quota_pod(name: str, cpu: str) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "16Mi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE_UNDER_TEST,
            "labels": {"quota.scheduling.koordinator.sh/name": QUOTA},
        },
        "spec": {
            "schedulerName": "koord-scheduler",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": images.WORKLOAD.ref,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


def get(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.get(f"{PODS}/{name}"))


def bound(cluster: Cluster, name: str) -> dict[str, Any] | None:
    found = get(cluster, name)
    return found if found["spec"].get("nodeName") else None


def waiting_because(cluster: Cluster, name: str, pods: str = PODS) -> str | None:
    """The message of the pod's PodScheduled=False condition, once kube-scheduler gave up."""
    for condition in dict(cluster.get(f"{pods}/{name}"))["status"].get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return None


def scheduler_saw_quota(cluster: Cluster) -> bool:
    """Every koord-scheduler replica has the quota (kube-scheduler calls one of them)."""
    logs = cluster.kubectl(
        "logs", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=scheduler",
        "--tail=-1", "--prefix=true", check=False,
    )  # fmt: skip
    replicas = {line.split(" ", 1)[0] for line in logs.splitlines() if line.startswith("[")}
    seeing = {
        line.split(" ", 1)[0] for line in logs.splitlines() if f"ElasticQuota {QUOTA}:" in line
    }
    return bool(replicas) and seeing == replicas


@pytest.mark.cluster_tier("1.7")  # control plane only: run once
def test_koord_managers_webhook_refuses_a_quota_whose_min_is_over_its_max(
    cluster: Cluster,
) -> None:
    cluster.wait_for(
        "every koord-manager replica serving", lambda: product.serving_managers(cluster)
    )
    body = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "upside-down", "namespace": "default"},
        "spec": {"min": {"cpu": "430m"}, "max": {"cpu": "310m"}},
    }
    path = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/default/elasticquotas?dryRun=All"
    try:
        cluster.api("POST", path, body)
    except ClusterError as refused:
        text = str(refused)
        message = str(json.loads(text[text.index("{") :])["message"])
    else:
        raise AssertionError("the quota was admitted")
    assert 'admission webhook "velasticquota.koordinator.sh" denied the request' in message
    assert "resourceKey cpu of quota upside-down min 430m > max 310m" in message, message


@pytest.mark.cluster_tier("1.7")  # control plane only: run once
def test_a_pod_over_its_quota_waits_with_koordinators_reason_until_room_is_made(
    cluster: Cluster,
) -> None:
    # room on the node for the quota's pods: nothing of an earlier test still going
    cluster.wait_for("no pod terminating", lambda: product.nothing_terminating(cluster), 120)
    cluster.apply(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE_UNDER_TEST}}}")
    try:
        cluster.apply(f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: {QUOTA}
  namespace: {NAMESPACE_UNDER_TEST}
  annotations:
    quota.scheduling.koordinator.sh/shared-weight: '{{"cpu": "3"}}'
spec:
  min: {{cpu: 70m}}
  max: {{cpu: 310m}}
""")
        cluster.wait_for("koord-scheduler's replicas reading the quota",
                         lambda: scheduler_saw_quota(cluster), 60)  # fmt: skip
        cluster.api("POST", PODS, quota_pod("first", "190m"))
        cluster.wait_for("the first pod of the quota bound", lambda: bound(cluster, "first"), 90)

        # 190m used; asked 190m + 170m = 360m, capped at the max: runtime 310m < 360m
        cluster.api("POST", PODS, quota_pod("second", "170m"))
        message = cluster.wait_for(
            "the second pod refused for its quota", lambda: waiting_because(cluster, "second"), 90
        )
        assert (
            "Insufficient quotas, quotaName: team-q, runtime: cpu:310m, used: cpu:190m, "
            "pod's request: cpu:170m, exceedDimensions: [cpu]"
        ) in message, message
        events = cluster.kubectl_json(
            "get", "events", "-n", NAMESPACE_UNDER_TEST,
            "--field-selector=involvedObject.name=second,reason=FailedScheduling",
        )["items"]  # fmt: skip
        assert any("Insufficient quotas, quotaName: team-q" in e["message"] for e in events)

        # koord-manager's leader writes the same numbers on the quota, in Koordinator's form
        # (before the second pod, the runtime was 190m: all the quota asked)
        def written() -> dict[str, Any] | None:
            found = dict(cluster.get(QUOTA_PATH))
            runtime = found["metadata"].get("annotations", {}).get(RUNTIME)
            return found if runtime and milli_value(json.loads(runtime)["cpu"]) == 310 else None

        found = cluster.wait_for("the quota's runtime of 310m written", written, 60)
        assert milli_value(found["status"]["used"]["cpu"]) == 190, found["status"]

        # the first pod ends: the quota has room, and kube-scheduler's next try places it
        cluster.api("DELETE", f"{PODS}/first")
        cluster.wait_for("the second pod bound", lambda: bound(cluster, "second"), 150)
    finally:
        cluster.kubectl("delete", "namespace", NAMESPACE_UNDER_TEST, "--wait=false")


RECLAIM_NS = "reclaim-test"
RECLAIM_PODS = f"/api/v1/namespaces/{RECLAIM_NS}/pods"


def reclaim_job(name: str, quota: str, members: int, cpu: int, priority: str) -> dict[str, Any]:
    requests = {"cpu": f"{cpu}m", "memory": "16Mi"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": RECLAIM_NS},
        "spec": {
            "parallelism": members,
            "completions": members,
            "backoffLimit": 6,
            "template": {
                "metadata": {"labels": {"quota.scheduling.koordinator.sh/name": quota}},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "priorityClassName": priority,
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "c",
                            "image": images.WORKLOAD.ref,
                            "imagePullPolicy": "Never",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": requests, "limits": requests},
                        }
                    ],
                },
            },
        },
    }


def job_pods(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    found = cluster.get(f"{RECLAIM_PODS}?labelSelector=job-name={name}")["items"]
    return [p for p in found if "deletionTimestamp" not in p["metadata"]]


def get_in(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.get(f"{RECLAIM_PODS}/{name}"))


def bound_names(cluster: Cluster, name: str, count: int) -> list[str] | None:
    pods = job_pods(cluster, name)
    names = sorted(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName"))
    return names if len(names) == count else None


def root_total(cluster: Cluster) -> int:
    """The quota tree's root total: the node's allocatable cpu less what its pods ask (they are
    all in the default quota), milli-cores, once no pod is on its way out."""
    cluster.wait_for("no pod terminating", lambda: product.nothing_terminating(cluster), 120)
    (node,) = cluster.get("/api/v1/nodes")["items"]
    asked = sum(
        milli_value((c.get("resources", {}).get("requests") or {}).get("cpu", "0"))
        for pod in cluster.get("/api/v1/pods")["items"]
        if pod["spec"].get("nodeName") and pod["status"].get("phase") not in ("Succeeded", "Failed")
        for c in pod["spec"]["containers"]
    )
    return milli_value(node["status"]["allocatable"]["cpu"]) - asked


@pytest.mark.cluster_tier("2.1")  # control plane only: run once (the tests above in 1.7)
def test_a_team_borrowing_idle_quota_gives_it_back_when_the_owners_job_arrives(
    cluster: Cluster,
) -> None:
    """Two teams share the node. team-b borrows team-a's idle min; team-a's job arrives, team-b's
    runtime drops below its used, and after delayEvictTime (5 s in the tier's values) koord-manager
    evicts team-b's pods in Koordinator's order: the least important first, so its two
    low-priority pods go although the one high-priority pod alone would have been enough."""
    total = root_total(cluster)
    half, high, low = total // 2, total * 3 // 10, total // 4
    cluster.apply(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {RECLAIM_NS}}}")
    cluster.apply("""
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: reclaim-test-low}
value: 1100
preemptionPolicy: Never
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: reclaim-test-high}
value: 1900
preemptionPolicy: Never
""")
    try:
        # team-a is guaranteed half of the node; team-b 40m; either may borrow up to all of it
        for name, minimum in (("team-a", half), ("team-b", 40)):
            cluster.apply(f"""
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata: {{name: {name}, namespace: {RECLAIM_NS}}}
spec:
  min: {{cpu: {minimum}m}}
  max: {{cpu: {total}m}}
""")
        jobs = f"/apis/batch/v1/namespaces/{RECLAIM_NS}/jobs"
        cluster.api("POST", jobs, reclaim_job("b-high", "team-b", 1, high, "reclaim-test-high"))
        cluster.api("POST", jobs, reclaim_job("b-low", "team-b", 2, low, "reclaim-test-low"))
        kept = cluster.wait_for(
            "team-b's job on borrowed quota", lambda: bound_names(cluster, "b-high", 1), 120
        )
        evicted = cluster.wait_for(
            "team-b's low pods", lambda: bound_names(cluster, "b-low", 2), 120
        )

        # team-b uses 0.8 of the node; team-a asks its min, 0.5: team-b's runtime becomes 0.5
        cluster.api("POST", jobs, reclaim_job("a-main", "team-a", 1, half, "reclaim-test-low"))
        cluster.wait_for(
            "team-a's guaranteed job bound", lambda: bound_names(cluster, "a-main", 1), 120
        )
        assert bound_names(cluster, "b-high", 1) == kept  # the important pod stayed
        gone = {p["metadata"]["name"] for p in job_pods(cluster, "b-low")}
        assert not gone & set(evicted), "the low pods were not the ones evicted"
        # the Job's replacements wait: the node has 0.2 left, team-b's quota too (0.3 of 0.5)
        replacement = cluster.wait_for(
            "a replacement of team-b's waiting",
            lambda: next(
                (
                    p["metadata"]["name"]
                    for p in job_pods(cluster, "b-low")
                    if waiting_because(cluster, p["metadata"]["name"], RECLAIM_PODS)
                ),
                None,
            ),
            90,
        )
        assert not get_in(cluster, replacement)["spec"].get("nodeName")
        events = cluster.kubectl_json(
            "get", "events", "-n", RECLAIM_NS, "--field-selector=reason=QuotaOverUsedRevoke"
        )["items"]
        assert sorted(e["involvedObject"]["name"] for e in events) == evicted
    finally:
        # the Jobs and their pods first: a pending pod kube-scheduler still tries in a namespace
        # being deleted has its events refused (test_audit counts every refusal)
        cluster.kubectl(
            "delete", "jobs", "--all", "-n", RECLAIM_NS, "--cascade=foreground",
            "--timeout=120s", check=False,
        )  # fmt: skip
        cluster.kubectl("delete", "namespace", RECLAIM_NS, "--wait=false")
        cluster.kubectl(
            "delete", "priorityclass", "reclaim-test-low", "reclaim-test-high", check=False
        )
