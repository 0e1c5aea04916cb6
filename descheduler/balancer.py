"""The descheduling loop: every deschedulingInterval, LowNodeLoad's round over the ready
nodes (descheduler.lownodeload), and for each pod it chooses a PodMigrationJob; in a dry run
the job is written down marked as a dry run (Pending, status DryRun: never arbitrated or
carried out), with a log line, an Event on the pod and a count in a metric.

It follows Koordinator v1.8.0's pkg/descheduler/descheduler.go (the round over ready nodes,
none with fewer than two, once only with an interval of 0; the per-round limits
maxNoOfPodsToEvictPerNode/PerNamespace/Total) and
pkg/descheduler/controllers/migration/evict.go (Evict: the migration filter first, then
CreatePodMigrationJob with the evict-reason, evict-trigger and job-created-by annotations).

Jobs created here carry MigrationControllerArgs' defaultJobMode, as CreatePodMigrationJob
does (Koordinator's default: ReservationFirst, a Reservation on another node before the
eviction).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from descheduler.anomaly import LowNodeLoadState
from descheduler.cluster import PodInfo
from descheduler.config import LOW_NODE_LOAD, DeschedulerConfig
from descheduler.events import NORMAL, EventRecorder
from descheduler.explain import ExplainStore, node_views
from descheduler.lownodeload import BalanceResult, balance
from descheduler.metrics import DeschedulerMetrics
from descheduler.migration.args import MigrationControllerArgs
from descheduler.migration.job import (
    ANNOTATION_DRY_RUN,
    STATUS_DRY_RUN,
    Phase,
    PodMigrationJob,
    PodRef,
    new_pod_migration_job,
)
from descheduler.migration.limits import Migrating, forbidden_reason, wait_reason
from descheduler.migration.view import ClusterView, PodView
from descheduler.state import DeschedulerState
from koordkube.client import KubeApi
from koordkube.resources import PodMigrationJob as PodMigrationJobResource

log = logging.getLogger(__name__)

DRY_RUN_REASON = "DryRunMigration"  # ours: the Event a dry run posts on the pod
TERMINAL_PHASES = ("Succeeded", "Failed", "Aborted")
OPEN_PHASES = (Phase.PENDING, Phase.RUNNING)  # what the migration limits count at Filter time
OPEN_JOB = "it has an open PodMigrationJob"

ObjectLimited = Callable[[PodView], "tuple[str, str] | None"]
"""The migration controller's objectLimiters (ObjectLimiters.exceeded): (limiter, why) when
the pod's workload or namespace may not lose a pod now."""


@dataclass
class RoundLimits:
    """The configuration's maxNoOfPodsToEvict* limits, counted over one round."""

    config: DeschedulerConfig
    per_node: dict[str, int] = field(default_factory=dict)
    per_namespace: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def refusal(self, node: str, namespace: str) -> str | None:
        """EvictionLimiter.AllowEvict: the node's, then the namespace's, then the total."""
        c = self.config
        if c.max_pods_per_node is not None and self.per_node.get(node, 0) >= c.max_pods_per_node:
            return f"maxNoOfPodsToEvictPerNode {c.max_pods_per_node} reached on {node}"
        if (
            c.max_pods_per_namespace is not None
            and self.per_namespace.get(namespace, 0) >= c.max_pods_per_namespace
        ):
            return (
                f"maxNoOfPodsToEvictPerNamespace {c.max_pods_per_namespace} reached in {namespace}"
            )
        if c.max_pods_total is not None and self.total >= c.max_pods_total:
            return f"maxNoOfPodsToEvictTotal {c.max_pods_total} reached"
        return None

    def count(self, node: str, namespace: str) -> None:
        self.total += 1
        self.per_node[node] = self.per_node.get(node, 0) + 1
        self.per_namespace[namespace] = self.per_namespace.get(namespace, 0) + 1


