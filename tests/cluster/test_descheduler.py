"""koord-descheduler on the real cluster: LowNodeLoad on two nodes' NodeMetrics, a
PodMigrationJob, the Eviction API, and a PodDisruptionBudget that the real disruption
controller computes.

The second node, koord-idle, is tests/cluster/othernode.py's: no kubelet, kept Ready by a
heartbeat, a NodeMetric of an idle 64-core node, and a NoSchedule taint that only this
module's pods tolerate (it has no kubernetes.io/os label either, so none of the chart's pods
go there). The real node, koord-node, reads as hot through the chart's own values: LowNodeLoad
is enabled by ``helm upgrade`` with thresholds of 1 % (low) and 2 % (high), which the
cluster's real usage in koordlet's NodeMetric is over; only this module's namespace may be
evicted. The product runs as installed, with the chart's ServiceAccount and RBAC.

- A dry run writes a PodMigrationJob in status DryRun and a DryRunMigration Event for a pod
  of the module's Deployment and evicts nothing, while later rounds go on.
- For real: a PodMigrationJob for one of its pods goes Running in the chart's default mode,
  Koordinator's ReservationFirst: its Reservation is placed on koord-idle (never the pod's own
  node) before any eviction; the eviction is refused with 429 while the PodDisruptionBudget
  (minAvailable = replicas) allows no disruption, tried again, and goes through once the
  budget is relaxed: the pod is gone, its replacement is bound into the Reservation on
  koord-idle at once (never Pending for want of a node), and once it is Ready (said by the
  test: koord-idle has no kubelet) the job Succeeds; the API server's audit log shows the
  descheduler's evictions (429s, then 201), never a delete; no request of the descheduler was
  Forbidden.

At the end the chart's values are restored (LowNodeLoad off again) and the namespace, the
jobs and the second node are removed. Control-plane behaviour only: it runs in the containerd
1.7 tier (test_reservation runs in the 2.1 tier; the two tiers' budgets).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import audit, helm
from tests.cluster.cluster import NODE_NAME, Cluster, ClusterError
from tests.cluster.conftest import LOG_KEEP_DIR, keep_logs
from tests.cluster.helm import NAMESPACE
from tests.cluster.othernode import OtherNode
from tests.cluster.product import VALUES
from tests.e2e.harness import images, paths

pytestmark = pytest.mark.cluster_tier("1.7")  # control plane only: run once

NS = "koord-deschedule"
APP = "hot-web"
IDLE = "koord-idle"
REPLICAS = 2
TAINT = {"key": "koordinator-py.io/idle-node", "value": "true", "effect": "NoSchedule"}
PMJ = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
PDB = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/{APP}"
DESCHEDULER_PODS = "app.kubernetes.io/component=descheduler"
DESCHEDULER_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:koord-descheduler"
DRY_RUN_ANNOTATION = "koordinator-py.io/dry-run"
MERGE = "application/merge-patch+json"

WORKLOAD = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {APP}, namespace: {NS}}}
spec:
  replicas: {REPLICAS}
  selector: {{matchLabels: {{app: {APP}}}}}
  template:
    metadata: {{labels: {{app: {APP}}}}}
    spec:
      # the extender's kube-scheduler: a ReservationFirst migration's reserve pod and the
      # replacement that goes into the Reservation are placed through the extender
      schedulerName: koord-scheduler
      terminationGracePeriodSeconds: 1
      tolerations:
        - {{key: {TAINT["key"]}, operator: Equal, value: "{TAINT["value"]}", effect: NoSchedule}}
      containers:
        - name: {APP}
          image: {images.WORKLOAD.ref}
          imagePullPolicy: Never
          command: ["sleep", "3600"]
          resources:
            requests: {{cpu: 10m, memory: 16Mi}}
            limits: {{cpu: 100m, memory: 32Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {APP}, namespace: {NS}}}
spec:
  minAvailable: {REPLICAS}
  selector: {{matchLabels: {{app: {APP}}}}}
"""


