"""ReservationFirst PodMigrationJobs: the Reservation made from the pod, and the migration
controller on tests.fakekube.FakeKubeAPI taking a job through it, one reconcile at a time
(koord-manager's writes on the Reservation played by the test).

Cases after Koordinator v1.8.0's pkg/descheduler/controllers/migration/controller_test.go
(TestCreateReservation, TestHandleScheduleFailed/Success, TestWaitForPodBindReservation,
TestMigrate, TestMigrateWithSamePodName, TestMigrateWithReservationScheduleFailed/Expired,
TestMigrateWhenEvictingWithSucceededReservation, TestWaitForPendingPodScheduled,
TestAbortJobIfReserveOnSameNode, TestAbortJobIfTimeout, TestDoScavenge) and
reservation/util_test.go (TestCreateOrUpdateReservationOptions), with other numbers and
names."""

from __future__ import annotations

import asyncio
import copy
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from descheduler.controller import MigrationController
from descheduler.events import EventRecorder
from descheduler.metrics import DeschedulerMetrics
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import ANNOTATION_PASSED_ARBITRATION
from descheduler.migration.reservation import (
    DEFAULT_CREATOR,
    LABEL_CREATED_BY,
    is_migrate_pending_pod,
    reservation_options,
    reserve_resource_owners,
)
from descheduler.state import DeschedulerState
from koordapi.reservation.model import LABEL_RESERVATION_ORDER, Reservation
from koordkube.resources import object_key
from tests.fakekube import KINDS, FakeKubeAPI
from tests.unit.koordkube.fakes import eventually

NOW = 1_760_000_000.0
JOB_UID = "5b0c1e7a-job"
STS_UID = "sts-uid-0b3"
STS_REF = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "name": "ledger",
    "uid": STS_UID,
    "controller": True,
}


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str = "ledger-3", node: str = "kubelet-a", *, uid: str = "pod-uid-1"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": uid,
            "resourceVersion": "17",
            "labels": {"app": "ledger"},
            "annotations": {"team": "payments"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "cm-uid"},
                STS_REF,
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "1300m", "memory": "700Mi"}}}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z1"]}
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z2"]}
                                ]
                            },
                        ]
                    }
                }
            },
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-ledger-3"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def job(mode: str = "ReservationFirst", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {
            "name": "move-ledger",
            "uid": JOB_UID,
            "creationTimestamp": stamp(NOW),
            "annotations": {
                ANNOTATION_PASSED_ARBITRATION: "true",
                "koordinator.sh/evict-reason": "node is overutilized",
            },
        },
        "spec": {
            "podRef": {"namespace": "shop", "name": "ledger-3"},
            "mode": mode,
            "ttl": "7m",
            **spec,
        },
    }


class Harness:
    """The controller over a fake API, its informers running; ``step`` reconciles the job
    once the caches have caught up with the fake's objects."""

    def __init__(self, fake: FakeKubeAPI, *, gate: bool = False) -> None:
        self.fake = fake
        self.now = NOW + 30
        api = fake.kube_api()
        self.state = DeschedulerState(api, workloads=False)
        self.controller = MigrationController(
            api,
            self.state,
            MigrationControllerArgs(object_limiters={}),
            DeschedulerMetrics(),
            EventRecorder(api, clock=lambda: self.now),
            clock=lambda: self.now,
            requeue_after=0.01,
            disable_pvc_reservation=gate,
        )

    def caught_up(self) -> bool:
        for kind, informer in (
            ("Pod", self.state.pods),
            ("PodMigrationJob", self.state.jobs_informer),
        ):
            want = {
                object_key(o): o["metadata"]["resourceVersion"] for o in self.fake.objects(kind)
            }
            have = {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}
            if want != have:
                return False
        return True

    async def step(self) -> float | None:
        await eventually(self.caught_up, 5)
        return await self.controller.reconcile("move-ledger")

    def job(self) -> dict[str, Any]:
        obj = self.fake.get("PodMigrationJob", "move-ledger")
        assert obj is not None
        return obj

    def status(self) -> dict[str, Any]:
        return dict(self.job().get("status") or {})

    def condition(self, kind: str) -> dict[str, Any] | None:
        for cond in self.status().get("conditions") or ():
            if cond["type"] == kind:
                return {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        return None

    def events(self, reason: str) -> list[tuple[str, str]]:
        return [
            (e["type"], e["message"]) for e in self.fake.objects("Event") if e["reason"] == reason
        ]

    def evictions(self) -> int:
        return len(self.fake.calls("create", r"/eviction$"))

    def reservation(self) -> dict[str, Any]:
        obj = self.fake.get("Reservation", JOB_UID)
        assert obj is not None
        return obj

    def manager_writes(self, **status: Any) -> None:
        """koord-manager (or the extender) writing the Reservation's status."""
        obj = self.reservation()
        obj["status"] = status
        self.fake.seed(obj)


def run(fake: FakeKubeAPI, body: Callable[[Harness], Awaitable[None]], **kw: Any) -> Harness:
    harness = Harness(fake, **kw)

    async def main() -> None:
        tasks = [asyncio.create_task(i.run()) for i in harness.state.informers]
        try:
            await asyncio.gather(*(i.wait_synced() for i in harness.state.informers))
            await body(harness)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), 30))
    return harness


