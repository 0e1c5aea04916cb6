"""koord-manager and koordlet installed by the Helm chart on a kind cluster."""

from __future__ import annotations

import json
import time
from typing import Any

MANIFEST_PROFILE = """
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata: {name: batch-jobs}
spec:
  namespaceSelector: {matchLabels: {koordinator.sh/enable-colocation: "true"}}
  qosClass: BE
  priorityClassName: koord-batch
"""


def kubectl_json(cluster: Any, *args: str) -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json"))


def wait_for(check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(2)
    raise TimeoutError("condition not met")


def test_every_node_gets_a_nodeslo_and_a_nodemetric(kind_cluster: Any) -> None:
    nodes = [n["metadata"]["name"] for n in kubectl_json(kind_cluster, "get", "nodes")["items"]]
    for kind in ("nodeslos", "nodemetrics"):
        names = wait_for(
            lambda kind=kind: (
                {o["metadata"]["name"] for o in kubectl_json(kind_cluster, "get", kind)["items"]}
                >= set(nodes)
            )
        )
        assert names


def test_a_profile_turns_a_pod_into_batch(kind_cluster: Any, tmp_path: Any) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(MANIFEST_PROFILE)
    kind_cluster.kubectl("apply", "-f", str(profile))
    kind_cluster.kubectl("create", "namespace", "jobs")
    kind_cluster.kubectl("label", "namespace", "jobs", "koordinator.sh/enable-colocation=true")
    kind_cluster.kubectl(
        "-n", "jobs", "run", "job", "--image=busybox", "--restart=Never",
        "--overrides", json.dumps({"spec": {"containers": [{"name": "job", "image": "busybox",
            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}),
    )  # fmt: skip
    pod = kubectl_json(kind_cluster, "-n", "jobs", "get", "pod", "job")
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert requests["kubernetes.io/batch-cpu"] == "500"


def test_the_extender_answers_through_its_service(kind_cluster: Any) -> None:
    """koord-scheduler's replicas are ready and its Service answers over HTTPS (what
    kube-scheduler dials once the rendered KubeSchedulerConfiguration is merged)."""
    service = "koord-scheduler-service"
    kind_cluster.kubectl(
        "-n", "koordinator-system", "rollout", "status", "deployment/koord-scheduler",
        "--timeout=180s",
    )  # fmt: skip
    path = f"/api/v1/namespaces/koordinator-system/services/https:{service}:443/proxy/healthz"
    assert wait_for(lambda: kind_cluster.kubectl("get", "--raw", path).strip() == "ok")
    config = kubectl_json(
        kind_cluster, "-n", "koordinator-system", "get", "configmap",
        "koord-scheduler-extender-config",
    )  # fmt: skip
    assert "filterVerb: filter" in config["data"]["kube-scheduler-config.yaml"]


LS_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, koordinator.sh/qosClass: LS}}
    spec:
      containers:
        - name: web
          image: busybox
          command: ["sh", "-c", "while :; do :; done"]
          resources: {requests: {cpu: 500m, memory: 64Mi}, limits: {cpu: "1", memory: 64Mi}}
"""


def test_the_story_batch_resources_appear_be_pods_get_batch_values(
    kind_cluster: Any, tmp_path: Any
) -> None:
    """koordlet reports, the manager publishes batch resources, a BE job admitted through a
    profile runs on them with batch values in its cgroups (read through koordlet's API)."""
    nodes = kubectl_json(kind_cluster, "get", "nodes")["items"]
    name = nodes[0]["metadata"]["name"]

    def batch_cpu() -> Any:
        node = kubectl_json(kind_cluster, "get", "node", name)
        return node["status"]["allocatable"].get("kubernetes.io/batch-cpu")

    assert wait_for(batch_cpu, timeout=300)  # koordlet reported; the manager wrote it
    manifest = tmp_path / "ls.yaml"
    manifest.write_text(LS_DEPLOYMENT)
    kind_cluster.kubectl("apply", "-f", str(manifest))
    profile = tmp_path / "profile.yaml"
    profile.write_text(MANIFEST_PROFILE)
    kind_cluster.kubectl("apply", "-f", str(profile))
    kind_cluster.kubectl("create", "namespace", "story")
    kind_cluster.kubectl("label", "namespace", "story", "koordinator.sh/enable-colocation=true")
    kind_cluster.kubectl(
        "-n", "story", "create", "job", "batch", "--image=busybox", "--", "sh", "-c",
        "while :; do :; done",
    )  # fmt: skip
    pod = wait_for(
        lambda: (kubectl_json(kind_cluster, "-n", "story", "get", "pods")["items"] or [None])[0]
    )
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    status = wait_for(
        lambda: "batch resources" in kind_cluster.kubectl(
            "-n", "koordinator-system", "exec", "ds/koordlet", "--",
            "koordctl", "status",
        )
    )  # fmt: skip
    assert status
