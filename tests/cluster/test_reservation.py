"""Reservations on the real cluster: kube-scheduler places a Reservation (through the reserve
pod koord-manager creates and the extender turns into the Reservation's node), the extender
holds its room against a filler pod while a pod that fits beside it still goes there, an owner
pod goes into it (and, allocated once, it ends Succeeded), and an expired Reservation gives its
room back to the pod that waited for it. A Reservation no node can take stays Pending with
kube-scheduler's reason.

The room is held on a second Node without a kubelet (tests.cluster.othernode): binding is
what is checked. Control-plane behaviour only: it runs in the containerd 2.1 tier (the gang
tests run in the 1.7 tier; the two tiers' budgets).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import product
from tests.cluster.cluster import Cluster, ClusterError
from tests.cluster.othernode import OtherNode
from tests.e2e.harness import images

pytestmark = pytest.mark.cluster_tier("2.1")  # control plane only: run once

NS = "reservation-test"
NODE = "koord-spare"
PODS = f"/api/v1/namespaces/{NS}/pods"
RESERVATIONS = "/apis/scheduling.koordinator.sh/v1alpha1/reservations"
LABEL = {"koordinator-py.io/test-node": "spare"}
TAINT = {"key": "koordinator-py.io/reservation-test", "value": "true", "effect": "NoSchedule"}
MINE = {"koordinator-py.io/test": "reservation"}
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"


def spec(cpu: str) -> dict[str, Any]:
    """A pod spec for the spare node only, asking ``cpu``."""
    requests = {"cpu": cpu, "memory": "64Mi"}
    return {
        "schedulerName": "koord-scheduler",
        "nodeSelector": dict(LABEL),
        "tolerations": [{"key": TAINT["key"], "operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "c",
                "image": images.WORKLOAD.ref,
                "imagePullPolicy": "Never",
                "command": ["sleep", "3600"],
                "resources": {"requests": requests, "limits": requests},
            }
        ],
    }


def pod(name: str, cpu: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
        "spec": spec(cpu),
    }


def reservation(name: str, cpu: str, owners: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "labels": dict(MINE)},
        "spec": {
            "template": {"metadata": {"namespace": NS}, "spec": spec(cpu)},
            "owners": owners,
            **extra,
        },
    }


def status_of(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(cluster.get(f"{RESERVATIONS}/{name}").get("status") or {})


def in_phase(cluster: Cluster, name: str, phase: str) -> dict[str, Any] | None:
    status = status_of(cluster, name)
    return status if status.get("phase") == phase else None


def bound(cluster: Cluster, name: str) -> dict[str, Any] | None:
    found = cluster.get(f"{PODS}/{name}")
    return found if found["spec"].get("nodeName") else None


def refused(cluster: Cluster, name: str) -> str | None:
    """kube-scheduler's message on a pod it could not place."""
    found = cluster.get(f"{PODS}/{name}")
    for cond in found.get("status", {}).get("conditions") or []:
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            return str(cond.get("message") or "")
    return None


def gone(cluster: Cluster, path: str) -> bool:
    try:
        cluster.get(path)
    except ClusterError as err:
        if " 404 " in str(err):
            return True
        raise
    return False


