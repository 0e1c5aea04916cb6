"""koord-manager's reservation controller against the in-process fake API server: the reserve
pod of a Pending Reservation, kube-scheduler's Unschedulable message mirrored into the
Scheduled condition, currentOwners and allocated from the pods bound into it (Succeeded with
the first owner if allocateOnce), expiry past ttl or expires (and with its node gone), leftover
reserve pods deleted, ended Reservations collected after the GC duration.

Shapes from Koordinator's pkg/scheduler/plugins/reservation/controller/controller_test.go
(TestExpireActiveReservation, TestSyncStatus, TestGCReservations), other numbers. The
informers run for real; each reconcile is called by the test with a manual clock, once the
informers hold the fake's objects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordapi.gang.spec import format_time, parse_time
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
)
from koordapi.reservation.reservepod import reserve_pod
from koordkube.resources import object_key
from manager.controllers.reservation import RETRY, ReservationController, key_of
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run

NS = "koordinator-system"
R_UID = "uid-r-web"
KEY = key_of("r-web")
CREATED = "2030-03-17T08:00:00Z"
T0 = parse_time(CREATED) or 0.0
STATUS_PATH = r"/reservations/r-web/status$"
POD_PATH = rf"/namespaces/default/pods/{R_UID}$"
DAY = 24 * 3600.0


def reservation(
    *,
    phase: str = "Available",
    node: str = "node-a",
    once: bool = False,
    ttl: str | None = "1h",
    expires: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """r-web, 2300m / 3Gi for pods labelled app=web, created at CREATED."""
    requests = {"cpu": "2300m", "memory": "3Gi"}
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"namespace": "default"},
            "spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]},
        },
        "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
        "allocateOnce": once,
    }
    if ttl is not None:
        spec["ttl"] = ttl
    if expires is not None:
        spec["expires"] = expires
    status: dict[str, Any] = {"phase": phase}
    if node:
        status.update(nodeName=node, allocatable=dict(requests))
    if conditions is not None:
        status["conditions"] = conditions
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "r-web", "uid": R_UID, "creationTimestamp": CREATED},
        "spec": spec,
        "status": status,
    }


def ready(status: str, reason: str, at: float) -> dict[str, Any]:
    stamp = format_time(at)
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def node(name: str = "node-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "7", "memory": "13Gi"}},
    }


def owner(
    name: str, cpu: str, memory: str, *, into: str = R_UID, phase: str = "Running"
) -> dict[str, Any]:
    """A pod on node-a bound into the reservation with uid ``into``."""
    requests = {"cpu": cpu, "memory": memory}
    allocated = json.dumps({"name": "r-web", "uid": into})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "web",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
            "annotations": {ANNOTATION_RESERVATION_ALLOCATED: allocated},
        },
        "spec": {
            "nodeName": "node-a",
            "containers": [{"name": "main", "resources": {"requests": requests}}],
        },
        "status": {"phase": phase},
    }


@dataclass
class Harness:
    api: FakeKubeAPI
    state: ClusterState
    controller: ReservationController
    metrics: ManagerMetrics
    now: list[float]
    queued: list[str] = field(default_factory=list)

    def caught_up(self) -> bool:
        for informer, kind in (
            (self.state.nodes, "Node"),
            (self.state.pods, "Pod"),
            (self.state.reservations, "Reservation"),
        ):
            want = {object_key(o): o["metadata"]["resourceVersion"] for o in self.api.objects(kind)}
            have = {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}
            if want != have:
                return False
        return True

    async def pass_(self, at: float, key: str = KEY) -> float | None:
        """One reconcile of ``key`` at ``at`` seconds after CREATED."""
        await eventually(self.caught_up)
        self.now[0] = T0 + at
        return await self.controller.reconcile(key)

    def status(self) -> dict[str, Any]:
        obj = self.api.get("Reservation", "r-web")
        assert obj is not None
        return dict(obj["status"])

    def writes(self) -> int:
        return len(self.api.calls("patch", STATUS_PATH))

    def outcome(self, outcome: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            "koord_manager_reconciles_total", {"controller": "reservation", "outcome": outcome}
        )


@asynccontextmanager
async def watching(api: FakeKubeAPI) -> AsyncIterator[Harness]:
    kube = api.kube_api()
    state = ClusterState(kube, NS, "slo-controller-config")
    metrics, now = ManagerMetrics(), [T0]
    queued: list[str] = []
    controller = ReservationController(
        kube, state, metrics, enqueue=queued.append, clock=lambda: now[0]
    )
    informers = (state.nodes, state.pods, state.reservations)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.gather(*(i.wait_synced() for i in informers))
        yield Harness(api, state, controller, metrics, now, queued)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def cluster(*objs: dict[str, Any]) -> FakeKubeAPI:
    api = FakeKubeAPI()
    api.seed(node("node-a"), node("node-b"), *objs)
    return api


# -- Pending: the reserve pod ------------------------------------------------------------------


def test_a_pending_reservation_gets_its_reserve_pod_once() -> None:
    api = cluster(reservation(phase="Pending", node=""))

    async def scenario() -> None:
        async with watching(api) as h:
            assert h.queued == [KEY]  # the Reservation's informer event
            # looked at again when it expires: created + 1h, 600 s from now (and half a second)
            assert await h.pass_(600) == 3000.5
            (create,) = api.calls("create", r"/namespaces/default/pods$")
            pod = api.get("Pod", R_UID, "default")
            assert pod is not None
            annotations = pod["metadata"]["annotations"]
            assert annotations[ANNOTATION_RESERVE_POD] == "true"
            assert annotations[ANNOTATION_RESERVATION_NAME] == "r-web"
            (ref,) = pod["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
                "Reservation",
                "r-web",
                R_UID,
                True,
            )
            assert create.body["spec"]["containers"][0]["resources"]["requests"] == {
                "cpu": "2300m",
                "memory": "3Gi",
            }
            await eventually(lambda: h.queued.count(KEY) == 2)  # the reserve pod's event
            await h.pass_(601)
            assert len(api.calls("create", r"/pods$")) == 1  # it has one
            assert h.writes() == 0
            assert h.outcome("reserve-pod-created") == 1

    run(scenario())


def test_kube_schedulers_unschedulable_message_becomes_the_scheduled_condition() -> None:
    pending = reservation(phase="Pending", node="")
    pod = reserve_pod(pending)
    message = "0/2 nodes are available: 2 Insufficient cpu."
    pod["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
            }
        ],
    }
    api = cluster(pending, pod)
    version = (api.get("Reservation", "r-web") or {})["metadata"]["resourceVersion"]

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(70)
            (patch,) = api.calls("patch", STATUS_PATH)
            assert patch.body["metadata"]["resourceVersion"] == version
            status = h.status()
            assert status["phase"] == "Pending"
            (cond,) = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
                "Scheduled",
                "False",
                "Unschedulable",
                message,
            )
            assert cond["lastTransitionTime"] == format_time(T0 + 70)
            await h.pass_(80)
            assert h.writes() == 1  # the same message is not written again
            assert api.calls("create", r"/pods$") == []
            # a new message is
            changed = api.get("Pod", R_UID, "default")
            assert changed is not None
            changed["status"]["conditions"][0]["message"] = "0/2 nodes are available."
            api.seed(changed)
            await h.pass_(90)
            assert h.writes() == 2
            (cond,) = h.status()["conditions"]
            assert cond["message"] == "0/2 nodes are available."

    run(scenario())


def test_a_reserve_pod_bound_by_a_scheduler_without_the_extender_is_deleted_and_said() -> None:
    pending = reservation(phase="Pending", node="")
    pod = reserve_pod(pending)
    pod["spec"]["nodeName"] = "node-b"  # default-scheduler bound it: it would run, holding nothing
    api = cluster(pending, pod)

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(45)
            assert api.calls("delete", POD_PATH)
            assert api.get("Pod", R_UID, "default") is None
            (cond,) = h.status()["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == (
                "Scheduled",
                "False",
                "Unschedulable",
            )
            assert cond["message"].startswith("reserve pod bound to node-b by scheduler ")

    run(scenario())


def test_a_reserve_pod_the_api_server_refuses_is_said_on_the_reservation() -> None:
    pending = reservation(phase="Pending", node="")
    pending["spec"]["template"]["metadata"]["namespace"] = "gone-ns"
    api = cluster(pending)
    api.fail("create", r"/namespaces/gone-ns/pods$", 404, times=2)

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(30)
            (cond,) = h.status()["conditions"]
            assert cond["reason"] == "Unschedulable"
            assert cond["message"].startswith("reserve pod not created: "), cond
            await h.pass_(40)
            assert len(api.calls("create", r"/namespaces/gone-ns/pods$")) == 2
            assert h.writes() == 1  # the same refusal is not written again

    run(scenario())


# -- Available: owners ---------------------------------------------------------------------------


def test_current_owners_and_allocated_follow_the_pods_bound_into_it() -> None:
    api = cluster(
        reservation(),
        owner("web-1", "700m", "512Mi"),
        owner("web-0", "1", "1Gi"),
        owner("web-2", "300m", "256Mi", phase="Succeeded"),  # finished: takes nothing
        owner("web-3", "400m", "128Mi", into="uid-other"),  # in another reservation
    )

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_(60) == 3540.5
            # 1000m + 700m, 1Gi + 512Mi
            assert h.status()["allocated"] == {"cpu": "1700m", "memory": "1536Mi"}
            assert h.status()["currentOwners"] == [
                {"namespace": "web", "name": "web-0", "uid": "uid-web-0"},
                {"namespace": "web", "name": "web-1", "uid": "uid-web-1"},
            ]
            assert h.status()["phase"] == "Available"  # allocated many times
            await h.pass_(61)
            assert h.writes() == 1  # unchanged: not written again
            api.remove("Pod", "web-1", "web")
            await h.pass_(62)
            assert h.writes() == 2
            assert h.status()["allocated"] == {"cpu": "1", "memory": "1Gi"}
            assert [o["name"] for o in h.status()["currentOwners"]] == ["web-0"]

    run(scenario())


def test_an_allocate_once_reservation_succeeds_with_its_first_owner_and_is_collected() -> None:
    api = cluster(
        reservation(once=True, conditions=[ready("True", "Available", T0 + 5)]),
        owner("web-0", "2", "2Gi"),
    )

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(300)
            status = h.status()
            assert status["phase"] == "Succeeded"
            assert status["currentOwners"] == [
                {"namespace": "web", "name": "web-0", "uid": "uid-web-0"}
            ]
            assert status["allocated"] == {"cpu": "2", "memory": "2Gi"}
            (cond,) = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "False", "Succeeded")
            # updated in place: probed now, the transition kept from when it became Available
            assert cond["lastProbeTime"] == format_time(T0 + 300)
            assert cond["lastTransitionTime"] == format_time(T0 + 5)
            # ended 100 s ago (its last probe, as isReservationNeedCleanup reads a Succeeded
            # one): collected a day after it ended
            assert await h.pass_(400) == DAY - 100
            assert api.calls("delete") == []
            await h.pass_(300 + DAY - 1)
            assert api.calls("delete") == []
            assert await h.pass_(300 + DAY + 1) is None  # (Koordinator: more than a day)
            assert api.get("Reservation", "r-web") is None
            assert h.outcome("collected") == 1

    run(scenario())


# -- expiry --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "expires"),
    [
        ("1h", None),  # created + 1h
        ("2h", "2030-03-17T09:00:00Z"),  # the earlier of expires and created + ttl
        (None, "2030-03-17T09:00:00Z"),  # expires alone (no ttl defaulted)
    ],
    ids=["ttl", "expires-before-ttl", "expires"],
)
def test_a_reservation_past_its_expiry_fails_and_its_reserve_pod_goes(
    ttl: str | None, expires: str | None
) -> None:
    r = reservation(ttl=ttl, expires=expires, conditions=[ready("True", "Available", T0 + 5)])
    leftover = reserve_pod(r)
    api = cluster(r, leftover)

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_(3600) == 0.5  # due, not yet past: looked at again
            assert h.writes() == 0
            await h.pass_(3601)
            status = h.status()
            assert status["phase"] == "Failed"
            (cond,) = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "False", "Expired")
            assert cond["lastTransitionTime"] == format_time(T0 + 3601)
            assert api.calls("delete", POD_PATH)
            assert api.get("Pod", R_UID, "default") is None
            # finished: collected a day after it expired
            assert await h.pass_(3700) == DAY - 99
            assert h.writes() == 1
            await h.pass_(3601 + DAY + 1)
            assert api.get("Reservation", "r-web") is None

    run(scenario())


def test_a_reservation_whose_node_is_gone_fails_as_expired() -> None:
    api = cluster(reservation(node="node-b"))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(10)
            assert h.writes() == 0  # node-b is there
            api.remove("Node", "node-b")
            before = len(h.queued)
            await h.pass_(20, key="node-b")  # a node event asks for its reservations
            assert h.queued[before:] == [KEY]
            assert h.writes() == 0
            await h.pass_(20, key="node-a")  # none there
            assert h.queued[before:] == [KEY]
            await h.pass_(21)
            status = h.status()
            assert status["phase"] == "Failed"
            assert status["conditions"][-1]["reason"] == "Expired"

    run(scenario())


def test_a_reserve_pod_left_for_a_placed_reservation_is_deleted() -> None:
    r = reservation()
    api = cluster(r, reserve_pod(r))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_(30)
            assert api.get("Pod", R_UID, "default") is None
            assert len(api.calls("delete", POD_PATH)) == 1
            assert h.outcome("reserve-pod-deleted") == 1
            # nothing of its status changes: no owners yet, none recorded
            assert h.writes() == 0

    run(scenario())


def test_a_conflicting_write_is_tried_again() -> None:
    api = cluster(reservation(ttl="30s"))
    api.fail("patch", STATUS_PATH, 409)

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_(45) == RETRY
            assert h.status()["phase"] == "Available"
            assert h.outcome("conflict") == 1
            await h.pass_(46)
            assert h.status()["phase"] == "Failed"

    run(scenario())
