"""koord-manager's composition root: informers, controllers, leader election, webhooks, metrics.

Every replica keeps the informer caches and serves the webhooks and /metrics (the API server
and Prometheus reach whichever pod a Service picks). Only the replica holding the Lease runs
the controllers, so two replicas never both write; when it loses the Lease, ``run`` returns
and the process exits, as Kubernetes components do, to start over as a follower.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from koordapi.errors import ModelError
from koordapi.features import manager_gate_states, manager_gates_unfollowed, parse_manager_gates
from koordapi.quota.revoke import ElasticQuotaArgs, parse_elastic_quota_args
from koordapi.quota.topology import QuotaGates, QuotaTopology
from koordapi.settings import flag
from koordkube import ratelimit
from koordkube.certkeeper import CertificateKeeper, webhook_names
from koordkube.client import KubeApi
from koordkube.clientauth import ClientAuth, parse_names
from koordkube.leader import LeaderElectionConfig, LeaderElector
from koordkube.probes import serve_probes
from koordkube.resources import object_key
from koordkube.workqueue import WorkQueue, run_worker
from manager.controllers.deviceresource import DeviceResourceController
from manager.controllers.elasticquota import KEY as ELASTIC_QUOTA_KEY
from manager.controllers.elasticquota import NO_REVOKE, ElasticQuotaStatusController
from manager.controllers.events import EventRecorder
from manager.controllers.gang import KEY as GANG_KEY
from manager.controllers.gang import GangController
from manager.controllers.noderesource import NAME as NODE_RESOURCE
from manager.controllers.noderesource import NodeResourceController
from manager.controllers.nodeslo import NodeMetricController, NodeSLOController
from manager.controllers.reservation import ReservationController
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics
from manager.unsupported import SLOConfigAudit
from manager.webhooks import cabundle, elasticquota
from manager.webhooks.audit import AdmissionAudit
from manager.webhooks.server import WebhookServer

log = logging.getLogger(__name__)

Object = dict[str, Any]


def read_elastic_quota_args(text: str) -> ElasticQuotaArgs:
    """--elastic-quota-args: ValueError saying why the text is refused."""
    try:
        return parse_elastic_quota_args(json.loads(text) if text.strip() else {})
    except (ValueError, ModelError) as err:
        raise ValueError(f"not ElasticQuotaArgs: {err}") from err


@dataclass(frozen=True)
class ManagerOptions:
    """koord-manager's settings, a settings table (koordapi.settings): manager.cli's flags."""

    config_namespace: str = field(default="koordinator-system", metadata=flag("config-namespace"))
    slo_config_name: str = field(default="slo-controller-config", metadata=flag("slo-config-name"))
    # None: no webhook server (--disable-webhooks)
    webhook_port: int | None = field(
        default=9876,
        metadata=flag("webhook-port", "HTTPS port of the admission webhooks", parse=int, ours=True),
    )
    webhook_cert_dir: Path = field(
        default=Path("/tmp/k8s-webhook-server/serving-certs"),  # controller-runtime's default
        metadata=flag(
            "webhook-cert-dir",
            "folder with tls.crt and tls.key (reloaded when they change)",
            ours=True,
        ),
    )
    # empty: tls.crt and tls.key are provided in --webhook-cert-dir (the chart's, or cert-manager's)
    webhook_cert_secret: str = field(
        default="",
        metadata=flag(
            "webhook-cert-secret",
            "Secret (in --config-namespace) where koord-manager keeps its own serving "
            "certificate and CA, as Koordinator does: made when missing, renewed six months "
            "before its end, written to --webhook-cert-dir, and the webhook configurations' "
            "caBundle kept equal to the CA; empty: the files in --webhook-cert-dir are given",
            ours=True,
        ),
    )
    webhook_service_name: str = field(
        default="koordinator-webhook-service",  # Koordinator's SERVICE_NAME default
        metadata=flag(
            "webhook-service-name",
            "the webhook Service, in --config-namespace: the names the certificate is for",
            ours=True,
        ),
    )
    mutating_webhook_configuration: str = field(
        default=cabundle.DEFAULT_MUTATING,
        metadata=flag(
            "mutating-webhook-configuration",
            "with --webhook-cert-secret: the MutatingWebhookConfiguration whose caBundle is kept",
            ours=True,
        ),
    )
    validating_webhook_configuration: str = field(
        default=cabundle.DEFAULT_VALIDATING,
        metadata=flag(
            "validating-webhook-configuration",
            "with --webhook-cert-secret: the ValidatingWebhookConfiguration whose caBundle is kept",
            ours=True,
        ),
    )
    # Client authentication of the webhook's callers (koordkube.clientauth); all empty: none.
    webhook_client_ca_file: Path | None = field(
        default=None,
        metadata=flag(
            "webhook-client-ca-file",
            "PEM CA bundle: callers must present a client certificate it signed (the "
            "kube-apiserver's, from its admission configuration); reloaded when it changes",
            ours=True,
        ),
    )
    webhook_client_allowed_names: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "webhook-client-allowed-names",
            "with --webhook-client-ca-file: the client certificate's subject CN or a DNS SAN "
            "must be one of these, comma-separated; empty: any certificate of the CA",
            parse=lambda text: tuple(sorted(parse_names(text))),
            ours=True,
        ),
    )
    webhook_client_token_file: Path | None = field(
        default=None,
        metadata=flag(
            "webhook-client-token-file",
            "bearer tokens accepted from callers, one a line; reloaded when it changes; "
            "beside --webhook-client-ca-file, either credential is enough",
            ours=True,
        ),
    )
    # empty: no metrics server
    metrics_addr: str = field(
        default=":8080", metadata=flag("metrics-addr", "/metrics, /healthz, /readyz")
    )
    # empty: the probes on --metrics-addr only (Koordinator's default is ":8000")
    health_probe_addr: str = field(
        default="", metadata=flag("health-probe-addr", "/healthz and /readyz (and /metrics)")
    )
    # 0: handlers see an object only when it changes
    sync_period: float = field(
        default=0.0,
        metadata=flag(
            "sync-period", "how often every cached object is reconciled again; 0: only on changes"
        ),
    )
    feature_gates: Mapping[str, bool] = field(
        default_factory=dict,
        metadata=flag(
            "feature-gates",
            "Koordinator's koord-manager gates, NAME=true|false,... (AllAlpha, AllBeta); "
            "WebhookFramework=false runs no webhooks, the others are accepted and said at "
            "start-up where this manager does not do what they ask (the list: below)",
            parse=parse_manager_gates,
        ),
    )
    # Koordinator's defaults (monitorAllQuotas false): no reclaim
    elastic_quota_args: ElasticQuotaArgs = field(
        default=NO_REVOKE,
        metadata=flag(
            "elastic-quota-args",
            'Koordinator\'s ElasticQuotaArgs as JSON, e.g. {"monitorAllQuotas": true, '
            '"delayEvictTime": "2m"}: with monitorAllQuotas and enableRuntimeQuota, pods of '
            "a quota over its runtime for longer than delayEvictTime are evicted (the reclaim "
            "Koordinator's koord-scheduler does; its other fields are not read here)",
            parse=read_elastic_quota_args,
            ours=True,
        ),
    )
    # empty: not checked
    schedulers: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "schedulers",
            "scheduler names that run in the cluster, comma-separated: a pod that a "
            "ClusterColocationProfile gives another one is admitted with a warning",
            parse=lambda text: tuple(s.strip() for s in text.split(",") if s.strip()),
            ours=True,
        ),
    )
    # The webhooks' rate limit (koordkube.ratelimit, where the defaults are explained): a token
    # bucket per client (the TLS client certificate's CN, else the address) and one overall.
    webhook_rate_limit_qps: float = field(
        default=ratelimit.DEFAULT_QPS,
        metadata=flag(
            "webhook-rate-limit-qps",
            "webhook requests a second this replica serves in all, beyond them HTTP 429 with "
            "Retry-After; 0: no overall limit",
            parse=ratelimit.parse_qps,
            ours=True,
        ),
    )
    webhook_rate_limit_burst: int = field(
        default=ratelimit.DEFAULT_BURST,
        metadata=flag(
            "webhook-rate-limit-burst",
            "webhook requests served at once above --webhook-rate-limit-qps",
            parse=ratelimit.parse_burst,
            ours=True,
        ),
    )
    webhook_rate_limit_per_client_qps: float = field(
        default=ratelimit.DEFAULT_PER_CLIENT_QPS,
        metadata=flag(
            "webhook-rate-limit-per-client-qps",
            "webhook requests a second served to one client (its client certificate's CN, "
            "else its address); 0: no per-client limit",
            parse=ratelimit.parse_qps,
            ours=True,
        ),
    )
    webhook_rate_limit_per_client_burst: int = field(
        default=ratelimit.DEFAULT_PER_CLIENT_BURST,
        metadata=flag(
            "webhook-rate-limit-per-client-burst",
            "webhook requests served at once to one client above its rate",
            parse=ratelimit.parse_burst,
            ours=True,
        ),
    )
    leader_elect: bool = field(default=True, metadata=flag("enable-leader-election"))
    leader_election_namespace: str = field(
        default="koordinator-system", metadata=flag("leader-election-namespace")
    )
    leader_election_id: str = field(
        default="koord-manager", metadata=flag("leader-election-id", "the Lease's name", ours=True)
    )
    workers: int = field(
        default=4,
        metadata=flag("workers", "concurrent reconciles per controller", ours=True),
    )

    def webhook_rate_limits(self) -> ratelimit.RateLimits:
        """The webhooks' rate limit (--webhook-rate-limit-*)."""
        return ratelimit.RateLimits(
            qps=self.webhook_rate_limit_qps,
            burst=self.webhook_rate_limit_burst,
            per_client_qps=self.webhook_rate_limit_per_client_qps,
            per_client_burst=self.webhook_rate_limit_per_client_burst,
        )

    def webhook_client_auth(self) -> ClientAuth:
        """Who may call the webhooks (--webhook-client-*); all unset: anyone."""
        return ClientAuth.of(
            self.webhook_client_ca_file,
            self.webhook_client_allowed_names,
            self.webhook_client_token_file,
        )


