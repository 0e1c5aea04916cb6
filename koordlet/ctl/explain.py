"""``koordctl explain``: a pod's applied values, NRI conflicts and the QoS actions behind them;
``explain node NAME``: a Node's batch and mid resources and koord-manager's explanation."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
from typing import Any

from koordlet.ctl import client
from koordlet.ctl.render import cores, mib


def _values(applied: dict[str, Any]) -> str:
    return "  ".join(f"{k}={v}" for k, v in applied.items() if v is not None) or "-"


def render_explain(data: dict[str, Any]) -> str:
    """The pod, what its cgroups hold now, values of its containers that another NRI plugin
    or the kubelet changed, and each QoS action behind the values, newest last."""
    lines = [
        f"pod {data['namespace']}/{data['name']} (uid {data['uid']})",
        f"  QoS {data['qos']} (Kubernetes {data['kube_qos']}), cgroup {data['cgroup']}",
        f"  usage: cpu {cores(data['usage']['cpu'])} cores, memory {mib(data['usage']['memory'])}",
        "applied now:",
        f"  pod: {_values(data['applied'])}",
    ]
    lines += [f"  {c['name']}: {_values(c['applied'])}" for c in data["containers"]]
    conflicts = data.get("conflicts") or []  # a koordlet before conflict detection has none
    if conflicts:
        lines.append("conflicts (another NRI plugin or the kubelet changed what koordlet asked):")
    for conflict in conflicts:
        when = time.strftime("%H:%M:%S", time.localtime(conflict["ts"]))
        lines.append(
            f"  {when} {conflict['container']}: {conflict['resource']} asked {conflict['asked']},"
            f" found {conflict['found']} ({conflict['file']})"
        )
    lines.append("why:")
    if not data["actions"]:
        lines.append("  no QoS manager action concerns this pod (values come from the hooks)")
    for action in data["actions"]:
        when = time.strftime("%H:%M:%S", time.localtime(action["ts"]))
        lines.append(
            f"  {when} {action['strategy']}: {action['kind']} {action['value']}"
            f" on {action['target']} because {action['reason']}"
        )
    lines.append("strategies:")
    for name, status in data["strategies"].items():
        lines.append(f"  {name}: {status['text']}")
    return "\n".join(lines)


def explain_node(args: argparse.Namespace) -> int:
    """A Node's batch and mid resources and koord-manager's explanation, from the API server."""
    from koordapi.explanation import render_node_explanation  # noqa: PLC0415

    try:
        node = client.read_node(args.name, args.kubeconfig)
    except Exception as err:
        print(f"koordctl explain node: cannot read node {args.name}: {err}", file=sys.stderr)
        return 1
    print(json.dumps(node) if args.json else render_node_explanation(node))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.pod == "node" and args.name:
        return explain_node(args)
    path = "/api/v1/explain?" + urllib.parse.urlencode({"pod": args.pod})
    try:
        data = client.fetch(args.addr, path)
    except client.KoordletUnreachable as err:
        print(f"koordctl explain: {err}", file=sys.stderr)
        return 1
    print(json.dumps(data) if args.json else render_explain(data))
    return 0
