"""``koordctl status``: one node's chain, measured usage → NodeMetric → batch resources →
NodeSLO → applied values, assembled from koordlet's API and (when reachable) the API server.

Pure functions over the JSON both sides serve: ``assemble`` builds the status object (also
what ``--json`` prints), ``render`` the text. ``run`` reads both through ``koordctl.client``.
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from koordapi.explanation import ANNOTATION_NODE_RESOURCE_EXPLANATION, MANAGED_RESOURCES
from koordctl import client

CHAIN_RESOURCES = MANAGED_RESOURCES
QOS_CLASSES = ("lseClass", "lsrClass", "lsClass", "beClass")
APPLIED_FILES = ("cpu.shares", "cpu.cfs_quota_us", "cpuset.cpus", "memory.limit_in_bytes")
EXPLANATION_ANNOTATION = ANNOTATION_NODE_RESOURCE_EXPLANATION  # koord-manager writes it
NO_CLUSTER = (
    "cluster part not shown: it needs --kubeconfig FILE or in-cluster credentials "
    "(NodeMetric, Node batch resources, NodeSLO come from the API server)"
)

NEEDS_API = "not shown (needs --kubeconfig or in-cluster credentials)"

Object = Mapping[str, Any]


def _usage(resource_map: Any) -> dict[str, Any]:
    """``{"resources": {"cpu": "1500m", "memory": "123"}}`` → ``{"cpu": ..., "memory": ...}``."""
    resources = (resource_map or {}).get("resources") if isinstance(resource_map, Mapping) else {}
    return {k: resources.get(k) for k in ("cpu", "memory")} if resources else {}


def metric_summary(metric_status: Object | None) -> dict[str, Any] | None:
    """The parts of a NodeMetric ``status`` the chain shows."""
    if metric_status is None:
        return None
    node_part = metric_status.get("nodeMetric") or {}
    return {
        "updateTime": metric_status.get("updateTime"),
        "nodeUsage": _usage(node_part.get("nodeUsage")),
        "systemUsage": _usage(node_part.get("systemUsage")),
        "pods": len(metric_status.get("podsMetric") or []),
    }


def node_summary(node: Object) -> dict[str, Any]:
    """A Node's managed batch/mid allocatable and koord-manager's explanation of them."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    allocatable = status.get("allocatable") or {}
    raw = (meta.get("annotations") or {}).get(EXPLANATION_ANNOTATION)
    explanation: dict[str, Any] | None = None
    if raw is not None:
        try:
            explanation = json.loads(raw)
        except ValueError:
            explanation = {"unreadable": str(raw)[:200]}
    return {
        "name": meta.get("name"),
        "capacity": {k: (status.get("capacity") or {}).get(k) for k in ("cpu", "memory")},
        "allocatable": {name: allocatable.get(name) for name in CHAIN_RESOURCES},
        "explanation": explanation,
    }


def slo_summary(node_slo: Object) -> dict[str, Any]:
    """NodeSLO's key settings: the BE usage thresholds and each class's cpuQOS."""
    spec = node_slo.get("spec") or {}
    threshold = spec.get("resourceUsedThresholdWithBE") or {}
    strategy = spec.get("resourceQOSStrategy") or {}
    cpu_qos = {}
    for name in QOS_CLASSES:
        qos = ((strategy.get(name) or {}).get("cpuQOS")) or {}
        if qos:
            cpu_qos[name] = {"enable": qos.get("enable"), "groupIdentity": qos.get("groupIdentity")}
    return {
        "thresholdWithBE": {
            "enable": threshold.get("enable"),
            "cpuSuppressThresholdPercent": threshold.get("cpuSuppressThresholdPercent"),
            "cpuSuppressPolicy": threshold.get("cpuSuppressPolicy"),
            "memoryEvictThresholdPercent": threshold.get("memoryEvictThresholdPercent"),
        },
        "cpuQOS": cpu_qos,
    }


