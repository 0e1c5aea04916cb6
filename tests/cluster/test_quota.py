"""ElasticQuota on the real cluster: the chart's CRD takes Koordinator's quota, and a pod that
would take its quota past the runtime waits in kube-scheduler's queue with Koordinator's reason
(the extender refuses it on every node) until a pod of the quota ends."""

from __future__ import annotations

import json
from typing import Any

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


def waiting_because(cluster: Cluster, name: str) -> str | None:
    """The message of the pod's PodScheduled=False condition, once kube-scheduler gave up."""
    for condition in get(cluster, name)["status"].get("conditions", []):
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


def test_a_pod_over_its_quota_waits_with_koordinators_reason_until_room_is_made(
    cluster: Cluster,
) -> None:
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