def chart_values(*, dry_run: bool) -> dict[str, Any]:
    """The tier's values with LowNodeLoad on: 1 % and 2 % thresholds (koord-node's real usage
    is over 2 % of its 2 cores and its memory; koord-idle's 50m of 64 cores is under 1 %), a
    node anomalous at its first report, a round every 5 s, and only NS evictable."""
    descheduler = {
        **VALUES.get("descheduler", {}),
        "deschedulingInterval": "5s",
        "dryRun": dry_run,
        "lowNodeLoad": {
            "enabled": True,
            "args": {
                "lowThresholds": {"cpu": 1, "memory": 1},
                "highThresholds": {"cpu": 2, "memory": 2},
                "anomalyCondition": {"consecutiveAbnormalities": 1},
                "evictableNamespaces": {"include": [NS]},
            },
        },
        "migrationController": {"args": {"namespaces": {"include": [NS]}}},
    }
    return {**VALUES, "descheduler": descheduler}


def helm_upgrade(cluster: Cluster, values: dict[str, Any]) -> None:
    helm.run(
        cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "upgrade",
        values=values, timeout=300,
    )  # fmt: skip


def descheduler_pods(cluster: Cluster) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = cluster.kubectl_json(
        "get", "pods", "-n", NAMESPACE, "-l", DESCHEDULER_PODS
    )["items"]
    return pods


def rolled_out(cluster: Cluster) -> bool:
    """Every descheduler pod is of the Deployment's current template and none is ending."""
    deployment = cluster.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/koord-descheduler")
    status = deployment.get("status", {})
    if status.get("observedGeneration") != deployment["metadata"]["generation"]:
        return False
    pods = descheduler_pods(cluster)
    return len(pods) == status.get("updatedReplicas") == status.get("replicas") and not any(
        p["metadata"].get("deletionTimestamp") for p in pods
    )


class Logs:
    """The descheduler pods' logs, gathered before each upgrade replaces the pods."""

    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    def gather(self, cluster: Cluster) -> str:
        for pod in descheduler_pods(cluster):
            name = pod["metadata"]["name"]
            text = cluster.kubectl("logs", "-n", NAMESPACE, name, check=False)
            if text:
                self.kept[name] = text
        return "\n".join(self.kept.values())

    def save(self) -> None:
        """Into the session's log folder, beside what keep_logs keeps (the pods the upgrades
        replaced are gone from the cluster by then)."""
        folder = LOG_KEEP_DIR / paths.CONTAINERD_VERSION
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.kept.items():
            (folder / f"pod-{NAMESPACE}-{name}.log").write_text(text)


def module_pods(cluster: Cluster) -> dict[str, str]:
    """This module's pods by name, with their uids."""
    items = cluster.get(f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3D{APP}")["items"]
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in items}


def explain(cluster: Cluster, node: str) -> dict[str, Any] | None:
    """The leading descheduler's /explain/nodes/NODE (the other replica answers 503)."""
    for pod in descheduler_pods(cluster):
        ip = pod.get("status", {}).get("podIP")
        if not ip or pod["metadata"].get("deletionTimestamp"):
            continue
        url = f"http://{ip}:10251/explain/nodes/{node}"

        def fetch(url: str = url) -> dict[str, Any] | None:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310
                    found: dict[str, Any] = json.loads(answer.read())
                    return found
            except (urllib.error.URLError, OSError):
                return None

        view = cluster.in_netns(fetch)
        if view is not None:
            return view
    return None


def outcome(view: dict[str, Any] | None, pod: str) -> str:
    """What the last round did with ``pod`` (namespace/name), as /explain says."""
    for pool in (view or {}).get("pools", []):
        for candidate in pool["candidates"]:
            if candidate["pod"] == pod:
                return str(candidate["outcome"])
    return ""


def jobs_of_ns(cluster: Cluster, *, dry_run: bool) -> list[dict[str, Any]]:
    """The PodMigrationJobs of this module's pods, a dry run's or not."""
    return [
        job
        for job in cluster.get(PMJ)["items"]
        if job["spec"].get("podRef", {}).get("namespace") == NS
        and (job["metadata"].get("annotations", {}).get(DRY_RUN_ANNOTATION) == "true") == dry_run
    ]