def cluster(*objs: dict[str, Any], reservations: bool = True) -> FakeKubeAPI:
    # the fake serves Reservations; without them, a cluster without the CRD
    fake = FakeKubeAPI(kinds=[k for k in KINDS if reservations or k.kind != "Reservation"])
    fake.seed(*objs)
    return fake


SCHEDULED = {"type": "Scheduled", "status": "True", "reason": "Scheduled"}
READY = {"type": "Ready", "status": "True", "reason": "Available"}


def available(node: str = "kubelet-b", **more: Any) -> dict[str, Any]:
    return {"phase": "Available", "nodeName": node, "conditions": [SCHEDULED, READY], **more}


async def running_with_reservation(h: Harness) -> None:
    """Running (the pod's uid into podRef), then the Reservation created."""
    assert await h.step() is None
    assert h.status()["phase"] == "Running"
    assert h.job()["spec"]["podRef"]["uid"] == "pod-uid-1"
    assert await h.step() is None
    assert h.fake.get("Reservation", JOB_UID) is not None


# -- the Reservation made from the pod ---------------------------------------------------------


def test_the_reservation_is_made_from_the_pod() -> None:
    options = reservation_options(None, pod(), job_uid=JOB_UID, job_ttl="7m", now=1234.5678)
    template = options["template"]
    assert template["metadata"] == {
        "name": JOB_UID,
        "labels": {LABEL_CREATED_BY: DEFAULT_CREATOR, LABEL_RESERVATION_ORDER: "1234567"},
    }
    spec = template["spec"]
    assert spec["allocateOnce"] is True
    assert spec["ttl"] == "7m"
    # owned through the controller reference (the ConfigMap's, not a controller, is skipped)
    assert spec["owners"] == [{"controller": {**STS_REF, "namespace": "shop"}}]
    meta = spec["template"]["metadata"]
    assert meta == {
        "name": "ledger-3",
        "namespace": "shop",
        "labels": {"app": "ledger"},
        "annotations": {"team": "payments"},
    }
    pod_spec = spec["template"]["spec"]
    assert "nodeName" not in pod_spec
    skip = {"key": "metadata.name", "operator": "NotIn", "values": ["kubelet-a"]}
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchFields"] for t in terms] == [[skip], [skip]]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["z1"], ["z2"]]
    # the gate off: the volumes stay
    assert [v["name"] for v in pod_spec["volumes"]] == ["data", "scratch", "tmp"]


def test_disable_pvc_reservation_and_a_pod_without_affinity_or_controller() -> None:
    bare = pod()
    del bare["spec"]["affinity"]
    bare["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "x", "controller": False}]
    options = reservation_options(
        None, bare, job_uid="u", job_ttl=None, now=0, disable_pvc_reservation=True
    )
    spec = options["template"]["spec"]
    assert [v["name"] for v in spec["template"]["spec"]["volumes"]] == ["scratch"]
    assert spec["template"]["spec"]["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["kubelet-a"]}
                        ]
                    }
                ]
            }
        }
    }
    assert "ttl" not in spec  # no job ttl
    assert spec["owners"] == []  # no controller: creating it will be refused


def test_the_user_template_is_kept_and_completed() -> None:
    given: dict[str, Any] = {
        "template": {
            "metadata": {"labels": {"tier": "gold"}},
            "spec": {
                "expires": "2030-01-01T00:00:00Z",
                "owners": [{"labelSelector": {"matchLabels": {"app": "ledger"}}}],
            },
        }
    }
    options = reservation_options(given, pod(), job_uid=JOB_UID, job_ttl="7m", now=2)
    template = options["template"]
    assert template["metadata"]["name"] == JOB_UID
    assert template["metadata"]["labels"]["tier"] == "gold"
    assert template["spec"]["owners"] == given["template"]["spec"]["owners"]
    assert "ttl" not in template["spec"]  # expires set: no ttl from the job
    assert template["spec"]["template"]["metadata"]["name"] == "ledger-3"
    assert given["template"]["metadata"] == {"labels": {"tier": "gold"}}  # not changed