@dataclass
class RoundEvictor:
    """The evictor one round hands its pods to: Koordinator's Evictor().Filter (``filter``:
    the migration controller's checks, so that a pod it would refuse is never counted as
    moving) and Evict (``admit``: the round's maxNoOfPodsToEvict* limits, and outside a dry
    run the object limiters, before the pod is taken). What the round takes is remembered:
    taken pods have an open job from then on, and outside a dry run count against the
    migration limits of the pods after them. ``outcomes`` says what became of each pod
    refused (namespace/name -> text), for /explain."""

    migration: MigrationControllerArgs
    view: ClusterView
    active: set[str]  # pods with an open PodMigrationJob (a dry run's too)
    migrating: list[Migrating]  # open jobs the migration limits count (not a dry run's)
    limits: RoundLimits
    dry_run: bool
    object_limited: ObjectLimited | None = None
    outcomes: dict[str, str] = field(default_factory=dict)

    def filter(self, pod: PodInfo) -> str | None:
        """Why the migration controller would refuse ``pod`` now, None if it would not."""
        why = self._filter(pod)
        if why is not None:
            self.outcomes[pod.key] = f"not migrated: {why}"
        return why

    def _filter(self, pod: PodInfo) -> str | None:
        view = self.view.pod(pod.key)
        if view is None:
            return "the pod is not in the cache"
        if pod.key in self.active:
            return OPEN_JOB
        forbidden = forbidden_reason(view, self.migration, self.view)
        if forbidden is not None:
            return forbidden
        hold = wait_reason(view, self.migration, self.view, self.migrating)
        return None if hold is None else hold.message

    def admit(self, node: str, pod: PodInfo, reason: str) -> str | None:
        """None when the eviction of ``pod`` off ``node`` is taken, else why not."""
        why = self.limits.refusal(node, pod.namespace)
        view = self.view.pod(pod.key)
        if why is None and not self.dry_run and view is not None and self.object_limited:
            limited = self.object_limited(view)
            if limited is not None:
                why = limited[1]
        if why is not None:
            self.outcomes[pod.key] = f"not migrated this round: {why}"
            return why
        self.limits.count(node, pod.namespace)
        self.active.add(pod.key)
        if not self.dry_run and view is not None:  # the job it will get, as the limits see it
            job = PodMigrationJob("", pod_ref=PodRef(view.namespace, view.name, view.uid))
            self.migrating.append(Migrating(job, view))
        return None