def events_about(cluster: Cluster, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = cluster.get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [
        e
        for e in events
        if e.get("involvedObject", {}).get("name") == name and e.get("reason") == reason
    ]


def descheduler_requests(
    cluster: Cluster, *, resource: str, subresource: str = "", name: str = ""
) -> list[dict[str, Any]]:
    """The descheduler's requests on ``resource`` (and ``subresource``, ``name``) in the API
    server's audit log."""
    return [
        e
        for e in audit.read(cluster.audit_log)
        if e["user"]["username"] == DESCHEDULER_ACCOUNT
        and e.get("objectRef", {}).get("resource") == resource
        and e["objectRef"].get("subresource", "") == subresource
        and (not name or e["objectRef"].get("name") == name)
    ]


@pytest.fixture(scope="module")
def two_nodes(cluster: Cluster) -> Iterator[tuple[OtherNode, Logs]]:
    """The module's Deployment running on koord-node with its PDB computed, then koord-idle;
    afterwards the chart's values restored and everything removed."""
    cluster.apply(WORKLOAD)
    cluster.wait_for(
        f"{REPLICAS} pods of {APP} running on {NODE_NAME}",
        lambda: (
            len(
                [
                    p
                    for p in cluster.get(f"/api/v1/namespaces/{NS}/pods")["items"]
                    if p["spec"].get("nodeName") == NODE_NAME
                    and any(c.get("ready") for c in p["status"].get("containerStatuses", []))
                ]
            )
            == REPLICAS
        ),
        timeout=180,
    )
    # the real disruption controller: both pods healthy, none may go
    cluster.wait_for(
        "the PodDisruptionBudget computed, no disruption allowed",
        lambda: (
            (s := cluster.get(PDB).get("status", {})).get("currentHealthy") == REPLICAS
            and s.get("disruptionsAllowed") == 0
        ),
        timeout=120,
    )
    idle = OtherNode(
        cluster, IDLE, labels={"koordinator-py.io/test-node": "idle"}, taints=[TAINT]
    ).start()
    logs = Logs()
    try:
        cluster.wait_for("koord-idle Ready", lambda: node_ready(cluster, IDLE), timeout=60)
        yield idle, logs
    finally:
        logs.gather(cluster)
        logs.save()
        keep_logs(cluster)
        helm_upgrade(cluster, VALUES)
        for job in cluster.get(PMJ)["items"]:
            if job["spec"].get("podRef", {}).get("namespace") == NS:
                cluster.delete(f"{PMJ}/{job['metadata']['name']}")
        for reservation in cluster.get(RESERVATIONS)["items"]:  # the jobs' (if still there)
            template = reservation["spec"].get("template", {}).get("metadata", {})
            if template.get("namespace") == NS:
                cluster.delete(f"{RESERVATIONS}/{reservation['metadata']['name']}")
        cluster.kubectl("delete", "namespace", NS, "--wait=false", check=False)
        idle.stop()
        cluster.wait_for(f"namespace {NS} gone", lambda: namespace_gone(cluster), timeout=180)


def node_ready(cluster: Cluster, name: str) -> bool:
    node = cluster.get(f"/api/v1/nodes/{name}")
    conditions = node.get("status", {}).get("conditions", [])
    taints = node.get("spec", {}).get("taints") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) and all(
        t["key"] == TAINT["key"] for t in taints
    )


def namespace_gone(cluster: Cluster) -> bool:
    try:
        cluster.get(f"/api/v1/namespaces/{NS}")
    except ClusterError as err:
        return ": 404 " in str(err)
    return False