class Manager:
    def __init__(
        self,
        api: KubeApi,
        options: ManagerOptions,
        *,
        clock: Callable[[], float] = time.time,
        ignored_flags: Sequence[str] = (),
    ) -> None:
        self.api, self.options = api, options
        self.metrics = ManagerMetrics()
        # Koordinator's gates and flags accepted and not followed (manager.cli says them)
        for gate in manager_gates_unfollowed(options.feature_gates):
            self.metrics.feature_gate_unimplemented.labels(gate).set(1)
        for name in ignored_flags:
            self.metrics.flag_unimplemented.labels(name).set(1)
        self.state = ClusterState(
            api,
            options.config_namespace,
            options.slo_config_name,
            resync_period=options.sync_period or None,
        )
        self.events = EventRecorder(api, clock=clock)
        # what slo-controller-config carries that changes nothing: logged once per change
        self.slo_audit = SLOConfigAudit(self.metrics, options.slo_config_name)
        self.node_resource = NodeResourceController(api, self.state, self.metrics, clock=clock)
        self.node_slo = NodeSLOController(api, self.state, self.events, self.metrics)
        self.node_metric = NodeMetricController(api, self.state, self.metrics)
        self.device_resource = DeviceResourceController(api, self.state, self.metrics)
        # ElasticQuota status: one key, any pod, node or quota event asks for a pass
        self.elastic_quota = ElasticQuotaStatusController(
            api,
            self.state,
            self.metrics,
            nudge=lambda: self.queues[ElasticQuotaStatusController.NAME].add(ELASTIC_QUOTA_KEY),
            revoke=options.elastic_quota_args,
            events=self.events,
        )
        # gangs: members' scheduling gates removed together, PodGroup status; one key as well
        self.gang = GangController(
            api,
            self.state,
            self.events,
            self.metrics,
            nudge=lambda: self.queues[GangController.NAME].add(GANG_KEY),
            clock=clock,
        )
        # Reservations: reserve pods for kube-scheduler to place, owners, expiry; one key each
        self.reservation = ReservationController(
            api,
            self.state,
            self.metrics,
            # the queue is made below, from the reconcilers
            enqueue=lambda key: self.queues[ReservationController.NAME].add(key),  # noqa: PLW0108
            clock=clock,
        )
        self.reconcilers: dict[str, Callable[[str], Awaitable[float | None]]] = {
            NODE_RESOURCE: self.node_resource.reconcile,
            NodeSLOController.NAME: self.node_slo.reconcile,
            NodeMetricController.NAME: self.node_metric.reconcile,
            DeviceResourceController.NAME: self.device_resource.reconcile,
            ElasticQuotaStatusController.NAME: self.elastic_quota.reconcile,
            GangController.NAME: self.gang.reconcile,
            ReservationController.NAME: self.reservation.reconcile,
        }
        self.queues = {name: WorkQueue() for name in self.reconcilers}
        self._wire()
        self.webhooks: WebhookServer | None = None
        self.quota_tree, self.quota_routes = self._quota_webhooks()
        # the webhooks' decisions, logged, counted and served at /explain/pods/{ns}/{name}
        self.admission_audit = AdmissionAudit(self.metrics, clock=clock)
        self.leading = asyncio.Event()

    # -- events to keys -----------------------------------------------------------------------

    def _all(self, node: str) -> None:
        for queue in self.queues.values():
            queue.add(node)

    def _every_node(self) -> None:
        for node in self.state.nodes.keys():  # noqa: SIM118 - an Informer, not a dict
            self._all(node)

    def _wire(self) -> None:
        s, q = self.state, self.queues
        s.nodes.add_handler(lambda _event, node: self._all(object_key(node)))
        s.config_maps.add_handler(lambda _event, _cm: self._every_node())

        def on_config_map(_event: str, _cm: Object) -> None:
            self.slo_audit.note(s.slo_config_data())  # None once deleted

        s.config_maps.add_handler(on_config_map)

        def on_metric(_event: str, metric: Object) -> None:
            q[NODE_RESOURCE].add(object_key(metric))
            q[NodeMetricController.NAME].add(object_key(metric))

        def on_pod(_event: str, pod: Object) -> None:
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                q[NODE_RESOURCE].add(node)

        s.node_metrics.add_handler(on_metric)
        s.pods.add_handler(on_pod)
        s.node_slos.add_handler(lambda _e, slo: q[NodeSLOController.NAME].add(object_key(slo)))
        s.devices.add_handler(
            lambda _e, device: q[DeviceResourceController.NAME].add(object_key(device))
        )

    # -- running ------------------------------------------------------------------------------

    def _timed(self, name: str) -> Callable[[str], Awaitable[float | None]]:
        reconcile = self.reconcilers[name]

        async def run(key: str) -> float | None:
            start = time.perf_counter()
            try:
                return await reconcile(key)
            except Exception:
                self.metrics.reconcile_errors.labels(name).inc()
                raise
            finally:
                self.metrics.reconcile_seconds.labels(name).observe(time.perf_counter() - start)
                self.metrics.queue_depth.labels(name).set(len(self.queues[name]))

        return run

    async def lead(self) -> None:
        """Run the controllers until cancelled (leadership lost or shutdown)."""
        self.leading.set()
        self.metrics.leader.set(1)
        log.info("leading: starting the controllers")
        self._every_node()
        workers = [
            asyncio.create_task(run_worker(self.queues[name], self._timed(name)))
            for name in self.reconcilers
            for _ in range(self.options.workers)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            self.leading.clear()
            self.metrics.leader.set(0)
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def run(self) -> None:
        """Until cancelled, or until this replica loses the Lease."""
        informers = [
            asyncio.create_task(i.run())
            for i in (*self.state.informers, *self.state.optional_informers)
        ]
        servers: list[web.AppRunner] = []
        background: list[asyncio.Task[None]] = []
        try:
            for addr in dict.fromkeys((self.options.metrics_addr, self.options.health_probe_addr)):
                if addr:
                    servers.append(await self._serve_metrics(addr))
            if self.options.webhook_port is not None and self.options.webhook_cert_secret:
                keeper = self.certificate_keeper()
                await keeper.first_sync()  # the server loads the files it wrote
                background.append(asyncio.create_task(keeper.run(keeper.interval)))
            if self.options.webhook_port is not None:
                self.webhooks = WebhookServer(
                    "0.0.0.0",  # noqa: S104 - reached through a Service
                    self.options.webhook_port,
                    self.options.webhook_cert_dir,
                    self.state,
                    self.options.config_namespace,
                    self.options.slo_config_name,
                    schedulers=self.options.schedulers,
                    client_auth=self.options.webhook_client_auth(),
                    audit=self.admission_audit,
                    rate_limiter=self.webhook_rate_limiter(),
                    quota_tree=self.quota_tree,
                    quota_routes=self.quota_routes,
                )
                if self.webhooks.authenticator is not None:
                    refused = self.metrics.webhook_client_auth_refused
                    self.webhooks.authenticator.on_refused = lambda why: refused.labels(why).inc()
                await self.webhooks.start()
            await asyncio.gather(*(i.wait_synced() for i in self.state.informers))
            log.info("synced: %d nodes, %d pods", len(self.state.nodes), len(self.state.pods))
            if self.options.leader_elect:
                config = LeaderElectionConfig(
                    name=self.options.leader_election_id,
                    namespace=self.options.leader_election_namespace,
                )
                await LeaderElector(self.api, config).run(self.lead)
                log.warning("lost the leader Lease %s: stopping", config.name)
            else:
                await self.lead()
        finally:
            for queue in self.queues.values():
                queue.shut_down()
            if self.webhooks is not None:
                await self.webhooks.stop()
            for runner in servers:
                await runner.cleanup()
            for task in (*informers, *background):
                task.cancel()
            await asyncio.gather(*informers, *background, return_exceptions=True)

    def _quota_webhooks(self) -> tuple[elasticquota.QuotaTree | None, frozenset[str]]:
        """The ElasticQuota webhooks' tree, fed by the ElasticQuota informer, and the paths
        served: ElasticMutatingWebhook and ElasticValidatingWebhook each switch theirs (a
        path switched off is 404, as in Koordinator, whose server registers no handler). No
        tree without a webhook server (--disable-webhooks, WebhookFramework=false)."""
        if self.options.webhook_port is None:
            return None, frozenset()
        gates = manager_gate_states(self.options.feature_gates)
        routes = frozenset(
            path
            for path, gate in (
                (elasticquota.MUTATE_PATH, "ElasticMutatingWebhook"),
                (elasticquota.VALIDATE_PATH, "ElasticValidatingWebhook"),
            )
            if gates[gate]
        )
        if not routes:
            return None, routes
        topology = QuotaTopology(
            QuotaGates(
                enable_update_resource_key=gates["ElasticQuotaEnableUpdateResourceKey"],
                guarantee_usage=gates["ElasticQuotaGuaranteeUsage"],
                support_parent_quota_submit_pod=gates["SupportParentQuotaSubmitPod"],
                disable_default_quota=gates["DisableDefaultQuota"],
            )
        )
        quotas, pods = self.state.elastic_quotas, self.state.pods
        gauge = self.metrics.webhook_quota_shared_weight
        tree = elasticquota.QuotaTree(
            topology,
            synced=quotas.synced.is_set,
            pods=pods.list,
            on_shared_weight=lambda name, resource, amount: gauge.labels(name, resource).set(
                amount
            ),
        )
        quotas.add_handler(tree.on_event)
        return tree, routes

    def certificate_keeper(self) -> CertificateKeeper:
        """The keeper of --webhook-cert-secret, its state in the metrics."""
        o = self.options
        keeper = CertificateKeeper(
            self.api,
            o.config_namespace,
            o.webhook_cert_secret,
            webhook_names(o.webhook_service_name, o.config_namespace),
            o.webhook_cert_dir,
            on_ca=cabundle.CABundleWriter(
                self.api,
                [
                    (cabundle.MUTATING, o.mutating_webhook_configuration),
                    (cabundle.VALIDATING, o.validating_webhook_configuration),
                ],
            ),
            on_event=lambda event: self.metrics.webhook_certificate_events.labels(event).inc(),
        )
        self.metrics.webhook_certificate_not_after.set_function(keeper.not_after)
        return keeper

    def webhook_rate_limiter(self) -> ratelimit.RateLimiter:
        """The webhooks' limiter, each refusal counted in koord_manager_webhook_rate_limited."""
        limits = self.options.webhook_rate_limits()
        log.info("webhook rate limit: %s", limits.describe())
        counter = self.metrics.webhook_rate_limited
        return ratelimit.RateLimiter(
            limits,
            on_refused=lambda route, _refusal: counter.labels(route).inc(),
            component="koord-manager webhook",
        )

    def synced(self) -> bool:
        """/readyz: the informer caches synced and, where this replica serves the webhooks,
        their server listening. The Service sends the API server's webhook calls to ready
        replicas only: a replica whose caches synced while it still waited for its certificate
        (an API server restarting) was called and refused the connection (seen on the cluster
        tier), which failurePolicy Fail turns into refused writes."""
        serving = self.options.webhook_port is None or (
            self.webhooks is not None and self.webhooks.listening
        )
        return serving and all(i.synced.is_set() for i in self.state.informers)

    async def _serve_metrics(self, addr: str) -> web.AppRunner:
        runner = await serve_probes(
            addr,
            self.synced,
            lambda: (self.metrics.exposition(), CONTENT_TYPE_LATEST),
            self.admission_audit.routes(),
        )
        log.info("metrics and probes on %s", addr)
        return runner