def test_a_pod_kube_scheduler_could_not_place_owns_its_reservation() -> None:
    pending = pod(node="")
    pending["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    owners = reserve_resource_owners(pending)
    assert owners == [
        {"object": {"uid": "pod-uid-1", "kind": "Pod", "name": "ledger-3", "namespace": "shop"}}
    ]
    options = reservation_options(None, pending, job_uid=JOB_UID, job_ttl=None, now=0)
    # no node: no skip-node term added to the pod's own affinity
    terms = options["template"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert all("matchFields" not in t for t in terms)
    reservation = Reservation.from_dict(
        {"metadata": {"name": "r"}, **{"spec": options["template"]["spec"]}}
    )
    assert is_migrate_pending_pod(reservation)
    by_controller = Reservation.from_dict(
        {
            "metadata": {"name": "r"},
            "spec": {"template": {}, "owners": reserve_resource_owners(pod())},
        }
    )
    assert not is_migrate_pending_pod(by_controller)


# -- the controller ----------------------------------------------------------------------------


def test_a_reservation_first_job_reserves_evicts_and_waits_for_the_replacement() -> None:
    fake = cluster(pod(), job())

    async def body(h: Harness) -> None:
        await running_with_reservation(h)
        created = h.reservation()
        assert created["spec"]["allocateOnce"] is True
        assert created["spec"]["ttl"] == "7m"
        assert created["metadata"]["labels"] == {
            LABEL_CREATED_BY: DEFAULT_CREATOR,
            LABEL_RESERVATION_ORDER: str(int((NOW + 30) * 1000)),
        }
        assert created["spec"]["owners"] == [{"controller": {**STS_REF, "namespace": "shop"}}]
        assert "nodeName" not in created["spec"]["template"]["spec"]
        ref = h.job()["spec"]["reservationOptions"]["reservationRef"]
        assert (ref["name"], ref["uid"], ref["kind"]) == (
            JOB_UID,
            created["metadata"]["uid"],
            "Reservation",
        )
        assert h.events("ReservationCreated") == [
            ("Normal", f'Successfully create Reservation "{JOB_UID}"')
        ]

        # Pending: looked at again, nothing evicted
        assert await h.step() == 0.01
        assert h.condition("ReservationCreated") == {"type": "ReservationCreated", "status": "True"}
        assert h.evictions() == 0

        # kube-scheduler cannot place it yet: its message is on the job, which keeps waiting
        why = (
            "0/3 nodes are available: 2 Insufficient cpu, "
            "1 node(s) didn't match Pod's node affinity."
        )
        h.manager_writes(
            phase="Pending",
            conditions=[
                {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": why}
            ],
        )
        assert await h.step() == 0.01
        status = h.status()
        assert (status["phase"], status["status"], status["reason"], status["message"]) == (
            "Running",
            "ReservationScheduled",
            "Unschedulable",
            why,
        )
        assert h.events("Unschedulable") == [("Warning", why)]
        assert await h.step() == 0.01
        assert len(h.events("Unschedulable")) == 1  # unchanged: not said again
        assert h.evictions() == 0

        # placed on kubelet-b and Available: the node noted, then the pod evicted
        h.manager_writes(**available())
        assert await h.step() == 0.01
        assert h.condition("ReservationScheduled") == {
            "type": "ReservationScheduled",
            "status": "True",
        }
        assert h.status()["nodeName"] == "kubelet-b"
        assert h.events("ReservationScheduled") == [
            ("Normal", f'Assigned Reservation "{JOB_UID}" to node "kubelet-b"')
        ]
        assert h.evictions() == 1
        assert h.condition("Eviction") == {
            "type": "Eviction",
            "status": "False",
            "reason": "Evicting",
            "message": 'Pod "shop/ledger-3" evicted from node "kubelet-a" by the reason '
            '"node is overutilized"',
        }

        # the pod is gone; its StatefulSet's replacement (same name) is not bound yet
        assert await h.step() == 0.01
        assert h.condition("Eviction")["reason"] == "EvictComplete"  # type: ignore[index]
        assert h.condition("PodBoundReservation") == {
            "type": "PodBoundReservation",
            "status": "False",
            "reason": "WaitForPodBindReservation",
        }
        assert h.events("WaitForPodBindReservation") == [
            ("Normal", "Waiting for Pod bind Reservation")
        ]

        # the replacement goes into the Reservation (allocateOnce: Succeeded), not Ready yet
        replacement = pod(node="kubelet-b", uid="pod-uid-2")
        replacement["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "Ready", "status": "False"}],
        }
        h.fake.seed(replacement)
        owner = {"namespace": "shop", "name": "ledger-3", "uid": "pod-uid-2"}
        h.manager_writes(**available(), currentOwners=[owner])
        h.manager_writes(**{**available(), "phase": "Succeeded"}, currentOwners=[owner])
        assert await h.step() == 0.01
        assert h.condition("ReservationBound") == {"type": "ReservationBound", "status": "True"}
        assert h.status()["podRef"] == owner
        assert h.events("PodBoundReservation") == [
            ("Normal", 'Reservation bound by pod "shop/ledger-3"')
        ]
        assert h.condition("BoundPodReady") == {
            "type": "BoundPodReady",
            "status": "False",
            "reason": "WaitForBoundPodReady",
        }
        assert h.events("WaitForBoundPodReady") == [
            ("Normal", "Waiting for Bound Pod shop/ledger-3 Ready")
        ]

        # Ready: Succeeded
        replacement["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        h.fake.seed(replacement)
        assert await h.step() is None
        status = h.status()
        message = f'Bind Pod "shop/ledger-3" in Reservation "{JOB_UID}"'
        assert (status["phase"], status["status"], status["reason"], status["message"]) == (
            "Succeeded",
            "Complete",
            "",
            message,
        )
        assert status["podRef"] == owner
        assert h.condition("BoundPodReady") == {"type": "BoundPodReady", "status": "True"}
        assert h.condition("PodBoundReservation") == {
            "type": "PodBoundReservation",
            "status": "True",
            "message": message,
        }
        assert h.events("BoundPodReady") == [("Normal", 'Bind pod "shop/ledger-3" is ready')]
        assert h.events("Complete") == [("Normal", message)]
        assert h.evictions() == 1
        assert h.fake.get("Reservation", JOB_UID) is not None  # koord-manager's to end

    run(fake, body)


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        # TestMigrateWithReservationExpired
        (
            {
                "phase": "Failed",
                "conditions": [{"type": "Ready", "status": "False", "reason": "Expired"}],
            },
            "ReservationExpired",
            "Reservation expired",
        ),
        # TestMigrateWithReservationScheduleFailed: no node, and no longer Pending
        (
            {
                "phase": "Failed",
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/5 nodes: 5 Too many pods.",
                    }
                ],
            },
            "Unschedulable",
            "0/5 nodes: 5 Too many pods.",
        ),
        # TestAbortJobIfReserveOnSameNode
        (
            available("kubelet-a"),
            "ForbiddenMigratePod",
            f'Scheduler assignes the Reservation "{JOB_UID}" on the same node as the Pod',
        ),
        # TestMigrateWhenEvictingWithSucceededReservation: another pod took it first
        (
            {
                **available(),
                "phase": "Succeeded",
                "currentOwners": [{"namespace": "shop", "name": "ledger-9"}],
            },
            "ForbiddenMigratePod",
            "Reservation is already bound by another Pod",
        ),
    ],
)
def test_a_reservation_that_cannot_take_the_pod_fails_the_job_and_evicts_nothing(
    status: dict[str, Any], reason: str, message: str
) -> None:
    fake = cluster(pod(), job())

    async def body(h: Harness) -> None:
        await running_with_reservation(h)
        h.manager_writes(**status)
        assert await h.step() is None
        got = h.status()
        assert (got["phase"], got["reason"], got["message"]) == ("Failed", reason, message)
        assert h.evictions() == 0
        assert h.fake.get("Pod", "ledger-3", "shop") is not None
        # Koordinator's aborts post no Event for an expired or unschedulable Reservation;
        # the Unschedulable one is the Warning the copied message came with
        said = {"ReservationExpired": 0, "Unschedulable": 1, "ForbiddenMigratePod": 1}
        assert len(h.events(reason)) == said[reason]

    run(fake, body)


