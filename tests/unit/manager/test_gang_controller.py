"""koord-manager's gang controller against the in-process fake API server: a gang's members
leave their scheduling gate together when the whole group fits (Koordinator's Permit, done
before scheduling), the others wait whole and say why in a FailedScheduling Event, and
PodGroup status is written as Koordinator's PodGroup controller writes it.

The informers run for real; passes are called by the test with a manual clock, each after the
informers have caught up with the fake's objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from koordapi.gang import spec as gang_spec
from koordapi.gang.gate import GATE, gated
from koordkube.resources import object_key
from manager.controllers.events import EventRecorder
from manager.controllers.gang import KEY, GangController
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run

NS = "koordinator-system"
START = 1_900_000_000.0  # epoch seconds


def member(
    name: str,
    gang: str,
    minimum: int,
    cpu: str,
    *,
    created: int,
    waiting: str = "",
    mode: str = "",
    policy: str = "",
) -> dict[str, Any]:
    annotations = {
        gang_spec.ANNOTATION_NAME: gang,
        gang_spec.ANNOTATION_MIN_AVAILABLE: str(minimum),
    }
    if waiting:
        annotations[gang_spec.ANNOTATION_WAITING_TIME] = waiting
    if mode:
        annotations[gang_spec.ANNOTATION_MODE] = mode
    if policy:
        annotations[gang_spec.ANNOTATION_MATCH_POLICY] = policy
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "jobs",
            "annotations": annotations,
            "creationTimestamp": f"2030-03-17T08:00:{created:02d}Z",
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            "schedulingGates": [{"name": GATE}],
        },
        "status": {"phase": "Pending"},
    }


def filler(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "other"},
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


def node(cpu: str, pods: int = 110) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": str(pods)}},
    }


@dataclass
class Harness:
    api: FakeKubeAPI
    state: ClusterState
    controller: GangController
    now: list[float]

    def caught_up(self) -> bool:
        for informer, kind in (
            (self.state.nodes, "Node"),
            (self.state.pods, "Pod"),
            (self.state.pod_groups, "PodGroup"),
        ):
            want = {object_key(o): o["metadata"]["resourceVersion"] for o in self.api.objects(kind)}
            have = {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}
            if want != have:
                return False
        return True

    async def pass_(self, seconds: float = 1.0) -> float | None:
        await eventually(self.caught_up)
        self.now[0] += seconds
        return await self.controller.reconcile(KEY)

    def gated(self) -> list[str]:
        return sorted(p["metadata"]["name"] for p in self.api.objects("Pod") if gated(p))

    def released(self) -> list[str]:
        return sorted(
            p["metadata"]["name"]
            for p in self.api.objects("Pod")
            if "schedulingGates" in p["spec"] and not gated(p)
        )

    def events(self, pod: str) -> list[str]:
        return [
            e["message"]
            for e in self.api.objects("Event")
            if e["involvedObject"]["name"] == pod and e["reason"] == "FailedScheduling"
        ]

    def bind(self, name: str) -> None:
        pod = self.api.get("Pod", name, "jobs")
        assert pod is not None
        self.api.seed({**pod, "spec": {**pod["spec"], "nodeName": "node-1"}})


@asynccontextmanager
async def watching(api: FakeKubeAPI) -> AsyncIterator[Harness]:
    kube = api.kube_api()
    state = ClusterState(kube, NS, "slo-controller-config")
    now = [START]
    events = EventRecorder(kube, clock=lambda: now[0])
    controller = GangController(kube, state, events, ManagerMetrics(), clock=lambda: now[0])
    informers = (state.nodes, state.pods, state.pod_groups)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.gather(*(i.wait_synced() for i in informers))
        yield Harness(api, state, controller, now)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def four_on_room_for_three() -> FakeKubeAPI:
    # node 7300m; the filler takes 2150m: 5150m left, room for three 1700m members (5100m)
    api = FakeKubeAPI()
    api.seed(node("7300m"), filler("filler", "2150m"))
    api.seed(*(member(f"w-{i}", "train", 4, "1700m", created=i) for i in range(4)))
    return api


def test_a_strict_gang_runs_none_until_all_fit_then_all_go_together() -> None:
    api = four_on_room_for_three()

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.gated() == ["w-0", "w-1", "w-2", "w-3"]
            # Koordinator's summaryAndRecordFailedMessage: the first member left without a
            # node, kube-scheduler's fit error, and how many of the group had one
            want = (
                'GangGroup "jobs/train" gets rejected due to member Pod "w-3" is unschedulable '
                'with reason "0/1 nodes are available: 1 Insufficient cpu.", '
                "alreadyWaitForBound: 3"
            )
            assert h.events("w-0") == [want]
            assert h.events("w-3") == [want]
            await h.pass_()
            assert len(h.events("w-0")) == 1  # told once while the reason stays
            # deleted, the filler still holds its room until it is gone, as kube-scheduler
            # counts it: letting the gang go now would leave a member unplaced
            filler_pod = api.get("Pod", "filler", "other")
            assert filler_pod is not None
            meta = {**filler_pod["metadata"], "deletionTimestamp": "2030-03-17T08:01:00Z"}
            api.seed({**filler_pod, "metadata": meta})
            await h.pass_()
            assert len(h.gated()) == 4
            api.remove("Pod", "filler", "other")
            await h.pass_()
            assert h.gated() == []
            assert h.released() == ["w-0", "w-1", "w-2", "w-3"]

    run(scenario())


def test_too_few_members_wait_with_koordinators_basic_check_text() -> None:
    api = FakeKubeAPI()
    api.seed(node("64"))
    api.seed(*(member(f"w-{i}", "train", 3, "100m", created=i) for i in range(2)))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.gated() == ["w-0", "w-1"]
            # PreEnqueue's basicGangRequirementsCheck, each member in its own name
            assert h.events("w-1") == [
                "gangGroup [jobs/train] basic check: memberGangs [jobs/train] child pod not "
                "collect enough, current gang: jobs/train, podName: jobs/w-1"
            ]
            api.seed(member("w-2", "train", 3, "100m", created=2))
            await h.pass_()
            assert h.released() == ["w-0", "w-1", "w-2"]

    run(scenario())


def test_of_two_gangs_fitting_alone_not_together_the_older_runs_the_other_waits_whole() -> None:
    # 5900m: gang a (3 x 1300m = 3900m) or gang b (2 x 1900m = 3800m), not both (7700m)
    api = FakeKubeAPI()
    api.seed(node("5900m"))
    api.seed(*(member(f"b-{i}", "gang-b", 2, "1900m", created=10 + i) for i in range(2)))
    api.seed(*(member(f"a-{i}", "gang-a", 3, "1300m", created=i) for i in range(3)))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.released() == ["a-0", "a-1", "a-2"]
            assert h.gated() == ["b-0", "b-1"]  # released members keep their room unbound
            for name in ("a-0", "a-1", "a-2"):
                h.bind(name)
            await h.pass_()
            assert h.gated() == ["b-0", "b-1"]
            (message,) = h.events("b-0")
            assert "Insufficient cpu" in message and "alreadyWaitForBound: 1" in message

    run(scenario())


def test_a_released_member_keeps_its_room_for_its_waiting_time_only() -> None:
    # gang a (2 x 2s waiting-time): released, never bound; gang b fits only in a's room
    api = FakeKubeAPI()
    api.seed(node("3"))
    api.seed(*(member(f"a-{i}", "gang-a", 2, "1250m", created=i, waiting="30s") for i in range(2)))

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_() == 30.0  # the next pass due when a's room runs out
            assert h.released() == ["a-0", "a-1"]
            api.seed(member("b-0", "gang-b", 1, "1750m", created=9))
            await h.pass_(5.0)
            assert h.gated() == ["b-0"]  # 3000m - 2500m kept for a: 500m
            await h.pass_(26.0)  # 31 s after a was let go, unbound: its room is given back
            assert h.gated() == []

    run(scenario())


def test_a_gang_once_satisfied_lets_a_later_member_go_alone() -> None:
    api = FakeKubeAPI()
    api.seed(node("8"))
    api.seed(*(member(f"w-{i}", "train", 2, "500m", created=i) for i in range(2)))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            h.bind("w-0")
            h.bind("w-1")
            await h.pass_()
            api.seed(member("w-2", "train", 2, "500m", created=5))  # a replacement
            await h.pass_()
            assert h.gated() == []

    run(scenario())


def test_podgroup_status_follows_its_members() -> None:
    api = FakeKubeAPI()
    api.seed(node("8"))
    api.seed(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "jobs"},
            "spec": {"minMember": 2},
        }
    )
    pods = []
    for i in range(2):
        pod = member(f"w-{i}", "train", 2, "500m", created=i)
        del pod["metadata"]["annotations"]
        pod["metadata"]["labels"] = {gang_spec.LABEL_POD_GROUP: "train"}
        pods.append(pod)
    api.seed(*pods)

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.released() == ["w-0", "w-1"]
            group = api.get("PodGroup", "train", "jobs")
            # "" -> Pending -> PreScheduling (2 members) -> Scheduling (none bound yet),
            # Koordinator's syncHandler repeated while the status changes
            assert group is not None and group["status"]["phase"] == "Scheduling"
            assert group["status"]["scheduled"] == 0
            assert group["status"]["scheduleStartTime"]
            for name in ("w-0", "w-1"):
                h.bind(name)
            await h.pass_()
            group = api.get("PodGroup", "train", "jobs")
            assert group is not None
            assert group["status"]["phase"] == "Scheduled"
            assert group["status"]["scheduled"] == 2

    run(scenario())


def test_gangs_of_a_group_wait_for_each_other_and_go_together() -> None:
    # a driver gang (1) and a worker gang (3) bundled by the groups annotation: the driver alone
    # is complete and fits, but goes only once the workers are all there too
    group = '["jobs/driver", "jobs/workers"]'
    api = FakeKubeAPI()
    api.seed(node("16"))
    driver = member("d-0", "driver", 1, "700m", created=0)
    driver["metadata"]["annotations"][gang_spec.ANNOTATION_GROUPS] = group
    api.seed(driver)
    workers = [member(f"w-{i}", "workers", 3, "1300m", created=1 + i) for i in range(3)]
    for pod in workers:
        pod["metadata"]["annotations"][gang_spec.ANNOTATION_GROUPS] = group

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.gated() == ["d-0"]
            (message,) = h.events("d-0")
            assert "memberGangs [jobs/workers]" in message  # the gang that is missing
            api.seed(*workers[:2])
            await h.pass_()
            assert h.gated() == ["d-0", "w-0", "w-1"]
            api.seed(workers[2])
            await h.pass_()
            assert h.released() == ["d-0", "w-0", "w-1", "w-2"]

    run(scenario())


def test_a_gated_pod_whose_gang_annotations_were_removed_is_let_go() -> None:
    api = FakeKubeAPI()
    api.seed(node("8"))
    orphan = member("o-0", "train", 5, "100m", created=0)
    del orphan["metadata"]["annotations"]
    api.seed(orphan, member("w-0", "train", 2, "100m", created=1))

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.released() == ["o-0"]
            assert h.gated() == ["w-0"]  # its gang still lacks a member

    run(scenario())


def test_without_a_gang_waiting_pod_events_ask_for_no_pass() -> None:
    api = FakeKubeAPI()
    api.seed(node("8"), filler("plain", "100m"))
    nudges: list[str] = []

    async def scenario() -> None:
        async with watching(api) as h:
            h.controller.nudge = lambda: nudges.append("pass")
            plain = api.get("Pod", "plain", "other")
            assert plain is not None
            h.controller._on_pod("MODIFIED", plain)
            h.controller._on_event("MODIFIED", node("8"))
            assert nudges == []
            h.controller._on_pod("ADDED", member("w-0", "train", 2, "100m", created=0))
            assert nudges == ["pass"]
            h.controller._on_event("MODIFIED", node("8"))  # room may change for the gang
            assert nudges == ["pass", "pass"]

    run(scenario())