def koordctl(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(
        ["nsenter", f"--net={cluster.netns_path}", str(Path(sys.executable).parent / "koordctl"),
         *args, f"--kubeconfig={cluster.admin_kubeconfig}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def remove_pods(cluster: Cluster) -> None:
    """Every pod of the namespace, at once (no kubelet on the spare node confirms an end), but
    the reserve pods of Reservations still Pending (koord-manager keeps them)."""
    cluster.kubectl("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", check=False)

    def gone() -> bool:
        left = cluster.get(PODS)["items"]
        return all(RESERVE_POD in (p["metadata"].get("annotations") or {}) for p in left)

    cluster.wait_for("the test's pods gone", gone, 60)


@pytest.fixture(scope="module")
def spare(cluster: Cluster) -> Iterator[OtherNode]:
    cluster.wait_for(
        "every koord-manager replica serving", lambda: product.serving_managers(cluster)
    )
    cluster.apply(f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NS}}}")
    node = OtherNode(cluster, NODE, cpu="4", memory="8Gi", labels=LABEL, taints=[TAINT]).start()
    try:
        yield node
    finally:
        selector = ",".join(f"{k}={v}" for k, v in MINE.items())
        cluster.kubectl("delete", "reservations", "-l", selector, "--wait=true", check=False)
        remove_pods(cluster)
        node.stop()
        cluster.kubectl("delete", "namespace", NS, "--timeout=120s")


def test_a_reservation_holds_its_room_against_a_filler_and_takes_its_owner(
    cluster: Cluster, spare: OtherNode
) -> None:
    owners = [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    created = cluster.api("POST", RESERVATIONS, reservation("hold-web", "2300m", owners))
    uid = created["metadata"]["uid"]
    status = cluster.wait_for(
        "the Reservation Available", lambda: in_phase(cluster, "hold-web", "Available"), 90
    )
    assert status["nodeName"] == NODE, status  # the only node its template tolerates
    assert status["allocatable"] == {"cpu": "2300m", "memory": "64Mi"}, status
    scheduled = {c["type"]: c for c in status["conditions"]}["Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("True", "Scheduled"), scheduled
    # the reserve pod (named after the uid, in the template's namespace) is gone, never bound
    cluster.wait_for("the reserve pod gone", lambda: gone(cluster, f"{PODS}/{uid}"), 60)

    # 4 cpu, 2.3 held: a 2-cpu filler does not fit, a 1.5-cpu pod does
    cluster.api("POST", PODS, pod("filler", "2"))
    message = cluster.wait_for("the filler refused", lambda: refused(cluster, "filler"), 60)
    assert "Insufficient cpu" in message, message
    cluster.api("POST", PODS, pod("beside", "1500m"))
    assert (
        cluster.wait_for("the pod beside bound", lambda: bound(cluster, "beside"), 60)["spec"][
            "nodeName"
        ]
        == NODE
    )

    # an owner goes into the reservation: 4 - 1.5 = 2.5 free to kube-scheduler, all of it
    # held but for the reservation's own 2.3
    cluster.api("POST", PODS, pod("web-1", "2", {"app": "web"}))
    owner = cluster.wait_for("the owner bound", lambda: bound(cluster, "web-1"), 60)
    assert owner["spec"]["nodeName"] == NODE
    assert json.loads(owner["metadata"]["annotations"][ALLOCATED]) == {
        "name": "hold-web",
        "uid": uid,
    }
    status = cluster.wait_for(
        "allocated once: Succeeded", lambda: in_phase(cluster, "hold-web", "Succeeded"), 60
    )
    assert [o["name"] for o in status["currentOwners"]] == ["web-1"], status
    assert status["allocated"] == {"cpu": "2", "memory": "64Mi"}, status
    # the filler still does not fit: 4 - 1.5 - 2 leaves half a cpu
    assert not cluster.get(f"{PODS}/filler")["spec"].get("nodeName")
    # what a user runs to see it: koordctl, with the cluster's kubeconfig
    listed = koordctl(cluster, "reservation")
    row = next(line for line in listed.splitlines() if " hold-web " in line)
    assert row.split()[:3] == [NODE, "hold-web", "Succeeded"], listed
    assert f"{NS}/web-1" in row, listed
    why = koordctl(cluster, "reservation", "why", f"{NS}/web-1")
    assert f"in Reservation hold-web on node {NODE}" in why, why
    remove_pods(cluster)


def test_an_expired_reservation_gives_its_room_back_to_the_pod_that_waited(
    cluster: Cluster, spare: OtherNode
) -> None:
    owners = [{"object": {"namespace": NS, "name": "nobody"}}]
    cluster.api("POST", RESERVATIONS, reservation("short", "3100m", owners, ttl="30s"))
    cluster.wait_for(
        "the Reservation Available", lambda: in_phase(cluster, "short", "Available"), 90
    )
    # one no node can take stays Pending, with kube-scheduler's reason
    cluster.api("POST", RESERVATIONS, reservation("too-big", "5", owners, ttl="2m"))

    def unschedulable() -> dict[str, Any] | None:
        for cond in status_of(cluster, "too-big").get("conditions") or []:
            if cond["type"] == "Scheduled" and cond["reason"] == "Unschedulable":
                return dict(cond)
        return None

    cond = cluster.wait_for("too-big Unschedulable", unschedulable, 60)
    assert cond["status"] == "False" and "Insufficient cpu" in cond["message"], cond
    assert status_of(cluster, "too-big").get("phase", "Pending") == "Pending"

    cluster.api("POST", PODS, pod("waiter", "1500m"))  # 4 - 3.1 held: does not fit
    message = cluster.wait_for("the waiter refused", lambda: refused(cluster, "waiter"), 60)
    assert "Insufficient cpu" in message, message
    status = cluster.wait_for("short expired", lambda: in_phase(cluster, "short", "Failed"), 90)
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Expired"), ready
    # tried again at once, not at kube-scheduler's five-minute flush
    placed = cluster.wait_for("the waiter bound", lambda: bound(cluster, "waiter"), 60)
    assert placed["spec"]["nodeName"] == NODE
    cluster.api("DELETE", f"{RESERVATIONS}/too-big")  # its reserve pod goes with it (owner)
    remove_pods(cluster)
