"""Koordinator's koordlet metrics, for the census tests (unit: test_koordseries.py; on a real
scrape: tests/e2e/test_metrics.py)."""

from __future__ import annotations

# Every metric of Koordinator's koordlet (pkg/koordlet/metrics, main branch of 2026-07: v1.8's
# 33 and 8 newer), as its Go code declares it: type and label names. Go counters have no
# _total suffix; the Python client adds one (the chart's recording rules map them back).
NODE = "node"
POD = ("pod_uid", "pod_name", "pod_namespace")
CONTAINER = ("container_id", "container_name")
PSI = ("psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported")
UPSTREAM: dict[str, tuple[str, tuple[str, ...]]] = {
    "koordlet_start_time": ("gauge", (NODE,)),
    "koordlet_collect_node_cpu_info_status": ("counter", (NODE, "status")),
    "koordlet_collect_node_numa_info_status": ("counter", (NODE, "status")),
    "koordlet_collect_node_local_storage_info_status": ("counter", (NODE, "status")),
    "koordlet_pod_eviction": ("counter", (NODE, "reason")),
    "koordlet_pod_eviction_detail": ("counter", (NODE, "pod_namespace", "pod_name", "reason")),
    "koordlet_node_used_cpu_cores": ("gauge", (NODE,)),
    "koordlet_node_used_memory_bytes": ("gauge", (NODE,)),
    "koordlet_container_core_sched_cookie": (
        "gauge",
        (NODE, *POD, *CONTAINER, "core_sched_group", "core_sched_cookie"),
    ),
    "koordlet_core_sched_cookie_manage_status": ("counter", (NODE, "core_sched_group", "status")),
    "koordlet_container_cpi": ("gauge", (NODE, *POD, *CONTAINER, "cpi_field")),
    "koordlet_container_scaled_cfs_burst_us": (
        "gauge",
        (NODE, "pod_namespace", "pod_name", *CONTAINER),
    ),
    "koordlet_container_scaled_cfs_quota_us": (
        "gauge",
        (NODE, "pod_namespace", "pod_name", *CONTAINER),
    ),
    "koordlet_cpuset_share_pool_cpu_cores": ("gauge", (NODE,)),
    "koordlet_cpuset_be_share_pool_cpu_cores": ("gauge", (NODE,)),
    "koordlet_cpuset_share_pool_info": ("gauge", (NODE, "cpu")),
    "koordlet_cpuset_be_share_pool_info": ("gauge", (NODE, "cpu")),
    "koordlet_be_suppress_cpu_cores": ("gauge", (NODE, "type")),
    "koordlet_be_suppress_ls_used_cpu_cores": ("gauge", (NODE,)),
    "koordlet_be_suppress_be_used_cpu_cores": ("gauge", (NODE,)),
    "koordlet_host_application_resource_usage": (
        "gauge",
        (NODE, "host_application_name", "resource", "priority_class", "qos"),
    ),
    "koordlet_kubelet_request_duration_seconds": ("histogram", ("verb", "path", "code")),
    "koordlet_node_predicted_resource_reclaimable": (
        "gauge",
        (NODE, "predictor", "resource", "unit"),
    ),
    "koordlet_node_predicted_resource_peak": ("gauge", (NODE, "predictor", "resource", "unit")),
    "koordlet_container_psi": ("gauge", (NODE, *POD, *CONTAINER, *PSI)),
    "koordlet_pod_psi": ("gauge", (NODE, *POD, *PSI)),
    "koordlet_resctrl_llc_occupancy": ("gauge", (NODE, "cache_id", "qos")),
    "koordlet_resctrl_memory_bandwidth": ("gauge", (NODE, "cache_id", "qos", "mb_type")),
    "koordlet_resource_update_duration_milliseconds": ("histogram", ("type", "status")),
    "koordlet_node_resource_allocatable": ("gauge", (NODE, "resource", "unit")),
    "koordlet_node_priority_resource_reclaimable": (
        "gauge",
        (NODE, "priority", "resource", "unit"),
    ),
    "koordlet_node_resource_priority_reclaimable_status": ("gauge", (NODE, "priority")),
    "koordlet_container_resource_requests": (
        "gauge",
        (NODE, "resource", "unit", *POD, *CONTAINER),
    ),
    "koordlet_container_resource_limits": ("gauge", (NODE, "resource", "unit", *POD, *CONTAINER)),
    "koordlet_runtime_hook_invoked_duration_milliseconds": (
        "histogram",
        (NODE, "hook", "stage", "status"),
    ),
    "koordlet_runtime_hook_reconciler_invoked_duration_milliseconds": (
        "histogram",
        (NODE, "level", "resource_type", "status"),
    ),
    "koordlet_container_oom_score_adj": (
        "gauge",
        (NODE, "pod_name", "pod_namespace", "pod_uid", "container_name"),
    ),
    "koordlet_node_metric_node_usage": ("gauge", (NODE, "resource", "unit")),
    "koordlet_node_metric_system_usage": ("gauge", (NODE, "resource", "unit")),
    "koordlet_node_metric_numa_node_usage": ("gauge", (NODE, "numa_node", "resource", "unit")),
    "koordlet_node_metric_numa_system_usage": ("gauge", (NODE, "numa_node", "resource", "unit")),
}