def be_applied(pods: Sequence[Object]) -> list[dict[str, Any]]:
    """The BE pods koordlet knows, with the values it applied to their cgroups."""
    out = []
    for pod in pods:
        if pod.get("qos") != "BE":
            continue
        applied = pod.get("applied") or {}
        out.append(
            {
                "pod": f"{pod.get('namespace')}/{pod.get('name')}",
                "applied": {
                    f: applied.get(f) for f in (*APPLIED_FILES, "cpu.idle") if f in applied
                },
                "usage": pod.get("usage") or {},
            }
        )
    return sorted(out, key=lambda p: str(p["pod"]))


def assemble(
    *,
    node_name: str,
    local_node: Object | None = None,
    local_pods: Sequence[Object] | None = None,
    local_metric: Object | None = None,
    local_error: str | None = None,
    cluster: Mapping[str, Object | None] | None = None,
    cluster_error: str | None = None,
) -> dict[str, Any]:
    """The status object. ``cluster`` holds ``node``, ``nodeMetric`` and ``nodeSLO`` objects
    (each None when absent); None: no API access (``cluster_error`` says why, if known)."""
    local: dict[str, Any] | None = None
    if local_node is not None:
        local = {
            "cpus": local_node.get("cpus"),
            "memoryBytes": local_node.get("memory_bytes"),
            "usage": local_node.get("usage") or {},
            "systemUsage": local_node.get("system_usage") or {},
            "nodeMetric": metric_summary(local_metric),
        }
    status: dict[str, Any] = {
        "node": node_name,
        "koordlet": local,
        "koordletError": local_error,
        "bePods": be_applied(local_pods or []),
        "cluster": None,
        "clusterError": cluster_error,
    }
    if cluster is not None:
        node, metric, slo = cluster.get("node"), cluster.get("nodeMetric"), cluster.get("nodeSLO")
        status["cluster"] = {
            "node": None if node is None else node_summary(node),
            "nodeMetric": None if metric is None else metric_summary(metric.get("status") or {}),
            "nodeSLO": None if slo is None else slo_summary(slo),
        }
    return status


def _cores(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f} cores"


def _mib(value: Any) -> str:
    return "-" if value is None else f"{float(value) / (1 << 20):.0f}Mi"


def _pair(usage: Mapping[str, Any]) -> str:
    return f"cpu {usage.get('cpu') or '-'}, memory {usage.get('memory') or '-'}"


def _metric_line(label: str, summary: Mapping[str, Any] | None) -> str:
    if summary is None:
        return f"  {label}: none"
    return (
        f"  {label}: updateTime {summary['updateTime']}, node usage "
        f"{_pair(summary['nodeUsage'])}; system usage {_pair(summary['systemUsage'])}; "
        f"{summary['pods']} pod metrics"
    )


def _on_off(value: Any) -> str:
    return "-" if value is None else ("on" if value else "off")


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value}%"


def _node_lines(node: Mapping[str, Any] | None) -> list[str]:
    if node is None:
        return ["  Node not found"]
    lines = [f"  {name}: {'-' if v is None else v}" for name, v in node["allocatable"].items()]
    why = node["explanation"]
    if why is None:
        return [*lines, "  no explanation: koord-manager has not written this node"]
    if "unreadable" in why:
        return [*lines, f"  unreadable explanation: {why['unreadable']}"]
    lines.append(f"  written {why.get('updateTime')} because {why.get('writtenBecause')}")
    if why.get("reason"):
        lines.append(f"  reason: {why['reason']}")
    return lines + [f"  how: {text}" for text in (why.get("resources") or {}).values()]


