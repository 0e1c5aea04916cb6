"""koord-descheduler running on tests.fakekube.FakeKubeAPI: the LowNodeLoad round creates
a PodMigrationJob, arbitration passes it, the pod is evicted through the Eviction API (a PDB's
429 retried), the job succeeds; dry runs, ReservationFirst by default, timeouts, the Lease."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import generate_latest

from descheduler.app import AppOptions, Descheduler
from descheduler.balancer import DRY_RUN_REASON
from descheduler.config import DeschedulerConfig, parse_config
from descheduler.migration.job import (
    ANNOTATION_DRY_RUN,
    ANNOTATION_EVICT_TRIGGER,
    ANNOTATION_JOB_CREATED_BY,
    ANNOTATION_PASSED_ARBITRATION,
    REASON_TIMEOUT,
    STATUS_DRY_RUN,
)
from descheduler.migration.view import pod_view
from tests.fakekube import KINDS, FakeKubeAPI, Kind
from tests.unit.koordkube.fakes import eventually

GI = 1 << 30
APPS = (
    Kind("apps", "v1", "ReplicaSet", "replicasets", True, status=True),
    Kind("apps", "v1", "StatefulSet", "statefulsets", True, status=True),
)
RS_UID = "rs-web-uid"


def config_text(
    *, dry_run: bool = False, interval: str = "0s", lease: bool = True, mode: str = "EvictDirectly"
) -> str:
    """The app's configuration; ``mode`` is defaultJobMode ("" leaves Koordinator's)."""
    job_mode = f"\n      defaultJobMode: {mode}" if mode else ""
    return f"""
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: {interval}
dryRun: {str(dry_run).lower()}
healthzBindAddress: ""
metricsBindAddress: ""
leaderElection:
  leaderElect: {str(lease).lower()}
profiles:
- name: koord-descheduler
  plugins:
    balance:
      enabled:
      - name: LowNodeLoad
  pluginConfig:
  - name: MigrationController
    args:
      apiVersion: descheduler/v1alpha2
      kind: MigrationControllerArgs{job_mode}
      arbitrationArgs:
        enabled: true
        interval: 10ms
  - name: LowNodeLoad
    args:
      apiVersion: descheduler/v1alpha2
      kind: LowNodeLoadArgs
      lowThresholds: {{cpu: 20, memory: 20}}
      highThresholds: {{cpu: 50, memory: 80}}
      anomalyCondition: {{consecutiveAbnormalities: 1}}