def test_a_dry_run_writes_a_job_down_and_evicts_nothing(
    cluster: Cluster, two_nodes: tuple[OtherNode, Logs]
) -> None:
    idle, logs = two_nodes
    before = module_pods(cluster)
    helm_upgrade(cluster, chart_values(dry_run=True))
    # koordlet's NodeMetric must report the pods' usage (nodeFit needs it), every 30 s
    jobs = cluster.wait_for(
        "a dry run's PodMigrationJob for a pod of the module's Deployment",
        lambda: jobs_of_ns(cluster, dry_run=True),
        timeout=300,
    )
    job = jobs[0]
    pod = job["spec"]["podRef"]["name"]
    assert pod in before
    status = job["status"]
    assert (status["phase"], status["status"], status["reason"]) == ("Pending", "DryRun", "DryRun")
    assert f"would migrate pod {NS}/{pod} off node {NODE_NAME}" in status["message"]
    assert "node is overutilized" in job["metadata"]["annotations"]["koordinator.sh/evict-reason"]
    (event,) = cluster.wait_for(
        "the DryRunMigration Event on the pod",
        lambda: events_about(cluster, NS, pod, "DryRunMigration"),
    )
    assert event["message"] == status["message"]

    # a later round (as the leader's /explain says) passes the pod over for its open job:
    # the dry run has had its chance to evict and did not
    def passed_over() -> dict[str, Any] | None:
        view = explain(cluster, NODE_NAME)
        wanted = "not migrated: it has an open PodMigrationJob"
        return view if outcome(view, f"{NS}/{pod}") == wanted else None

    view = cluster.wait_for("a later round passing the pod over", passed_over, timeout=120)
    assert view["dryRun"] is True
    assert view["pools"][0]["category"] == "high"
    idle_view = explain(cluster, IDLE)
    assert idle_view is not None and idle_view["pools"][0]["category"] in ("low", "both-low")
    assert idle.beats > 0
    assert module_pods(cluster) == before
    for written in jobs_of_ns(cluster, dry_run=True):
        annotations = written["metadata"].get("annotations", {})
        assert "descheduler.koordinator.sh/passed-arbitration" not in annotations
        assert written["status"]["phase"] == "Pending"
    assert descheduler_requests(cluster, resource="pods", subresource="eviction") == []
    assert jobs_of_ns(cluster, dry_run=False) == []
    for written in jobs_of_ns(cluster, dry_run=True):
        assert events_about(cluster, "default", written["metadata"]["name"], "Evicting") == []
    assert "Forbidden" not in logs.gather(cluster)


