"""koord-manager's ElasticQuota status controller against the in-process fake API server: the
annotations and status.used Koordinator's controller.go writes (its TestController_Run and
TestUpdateElasticQuotaStatusIfChanged shapes, other numbers), written only when they change,
one pass a second at most, and the per-quota metrics.

The informers run for real against FakeKubeAPI; the passes are called by the test with a
manual clock, each after the informers have caught up with the fake's objects.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordapi.quota import model
from koordapi.quota.revoke import ElasticQuotaArgs
from koordapi.quota.runtime import QuotaTree
from koordkube.resources import object_key
from manager.controllers.elasticquota import (
    KEY,
    NO_REVOKE,
    ElasticQuotaStatusController,
    resource_list_json,
    status_patch,
)
from manager.controllers.events import EventRecorder
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import ManualClock, eventually, run
from tests.unit.manager.test_controllers import running

NS = "koordinator-system"
GI = 1024**3
QUOTA_PATH = r"/elasticquotas/"


def make_quota(name: str, min_: dict[str, str], max_: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "quotas"},
        "spec": {"min": min_, "max": max_},
    }


def make_pod(
    name: str, quota: str, cpu: str, memory: str | None = None, *, node: str | None = "node-1"
) -> dict[str, Any]:
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "work", "labels": {model.LABEL_QUOTA_NAME: quota}},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def make_node(cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": cpu, "memory": memory}},
    }


@dataclass
class Harness:
    api: FakeKubeAPI
    state: ClusterState
    controller: ElasticQuotaStatusController
    metrics: ManagerMetrics
    clock: ManualClock
    nudges: list[int] = field(default_factory=list)

    def quota(self, name: str) -> dict[str, Any]:
        obj = self.api.get("ElasticQuota", name, "quotas")
        assert obj is not None
        return obj

    def annotation(self, name: str, key: str) -> Any:
        text = (self.quota(name)["metadata"].get("annotations") or {}).get(key)
        return None if text is None else json.loads(text)

    def patches(self) -> int:
        return len(self.api.calls("patch", QUOTA_PATH))

    def caught_up(self) -> bool:
        """Every informer holds the fake's objects at their current versions."""
        for informer, kind in (
            (self.state.nodes, "Node"),
            (self.state.pods, "Pod"),
            (self.state.elastic_quotas, "ElasticQuota"),
        ):
            want = {object_key(o): o["metadata"]["resourceVersion"] for o in self.api.objects(kind)}
            have = {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}
            if want != have:
                return False
        return True

    async def pass_(self, seconds: float = 1.0) -> float | None:
        """One reconcile of the controller's key, ``seconds`` after the last one, once the
        informers have caught up."""
        await eventually(self.caught_up)
        self.clock.advance(seconds)
        return await self.controller.reconcile(KEY)

    def gauge(self, name: str, field_: str, resource: str) -> float | None:
        return self.metrics.registry.get_sample_value(
            "koord_manager_elastic_quota_status",
            {
                "name": name,
                "resource": resource,
                "tree": "",
                "is_parent": "false",
                "parent": model.ROOT_QUOTA,
                "field": field_,
            },
        )


@asynccontextmanager
async def watching(
    api: FakeKubeAPI, revoke: ElasticQuotaArgs = NO_REVOKE
) -> AsyncIterator[Harness]:
    kube = api.kube_api()
    state = ClusterState(kube, NS, "slo-controller-config")
    metrics, clock = ManagerMetrics(), ManualClock()
    nudges: list[int] = []
    controller = ElasticQuotaStatusController(
        kube,
        state,
        metrics,
        nudge=lambda: nudges.append(1),
        clock=clock.monotonic,
        revoke=revoke,
        events=EventRecorder(kube),
    )
    informers = (state.nodes, state.pods, state.elastic_quotas)
    tasks = [asyncio.create_task(i.run()) for i in informers]
    try:
        await asyncio.gather(*(i.wait_synced() for i in informers))
        yield Harness(api, state, controller, metrics, clock, nudges)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# Two quotas under the root share a node of 7300m and 37Gi; their shared weights default to