"""


def stamp(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": "4", "memory": str(8 * GI), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


CREATED = "2026-03-07T11:13:17Z"


def pod(name: str, node_name: str, millicpu: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            # One creation second for all: pods leave a hot node newest first, and the fake API
            # would stamp the seconds it seeds them in, which a busy machine can make two.
            "creationTimestamp": CREATED,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web",
                    "uid": RS_UID,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "c",
                    "resources": {"requests": {"cpu": f"{millicpu}m", "memory": str(GI)}},
                }
            ],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def node_metric(name: str, pods: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "status": {
            "updateTime": stamp(time.time()),
            "nodeMetric": {"nodeUsage": {"resources": {}}},
            "podsMetric": [
                {
                    "namespace": "default",
                    "name": p["metadata"]["name"],
                    "podUsage": {"resources": p["spec"]["containers"][0]["resources"]["requests"]},
                }
                for p in pods
            ],
        },
    }


def hot_and_cold() -> FakeKubeAPI:
    """``hot`` at 75% cpu (three 1-cpu pods), ``cold`` at 2.5%: one pod has to go."""
    api = FakeKubeAPI(kinds=(*KINDS, *APPS))
    hot_pods = [pod(f"web-{i}", "hot", 1000) for i in range(3)]
    cold_pods = [pod("web-3", "cold", 100)]
    api.seed(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": RS_UID},
            "spec": {"replicas": 4},
        },
        node("hot"),
        node("cold"),
        *hot_pods,
        *cold_pods,
        node_metric("hot", hot_pods),
        node_metric("cold", cold_pods),
    )
    return api


def job_object(
    name: str, pod_name: str, *, mode: str = "EvictDirectly", created: float | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "PodMigrationJob",
        "metadata": {"name": name, "creationTimestamp": stamp(created or time.time())},
        "spec": {"podRef": {"namespace": "default", "name": pod_name}, "mode": mode, "ttl": "5m"},
    }


async def running(
    app: Descheduler, body: Callable[[], Awaitable[None]], *, lead: bool = True
) -> None:
    """Run the app while ``body`` runs (first waiting until it leads), then stop it."""
    task = asyncio.create_task(app.run())
    try:
        if lead:
            await asyncio.wait_for(app.leading.wait(), 5)
        await body()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def make_app(api: FakeKubeAPI, config: DeschedulerConfig, **kw: Any) -> Descheduler:
    options = AppOptions(identity="me", requeue_after=0.02)
    return Descheduler(api.kube_api(), config, options, **kw)


def phase(api: FakeKubeAPI, name: str) -> str:
    obj = api.get("PodMigrationJob", name)
    return "" if obj is None else str((obj.get("status") or {}).get("phase", ""))


def events(api: FakeKubeAPI, reason: str) -> list[dict[str, Any]]:
    return [e for e in api.objects("Event") if e.get("reason") == reason]


def test_a_hot_node_loses_a_pod_through_a_job_and_the_eviction_api() -> None:
    api = hot_and_cold()
    api.blocked_evictions.add("default/web-0")  # a PDB says no, at first
    app = make_app(api, parse_config(config_text()))

    async def body() -> None:
        await eventually(lambda: len(api.objects("PodMigrationJob")) == 1, 5)
        (job,) = api.objects("PodMigrationJob")
        name = job["metadata"]["name"]
        assert job["spec"]["mode"] == "EvictDirectly"
        assert job["spec"]["podRef"]["name"] == "web-0"
        annotations = job["metadata"]["annotations"]
        assert annotations[ANNOTATION_EVICT_TRIGGER] == "LowNodeLoad"
        assert annotations[ANNOTATION_JOB_CREATED_BY]
        assert "node is overutilized" in annotations["koordinator.sh/evict-reason"]
        # arbitrated, Running, and the eviction refused (429) twice: still Running, no delete
        await eventually(lambda: len(api.calls("create", r"/pods/web-0/eviction$")) >= 2, 5)
        assert phase(api, name) == "Running"
        assert api.get("Pod", "web-0") is not None
        assert not api.calls("delete", r"/pods/")
        assert events(api, "Evicting")[0]["type"] == "Warning"
        api.blocked_evictions.clear()
        await eventually(lambda: phase(api, name) == "Succeeded", 5)
        done = api.get("PodMigrationJob", name)
        assert done is not None
        assert done["metadata"]["annotations"][ANNOTATION_PASSED_ARBITRATION] == "true"
        assert done["status"]["message"] == 'Pod "default/web-0" has been evicted'
        assert done["spec"]["podRef"]["uid"]
        assert api.get("Pod", "web-0") is None
        assert [p["metadata"]["name"] for p in api.objects("Pod")] == ["web-1", "web-2", "web-3"]

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    text = app.metrics.exposition().decode()
    assert (
        'descheduler_pods_evicted{namespace="default",node="hot",result="success",'
        'strategy="LowNodeLoad"} 1.0' in text.splitlines()
    )
    assert 'result="error"' in text
    assert "koord_descheduler_pod_migration_jobs_created_total" in text


def test_a_dry_run_writes_the_job_down_evicts_nothing_and_posts_an_event() -> None:
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text(dry_run=True)))

    def dry_job_written() -> bool:
        jobs = api.objects("PodMigrationJob")
        return bool(jobs) and (jobs[0].get("status") or {}).get("status") == STATUS_DRY_RUN

    async def body() -> None:
        await eventually(lambda: app.metrics.rounds._value.get() == 1, 5)
        await eventually(lambda: bool(events(api, DRY_RUN_REASON)), 5)
        await eventually(dry_job_written, 5)
        # arbitration and the reconcile workers see it and leave it as it is
        await app.controller.arbitrate_once()
        (job,) = api.objects("PodMigrationJob")
        assert await app.controller.reconcile(job["metadata"]["name"]) is None

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    (event,) = events(api, DRY_RUN_REASON)
    assert event["involvedObject"]["name"] == "web-0"
    assert "would migrate pod default/web-0 off node hot" in event["message"]
    (job,) = api.objects("PodMigrationJob")
    assert job["metadata"]["annotations"][ANNOTATION_DRY_RUN] == "true"
    assert ANNOTATION_PASSED_ARBITRATION not in job["metadata"]["annotations"]
    assert job["spec"]["podRef"]["name"] == "web-0"
    assert job["status"]["phase"] == "Pending"
    assert "would migrate pod default/web-0 off node hot" in job["status"]["message"]
    assert not api.calls("create", r"/eviction$")
    text = generate_latest(app.metrics.registry).decode()
    assert 'koord_descheduler_dry_run_migrations_total{namespace="default",node="hot"' in text


def test_the_loop_creates_reservation_first_jobs_by_default() -> None:
    # Koordinator's defaultJobMode: the job reserves room off the hot node before any eviction
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text(mode="")))

    async def body() -> None:
        await eventually(lambda: len(api.objects("PodMigrationJob")) == 1, 5)
        (job,) = api.objects("PodMigrationJob")
        assert job["spec"]["mode"] == "ReservationFirst"
        await eventually(lambda: len(api.objects("Reservation")) == 1, 5)
        (reservation,) = api.objects("Reservation")
        ref = job["spec"]["podRef"]
        affinity = reservation["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
        (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchFields"][0]["values"] == ["hot"]
        assert reservation["metadata"]["name"] == job["metadata"]["uid"]
        assert reservation["spec"]["template"]["metadata"]["name"] == ref["name"]
        # Pending (nobody places it here): the pod stays where it is
        await eventually(lambda: bool(api.calls("get", r"/reservations/")), 5)
        assert not api.calls("create", r"/eviction$")
        assert api.get("Pod", ref["name"]) is not None

    asyncio.run(asyncio.wait_for(running(app, body), 20))


def test_a_timed_out_job_fails_and_finished_ones_are_left_alone() -> None:
    api = hot_and_cold()
    api.seed(job_object("old", "web-1"), job_object("aborted", "web-2"))
    api.seed({**job_object("aborted", "web-2"), "status": {"phase": "Aborted"}})
    later = time.time() + 400  # past the 5m TTL, not yet the scavenger's 5m after it
    app = make_app(api, parse_config(config_text(interval="1h")), clock=lambda: later)

    async def body() -> None:
        await eventually(lambda: phase(api, "old") == "Failed", 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    job = api.get("PodMigrationJob", "old")
    assert job is not None
    assert (job["status"]["reason"], job["status"]["message"]) == (
        REASON_TIMEOUT,
        "Abort job caused by timeout",
    )
    assert phase(api, "aborted") == "Aborted"
    assert api.get("Pod", "web-1") is not None and api.get("Pod", "web-2") is not None


def test_only_the_lease_holder_acts() -> None:
    api = hot_and_cold()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    api.seed(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "koord-descheduler", "namespace": "koordinator-system"},
            "spec": {
                "holderIdentity": "someone-else",
                "leaseDurationSeconds": 3600,
                "acquireTime": now,
                "renewTime": now,
            },
        }
    )
    api.seed(job_object("waiting", "web-1"))
    app = make_app(api, parse_config(config_text()))

    async def body() -> None:
        assert app.elector is not None
        elector = app.elector
        await eventually(lambda: elector.leader() == "someone-else", 5)
        await eventually(app.synced, 5)

    asyncio.run(asyncio.wait_for(running(app, body, lead=False), 20))
    assert not app.leading.is_set()
    assert app.metrics.rounds._value.get() == 0
    assert [j["metadata"]["name"] for j in api.objects("PodMigrationJob")] == ["waiting"]
    job = api.get("PodMigrationJob", "waiting")
    assert job is not None and ANNOTATION_PASSED_ARBITRATION not in (
        job["metadata"].get("annotations") or {}
    )
    assert not api.calls("create", r"/eviction$")


@pytest.mark.parametrize("lease", [True, False])
def test_without_leader_election_the_app_leads_at_once(lease: bool) -> None:
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text(lease=lease, dry_run=True)))

    async def body() -> None:
        await eventually(lambda: app.metrics.rounds._value.get() == 1, 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    assert (app.elector is None) is (not lease)
    leases = api.objects("Lease", "koordinator-system")
    assert [item["metadata"]["name"] for item in leases] == (["koord-descheduler"] if lease else [])


def test_the_scavenger_deletes_jobs_long_past_their_ttl() -> None:
    api = hot_and_cold()
    api.seed({**job_object("done", "web-1"), "status": {"phase": "Succeeded"}})
    later = time.time() + 700  # the 5m TTL and the scavenger's 5m of grace are over
    app = make_app(api, parse_config(config_text(interval="1h")), clock=lambda: later)

    async def body() -> None:
        await eventually(lambda: api.get("PodMigrationJob", "done") is None, 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    assert api.calls("delete", r"/podmigrationjobs/done$")


def test_object_limiters_space_out_the_evictions_of_one_workload() -> None:
    """The default workload limiter (five minutes; maxMigrating from the ladder: 2 of the
    ReplicaSet's 4 replicas, one eviction per 150 s): of the jobs for web pods that pass
    arbitration one evicts, the others wait (counted) until the clock moves 150 s on."""
    api = hot_and_cold()
    api.seed(job_object("j1", "web-1"), job_object("j2", "web-2"))
    now = [time.time()]
    app = make_app(api, parse_config(config_text(interval="1h")), clock=lambda: now[0])

    def succeeded() -> int:
        return sum(
            phase(api, j["metadata"]["name"]) == "Succeeded" for j in api.objects("PodMigrationJob")
        )

    def limited() -> float:
        return float(app.metrics.object_limited.labels("workload")._value.get())

    def evicted() -> set[str]:
        return {r.path for r in api.calls("create", r"/eviction$")}

    async def body() -> None:
        await eventually(lambda: succeeded() == 1, 5)
        waits = limited()
        await eventually(lambda: limited() >= waits + 3, 5)  # looked at again, still waiting
        assert len(evicted()) == 1 and succeeded() == 1
        now[0] += 151.0
        await eventually(lambda: succeeded() == 2, 5)
        assert len(evicted()) == 2

    asyncio.run(asyncio.wait_for(running(app, body), 20))


def shedding_cluster(pods: list[dict[str, Any]]) -> FakeKubeAPI:
    """``hot`` with ``pods``, ``cold`` (16 cores: room for them all) with one 100m pod; the
    ReplicaSet expects 6."""
    api = FakeKubeAPI(kinds=(*KINDS, *APPS))
    cold = node("cold")
    cold["status"]["allocatable"]["cpu"] = "16"
    cold_pods = [pod("web-9", "cold", 100)]
    api.seed(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": RS_UID},
            "spec": {"replicas": 6},
        },
        node("hot"),
        cold,
        *pods,
        *cold_pods,
        node_metric("hot", pods),
        node_metric("cold", cold_pods),
    )
    return api


def job_pods(api: FakeKubeAPI) -> list[str]:
    refs = (job["spec"]["podRef"] for job in api.objects("PodMigrationJob"))
    return sorted(f"{ref['namespace']}/{ref['name']}" for ref in refs)


def test_a_pod_the_migration_controller_refuses_is_not_counted_as_moving() -> None:
    # guard's 600m would cover hot's 600m excess alone, but its eviction cost is the maximum:
    # the round leaves it (and its usage) out and x1 and x2 (450m each) go instead. The
    # DaemonSet pod only adds usage. Before, guard was chosen, the round stopped there, and
    # the migration filter then refused it: nothing moved.
    guard = pod("guard", "hot", 600)
    guard["metadata"]["annotations"] = {"scheduling.koordinator.sh/eviction-cost": "2147483647"}
    ds = pod("ds", "hot", 1100)
    ds["metadata"]["ownerReferences"][0] |= {"kind": "DaemonSet", "uid": "ds-uid"}
    api = shedding_cluster([ds, pod("x1", "hot", 450), guard, pod("x2", "hot", 450)])
    app = make_app(api, parse_config(config_text()))

    async def body() -> None:
        await eventually(lambda: app.metrics.rounds._value.get() == 1, 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    assert job_pods(api) == ["default/x1", "default/x2"]
    view = app.balancer.explain.node("hot")
    assert view is not None
    (pool,) = view["pools"]
    outcomes = {c["pod"]: c["outcome"] for c in pool["candidates"]}
    assert outcomes["default/guard"] == (
        "not migrated: pod has the maximum eviction cost (2147483647)"
    )
    assert outcomes["default/x1"].startswith("PodMigrationJob ")


def test_a_pod_over_a_round_limit_is_skipped_and_its_usage_stays() -> None:
    # 3300m on hot (high 2000m): a1, a2 (namespace a) and b1 (namespace b), 1100m each, in
    # that order. maxNoOfPodsToEvictPerNamespace 1 refuses a2; its usage stays on hot, which
    # is still over, so b1 goes. Before, a2 counted as moved, the round stopped, and the
    # limit then dropped it: only a1 moved and hot stayed over.
    pods = [pod("a1", "hot", 1100), pod("a2", "hot", 1100), pod("b1", "hot", 1100)]
    for p, namespace in zip(pods, ("a", "a", "b"), strict=True):
        p["metadata"]["namespace"] = namespace
    api = shedding_cluster(pods)
    # node_metric names every pod in "default": the pods' namespaces as they are
    metric = api.get("NodeMetric", "hot")
    assert metric is not None
    for entry, namespace in zip(metric["status"]["podsMetric"], ("a", "a", "b"), strict=True):
        entry["namespace"] = namespace
    api.seed(metric)
    text = config_text().replace(
        "dryRun: false", "dryRun: false\nmaxNoOfPodsToEvictPerNamespace: 1"
    )
    app = make_app(api, parse_config(text))

    async def body() -> None:
        await eventually(lambda: app.metrics.rounds._value.get() == 1, 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    assert job_pods(api) == ["a/a1", "b/b1"]
    view = app.balancer.explain.node("hot")
    assert view is not None
    outcomes = {c["pod"]: c["outcome"] for c in view["pools"][0]["candidates"]}
    assert outcomes["a/a2"] == (
        "not migrated this round: maxNoOfPodsToEvictPerNamespace 1 reached in a"
    )


def test_evict_asks_the_object_limiters_before_it_creates_a_job() -> None:
    # the workload lost a pod a moment ago: its bucket (2 per 5 minutes for 4 replicas,
    # burst 1) is empty, so no job is created for its pods, as Koordinator's Evict refuses
    # them (checkPodExceedObjectLimiter) before CreatePodMigrationJob
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text()))
    web = api.get("Pod", "web-3")
    assert web is not None
    app.controller.object_limits.track(pod_view(web), lambda uid: 4, None)

    async def body() -> None:
        await eventually(lambda: app.metrics.rounds._value.get() == 1, 5)

    asyncio.run(asyncio.wait_for(running(app, body), 20))
    assert api.objects("PodMigrationJob") == []
    view = app.balancer.explain.node("hot")
    assert view is not None
    outcome = view["pools"][0]["candidates"][0]["outcome"]
    assert outcome.startswith("not migrated this round: the workload web/ReplicaSet/apps/v1")
    assert "has been frequently descheduled recently" in outcome
