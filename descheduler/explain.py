"""What koord-descheduler serves at ``GET /explain/nodes/{name}`` (``koordctl explain node NAME
--descheduler URL``): its last descheduling round's view of one node.

For each ready node of the last round: the pools that looked at it, with its category, usage
and prod usage against the low and high (and prod) thresholds as amounts and percentages of
its raw allocatable, whether the round found it anomalous and the consecutive abnormal reports
its detector counts, the pods chosen to leave it with LowNodeLoad's reason and what the
balancer did with each (then the pods the evictor refused, without a reason, with why not),
the note when none was chosen; the round's time and whether it was a
dry run. The PodMigrationJobs open for the node's pods come from the informers at request time.

The store is small and bounded: one JSON-ready entry per ready node, all replaced each round,
so nodes that are gone (or no longer ready) are dropped. Answers: 200 with the entry, 404 with
a JSON ``message`` for a node the last round did not see, 503 before the first round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from descheduler.anomaly import LowNodeLoadState
from descheduler.args import LowNodeLoadArgs, NodePool
from descheduler.cluster import NodeInfo
from descheduler.lownodeload import BalanceResult, HotNode, NodeSnapshot, PoolResult
from descheduler.migration.job import ANNOTATION_EVICT_REASON, Phase, PodMigrationJob
from descheduler.utilization import is_metric_expired

PATH = "/explain/nodes/{name}"
OPEN_PHASES = (Phase.PENDING, Phase.RUNNING)
NORMAL = "normal"  # LowNodeLoad's "" category: between the low and the high thresholds

View = dict[str, Any]


def _percent(amount: int, allocatable: int) -> float | None:
    return None if allocatable <= 0 else round(100.0 * amount / allocatable, 2)


def _resources(snap: NodeSnapshot, prod: bool) -> list[View]:
    """One row per resource the pool judges by (its thresholds' names)."""
    rows = []
    for name in sorted(snap.low):
        total = snap.allocatable.get(name, 0)
        row: View = {"name": name, "allocatable": total}
        columns = [("usage", snap.usage), ("low", snap.low), ("high", snap.high)]
        if prod:
            columns += [
                ("prodUsage", snap.prod_usage),
                ("prodLow", snap.prod_low),
                ("prodHigh", snap.prod_high),
            ]
        for key, amounts in columns:
            amount = amounts.get(name, 0)
            row[key] = amount
            row[f"{key}Percent"] = _percent(amount, total)
        rows.append(row)
    return rows


def _note(snap: NodeSnapshot, result: PoolResult, hot: HotNode | None, anomalous: bool) -> str:
    """Why no pod was chosen to leave the node ("" when some were)."""
    if hot is not None:
        return hot.note if not hot.victims else ""
    if result.note:
        return result.note
    if snap.category in ("high", "prod-high"):
        return "over its high thresholds, not anomalous yet" if not anomalous else ""
    if snap.category in ("low", "prod-low", "both-low"):
        return "underutilized: a target for pods moved off hot nodes"
    return "not over its high thresholds"


def _pool_view(
    snap: NodeSnapshot,
    pool: NodePool | None,
    result: PoolResult,
    hot: HotNode | None,
    *,
    state: LowNodeLoadState,
    outcomes: Mapping[str, str],
) -> View:
    prod = pool is not None and bool(pool.prod_low_thresholds or pool.prod_high_thresholds)
    by_prod = snap.name in result.abnormal_prod_nodes
    anomalous = by_prod or snap.name in result.abnormal_nodes
    needed = pool.anomaly_condition.consecutive_abnormalities if pool is not None else 1
    detector = state.prod_detector if snap.category == "prod-high" else state.node_detector
    # with consecutiveAbnormalities 1 the plugin keeps no detector: the first report decides
    abnormalities = detector.counts(snap.name)[0] if needed != 1 else None
    return {
        "pool": result.pool,
        "category": snap.category or NORMAL,
        "prodThresholds": prod,
        "resources": _resources(snap, prod),
        "anomalous": anomalous,
        "anomalousBy": ("prod" if by_prod else "node") if anomalous else "",
        "abnormalities": abnormalities,
        "consecutiveAbnormalities": needed,
        "hotReason": hot.reason if hot is not None else "",
        "candidates": [
            {"pod": v.pod, "reason": v.reason, "outcome": outcomes.get(v.pod, "")}
            for v in (hot.victims if hot is not None else ())
        ]
        # pods the evictor refused (their usage stayed on the node): no reason to move, why not
        + [
            {
                "pod": r.pod,
                "reason": "",
                "outcome": outcomes.get(r.pod) or f"not migrated: {r.reason}",
            }
            for r in (hot.refused if hot is not None else ())
        ],
        "note": _note(snap, result, hot, anomalous),
    }


def _left_out(info: NodeInfo, args: LowNodeLoadArgs, now: float) -> str:
    """Why a ready node is in no pool's round."""
    metric = info.metric
    if metric is None:
        return "left out of the round: no NodeMetric" + f" ({info.note})" * bool(info.note)
    if is_metric_expired(metric.update_time, args.node_metric_expiration_seconds, now):
        return "left out of the round: its NodeMetric is expired"
    return "no node pool selects it"


def node_views(
    args: LowNodeLoadArgs,
    nodes: Sequence[NodeInfo],
    result: BalanceResult,
    state: LowNodeLoadState,
    now: float,
    *,
    outcomes: Mapping[str, str] | None = None,
) -> dict[str, View]:
    """The round's view of each node in ``nodes`` (the round's input) by name. ``outcomes``:
    what the balancer did with each chosen pod (namespace/name → text). Call it after the
    round: detector counts are read as the round left them."""
    outcomes = outcomes or {}
    pools = {pool.name: pool for pool in args.node_pools}
    views: dict[str, View] = {info.name: {"pools": [], "note": ""} for info in nodes}
    for pool_result in result.pools:
        hot_nodes = {hot.node: hot for hot in pool_result.hot_nodes}
        for snap in pool_result.nodes:
            view = views.setdefault(snap.name, {"pools": [], "note": ""})
            view["pools"].append(
                _pool_view(
                    snap,
                    pools.get(pool_result.pool),
                    pool_result,
                    hot_nodes.get(snap.name),
                    state=state,
                    outcomes=outcomes,
                )
            )
    for info in nodes:
        view = views[info.name]
        if result.paused:
            view["note"] = "LowNodeLoad is paused: no round"
        elif not view["pools"]:
            view["note"] = _left_out(info, args, now)
    return views


def open_jobs(
    jobs: Iterable[PodMigrationJob], node_of: Callable[[str], str | None], node: str
) -> list[View]:
    """The open (Pending or Running) PodMigrationJobs whose pod is on ``node`` (``node_of``:
    a cached pod's node by namespace/name), or that name it in status.nodeName."""
    found = []
    for job in jobs:
        if job.effective_phase not in OPEN_PHASES or job.pod_ref is None:
            continue
        pod = job.pod_ref.key
        if node_of(pod) != node and job.node_name != node:
            continue
        found.append(
            {
                "name": job.name,
                "phase": str(job.effective_phase),
                "pod": pod,
                "reason": job.annotations.get(ANNOTATION_EVICT_REASON) or job.reason,
            }
        )
    return sorted(found, key=lambda job: (job["pod"], job["name"]))


@dataclass
class ExplainStore:
    """The last round's views: one entry per node, all replaced each round."""

    time: float | None = None  # None: no round yet
    dry_run: bool = False
    nodes: dict[str, View] = field(default_factory=dict)

    def record(self, time: float, dry_run: bool, nodes: Mapping[str, View]) -> None:
        self.time, self.dry_run, self.nodes = time, dry_run, dict(nodes)

    def node(self, name: str) -> View | None:
        view = self.nodes.get(name)
        if view is None or self.time is None:
            return None
        return {"node": name, "time": self.time, "dryRun": self.dry_run, **view}


def routes(
    store: ExplainStore,
    jobs: Callable[[str], list[View]],
    not_yet: Callable[[], str] = lambda: "no descheduling round has run yet",
) -> list[web.RouteDef]:
    """``GET /explain/nodes/{name}``, read-only: ``jobs(node)`` gives the open
    PodMigrationJobs, ``not_yet()`` the 503's message before the first round."""

    async def explain_node(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if store.time is None:
            return web.json_response({"message": not_yet()}, status=503)
        view = store.node(name)
        if view is None:
            message = f"node {name} was not among the ready nodes of the last descheduling round"
            return web.json_response({"message": message}, status=404)
        return web.json_response({**view, "migrationJobs": jobs(name)})

    return [web.get(PATH, explain_node)]
