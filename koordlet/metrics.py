"""koordlet's Prometheus metrics, in a registry of its own (no import-time globals).

Every series Koordinator's koordlet exports, and that is measured here, is exported under its
name, type and label names (koordlet/koordseries.py holds the census and the series built per
scrape). Two differences the Python client forces or we chose: counters end in ``_total``
(the chart's recording rules give Koordinator's names back), and besides Koordinator's
``*_duration_milliseconds`` histograms (with its buckets) the same timings are exported in
seconds, the Prometheus base unit (``..._duration_seconds``, our buckets).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

# Koordinator's Go client exports no *_created series: neither do we (dashboards and recording
# rules written for Koordinator see the same series).
disable_created_metrics()  # type: ignore[no-untyped-call]


class LabelCache:
    """A labelled metric's children, looked up once per label values: the NRI path observes
    several per request, and ``labels()`` costs more than the observation. Only for metrics
    whose series are never removed (a removed child would keep being served from here)."""

    def __init__(self, metric: Histogram | Counter | Gauge) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


SECOND_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# Koordinator's buckets for its *_duration_milliseconds histograms (ExponentialBuckets(0.01, 4,
# 8): 10 us to 164 ms, in milliseconds).
MILLISECOND_BUCKETS = (0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 40.96, 163.84)
# Koordinator's histograms in milliseconds: the only names ``promtool check metrics`` flags
# (non-base unit), kept so that Koordinator's dashboards work unchanged.
MILLISECOND_HISTOGRAMS = (
    "koordlet_runtime_hook_invoked_duration_milliseconds",
    "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
    "koordlet_resource_update_duration_milliseconds",
)
# Koordinator's eviction reason: its prefix before the feature (qosmanager/plugins/util).
EVICT_REASON_PREFIX = "trigger by koordlet feature "
# Koordinator forgets a pod's eviction-detail series 5 minutes after its last change
# (pkg/util/metrics DefaultExpireTime): pod names must not pile up.
EVICTION_DETAIL_SECONDS = 300.0
# Koordinator's kubelet request buckets (ExponentialBuckets(0.001, 4, 7): 1 ms to 4.096 s), used
# for all three outgoing-request histograms: kubelet, CRI and API server.
REQUEST_BUCKETS = (0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096)


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
            "koordlet_runtime_hook_invoked_duration_seconds",
            "Time of each runtime hook call",
            ["node", "hook", "stage", "status"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        self.hook_duration_ms = Histogram(
            "koordlet_runtime_hook_invoked_duration_milliseconds",
            "time duration of invocations of runtime hook plugins (Koordinator's histogram)",
            ["node", "hook", "stage", "status"],
            buckets=MILLISECOND_BUCKETS,
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
            "koordlet_runtime_hook_reconciler_invoked_duration_seconds",
            "Time of each reconciler pass",
            ["node", "level", "resource_type", "status"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        self.reconcile_duration_ms = Histogram(
            "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds",
            "time duration of invocations of runtime hook reconciler plugins (Koordinator's "
            "histogram)",
            ["node", "level", "resource_type", "status"],
            buckets=MILLISECOND_BUCKETS,
            registry=r,
        )
        self.resource_updates = Counter(
            "koordlet_resource_updates_total",
            "Writes of kernel state by resource and result",
            ["node", "resource", "status"],
            registry=r,
        )
        self.resource_update_duration = Histogram(
            "koordlet_resource_update_duration_seconds",
            "Time of each write of kernel state",
            ["node", "resource", "status"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        # Koordinator's: no node label, ``type`` is the resource written
        self.resource_update_duration_ms = Histogram(
            "koordlet_resource_update_duration_milliseconds",
            "time duration of resource update such as cgroup files (Koordinator's histogram)",
            ["type", "status"],
            buckets=MILLISECOND_BUCKETS,
            registry=r,
        )
        # every write comes through observe_write: its children looked up once
        self._writes = LabelCache(self.resource_updates)
        self._write_seconds = LabelCache(self.resource_update_duration)
        self._write_ms = LabelCache(self.resource_update_duration_ms)
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
        self.http_refused = Counter(
            "koordlet_http_connections_refused_total",
            "Connections to the metrics and status server closed unserved: too many at once",
            ["node"],
            registry=r,
        )
        self.unimplemented_gates = Gauge(
            "koordlet_feature_gate_unimplemented",
            "1 for each feature gate that is on (given or by default) and changes nothing here",
            ["node", "gate"],
            registry=r,
        )
        self.unimplemented_flags = Gauge(
            "koordlet_flag_unimplemented",
            "1 for each Koordinator flag given on the command line that changes nothing here",
            ["node", "flag"],
            registry=r,
        )
        self.node_config_errors = Counter(
            "koordlet_node_config_errors_total",
            "Times the NodeSLO file could not be used (the last good one stays)",
            ["node"],
            registry=r,
        )
        self.nri_conflicts = Counter(
            "koordlet_nri_conflicts_total",
            "Values koordlet asked for a container over NRI that its cgroup did not hold once "
            "started: another NRI plugin or the kubelet set them (koordctl explain says which)",
            ["node", "resource"],
            registry=r,
        )
        self.known_pods = Gauge(
            "koordlet_known_pods", "Pods known from the runtime", ["node"], registry=r
        )
        # -- QoS manager ----------------------------------------------------------------------
        self.qos_actions = Counter(
            "koordlet_qos_actions_total",
            "Changes the QoS manager made, by strategy and kind (koordctl explain says why)",
            ["node", "strategy", "kind"],
            registry=r,
        )
        self.qos_strategy_duration = Histogram(
            "koordlet_qos_strategy_duration_seconds",
            "Time of each QoS manager strategy run (context included)",
            ["node", "strategy"],
            buckets=SECOND_BUCKETS,
            registry=r,
        )
        self.be_suppress_cpu_cores = Gauge(
            "koordlet_be_suppress_cpu_cores",
            "CPU left to best-effort pods by CPU suppress, by policy (cpuset or cfsQuota)",
            ["node", "type"],
            registry=r,
        )
        self.be_suppress_ls_used = Gauge(
            "koordlet_be_suppress_ls_used_cpu_cores",
            "CPU used by the non-BE pods in the last CPU suppress computation",
            ["node"],
            registry=r,
        )
        self.pod_evictions = Counter(
            "koordlet_pod_eviction",
            "Pods evicted (or killed) by the QoS manager, by reason",
            ["node", "reason"],
            registry=r,
        )
        self.pod_eviction_detail = Counter(
            "koordlet_pod_eviction_detail",
            "Evictions by pod and reason (a pod's series goes 5 minutes after its last eviction)",
            ["node", "pod_namespace", "pod_name", "reason"],
            registry=r,
        )
        self._detail_changed: dict[tuple[str, str, str], float] = {}
        self.scaled_cfs_burst = Gauge(
            "koordlet_container_scaled_cfs_burst_us",
            "cpu.cfs_burst_us set by CPU burst",
            ["node", "pod_namespace", "pod_name", "container_id", "container_name"],
            registry=r,
        )
        self.scaled_cfs_quota = Gauge(
            "koordlet_container_scaled_cfs_quota_us",
            "cpu.cfs_quota_us set by CPU burst's quota scaling",
            ["node", "pod_namespace", "pod_name", "container_id", "container_name"],
            registry=r,
        )
        # -- node information read at start (Koordinator reads it every collect interval) -----
        self.cpu_info_status = Counter(
            "koordlet_collect_node_cpu_info_status",
            "Reads of the node's CPU information by result",
            ["node", "status"],
            registry=r,
        )
        self.numa_info_status = Counter(
            "koordlet_collect_node_numa_info_status",
            "Reads of the node's NUMA information by result",
            ["node", "status"],
            registry=r,
        )
        self.core_sched_status = Counter(
            "koordlet_core_sched_cookie_manage_status",
            "Core scheduling cookie changes by group and result",
            ["node", "core_sched_group", "status"],
            registry=r,
        )
        self.node_metric_node_usage = Gauge(
            "koordlet_node_metric_node_usage",
            "the node usage reported in the NodeMetric",
            ["node", "resource", "unit"],
            registry=r,
        )
        self.node_metric_system_usage = Gauge(
            "koordlet_node_metric_system_usage",
            "the system usage reported in the NodeMetric",
            ["node", "resource", "unit"],
            registry=r,
        )
        # -- peak prediction (koordlet.prediction) ---------------------------------------------
        self.predicted_reclaimable = Gauge(
            "koordlet_node_predicted_resource_reclaimable",
            "the node reclaimable resources predicted by koordinator",
            ["node", "predictor", "resource", "unit"],
            registry=r,
        )
        self.priority_reclaimable = Gauge(
            "koordlet_node_priority_resource_reclaimable",
            "the reclaimable resources of a priority class the NodeMetric reports",
            ["node", "priority", "resource", "unit"],
            registry=r,
        )
        self.priority_reclaimable_status = Gauge(
            "koordlet_node_resource_priority_reclaimable_status",
            "1 while the reclaimable resources of a priority class cannot be predicted, else 0",
            ["node", "priority"],
            registry=r,
        )
        # -- koordlet's own calls out: count, latency and errors ------------------------------
        # Rates and error rates come from the _count series by ``code``; every label value is
        # from a short fixed list (no pod names, no URLs with names in them).
        self.kubelet_requests = Histogram(
            "koordlet_kubelet_request_duration_seconds",
            "kubelet http request duration in seconds (code: the HTTP status, error when no "
            "response came)",
            ["node", "verb", "path", "code"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.cri_requests = Histogram(
            "koordlet_cri_request_duration_seconds",
            "CRI request duration in seconds (code: the gRPC status code name, OK on success)",
            ["node", "method", "code"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.apiserver_requests = Histogram(
            "koordlet_apiserver_request_duration_seconds",
            "Kubernetes API server request duration in seconds (code: the HTTP status, error "
            "when no response came; a watch is timed until its response starts)",
            ["node", "verb", "resource", "code"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )

    def record_eviction(self, namespace: str, name: str, feature: str, now: float) -> None:
        """One eviction by a QoS feature, with Koordinator's reason text."""
        reason = EVICT_REASON_PREFIX + feature
        self.pod_evictions.labels(self.node, reason).inc()
        self.pod_eviction_detail.labels(self.node, namespace, name, reason).inc()
        self._detail_changed[(namespace, name, reason)] = now
        self.expire_eviction_details(now)

    def expire_eviction_details(self, now: float) -> None:
        for key, changed in list(self._detail_changed.items()):
            if now - changed > EVICTION_DETAIL_SECONDS:
                del self._detail_changed[key]
                self.pod_eviction_detail.remove(self.node, *key)

    def observe_write(self, resource: str, status: str, seconds: float) -> None:
        """One write of kernel state, in both units (ours and Koordinator's)."""
        self._writes(self.node, resource, status).inc()
        self._write_seconds(self.node, resource, status).observe(seconds)
        self._write_ms(resource, status).observe(seconds * 1000)

    def observe_reconcile(self, level: str, resource: str, status: str, seconds: float) -> None:
        self.reconcile_duration.labels(self.node, level, resource, status).observe(seconds)
        self.reconcile_duration_ms.labels(self.node, level, resource, status).observe(
            seconds * 1000
        )

    def record_node_metric(self, key: str, cores: float | None, memory: float | None) -> None:
        """The usage a NodeMetric report carries (``nodeUsage`` or ``systemUsage``)."""
        gauge = self.node_metric_node_usage if key == "nodeUsage" else self.node_metric_system_usage
        for resource, unit, amount in (("cpu", "core", cores), ("memory", "byte", memory)):
            if amount is not None:
                gauge.labels(self.node, resource, unit).set(amount)

    def record_predicted_reclaimable(self, predictor: str, milli: int, memory: int) -> None:
        """One predictor's result (Koordinator's RecordNodePredictedResourceReclaimable)."""
        gauge = self.predicted_reclaimable
        gauge.labels(self.node, predictor, "cpu", "core").set(milli / 1000)
        gauge.labels(self.node, predictor, "memory", "byte").set(memory)

    def record_priority_reclaimable(self, priority: str, found: tuple[int, int] | None) -> None:
        """What the NodeMetric reports for ``priority``; None: no prediction (0, status 1)."""
        milli, memory = found if found is not None else (0, 0)
        self.priority_reclaimable.labels(self.node, priority, "cpu", "core").set(milli / 1000)
        self.priority_reclaimable.labels(self.node, priority, "memory", "byte").set(memory)
        self.priority_reclaimable_status.labels(self.node, priority).set(found is None)

    def record_core_sched(self, group: str, ok: bool) -> None:
        self.core_sched_status.labels(self.node, group, "succeeded" if ok else "failed").inc()

    def observe_kubelet(self, verb: str, path: str, code: str, seconds: float) -> None:
        self.kubelet_requests.labels(self.node, verb, path, code).observe(seconds)

    def observe_cri(self, method: str, code: str, seconds: float) -> None:
        self.cri_requests.labels(self.node, method, code).observe(seconds)

    def observe_apiserver(self, verb: str, resource: str, code: str, seconds: float) -> None:
        self.apiserver_requests.labels(self.node, verb, resource, code).observe(seconds)
