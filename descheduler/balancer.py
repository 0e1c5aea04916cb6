"""The descheduling loop: every deschedulingInterval, LowNodeLoad's round over the ready
nodes (descheduler.lownodeload), and for each pod it chooses a PodMigrationJob; in a dry run
the job is written down marked as a dry run (Pending, status DryRun: never arbitrated or
carried out), with a log line, an Event on the pod and a count in a metric.

It follows Koordinator v1.8.0's pkg/descheduler/descheduler.go (the round over ready nodes,
none with fewer than two, once only with an interval of 0; the per-round limits
maxNoOfPodsToEvictPerNode/PerNamespace/Total) and
pkg/descheduler/controllers/migration/evict.go (Evict: the migration filter first, then
CreatePodMigrationJob with the evict-reason, evict-trigger and job-created-by annotations).

Jobs created here always say ``mode: EvictDirectly``: MigrationControllerArgs' default mode
is Koordinator's ReservationFirst, which needs Reservations that this project does not have.
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
from descheduler.config import LOW_NODE_LOAD, DeschedulerConfig
from descheduler.events import NORMAL, EventRecorder
from descheduler.explain import ExplainStore, node_views
from descheduler.lownodeload import BalanceResult, balance
from descheduler.metrics import DeschedulerMetrics
from descheduler.migration.job import (
    ANNOTATION_DRY_RUN,
    STATUS_DRY_RUN,
    Mode,
    new_pod_migration_job,
)
from descheduler.migration.limits import forbidden_reason
from descheduler.state import DeschedulerState
from koordkube.client import KubeApi
from koordkube.resources import PodMigrationJob as PodMigrationJobResource

log = logging.getLogger(__name__)

DRY_RUN_REASON = "DryRunMigration"  # ours: the Event a dry run posts on the pod
TERMINAL_PHASES = ("Succeeded", "Failed", "Aborted")


@dataclass
class RoundLimits:
    """The configuration's maxNoOfPodsToEvict* limits, counted over one round."""

    config: DeschedulerConfig
    per_node: dict[str, int] = field(default_factory=dict)
    per_namespace: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def refusal(self, node: str, namespace: str) -> str | None:
        c = self.config
        if c.max_pods_total is not None and self.total >= c.max_pods_total:
            return f"maxNoOfPodsToEvictTotal {c.max_pods_total} reached"
        if c.max_pods_per_node is not None and self.per_node.get(node, 0) >= c.max_pods_per_node:
            return f"maxNoOfPodsToEvictPerNode {c.max_pods_per_node} reached on {node}"
        if (
            c.max_pods_per_namespace is not None
            and self.per_namespace.get(namespace, 0) >= c.max_pods_per_namespace
        ):
            return (
                f"maxNoOfPodsToEvictPerNamespace {c.max_pods_per_namespace} reached in {namespace}"
            )
        return None

    def count(self, node: str, namespace: str) -> None:
        self.total += 1
        self.per_node[node] = self.per_node.get(node, 0) + 1
        self.per_namespace[namespace] = self.per_namespace.get(namespace, 0) + 1


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
    ) -> None:
        self.api, self.state, self.config = api, state, config
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
        result = balance(args, infos, self.lnl_state, now, migration.effective_evictor())
        self.last = result
        outcomes: dict[str, str] = {}
        try:
            await self._migrate(result, outcomes)
        finally:
            views = node_views(args, infos, result, self.lnl_state, now, outcomes=outcomes)
            self.explain.record(now, self.config.effective_dry_run, views)

    async def _migrate(self, result: BalanceResult, outcomes: dict[str, str]) -> None:
        """A job (or a dry-run Event) per pod the round chose; ``outcomes`` gets what became of
        each (by namespace/name), for /explain."""
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
        victims = result.victims()
        if not victims:
            return
        migration = self.config.migration
        dry_run = self.config.effective_dry_run
        view = self.state.cluster_view()
        active = {
            job.pod_ref.key
            for job, _ in self.state.jobs()
            if job.pod_ref is not None and job.effective_phase not in TERMINAL_PHASES
        }
        limits = RoundLimits(self.config)
        for node, victim in victims:
            pod = self.state.pod(victim.pod)
            pod_view = view.pod(victim.pod)
            if pod is None or pod_view is None:
                outcomes.setdefault(victim.pod, "not migrated: the pod is not in the cache")
                continue
            namespace = pod_view.namespace
            if victim.pod in active:
                log.debug("pod %s already has a PodMigrationJob", victim.pod)
                outcomes.setdefault(victim.pod, "not migrated: it has an open PodMigrationJob")
                continue
            forbidden = forbidden_reason(pod_view, migration, view)
            if forbidden is not None:
                log.info("pod %s is not migrated: %s", victim.pod, forbidden)
                outcomes[victim.pod] = f"not migrated: {forbidden}"
                continue
            refused = limits.refusal(node, namespace)
            if refused is not None:
                log.info("pod %s is not migrated this round: %s", victim.pod, refused)
                outcomes[victim.pod] = f"not migrated this round: {refused}"
                continue
            limits.count(node, namespace)
            active.add(victim.pod)
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
            mode=str(Mode.EVICT_DIRECTLY),
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
