"""``koordctl top``: live node and per-pod usage grouped by QoS class."""

from __future__ import annotations

import argparse
from typing import Any

from koordctl import client
from koordctl.render import QOS_ORDER, cores, live, mib


def render_top(node: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """The ``koordctl top`` table: the node, then pods grouped by QoS class with totals."""
    usage = node.get("usage", {})
    cpu, memory = usage.get("cpu"), usage.get("memory")
    share = f" ({100 * cpu / node['cpus']:.0f}%)" if cpu is not None and node.get("cpus") else ""
    system = node.get("system_usage", {})
    lines = [
        f"NODE {node['name']}  CPU {cores(cpu)}/{node.get('cpus', '?')} cores{share}  "
        f"MEMORY {mib(memory)}/{mib(node.get('memory_bytes'))}  "
        f"SYSTEM {cores(system.get('cpu'))} cores {mib(system.get('memory'))}",
        "",
        f"{'QOS':7}{'NAMESPACE/POD':40}{'CPU(cores)':>11}{'MEMORY':>10}{'CONTAINERS':>12}",
    ]
    for qos in QOS_ORDER:
        group = [p for p in pods if p.get("qos") == qos]
        if not group:
            continue
        total_cpu = sum(p["usage"].get("cpu") or 0 for p in group)
        total_mem = sum(p["usage"].get("memory") or 0 for p in group)
        for pod in sorted(group, key=lambda p: -(p["usage"].get("cpu") or 0)):
            name = f"{pod['namespace']}/{pod['name']}"[:39]
            lines.append(
                f"{qos:7}{name:40}{cores(pod['usage'].get('cpu')):>11}"
                f"{mib(pod['usage'].get('memory')):>10}{len(pod['containers']):>12}"
            )
        lines.append(f"{'':7}{'= ' + qos + ' total':40}{cores(total_cpu):>11}{mib(total_mem):>10}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    def screen() -> str:
        return render_top(
            client.fetch(args.addr, "/api/v1/node"), client.fetch(args.addr, "/api/v1/pods")
        )

    return live("top", screen, args.once, args.interval)