# their max (cpu 6000 and 5000).
def two_quotas() -> FakeKubeAPI:
    api = FakeKubeAPI()
    api.seed(
        make_node("7300m", "37Gi"),
        make_quota("quota-a", {"cpu": "2100m", "memory": "11Gi"}, {"cpu": "6", "memory": "30Gi"}),
        make_quota("quota-b", {"cpu": "1700m", "memory": "9Gi"}, {"cpu": "5", "memory": "20Gi"}),
        make_pod("a-1", "quota-a", "2900m", "8Gi"),
        make_pod("a-2", "quota-a", "1000m", "5Gi"),
        make_pod("a-3", "quota-a", "1700m", node=None),  # pending: requested, not used
        make_pod("b-1", "quota-b", "900m", "3Gi"),
    )
    return api


def test_a_quota_borrows_and_gives_back_the_runtime_koordinators_arithmetic_gives() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_() is None
            # quota-a asks 2900m + 1000m + 1700m = 5600m, quota-b 900m (within its min: it lends
            # the 800m it does not use). cpu: a gets its min 2100m, b its request 900m; the
            # 4300m left go to a by weight (6000/6000 * 4300 = 4300), 6400m > 5600m: capped at
            # its request, 5600m: 3500m borrowed above its min. memory: a asks 13Gi, b 3Gi,
            # both within the 37Gi.
            assert h.annotation("quota-a", model.ANNOTATION_RUNTIME) == {
                "cpu": "5600m",
                "memory": "13Gi",
            }
            assert h.annotation("quota-a", model.ANNOTATION_REQUEST) == {
                "cpu": "5600m",
                "memory": "13Gi",
            }
            assert h.annotation("quota-a", model.ANNOTATION_CHILD_REQUEST) == {
                "cpu": "5600m",
                "memory": "13Gi",
            }
            # used: the assigned pods only (a-3 waits)
            assert h.quota("quota-a")["status"]["used"] == {"cpu": "3900m", "memory": "13Gi"}
            assert h.annotation("quota-b", model.ANNOTATION_RUNTIME) == {
                "cpu": "900m",
                "memory": "3Gi",
            }
            # empty lists are not written where the quota holds none (quotav1.RemoveZeros)
            for key in (model.ANNOTATION_GUARANTEED, model.ANNOTATION_ALLOCATED):
                assert h.annotation("quota-a", key) is None
            assert h.annotation("quota-b", model.ANNOTATION_NON_PREEMPTIBLE_USED) is None

            # quota-b now wants 900m + 3500m = 4400m and 5Gi: both quotas ask more than their
            # min. cpu: mins 2100m + 1700m, 3500m left, shared by weight 6000:5000:
            # a + int(6000 * 3500 / 11000 + 0.5) = 2100 + 1909 = 4009m,
            # b + int(5000 * 3500 / 11000 + 0.5) = 1700 + 1591 = 3291m, both under their
            # requests: quota-a gives back 1591m of what it borrowed. memory: b's 5Gi is
            # within its min.
            api.seed(make_pod("b-2", "quota-b", "3500m", "2Gi", node=None))
            assert await h.pass_() is None
            assert h.annotation("quota-a", model.ANNOTATION_RUNTIME) == {
                "cpu": "4009m",
                "memory": "13Gi",
            }
            assert h.annotation("quota-b", model.ANNOTATION_RUNTIME) == {
                "cpu": "3291m",
                "memory": "5Gi",
            }
            assert h.annotation("quota-b", model.ANNOTATION_REQUEST) == {
                "cpu": "4400m",
                "memory": "5Gi",
            }
            assert h.quota("quota-b")["status"]["used"] == {"cpu": "900m", "memory": "3Gi"}
            # quota-a's request and used did not change: only its runtime was written
            patch = h.api.calls("patch", "/quota-a")[-1].body
            assert patch == {
                "metadata": {
                    "annotations": {model.ANNOTATION_RUNTIME: '{"cpu":"4009m","memory":"13Gi"}'}
                }
            }

            # b-2 goes: quota-a borrows again
            api.remove("Pod", "b-2", "work")
            await h.pass_()
            assert h.annotation("quota-a", model.ANNOTATION_RUNTIME)["cpu"] == "5600m"
            assert h.annotation("quota-b", model.ANNOTATION_REQUEST)["cpu"] == "900m"

    run(scenario())


