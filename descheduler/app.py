"""koord-descheduler's composition root: informers, the descheduling loop, the migration
controller, leader election, and /healthz, /readyz, /metrics and the read-only
/explain/nodes/{name} (the last round's view of a node, descheduler.explain).

Every replica keeps the informer caches and serves the probes and /metrics. Only the
replica holding the Lease (Koordinator's: koordinator-system/koord-descheduler) runs the
descheduling rounds and the migration controller, so two replicas never both migrate; when
it loses the Lease, ``run`` returns and the process exits, to start over as a follower.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from descheduler.balancer import Balancer
from descheduler.config import DeschedulerConfig
from descheduler.controller import REQUEUE_AFTER, MigrationController
from descheduler.events import EventRecorder
from descheduler.explain import View, open_jobs, routes
from descheduler.metrics import DeschedulerMetrics
from descheduler.state import DeschedulerState
from koordkube.client import KubeApi
from koordkube.leader import Clock, LeaderElectionConfig, LeaderElector, default_identity
from koordkube.probes import serve_probes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppOptions:
    """What the command line adds to the configuration file."""

    identity: str = field(default_factory=default_identity)  # the Lease holder's name
    workloads: bool = True  # ReplicaSet and StatefulSet informers (expected replicas)
    requeue_after: float = REQUEUE_AFTER
    # Koordinator's flags given and gates set that change nothing here (the metrics say them)
    unimplemented_flags: tuple[str, ...] = ()
    unimplemented_gates: tuple[str, ...] = ()
    # the DisablePVCReservation gate: a migration's Reservation leaves the pod's PVCs out
    disable_pvc_reservation: bool = False


class Descheduler:
    def __init__(
        self,
        api: KubeApi,
        config: DeschedulerConfig,
        options: AppOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        lease_clock: Clock | None = None,
    ) -> None:
        self.api, self.config = api, config
        self.options = options or AppOptions()
        self.metrics = DeschedulerMetrics()
        self.metrics.unimplemented(
            self.options.unimplemented_flags, self.options.unimplemented_gates
        )
        self.state = DeschedulerState(api, workloads=self.options.workloads)
        self.events = EventRecorder(api, clock=clock)
        self.controller = MigrationController(
            api,
            self.state,
            config.migration,
            self.metrics,
            self.events,
            clock=clock,
            requeue_after=self.options.requeue_after,
            disable_pvc_reservation=self.options.disable_pvc_reservation,
        )
        self.balancer = Balancer(
            api,
            self.state,
            config,
            self.metrics,
            self.events,
            clock=clock,
            reconciler_uid=str(uuid.uuid4()),
            # Evict asks the controller's objectLimiters before it creates a job
            object_limited=self.controller.object_limits.exceeded,
        )
        self.elector: LeaderElector | None = None
        election = config.leader_election
        if election.leader_elect:
            self.elector = LeaderElector(
                api,
                LeaderElectionConfig(
                    name=election.resource_name,
                    namespace=election.resource_namespace,
                    identity=self.options.identity,
                    lease_duration=election.lease_duration,
                    renew_deadline=election.renew_deadline,
                    retry_period=election.retry_period,
                ),
                clock=lease_clock,
            )
        self.leading = asyncio.Event()

    def synced(self) -> bool:
        return self.state.synced()

    def open_jobs(self, node: str) -> list[View]:
        """The open PodMigrationJobs of ``node``'s pods, from the informers."""

        def node_of(key: str) -> str | None:
            pod = self.state.pod(key)
            return None if pod is None else (pod.get("spec") or {}).get("nodeName")

        return open_jobs((job for job, _ in self.state.jobs()), node_of, node)

    def _no_round_yet(self) -> str:
        if not self.leading.is_set():
            return "no descheduling round here: this replica does not hold the leader Lease"
        return "no descheduling round has run yet"

    async def lead(self) -> None:
        """The descheduling loop and the migration controller, until cancelled."""
        self.leading.set()
        self.metrics.leader.set(1)
        log.info("leading: starting the descheduling loop and the migration controller")
        tasks = [
            asyncio.create_task(self.balancer.run()),
            asyncio.create_task(self.controller.run()),
        ]
        try:
            # the loop may end by itself (deschedulingInterval 0); the controller does not
            await tasks[1]
        finally:
            self.leading.clear()
            self.metrics.leader.set(0)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def run(self) -> None:
        """Until cancelled, or until this replica loses the Lease."""
        informers = [asyncio.create_task(i.run()) for i in self.state.informers]
        servers: list[web.AppRunner] = []
        try:
            addresses = (self.config.healthz_bind_address, self.config.metrics_bind_address)
            for addr in dict.fromkeys(addresses):
                if addr:
                    servers.append(await self._serve(addr))
            await asyncio.gather(*(i.wait_synced() for i in self.state.informers))
            log.info(
                "synced: %d nodes, %d pods, %d PodMigrationJobs",
                len(self.state.nodes),
                len(self.state.pods),
                len(self.state.jobs_informer),
            )
            if self.elector is not None:
                await self.elector.run(self.lead)
                log.warning("lost the leader Lease %s: stopping", self.elector.describe)
            else:
                await self.lead()
        finally:
            for runner in servers:
                await runner.cleanup()
            for task in informers:
                task.cancel()
            await asyncio.gather(*informers, return_exceptions=True)

    async def _serve(self, addr: str) -> web.AppRunner:
        runner = await serve_probes(
            addr,
            self.synced,
            lambda: (self.metrics.exposition(), CONTENT_TYPE_LATEST),
            routes(self.balancer.explain, self.open_jobs, self._no_round_yet),
        )
        log.info("/healthz, /readyz, /metrics and /explain/nodes/{name} on %s", addr)
        return runner
