"""GET /explain/nodes/{name}: the last descheduling round's view of a node, served read-only
next to /healthz and /metrics (a real aiohttp server on localhost), and the views themselves
from stored rounds (descheduler.explain)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from prometheus_client import CONTENT_TYPE_LATEST

from descheduler.anomaly import LowNodeLoadState
from descheduler.args import AnomalyCondition
from descheduler.cluster import NodeInfo
from descheduler.config import parse_config
from descheduler.explain import ExplainStore, node_views, open_jobs, routes
from descheduler.lownodeload import balance
from descheduler.migration.job import PodMigrationJob
from koordkube.probes import serve_probes
from tests.unit.descheduler.fakes import NOW, build_node, build_pod, pool_args
from tests.unit.descheduler.test_app import config_text, hot_and_cold, job_object, make_app
from tests.unit.descheduler.test_lownodeload import cluster
from tests.unit.koordkube.fakes import eventually
from tests.unit.koordkube.test_probes import free_port


async def get(base: str, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as reply:
        return reply.status, await reply.json()


def test_the_descheduler_serves_its_last_round_view_of_a_node() -> None:
    """hot (75% cpu, high 50%) loses web-0 through a job that stays open (a PDB says no);
    cold (2.5%) is a target; a node the round never saw is a 404."""
    api = hot_and_cold()
    api.blocked_evictions.add("default/web-0")
    port = free_port()
    text = config_text().replace('healthzBindAddress: ""', f"healthzBindAddress: 127.0.0.1:{port}")
    app = make_app(api, parse_config(text), clock=lambda: NOW)
    base = f"http://127.0.0.1:{port}"
    answers: dict[str, tuple[int, Any]] = {}

    async def scenario() -> None:
        task = asyncio.create_task(app.run())
        try:
            await asyncio.wait_for(app.leading.wait(), 5)
            await eventually(lambda: app.balancer.explain.time is not None, 5)

            async def job_listed() -> bool:
                answers["hot"] = await get(base, "/explain/nodes/hot")
                return bool(answers["hot"][1].get("migrationJobs"))

            for _ in range(500):
                if await job_listed():
                    break
                await asyncio.sleep(0.01)
            answers["cold"] = await get(base, "/explain/nodes/cold")
            answers["gone"] = await get(base, "/explain/nodes/no-such-node")
            async with aiohttp.ClientSession() as session, session.get(base + "/healthz") as r:
                assert r.status == 200
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 20))

    status, hot = answers["hot"]
    assert status == 200
    assert (hot["node"], hot["time"], hot["dryRun"], hot["note"]) == ("hot", NOW, False, "")
    (pool,) = hot["pools"]
    assert (pool["pool"], pool["category"], pool["anomalous"]) == (
        "__default_node_pool__",
        "high",
        True,
    )
    assert pool["prodThresholds"] is False
    # consecutiveAbnormalities 1: no detector, the first report decides
    assert (pool["abnormalities"], pool["consecutiveAbnormalities"]) == (None, 1)
    cpu = next(r for r in pool["resources"] if r["name"] == "cpu")
    assert cpu == {
        "name": "cpu",
        "allocatable": 4000,
        "usage": 3000,
        "usagePercent": 75.0,
        "low": 800,
        "lowPercent": 20.0,
        "high": 2000,
        "highPercent": 50.0,
    }
    assert [r["name"] for r in pool["resources"]] == ["cpu", "memory"]
    (candidate,) = pool["candidates"]
    (job,) = api.objects("PodMigrationJob")
    name = job["metadata"]["name"]
    assert candidate == {
        "pod": "default/web-0",
        "reason": "node is overutilized, node cpu usage(75.00%)>threshold(50.00%)",
        "outcome": f"PodMigrationJob {name} created",
    }
    assert pool["note"] == ""
    (listed,) = hot["migrationJobs"]
    assert listed["name"] == name and listed["pod"] == "default/web-0"
    assert listed["phase"] in ("Pending", "Running")
    assert listed["reason"] == candidate["reason"]

    status, cold = answers["cold"]
    assert status == 200
    (cold_pool,) = cold["pools"]
    assert (cold_pool["category"], cold_pool["candidates"]) == ("both-low", [])
    assert cold_pool["note"] == "underutilized: a target for pods moved off hot nodes"
    assert cold["migrationJobs"] == []

    status, gone = answers["gone"]
    assert status == 404
    assert gone == {
        "message": "node no-such-node was not among the ready nodes of the last descheduling round"
    }


def test_before_the_first_round_the_answer_is_503_and_the_probes_still_work() -> None:
    store = ExplainStore()
    views = {"hot": {"pools": [], "note": "x"}}

    async def scenario() -> list[tuple[int, Any]]:
        runner = await serve_probes(
            "127.0.0.1:0",
            lambda: True,
            lambda: (b"up 1\n", CONTENT_TYPE_LATEST),
            routes(store, lambda node: [], lambda: "no round yet, says the test"),
        )
        port = runner.addresses[0][1]
        base = f"http://127.0.0.1:{port}"
        try:
            seen = [await get(base, "/explain/nodes/hot")]
            async with aiohttp.ClientSession() as session, session.get(base + "/metrics") as r:
                assert (r.status, await r.text()) == (200, "up 1\n")
            store.record(NOW, True, views)
            seen.append(await get(base, "/explain/nodes/hot"))
            return seen
        finally:
            await runner.cleanup()

    before, after = asyncio.run(asyncio.wait_for(scenario(), 10))
    assert before == (503, {"message": "no round yet, says the test"})
    assert after == (
        200,
        {
            "node": "hot",
            "time": NOW,
            "dryRun": True,
            "pools": [],
            "note": "x",
            "migrationJobs": [],
        },
    )


def test_a_follower_says_it_runs_no_rounds() -> None:
    api = hot_and_cold()
    app = make_app(api, parse_config(config_text()))
    assert "does not hold the leader Lease" in app._no_round_yet()


def two_hot_nodes_and_a_cold_one() -> list[Any]:
    nodes = [build_node(n, 4000, 8 << 30, 110) for n in ("hot", "warm", "cold")]
    pods = [
        *(build_pod(f"h{i}", 1000, 0, "hot") for i in range(3)),
        build_pod("w0", 1000, 0, "warm"),
        build_pod("c0", 100, 0, "cold"),
    ]
    return cluster(nodes, pods)


def test_a_node_over_its_thresholds_but_not_yet_anomalous_shows_its_count() -> None:
    args = pool_args({"cpu": 20}, {"cpu": 50}, condition=AnomalyCondition(2, 1))
    infos = two_hot_nodes_and_a_cold_one()
    state = LowNodeLoadState.for_args(args)
    result = balance(args, infos, state, NOW)
    views = node_views(args, infos, result, state, NOW)

    (pool,) = views["hot"]["pools"]
    assert (pool["category"], pool["anomalous"], pool["candidates"]) == ("high", False, [])
    assert (pool["abnormalities"], pool["consecutiveAbnormalities"]) == (1, 2)
    assert pool["note"] == "none of the nodes is anomalous yet"
    assert pool["hotReason"] == ""
    (warm,) = views["warm"]["pools"]
    assert (warm["category"], warm["note"]) == ("prod-low", "none of the nodes is anomalous yet")
    assert views["cold"]["pools"][0]["category"] == "both-low"
    # the second report counts 2, not more than 2 yet; the third makes it anomalous
    result = balance(args, infos, state, NOW + 10)
    (pool,) = node_views(args, infos, result, state, NOW + 10)["hot"]["pools"]
    assert (pool["anomalous"], pool["abnormalities"]) == (False, 2)
    result = balance(args, infos, state, NOW + 20)
    (pool,) = node_views(args, infos, result, state, NOW + 20)["hot"]["pools"]
    assert (pool["anomalous"], pool["anomalousBy"], pool["note"]) == (True, "node", "")
    assert [c["pod"] for c in pool["candidates"]] == ["default/h0"]


def test_prod_thresholds_add_prod_columns_and_outcomes_are_kept() -> None:
    args = pool_args({"cpu": 20}, {"cpu": 50}, prod_low={"cpu": 10}, prod_high={"cpu": 40})
    infos = two_hot_nodes_and_a_cold_one()
    state = LowNodeLoadState.for_args(args)
    result = balance(args, infos, state, NOW)
    outcomes = {"default/h0": "dry run: DryRunMigration Event posted, no job"}
    views = node_views(args, infos, result, state, NOW, outcomes=outcomes)

    (pool,) = views["hot"]["pools"]
    assert pool["prodThresholds"] is True
    cpu = pool["resources"][0]
    assert (cpu["prodLow"], cpu["prodLowPercent"], cpu["prodHigh"]) == (400, 10.0, 1600)
    assert pool["hotReason"] == "node is overutilized, node cpu usage(75.00%)>threshold(50.00%)"
    assert [(c["pod"], c["outcome"]) for c in pool["candidates"]] == [
        ("default/h0", "dry run: DryRunMigration Event posted, no job")
    ]


def test_a_node_left_out_of_the_round_says_why_and_gone_nodes_are_dropped() -> None:
    args = pool_args({"cpu": 20}, {"cpu": 50})
    infos = two_hot_nodes_and_a_cold_one()
    infos.append(NodeInfo("new", {"cpu": 4000}))  # ready, but no NodeMetric
    state = LowNodeLoadState.for_args(args)
    views = node_views(args, infos, balance(args, infos, state, NOW), state, NOW)
    assert views["new"] == {"pools": [], "note": "left out of the round: no NodeMetric"}

    store = ExplainStore()
    store.record(NOW, False, views)
    assert store.node("warm") is not None
    store.record(NOW + 60, False, {k: v for k, v in views.items() if k != "warm"})
    assert store.node("warm") is None
    hot = store.node("hot")
    assert hot is not None and hot["time"] == NOW + 60


def test_open_jobs_are_the_pending_and_running_ones_of_the_nodes_pods() -> None:
    jobs = [
        PodMigrationJob.from_dict(job_object("a", "web-0")),
        PodMigrationJob.from_dict(
            {**job_object("b", "web-1"), "status": {"phase": "Running", "reason": "Evicting"}}
        ),
        PodMigrationJob.from_dict({**job_object("c", "web-2"), "status": {"phase": "Succeeded"}}),
        PodMigrationJob.from_dict(job_object("d", "elsewhere")),
    ]
    where = {"default/web-0": "hot", "default/web-1": "hot", "default/web-2": "hot"}

    found = open_jobs(jobs, where.get, "hot")

    assert found == [
        {"name": "a", "phase": "Pending", "pod": "default/web-0", "reason": ""},
        {"name": "b", "phase": "Running", "pod": "default/web-1", "reason": "Evicting"},
    ]


def test_with_one_ready_node_the_view_says_no_round_ran() -> None:
    api = hot_and_cold()
    api.remove("Node", "cold")
    app = make_app(api, parse_config(config_text(dry_run=True)), clock=lambda: NOW)

    async def scenario() -> None:
        task = asyncio.create_task(app.run())
        try:
            await eventually(lambda: app.balancer.explain.time is not None, 5)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 20))
    assert app.balancer.explain.node("hot") == {
        "node": "hot",
        "time": NOW,
        "dryRun": True,
        "pools": [],
        "note": "1 ready node(s): no round, descheduling would only disrupt",
    }
    assert app.balancer.explain.node("cold") is None
