"""koord-manager's Prometheus metrics (served on --metrics-addr with /healthz).

Koordinator's koord-manager series (pkg/slo-controller/metrics, pkg/webhook/metrics) are
exported under its names, types and label names where the behaviour exists here, recorded
where the same things happen (``KOORDINATOR_NOT_MEASURED`` says why the others are not);
its counters are koordkube.gometrics ``GoCounter``s, exported under their plain names as
Koordinator's Go client does (no ``_total``): ``exposition`` writes /metrics' body. The
``koord_manager_*`` rest is ours.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from koordkube.gometrics import GoCounter, exposition

# Koordinator's Go client exports no *_created series: neither do we (dashboards and recording
# rules written for Koordinator see the same series).
disable_created_metrics()  # type: ignore[no-untyped-call]

SUCCEEDED, FAILED = "succeeded", "failed"  # Koordinator's status label values
# Koordinator's koord-manager series that are not exported here, and why (the census in
# docs/manager.md; tests/unit/manager/test_koordinator_metrics.py holds upstream's list).
KOORDINATOR_NOT_MEASURED: Mapping[str, str] = {}
# Koordinator's webhook_duration_milliseconds buckets: ExponentialBuckets(0.001, 2, 20).
WEBHOOK_MS_BUCKETS = tuple(0.001 * 2**i for i in range(20))


def status(ok: bool) -> str:
    return SUCCEEDED if ok else FAILED


class ManagerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter(
            "koord_manager_reconciles",
            "Reconciles by controller and outcome (written, created, updated, unchanged, deleted)",
            ["controller", "outcome"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "koord_manager_reconcile_errors",
            "Reconciles that failed and were queued again",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_seconds = Histogram(
            "koord_manager_reconcile_duration_seconds",
            "Time one reconcile took",
            ["controller"],
            buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
            registry=self.registry,
        )
        self.node_resource_writes = Counter(
            "koord_manager_node_resource_writes",
            "Node status writes of batch and mid resources",
            registry=self.registry,
        )
        # --webhook-cert-secret: the serving certificate koord-manager keeps (ours)
        self.webhook_certificate_events = Counter(
            "koord_manager_webhook_certificate_events",
            "Serving certificates issued into the Secret (issued) and passes of the "
            "certificate keeper that failed (failed)",
            ["event"],
            registry=self.registry,
        )
        self.webhook_certificate_not_after = Gauge(
            "koord_manager_webhook_certificate_not_after_timestamp_seconds",
            "When the webhook serving certificate in use ends (0: not kept by koord-manager)",
            registry=self.registry,
        )
        # -- Koordinator's series (pkg/slo-controller/metrics, pkg/webhook/metrics) ------------
        self.node_resource_reconcile_count = GoCounter(
            "slo_controller_node_resource_reconcile_count",
            "the status count of reconciling node resource",
            ["status", "reason"],
        )
        self.nodemetric_reconcile_count = GoCounter(
            "slo_controller_nodemetric_reconcile_count",
            "the status count of reconciling NodeMetric",
            ["status", "reason"],
        )
        self.nodemetric_spec_parse_count = GoCounter(
            "slo_controller_nodemetric_spec_parse_count",
            "the count of parsing NodeMetric spec",
            ["status", "reason"],
        )
        self.nodeslo_reconcile_count = GoCounter(
            "slo_controller_nodeslo_reconcile_count",
            "the status count of reconciling NodeSLO",
            ["status", "reason"],
        )
        self.nodeslo_spec_parse_count = GoCounter(
            "slo_controller_nodeslo_spec_parse_count",
            "the count of parsing NodeSLO spec",
            ["status", "reason"],
        )
        self.node_resource_run_plugin_status = GoCounter(
            "slo_controller_node_resource_run_plugin_status",
            "the status count of running node resource plugins",
            ["plugin", "status", "reason"],
        )
        self.node_extended_resource_allocatable_internal = Gauge(
            "slo_controller_node_extended_resource_allocatable_internal",
            "the internal allocatable of node extended resources which may not be updated at "
            "the node status",
            ["node", "resource", "unit"],
            registry=self.registry,
        )
        self.webhook_duration_milliseconds = Histogram(
            "koord_manager_webhook_webhook_duration_milliseconds",
            "webhook_duration_milliseconds",
            ["webhook_type", "object_type", "operation", "plugin_name", "status"],
            buckets=WEBHOOK_MS_BUCKETS,
            registry=self.registry,
        )
        # Koordinator's: set by the ElasticQuota mutating webhook for each quota it gives its
        # max as shared weight (series are never removed, as there)
        self.webhook_quota_shared_weight = Gauge(
            "koord_manager_webhook_quota_shared_weight",
            "The shared weight of the quota",
            ["elasticquota_name", "resource_name"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "koord_manager_leader",
            "1 while this replica holds the leader Lease (or runs without election)",
            registry=self.registry,
        )
        # slo-controller-config content accepted but not acted on (manager.unsupported)
        self.slo_config_unsupported_reports = Counter(
            "koord_manager_slo_config_unsupported_reports",
            "Fields (or whole keys) of slo-controller-config reported as set but not used "
            "here, each once per change of the ConfigMap (the log says why)",
            ["key"],
            registry=self.registry,
        )
        self.slo_config_unsupported_fields = Gauge(
            "koord_manager_slo_config_unsupported_fields",
            "Fields (or whole keys) of the current slo-controller-config that are set but not "
            "used here, by ConfigMap key",
            ["key"],
            registry=self.registry,
        )
        # Koordinator's gates and flags accepted but not followed (the start-up warning's)
        self.feature_gate_unimplemented = Gauge(
            "koord_manager_feature_gate_unimplemented",
            "1 for each Koordinator feature gate whose state (given or default) asks for what "
            "this manager does not do",
            ["gate"],
            registry=self.registry,
        )
        self.flag_unimplemented = Gauge(
            "koord_manager_flag_unimplemented",
            "1 for each Koordinator koord-manager flag given that changes nothing here",
            ["flag"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "koord_manager_queue_depth",
            "Keys waiting in each controller's work queue",
            ["controller"],
            registry=self.registry,
        )
        # ours: Koordinator's webhook server has no rate limit (koordkube.ratelimit); the
        # route label is the webhook's path, or "other" for any path it does not serve
        # ours: Koordinator's webhook server authenticates no caller (koordkube.clientauth)
        self.webhook_client_auth_refused = Counter(
            "koord_manager_webhook_client_auth_refused",
            "Webhook requests refused for their credentials (--webhook-client-*), by reason: "
            "unauthenticated (HTTP 401) or forbidden (HTTP 403)",
            ["reason"],
            registry=self.registry,
        )
        self.webhook_rate_limited = Counter(
            "koord_manager_webhook_rate_limited",
            "Webhook requests refused with HTTP 429 by the rate limit (--webhook-rate-limit-*), "
            "by route",
            ["route"],
            registry=self.registry,
        )
        # ours (Koordinator counts only its binding admission decisions); its labels are those
        # of Koordinator's koord_manager_webhook_webhook_duration_milliseconds, plus decision
        self.webhook_decisions = Counter(
            "koord_manager_webhook_decisions",
            "Admission decisions by webhook (mutate, validate), object (pod, configmap), "
            "operation and decision (mutated, denied, allowed: allowed unchanged)",
            ["webhook_type", "object_type", "operation", "decision"],
            registry=self.registry,
        )

        # ours, with the labels and field values of Koordinator's koord-scheduler series
        # scheduler_elastic_quota_status, which holds the scheduler's own view (its assumed
        # pods counted at once); this is the manager's, from its informers, written by the
        # leader (manager.controllers.elasticquota)
        self.elastic_quota_status = Gauge(
            "koord_manager_elastic_quota_status",
            "ElasticQuota current status as koord-manager's leader computes and writes it, by "
            "field (runtime, request, child-request, guaranteed, allocated, "
            "non-preemptible-request, non-preemptible-used, used, min, max, sharedWeight) and "
            "resource: cpu in milli-cores, the others in whole units",
            ["name", "resource", "tree", "is_parent", "parent", "field"],
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """/metrics' body: Koordinator's counters in the Go client's form, then the rest."""
        counters = [v for v in vars(self).values() if isinstance(v, GoCounter)]
        return exposition(self.registry, counters)