def test_a_timed_out_job_deletes_its_reservation() -> None:
    fake = cluster(pod(), job())

    async def body(h: Harness) -> None:
        await running_with_reservation(h)
        assert await h.step() == 0.01  # Pending
        h.now = NOW + 420  # the job's 7m
        assert await h.step() is None
        got = h.status()
        assert (got["phase"], got["reason"], got["message"]) == (
            "Failed",
            "Timeout",
            "Abort job caused by timeout",
        )
        assert h.fake.get("Reservation", JOB_UID) is None
        assert h.fake.calls("delete", rf"/reservations/{JOB_UID}$")
        assert h.evictions() == 0

    run(fake, body)


def test_the_scavenger_and_a_deleted_job_take_the_reservation_along() -> None:
    fake = cluster(pod(), job())

    async def body(h: Harness) -> None:
        await running_with_reservation(h)
        await eventually(h.caught_up, 5)
        h.now = NOW + 420 + 299  # 5 minutes of grace after the TTL: not yet
        await h.controller.scavenge_once()
        assert h.fake.get("Reservation", JOB_UID) is not None
        h.now = NOW + 420 + 300
        await h.controller.scavenge_once()
        assert h.fake.get("Reservation", JOB_UID) is None
        assert h.fake.get("PodMigrationJob", "move-ledger") is None

    run(fake, body)
    other = cluster(pod(), job())

    async def deleted(h: Harness) -> None:
        await running_with_reservation(h)
        await eventually(h.caught_up, 5)
        other.remove("PodMigrationJob", "move-ledger")
        await eventually(lambda: other.get("Reservation", JOB_UID) is None, 5)

    run(other, deleted)