def test_no_patch_when_nothing_changed() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            written = h.patches()
            assert written == 2
            # the patched quotas come back through the informer; the numbers are the same
            await h.pass_()
            # a pod event that changes no sum (labels only) asks for a pass that writes nothing
            relabelled = make_pod("a-1", "quota-a", "2900m", "8Gi")
            relabelled["metadata"]["labels"]["team"] = "ranking"
            api.seed(relabelled)
            await h.pass_()
            assert h.patches() == written
            # a quota that holds the numbers with zeros added or in another spelling of the
            # same amounts is not written either (compared as amounts, zeros removed)
            current = h.quota("quota-b")
            current["status"]["used"] = {"cpu": "0.9", "memory": "3072Mi", "pods": "0"}
            api.seed(current)
            await h.pass_()
            assert h.patches() == written

    run(scenario())


def test_passes_are_a_second_apart_and_an_event_storm_is_one_pass() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_() is None
            assert h.patches() == 2
            seen = len(h.nudges)
            for n in range(23):  # a storm of pod events within the second
                api.seed(make_pod(f"s-{n}", "quota-b", "10m", node=None))
            await eventually(h.caught_up)
            assert len(h.nudges) >= seen + 23  # each event asks for a pass ...
            # ... and 0.3 s after the last pass the controller waits the 0.7 s left
            delay = await h.pass_(0.3)
            assert delay == pytest.approx(0.7)
            assert h.patches() == 2
            # then one pass writes the storm's sum: 900m + 23 * 10m = 1130m requested by b,
            # still within its min 1700m: its runtime is its request; quota-a's stays 5600m
            # (2100m + the 7300m - 2100m - 1130m left, capped at its request): one patch, b's
            assert await h.pass_(0.75) is None
            assert h.annotation("quota-b", model.ANNOTATION_REQUEST)["cpu"] == "1130m"
            assert h.annotation("quota-b", model.ANNOTATION_RUNTIME)["cpu"] == "1130m"
            assert h.patches() == 3

    run(scenario())


def test_another_key_asks_for_a_pass_and_nothing_is_written_before_the_quotas_synced() -> None:
    api = two_quotas()

    async def scenario() -> None:
        kube = api.kube_api()
        state = ClusterState(kube, NS, "slo-controller-config")
        nudges: list[int] = []
        controller = ElasticQuotaStatusController(
            kube, state, ManagerMetrics(), nudge=lambda: nudges.append(1)
        )
        assert await controller.reconcile("node-1") is None
        assert nudges == [1]
        # the quota informer has not listed yet: look again in a second, write nothing
        assert await controller.reconcile(KEY) == 1.0
        assert api.calls("patch") == []

    run(scenario())


def test_a_malformed_quota_is_skipped_with_one_log_line(caplog: Any) -> None:
    api = two_quotas()
    api.seed(make_quota("quota-bad", {"cpu": "1"}, {"cpu": "lots"}))

    async def scenario() -> None:
        async with watching(api) as h:
            with caplog.at_level(logging.WARNING, "manager.controllers.elasticquota"):
                await h.pass_()
                await h.pass_()
            skipped = [r.message for r in caplog.records if "status not written" in r.message]
            assert len(skipped) == 1
            assert skipped[0].startswith("ElasticQuota quotas/quota-bad: status not written")
            assert "lots" in skipped[0]
            assert h.annotation("quota-bad", model.ANNOTATION_RUNTIME) is None
            # the others are written all the same
            assert h.annotation("quota-a", model.ANNOTATION_RUNTIME) is not None
            # fixed, and a pod of 700m in it: within its min, its runtime is its request
            api.seed(
                make_quota("quota-bad", {"cpu": "1"}, {"cpu": "2"}),
                make_pod("c-1", "quota-bad", "700m"),
            )
            await h.pass_()
            assert h.annotation("quota-bad", model.ANNOTATION_RUNTIME) == {"cpu": "700m"}

    run(scenario())


