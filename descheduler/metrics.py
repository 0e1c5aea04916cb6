"""koord-descheduler's Prometheus metrics (served with /healthz and /readyz).

``descheduler_pods_evicted`` is Koordinator v1.8.0's one descheduler metric
(pkg/descheduler/metrics/metrics.go), a counter with its labels: result ("success" or
"error"), strategy (the plugin that asked for the migration), namespace and node. Koordinator's
Go client exports a counter under its plain name: this one is a koordkube.gometrics
``GoCounter``, written out in the Go client's form (``exposition``). The ``koord_descheduler_*``
metrics are ours. CENSUS lists Koordinator's series and what became
of each (docs/descheduler.md shows it).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
)

from koordkube.gometrics import GoCounter, exposition

disable_created_metrics()  # type: ignore[no-untyped-call]

PODS_EVICTED = "descheduler_pods_evicted"
# Koordinator v1.8.0's koord-descheduler series (pkg/descheduler/metrics): name -> (type,
# label names, what it is here). Every one is exported.
CENSUS: dict[str, tuple[str, tuple[str, ...], str]] = {
    PODS_EVICTED: (
        "counter",
        ("result", "strategy", "namespace", "node"),
        "exported: each eviction the migration controller asks the Eviction API for, by "
        'result "success" or "error" and the job\'s evict trigger as strategy',
    ),
}


class DeschedulerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.pods_evicted = GoCounter(
            PODS_EVICTED,
            "Number of evicted pods, by the result, by the strategy, by the namespace, by the "
            "node name. 'error' result means a pod could not be evicted",
            CENSUS[PODS_EVICTED][1],
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
        self.flag_unimplemented = Gauge(
            "koord_descheduler_flag_unimplemented",
            "1 for each of Koordinator's flags given on the command line that changes nothing "
            "here (said at start-up)",
            ["flag"],
            registry=self.registry,
        )
        self.feature_gate_unimplemented = Gauge(
            "koord_descheduler_feature_gate_unimplemented",
            "1 for each feature gate set away from Koordinator's default with --feature-gates; "
            "none changes anything here (said at start-up)",
            ["gate"],
            registry=self.registry,
        )

    def unimplemented(self, flags: Iterable[str], gates: Iterable[str]) -> None:
        for name in flags:
            self.flag_unimplemented.labels(name).set(1)
        for name in gates:
            self.feature_gate_unimplemented.labels(name).set(1)

    def exposition(self) -> bytes:
        """/metrics' body: Koordinator's series in the Go client's form, then ours."""
        return exposition(self.registry, [self.pods_evicted])
