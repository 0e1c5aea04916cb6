"""koord-descheduler's Prometheus metrics (served with /healthz and /readyz).

``descheduler_pods_evicted`` is Koordinator v1.8.0's one descheduler metric
(pkg/descheduler/metrics/metrics.go) with its labels: result ("success" or "error"),
strategy (the plugin that asked for the migration), namespace and node. Koordinator's Go
client names the counter without a suffix; prometheus_client adds ``_total``, so the series
is ``descheduler_pods_evicted_total``. The ``koord_descheduler_*`` metrics are ours.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics

disable_created_metrics()  # type: ignore[no-untyped-call]


class DeschedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pods_evicted = Counter(
            "descheduler_pods_evicted",
            "Number of evicted pods, by the result, by the strategy, by the namespace, by the "
            "node name. 'error' result means a pod could not be evicted",
            ["result", "strategy", "namespace", "node"],
            registry=self.registry,
        )
        self.rounds = Counter(
            "koord_descheduler_rounds",
            "Descheduling rounds run (each deschedulingInterval while leading)",
            registry=self.registry,
        )
        self.jobs_created = Counter(
            "koord_descheduler_pod_migration_jobs_created",
            "PodMigrationJobs created by the descheduling rounds",
            ["strategy"],
            registry=self.registry,
        )
        self.dry_run_migrations = Counter(
            "koord_descheduler_dry_run_migrations",
            "Migrations a dry run would have requested (no PodMigrationJob is created)",
            ["strategy", "namespace", "node"],
            registry=self.registry,
        )
        self.jobs_finished = Counter(
            "koord_descheduler_pod_migration_jobs_finished",
            "PodMigrationJobs this controller moved to Succeeded or Failed, by phase and reason",
            ["phase", "reason"],
            registry=self.registry,
        )
        self.object_limited = Counter(
            "koord_descheduler_object_limited",
            "Times a passed PodMigrationJob waited (3 s) instead of evicting because the "
            "objectLimiters bucket of its pod's workload or namespace was empty",
            ["limiter"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "koord_descheduler_leader",
            "1 while this replica holds the leader Lease (or runs without election)",
            registry=self.registry,
        )
