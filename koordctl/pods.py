"""``koordctl pods``: known pods, their QoS class and the values koordlet applied."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from koordctl import client
from koordctl.render import QOS_ORDER, mib


def render_pods(pods: list[dict[str, Any]]) -> str:
    header = (
        f"{'QOS':7}{'NAMESPACE/POD':32}{'CONTAINER':14}{'SHARES':>8}{'QUOTA':>9}"
        f"{'CPUSET':>9}{'MEMORY':>10}{'IDLE':>6}"
    )
    lines = [header]

    def row(qos: str, name: str, container: str, applied: dict[str, Any]) -> str:
        memory = applied.get("memory.limit_in_bytes")
        return (
            f"{qos:7}{name[:31]:32}{container[:13]:14}{applied.get('cpu.shares', '-')!s:>8}"
            f"{applied.get('cpu.cfs_quota_us', '-')!s:>9}{applied.get('cpuset.cpus', '-')!s:>9}"
            f"{'-' if memory in (None, -1) else mib(memory):>10}{applied.get('cpu.idle', '')!s:>6}"
        )

    for pod in sorted(
        pods,
        key=lambda p: (
            QOS_ORDER.index(p.get("qos", "none")) if p.get("qos") in QOS_ORDER else 9,
            p["name"],
        ),
    ):
        name = f"{pod['namespace']}/{pod['name']}"
        lines.append(row(pod["qos"], name, "(pod)", pod.get("applied", {})))
        for container in pod.get("containers", []):
            lines.append(row("", "", container["name"], container.get("applied", {})))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        data = client.fetch(args.addr, "/api/v1/pods")
    except client.KoordletUnreachable as err:
        print(f"koordctl pods: {err}", file=sys.stderr)
        return 1
    print(json.dumps(data) if args.json else render_pods(data))
    return 0
