"""koordlet's Prometheus metrics, in a registry of its own (no import-time globals).

Names follow Koordinator's where it has one (``koordlet_runtime_hook_invoked_duration_
milliseconds``, ...); counters added here end in ``_total``.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

MS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000)


class KoordletMetrics:
    def __init__(self, node: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.node = node
        r = self.registry
        self.start_time = Gauge(
            "koordlet_start_time", "koordlet start time (unix seconds)", ["node"], registry=r
        )
        self.start_time.labels(node).set(time.time())
        self.hook_duration = Histogram(
            "koordlet_runtime_hook_invoked_duration_milliseconds",
            "Time of each runtime hook call",
            ["node", "hook", "stage", "status"],
            buckets=MS_BUCKETS,
            registry=r,
        )
        self.hook_failures = Counter(
            "koordlet_runtime_hook_failures_total",
            "Runtime hook failures by hook and cause (the container still starts unless the "
            "failure policy is Fail)",
            ["node", "hook", "cause"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
            "Time of each reconciler pass",
            ["node", "level", "resource_type", "status"],
            buckets=MS_BUCKETS,
            registry=r,
        )
        self.resource_updates = Counter(
            "koordlet_resource_updates_total",
            "Writes of kernel state by resource and result",
            ["node", "resource", "status"],
            registry=r,
        )
        self.resource_update_duration = Histogram(
            "koordlet_resource_update_duration_milliseconds",
            "Time of each write of kernel state",
            ["node", "resource", "status"],
            buckets=MS_BUCKETS,
            registry=r,
        )
        self.nri_requests = Histogram(
            "koordlet_nri_request_duration_seconds",
            "Time to answer each NRI request, from decoding to reply",
            ["node", "method"],
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1),
            registry=r,
        )
        self.nri_overruns = Counter(
            "koordlet_nri_handler_overruns_total",
            "NRI handlers answered with no change because they overran their time budget",
            ["node", "handler"],
            registry=r,
        )
        self.nri_connected = Gauge(
            "koordlet_nri_connected",
            "1 while registered with the runtime over NRI",
            ["node"],
            registry=r,
        )
        self.group_identity = Gauge(
            "koordlet_group_identity_mechanism_info",
            "The kernel mechanism GroupIdentity uses (bvt, cpu.idle or none)",
            ["node", "mechanism"],
            registry=r,
        )
        self.node_config_errors = Counter(
            "koordlet_node_config_errors_total",
            "Times the NodeSLO file could not be used (the last good one stays)",
            ["node"],
            registry=r,
        )
        self.known_pods = Gauge(
            "koordlet_known_pods", "Pods known from the runtime", ["node"], registry=r
        )