def test_a_quota_tree_that_cannot_be_built_writes_nothing() -> None:
    api = two_quotas()
    orphan = make_quota("quota-c", {"cpu": "1"}, {"cpu": "2"})
    orphan["metadata"]["labels"] = {model.LABEL_PARENT: "quota-nowhere"}
    api.seed(orphan)

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            assert h.patches() == 0
            assert "quota-nowhere" in h.controller.book.broken
            api.remove("ElasticQuota", "quota-c", "quotas")
            await h.pass_()
            assert h.patches() == 2

    run(scenario())


def test_metrics_per_quota_with_koordinators_labels_and_fields() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with watching(api) as h:
            await h.pass_()
            # cpu in milli-cores, memory in bytes, as Koordinator's RecordElasticQuotaMetric
            assert h.gauge("quota-a", "runtime", "cpu") == 5600
            assert h.gauge("quota-a", "request", "cpu") == 5600
            assert h.gauge("quota-a", "used", "cpu") == 3900
            assert h.gauge("quota-a", "used", "memory") == 13 * GI
            assert h.gauge("quota-a", "min", "memory") == 11 * GI
            assert h.gauge("quota-a", "max", "cpu") == 6000
            assert h.gauge("quota-b", "sharedWeight", "cpu") == 5000
            assert h.gauge("quota-b", "child-request", "memory") == 3 * GI
            # a quota gone takes its series with it
            api.remove("ElasticQuota", "quota-b", "quotas")
            await h.pass_()
            assert h.gauge("quota-b", "max", "cpu") is None
            assert h.gauge("quota-a", "max", "cpu") == 6000

    run(scenario())


def test_the_manager_runs_it_on_the_leader() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            await eventually(lambda: model.ANNOTATION_RUNTIME in annotations("quota-b"))
            assert json.loads(annotations("quota-b")[model.ANNOTATION_RUNTIME]) == {
                "cpu": "900m",
                "memory": "3Gi",
            }
            # a pod placed later is counted and written by a later pass (a second on)
            api.seed(make_pod("b-2", "quota-b", "300m", "1Gi"))
            await eventually(lambda: used("quota-b").get("cpu") == "1200m", timeout=5.0)
            assert used("quota-b")["memory"] == "4Gi"
            assert (
                manager.metrics.registry.get_sample_value(
                    "koord_manager_elastic_quota_status",
                    {
                        "name": "quota-b",
                        "resource": "cpu",
                        "tree": "",
                        "is_parent": "false",
                        "parent": model.ROOT_QUOTA,
                        "field": "used",
                    },
                )
                == 1200
            )

    def annotations(name: str) -> dict[str, str]:
        obj = api.get("ElasticQuota", name, "quotas") or {}
        return dict((obj.get("metadata") or {}).get("annotations") or {})

    def used(name: str) -> dict[str, str]:
        obj = api.get("ElasticQuota", name, "quotas") or {}
        return dict((obj.get("status") or {}).get("used") or {})

    run(scenario())


def test_a_clock_gone_back_does_not_hold_the_passes() -> None:
    api = two_quotas()

    async def scenario() -> None:
        async with watching(api) as h:
            assert await h.pass_() is None
            assert await h.pass_(-3600.0) is None  # a pass, not an hour's wait

    run(scenario())


# -- the patch itself (updateElasticQuotaStatusIfChanged) ------------------------------------


def test_the_patch_deletes_a_resource_no_longer_used_and_rewrites_an_unreadable_one() -> None:
    quota = make_quota("q", {"cpu": "1"}, {"cpu": "3", "nvidia.com/gpu": "2"})
    quota["metadata"]["annotations"] = {model.ANNOTATION_RUNTIME: "{not json"}
    quota["status"] = {"used": {"cpu": "1", "nvidia.com/gpu": "1"}}
    tree = QuotaTree.from_objects([quota], {"cpu": 4100, "nvidia.com/gpu": 2})
    patch, changes = status_patch(quota, tree.info("q"))
    assert patch is not None
    # nothing requested: runtime 0 in each resource max names
    assert patch["metadata"]["annotations"] == {
        model.ANNOTATION_RUNTIME: '{"cpu":"0","nvidia.com/gpu":"0"}'
    }
    assert patch["status"] == {"used": {"cpu": None, "nvidia.com/gpu": None}}
    assert changes == [
        "runtime changed from unreadable to cpu:0,nvidia.com/gpu:0",
        "used changed from cpu:1,nvidia.com/gpu:1 to <empty>",
    ]