def test_an_eviction_waits_for_the_disruption_budget_then_goes_through(
    cluster: Cluster, two_nodes: tuple[OtherNode, Logs]
) -> None:
    _, logs = two_nodes
    logs.gather(cluster)
    helm_upgrade(cluster, chart_values(dry_run=False))
    cluster.wait_for("the descheduler rolled out", lambda: rolled_out(cluster), timeout=120)
    for job in jobs_of_ns(cluster, dry_run=True):  # open jobs: the pods would be passed over
        cluster.api("DELETE", f"{PMJ}/{job['metadata']['name']}")
    before = module_pods(cluster)

    def running_job() -> dict[str, Any] | None:
        found = [j for j in jobs_of_ns(cluster, dry_run=False) if j.get("status", {}).get("phase")]
        return next((j for j in found if j["status"]["phase"] == "Running"), None)

    job = cluster.wait_for("a PodMigrationJob Running for a module pod", running_job, 180)
    name, pod = job["metadata"]["name"], job["spec"]["podRef"]["name"]
    assert job["spec"]["mode"] == "ReservationFirst"  # Koordinator's defaultJobMode
    assert job["metadata"]["annotations"]["koordinator.sh/evict-trigger"] == "LowNodeLoad"
    assert job["spec"]["podRef"]["uid"] == before[pod]

    # ReservationFirst: room on koord-idle (the pod's own node excluded) before any eviction
    def reserved() -> dict[str, Any] | None:
        ref = cluster.get(f"{PMJ}/{name}")["spec"].get("reservationOptions", {})
        found: dict[str, Any] = cluster.get(f"{RESERVATIONS}/{ref['reservationRef']['name']}")
        return found if found.get("status", {}).get("phase") == "Available" else None

    reservation = cluster.wait_for("the job's Reservation Available", reserved, timeout=120)
    reservation_name = reservation["metadata"]["name"]
    assert reservation_name == job["metadata"]["uid"]
    assert reservation["status"]["nodeName"] == IDLE
    assert reservation["spec"]["allocateOnce"] is True
    (owner,) = reservation["spec"]["owners"]
    assert (owner["controller"]["kind"], owner["controller"]["namespace"]) == ("ReplicaSet", NS)

    # the budget allows no disruption: 429, a Warning Event, tried again 3 s later
    def refused_twice() -> list[dict[str, Any]] | None:
        found = [
            e
            for e in events_about(cluster, "default", name, "Evicting")
            if e["type"] == "Warning" and "disruption budget" in e["message"]
        ]
        return found if len(found) >= 2 else None

    refusals = cluster.wait_for("the eviction refused by the PDB, twice", refused_twice, 120)
    assert refusals[0]["message"].startswith(f'Failed evict Pod "{NS}/{pod}" caused by ')
    status = cluster.get(f"{PMJ}/{name}")["status"]
    assert (status["phase"], status["nodeName"]) == ("Running", IDLE)
    assert module_pods(cluster)[pod] == before[pod]
    codes = [
        e["responseStatus"]["code"]
        for e in descheduler_requests(cluster, resource="pods", subresource="eviction", name=pod)
    ]
    assert len(codes) >= 2 and set(codes) == {429}, codes

    # relaxed: one of the two may go now
    cluster.api("PATCH", PDB, {"spec": {"minAvailable": REPLICAS - 1}}, MERGE)

    # the replacement goes into the Reservation on koord-idle, bound at once
    def bound() -> dict[str, Any] | None:
        found: dict[str, Any] = cluster.get(f"{PMJ}/{name}")
        return found if found["status"].get("podRef") else None

    waiting = cluster.wait_for("the replacement bound into the Reservation", bound, timeout=120)
    replacement = waiting["status"]["podRef"]["name"]
    assert replacement not in before
    new_pod = cluster.get(f"/api/v1/namespaces/{NS}/pods/{replacement}")
    assert new_pod["spec"]["nodeName"] == IDLE
    assert events_about(cluster, NS, replacement, "FailedScheduling") == []
    assert (
        cluster.get(f"{RESERVATIONS}/{reservation_name}")["status"]["currentOwners"][0]["name"]
        == replacement
    )
    # koord-idle has no kubelet: the test says the pod is Ready, as a kubelet would
    ready = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
    cluster.api(
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/{replacement}/status",
        {"status": {"phase": "Running", "conditions": ready}},
        MERGE,
    )

    def succeeded() -> dict[str, Any] | None:
        found: dict[str, Any] = cluster.get(f"{PMJ}/{name}")
        return found if found["status"].get("phase") == "Succeeded" else None

    done = cluster.wait_for("the PodMigrationJob Succeeded", succeeded, timeout=60)
    assert done["status"]["message"] == (
        f'Bind Pod "{NS}/{replacement}" in Reservation "{reservation_name}"'
    )
    assert before[pod] not in module_pods(cluster).values()
    evictions = descheduler_requests(cluster, resource="pods", subresource="eviction", name=pod)
    assert [e["responseStatus"]["code"] for e in evictions][-1] == 201
    # the descheduler evicts, never deletes (its ClusterRole has no delete on pods)
    deletes = [e for e in descheduler_requests(cluster, resource="pods") if e["verb"] == "delete"]
    assert deletes == []
    (completed,) = events_about(cluster, "default", name, "EvictComplete")
    assert completed["message"] == f'Pod "{NS}/{pod}" has been evicted'

    def success_logged() -> str | None:
        text = logs.gather(cluster)
        return text if f"PodMigrationJob {name} succeeded" in text else None

    text = cluster.wait_for("the descheduler's log line of the job's success", success_logged)
    assert f"PodMigrationJob {name} created: pod {NS}/{pod} off node {NODE_NAME}" in text
    # the chart's ServiceAccount and RBAC were enough for all of it
    assert "Forbidden" not in text
    forbidden = [
        audit.describe(e)
        for e in audit.read(cluster.audit_log)
        if e["user"]["username"] == DESCHEDULER_ACCOUNT
        and e.get("responseStatus", {}).get("code") == 403
    ]
    assert forbidden == []