class Balancer:
    def __init__(
        self,
        api: KubeApi,
        state: DeschedulerState,
        config: DeschedulerConfig,
        metrics: DeschedulerMetrics,
        events: EventRecorder,
        *,
        clock: Callable[[], float] = time.time,
        reconciler_uid: str = "",
        name_job: Callable[[], str] = lambda: str(uuid.uuid4()),
        object_limited: ObjectLimited | None = None,
    ) -> None:
        self.api, self.state, self.config = api, state, config
        # the migration controller's objectLimiters, which Evict asks before creating a job
        self.object_limited = object_limited
        self.metrics, self.events, self.clock = metrics, events, clock
        self.reconciler_uid = reconciler_uid or str(uuid.uuid4())
        self.name_job = name_job
        self.lnl_state = (
            LowNodeLoadState.for_args(config.low_node_load)
            if config.low_node_load is not None
            else None
        )
        self.last: BalanceResult | None = None
        self.explain = ExplainStore()  # the last round's view of each node, for /explain

    async def run(self) -> None:
        """Rounds until cancelled; one round only when deschedulingInterval is 0."""
        interval = self.config.descheduling_interval
        while True:
            started = asyncio.get_running_loop().time()
            try:
                await self.run_once()
            except Exception:
                log.exception("descheduling round failed")
            if interval <= 0:
                log.info("deschedulingInterval is 0: no more rounds")
                return
            elapsed = asyncio.get_running_loop().time() - started
            await asyncio.sleep(max(0.0, interval - elapsed))

    async def run_once(self) -> None:
        """One round: LowNodeLoad over the ready nodes, then a job (or a dry-run Event) per
        chosen pod."""
        try:
            await self._round()
        finally:
            self.metrics.rounds.inc()

    async def _round(self) -> None:
        args = self.config.low_node_load
        if args is None or self.lnl_state is None:
            return
        nodes = self.state.ready_nodes(self.config.node_selector)
        now = self.clock()
        if len(nodes) <= 1:
            log.info("%d ready node(s): descheduling would only disrupt, no round", len(nodes))
            note = f"{len(nodes)} ready node(s): no round, descheduling would only disrupt"
            names = [str((node.get("metadata") or {}).get("name", "")) for node in nodes]
            views = {name: {"pools": [], "note": note} for name in names}
            self.explain.record(now, self.config.effective_dry_run, views)
            return
        infos = self.state.node_infos(nodes)
        migration = self.config.migration
        evictor = self._evictor()
        result = balance(
            args, infos, self.lnl_state, now, migration.effective_evictor(),
            pod_filter=evictor.filter, admit=evictor.admit,
        )  # fmt: skip
        self.last = result
        outcomes = evictor.outcomes
        try:
            await self._migrate(result, outcomes)
        finally:
            views = node_views(args, infos, result, self.lnl_state, now, outcomes=outcomes)
            self.explain.record(now, self.config.effective_dry_run, views)

    def _evictor(self) -> RoundEvictor:
        """This round's evictor, over the informers' pods, workloads and open jobs."""
        view = self.state.cluster_view()
        active: set[str] = set()
        migrating: list[Migrating] = []
        for job, _ in self.state.jobs():
            if job.pod_ref is None or job.effective_phase in TERMINAL_PHASES:
                continue
            active.add(job.pod_ref.key)
            if not job.dry_run and job.effective_phase in OPEN_PHASES:
                migrating.append(Migrating(job, view.pod(job.pod_ref.key)))
        return RoundEvictor(
            self.config.migration,
            view,
            active,
            migrating,
            RoundLimits(self.config),
            self.config.effective_dry_run,
            object_limited=self.object_limited,
        )

    async def _migrate(self, result: BalanceResult, outcomes: dict[str, str]) -> None:
        """A job (or a dry-run one, with an Event) per pod the round took; ``outcomes`` gets
        what became of each (by namespace/name), for /explain. The round has already asked the
        evictor (filter, limits) about each pod."""
        if result.paused:
            log.info("LowNodeLoad is paused")
            return
        for pool in result.pools:
            if pool.note:
                log.debug("pool %s: %s", pool.pool, pool.note)
            for hot in pool.hot_nodes:
                log.info(
                    "node %s is hot: %s%s", hot.node, hot.reason, f" ({hot.note})" * bool(hot.note)
                )
                for refused in hot.refused:
                    # a pod whose job is under way is passed over every round: not news
                    level = logging.DEBUG if refused.reason == OPEN_JOB else logging.INFO
                    log.log(level, "pod %s is not migrated: %s", refused.pod, refused.reason)
        dry_run = self.config.effective_dry_run
        written: set[str] = set()
        for node, victim in result.victims():
            pod = self.state.pod(victim.pod)
            if pod is None:
                outcomes.setdefault(victim.pod, "not migrated: the pod is not in the cache")
                continue
            if victim.pod in written:  # chosen again by an overlapping pool
                continue
            written.add(victim.pod)
            namespace = str((pod.get("metadata") or {}).get("namespace", ""))
            if dry_run:
                message = (
                    f"dry run: {LOW_NODE_LOAD} would migrate pod {victim.pod} off node {node}: "
                    f"{victim.reason}"
                )
                log.info("%s", message)
                self.metrics.dry_run_migrations.labels(LOW_NODE_LOAD, namespace, node).inc()
                await self.events.post(pod, NORMAL, DRY_RUN_REASON, message, "Descheduling")
                created = await self._create_job(pod, node, victim.reason, dry_run=message)
                outcomes[victim.pod] = f"dry run: {DRY_RUN_REASON} Event posted; {created}"
                continue
            outcomes[victim.pod] = await self._create_job(pod, node, victim.reason)

    async def _create_job(
        self, pod: Mapping[str, Any], node: str, reason: str, *, dry_run: str = ""
    ) -> str:
        """Creates the pod's PodMigrationJob; what became of it, for /explain. With
        ``dry_run`` (the message) it is marked as a dry run's, with status DryRun."""
        migration = self.config.migration
        job = new_pod_migration_job(
            pod,
            name=self.name_job(),
            mode=migration.default_job_mode,
            ttl=migration.default_job_ttl,
            reason=reason,
            trigger=LOW_NODE_LOAD,
            delete_options=migration.default_delete_options,
            created_by=self.reconciler_uid,
        )
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        name = job["metadata"]["name"]
        if dry_run:
            job["metadata"]["annotations"][ANNOTATION_DRY_RUN] = "true"
        try:
            await self.api.create(PodMigrationJobResource, job)
            if dry_run:  # the status subresource: its own write
                status = {"phase": "Pending", "status": STATUS_DRY_RUN}
                status |= {"reason": STATUS_DRY_RUN, "message": dry_run}
                await self.api.patch(
                    PodMigrationJobResource, name, {"status": status}, subresource="status"
                )
        except Exception as err:
            log.warning("cannot create a PodMigrationJob for pod %s: %s", key, err)
            return f"not migrated: the PodMigrationJob was not created ({err})"
        if dry_run:
            return f"PodMigrationJob {name} written down ({STATUS_DRY_RUN})"
        self.metrics.jobs_created.labels(LOW_NODE_LOAD).inc()
        log.info(
            "PodMigrationJob %s created: pod %s off node %s (%s)",
            job["metadata"]["name"],
            key,
            node,
            reason,
        )
        return f"PodMigrationJob {job['metadata']['name']} created"