def _slo_lines(slo: Mapping[str, Any] | None) -> list[str]:
    if slo is None:
        return ["  NodeSLO not found"]
    t = slo["thresholdWithBE"]
    qos = ", ".join(
        f"{name} {_on_off(v['enable'])}"
        + ("" if v["groupIdentity"] is None else f" (groupIdentity {v['groupIdentity']})")
        for name, v in slo["cpuQOS"].items()
    )
    return [
        f"  resourceUsedThresholdWithBE: {_on_off(t['enable'])}, cpu suppress "
        f"{_pct(t['cpuSuppressThresholdPercent'])} ({t['cpuSuppressPolicy'] or '-'}), "
        f"memory evict {_pct(t['memoryEvictThresholdPercent'])}",
        f"  cpuQOS: {qos or 'not set'}",
    ]


def _local_lines(status: Mapping[str, Any]) -> list[str]:
    local = status.get("koordlet")
    if local is None:
        return [f"  koordlet not reachable: {status.get('koordletError') or 'unknown'}"]
    usage, system = local["usage"], local["systemUsage"]
    return [
        f"  node cpu {_cores(usage.get('cpu'))} of {local.get('cpus')}, memory "
        f"{_mib(usage.get('memory'))} of {_mib(local.get('memoryBytes'))}; system cpu "
        f"{_cores(system.get('cpu'))}, memory {_mib(system.get('memory'))}"
    ]


def _applied_lines(status: Mapping[str, Any]) -> list[str]:
    if status.get("koordlet") is None:
        return ["  koordlet not reachable"]
    if not status["bePods"]:
        return ["  no BE pods on this node"]
    lines = []
    for pod in status["bePods"]:
        values = "  ".join(f"{k}={v}" for k, v in pod["applied"].items() if v is not None)
        lines.append(f"  {pod['pod']}: {values or '-'}  (cpu {_cores(pod['usage'].get('cpu'))})")
    return lines


def render(status: Mapping[str, Any]) -> str:
    """The text of ``koordctl status``: one numbered section per stage of the chain."""
    local, cluster = status.get("koordlet"), status.get("cluster")
    lines = [f"node {status['node']}"]
    if cluster is None:
        if status.get("clusterError"):
            lines.append(f"API server not reachable: {status['clusterError']}")
        lines.append(NO_CLUSTER)
    lines += ["1. measured usage (koordlet):", *_local_lines(status), "2. NodeMetric:"]
    if local is not None:
        lines.append(_metric_line("koordlet's report", local.get("nodeMetric")))
    if cluster is None:
        lines.append(f"  API server: {NEEDS_API}")
    else:
        lines.append(_metric_line("API server", cluster["nodeMetric"]))
    lines.append("3. batch resources (Node allocatable, koord-manager):")
    lines += [f"  {NEEDS_API}"] if cluster is None else _node_lines(cluster["node"])
    lines.append("4. NodeSLO:")
    lines += [f"  {NEEDS_API}"] if cluster is None else _slo_lines(cluster["nodeSLO"])
    lines += ["5. applied values (BE pods, koordlet):", *_applied_lines(status)]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """The node's chain: usage → NodeMetric → batch resources → NodeSLO → applied values."""
    local: dict[str, Any] = {}
    local_error = None
    try:
        local["local_node"] = client.fetch(args.addr, "/api/v1/node")
        local["local_pods"] = client.fetch(args.addr, "/api/v1/pods")
        local["local_metric"] = client.fetch(args.addr, "/api/v1/nodemetric")
    except client.KoordletUnreachable as err:
        local_error = str(err)
    node = args.node or (local.get("local_node") or {}).get("name") or socket.gethostname()
    cluster, cluster_error = None, None
    if client.has_cluster_credentials(args.kubeconfig):
        try:
            cluster = client.read_cluster(node, args.kubeconfig)
        except Exception as err:
            cluster_error = f"{type(err).__name__}: {err}"
    report = assemble(
        node_name=node,
        local_error=local_error,
        cluster=cluster,
        cluster_error=cluster_error,
        **local,
    )
    print(json.dumps(report) if args.json else render(report))
    return 1 if local_error and cluster is None else 0