def test_a_used_that_is_no_resource_list_is_replaced() -> None:
    quota = make_quota("q", {"cpu": "1"}, {"cpu": "3"})
    quota["status"] = {"used": ["cpu", "2"]}
    tree = QuotaTree.from_objects([quota], {"cpu": 4100})
    patch, changes = status_patch(quota, tree.info("q"))
    assert patch is not None and patch["status"] == {"used": {}}
    assert "used changed from unreadable to <empty>" in changes


def test_resource_lists_are_written_as_kubernetes_quantities_in_gos_json() -> None:
    assert resource_list_json({"memory": 37 * GI, "cpu": 7300, "pods": 2000}) == (
        '{"cpu":"7300m","memory":"37Gi","pods":"2k"}'
    )
    assert resource_list_json({"cpu": 5000}) == '{"cpu":"5"}'
    assert resource_list_json({}) == "{}"


def test_a_borrowing_quota_gives_back_its_least_important_pods_after_the_delay() -> None:
    """Koordinator's QuotaOverUsedRevokeController (monitorAllQuotas, delayEvictTime 45s).
    Node 6 cores; quota-a min 4, quota-b min 2, both max 6. quota-b borrowed: its pods use
    4300m. quota-a's pods ask 3900m: quota-a's runtime 3900m, quota-b's 2100m (6000 - 3900),
    so quota-b is 2200m over its runtime."""
    api = FakeKubeAPI()
    api.seed(
        make_node("6", "32Gi"),
        make_quota("quota-a", {"cpu": "4"}, {"cpu": "6"}),
        make_quota("quota-b", {"cpu": "2"}, {"cpu": "6"}),
        make_pod("b-low", "quota-b", "1300m"),
        make_pod("b-mid", "quota-b", "1100m"),
        make_pod("b-top", "quota-b", "1900m"),
    )
    for name, priority in (("b-low", 10), ("b-mid", 20), ("b-top", 30)):
        pod = api.get("Pod", name, "work")
        assert pod is not None
        api.seed({**pod, "spec": {**pod["spec"], "priority": priority}})
    revoke = ElasticQuotaArgs(monitor_all_quotas=True, delay_evict_time=45.0)

    async def scenario() -> None:
        async with watching(api, revoke) as h:
            assert await h.pass_() is None  # nothing over-used
            api.seed(make_pod("a-1", "quota-a", "3900m", node=None))
            due = await h.pass_()
            assert h.annotation("quota-b", model.ANNOTATION_RUNTIME) == {"cpu": "2100m"}
            # last seen within its runtime a second ago: 45 s - 1 s, then one interval more
            assert due == 45.0
            await h.pass_(30.0)
            assert len(api.objects("Pod", "work")) == 4  # over for 30 s only: kept
            await h.pass_(16.0)
            # least important first until used fits (b-low 1300m, b-mid 1100m: 4300m -> 1900m),
            # then the more important of them put back if it still fits (1900 + 1100 > 2100: no)
            left = sorted(p["metadata"]["name"] for p in api.objects("Pod", "work"))
            assert left == ["a-1", "b-top"]
            told = [
                e["message"] for e in api.objects("Event") if e["reason"] == "QuotaOverUsedRevoke"
            ]
            assert len(told) == 2 and "uses cpu:4300m, over its runtime cpu:2100m" in told[0]

    run(scenario())


def test_elastic_quota_args_flag_reads_koordinators_json_and_refuses_bad_text() -> None:
    from manager.app import read_elastic_quota_args  # noqa: PLC0415

    args = read_elastic_quota_args('{"monitorAllQuotas": true, "delayEvictTime": "1m30s"}')
    assert (args.revokes, args.delay_evict_time) == (True, 90.0)
    assert not read_elastic_quota_args("").revokes  # Koordinator's defaults
    for text in ('{"monitorAllQuotas": "yes"}', "{not json", '{"delayEvictTime": "-5s"}'):
        with pytest.raises(ValueError, match="not ElasticQuotaArgs"):
            read_elastic_quota_args(text)