def test_a_reservation_that_cannot_be_created_is_said_and_retried() -> None:
    fake = cluster(pod(), job(), reservations=False)  # no Reservation CRD

    async def body(h: Harness) -> None:
        assert await h.step() is None
        assert await h.step() == 0.01
        cond = h.condition("ReservationCreated")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "FailedCreateReservation")
        assert cond["message"].startswith("Failed to create Reservation caused by ")
        assert [t for t, _ in h.events("FailedCreateReservation")] == ["Warning"]
        assert h.status()["phase"] == "Running"
        assert await h.step() == 0.01
        assert len(h.events("FailedCreateReservation")) == 1
        assert h.evictions() == 0

    run(fake, body)


def test_a_named_reservation_gets_its_order_or_is_missing() -> None:
    mine = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": "held-for-ledger"},
        "spec": {"template": {"spec": {}}, "owners": [{"controller": STS_REF}], "ttl": "1h"},
        "status": {"phase": "Pending"},
    }
    ref = {"reservationRef": {"name": "held-for-ledger"}}
    fake = cluster(pod(), job(reservationOptions=ref), mine)

    async def body(h: Harness) -> None:
        assert await h.step() is None  # Running
        assert await h.step() == 0.01  # Pending: nothing created
        assert [r["metadata"]["name"] for r in h.fake.objects("Reservation")] == ["held-for-ledger"]
        held = h.fake.get("Reservation", "held-for-ledger")
        assert held is not None
        assert held["metadata"]["labels"][LABEL_RESERVATION_ORDER] == str(int((NOW + 30) * 1000))
        h.fake.remove("Reservation", "held-for-ledger")
        assert await h.step() is None
        got = h.status()
        assert (got["phase"], got["reason"], got["message"]) == (
            "Failed",
            "MissingReservation",
            'Abort job caused by missing Reservation "held-for-ledger"',
        )

    run(fake, body)


def test_a_pending_pod_is_not_evicted_and_the_job_waits_for_it_to_be_placed() -> None:
    pending = pod(node="")
    pending["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes: 2 Insufficient memory.",
            }
        ],
    }
    fake = cluster(pending, job())

    async def body(h: Harness) -> None:
        await running_with_reservation(h)
        assert "object" in h.reservation()["spec"]["owners"][0]
        h.manager_writes(**available())
        assert await h.step() == 0.01
        assert h.condition("PodScheduled") == {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/2 nodes: 2 Insufficient memory.",
        }
        assert h.evictions() == 0
        placed = copy.deepcopy(pending)
        placed["spec"]["nodeName"] = "kubelet-b"
        placed["status"] = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
        }
        h.fake.seed(placed)
        assert await h.step() is None
        got = h.status()
        assert (got["phase"], got["status"], got["message"]) == (
            "Succeeded",
            "Complete",
            'Assign Pod "shop/ledger-3" to node "kubelet-b"',
        )
        assert h.condition("PodScheduled") == {"type": "PodScheduled", "status": "True"}
        assert h.evictions() == 0

    run(fake, body)


def test_evict_directly_jobs_need_no_reservation() -> None:
    fake = cluster(pod(), job("EvictDirectly"), reservations=False)

    async def body(h: Harness) -> None:
        assert await h.step() is None
        assert await h.step() == 0.01
        assert h.evictions() == 1
        assert await h.step() is None
        assert h.status()["phase"] == "Succeeded"
        assert not h.fake.calls(path=r"/reservations")

    run(fake, body)
