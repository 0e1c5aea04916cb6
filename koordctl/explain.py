"""``koordctl explain``: a pod's applied values, NRI conflicts and the QoS actions behind them,
and with ``--manager URL``/``--scheduler URL`` koord-manager's admission decisions and
koord-scheduler's binds for the pod (``koordctl.explain_pod``); ``explain node NAME``: a
Node's batch and mid resources and koord-manager's explanation, and with ``--descheduler URL``
(or $KOORD_DESCHEDULER_URL) koord-descheduler's last round's view of the node (its GET
/explain/nodes/NAME)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.parse
from typing import Any

from koordctl import client
from koordctl.render import cores, mib

DESCHEDULER_ENV = "KOORD_DESCHEDULER_URL"


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


def _amount(resource: str, amount: int) -> str:
    """koord-descheduler's amounts: milli-cores for cpu, bytes for memory, counts otherwise."""
    if resource == "cpu":
        return cores(amount / 1000)
    return mib(amount) if resource == "memory" else str(amount)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]  # fmt: skip


def _anomaly(pool: dict[str, Any]) -> str:
    if pool["anomalous"]:
        return f"anomalous ({pool['anomalousBy']} usage)"
    count, needed = pool["abnormalities"], pool["consecutiveAbnormalities"]
    if count is None:
        return "not anomalous"
    return f"not anomalous: {count} abnormal report(s) in a row, anomalous after more than {needed}"


def _pool_lines(pool: dict[str, Any]) -> list[str]:
    prod = bool(pool["prodThresholds"])
    lines = [f"  pool {pool['pool']}: category {pool['category']}, {_anomaly(pool)}"]
    header = ["RESOURCE", "USED/ALLOCATABLE", "USAGE", "LOW", "HIGH"]
    if prod:
        header += ["PROD USAGE", "PROD LOW", "PROD HIGH"]
    rows = [header]
    for res in pool["resources"]:
        name = res["name"]
        row = [
            name,
            f"{_amount(name, res['usage'])}/{_amount(name, res['allocatable'])}",
            *(_pct(res[f"{key}Percent"]) for key in ("usage", "low", "high")),
        ]
        if prod:
            row += [_pct(res[f"{key}Percent"]) for key in ("prodUsage", "prodLow", "prodHigh")]
        rows.append(row)
    lines += [f"    {line}" for line in _table(rows)]
    if pool["hotReason"]:
        lines.append(f"    hot: {pool['hotReason']}")
    if pool["candidates"]:
        lines.append("    candidates:")
    for cand in pool["candidates"]:
        lines.append(
            f"      {cand['pod']}: {cand['reason']}" if cand["reason"] else f"      {cand['pod']}"
        )
        if cand.get("outcome"):
            lines.append(f"        -> {cand['outcome']}")
    if pool["note"]:
        lines.append(f"    no candidates: {pool['note']}")
    return lines


def render_descheduler(data: dict[str, Any]) -> str:
    """koord-descheduler's view of one node (its /explain/nodes/NAME); KeyError, TypeError or
    ValueError for an answer of another shape."""
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(data["time"])))
    dry = " (dry run)" * bool(data["dryRun"])
    lines = [f"descheduler: node {data['node']}, last round {when}{dry}"]
    if data["note"]:
        lines.append(f"  {data['note']}")
    for pool in data["pools"]:
        lines += _pool_lines(pool)
    jobs = data["migrationJobs"]
    if not jobs:
        lines.append("  open PodMigrationJobs: none")
        return "\n".join(lines)
    lines.append("  open PodMigrationJobs:")
    rows = [["NAME", "PHASE", "POD", "REASON"]]
    rows += [[job["name"], job["phase"], job["pod"], job["reason"] or "-"] for job in jobs]
    lines += [f"    {line}" for line in _table(rows)]
    return "\n".join(lines)


def _descheduler_part(url: str, name: str) -> tuple[dict[str, Any] | None, str]:
    """koord-descheduler's answer for the node and its text; (None, "") after one line on
    stderr when it cannot be had."""
    path = "/explain/nodes/" + urllib.parse.quote(name, safe="")
    try:
        data = client.fetch_descheduler(url, path)
        return data, render_descheduler(data)
    except client.DeschedulerError as err:
        print(f"koordctl explain node: koord-descheduler: {err}", file=sys.stderr)
    except (KeyError, TypeError, ValueError, IndexError) as err:
        print(
            f"koordctl explain node: koord-descheduler at {url} gave a bad answer "
            f"({type(err).__name__}: {err})",
            file=sys.stderr,
        )
    return None, ""


def explain_node(args: argparse.Namespace) -> int:
    """A Node's batch and mid resources and koord-manager's explanation, from the API server;
    with a descheduler URL, koord-descheduler's view after it. Either part failing prints one
    line on stderr and makes the exit code 1, without hiding the other."""
    from koordapi.explanation import render_node_explanation  # noqa: PLC0415

    url = getattr(args, "descheduler", None) or os.environ.get(DESCHEDULER_ENV) or None
    node: dict[str, Any] | None = None
    try:
        node = client.read_node(args.name, args.kubeconfig)
    except Exception as err:
        print(f"koordctl explain node: cannot read node {args.name}: {err}", file=sys.stderr)
        if url is None:
            return 1
    if url is None:
        assert node is not None
        print(json.dumps(node) if args.json else render_node_explanation(node))
        return 0
    if node is not None and not args.json:
        print(render_node_explanation(node), flush=True)
    data, text = _descheduler_part(url, args.name)
    if args.json:
        print(json.dumps({"node": node, "descheduler": data}))
    elif text:
        print(text)
    return 0 if node is not None and data is not None else 1


def run(args: argparse.Namespace) -> int:
    if args.pod == "node" and args.name:
        return explain_node(args)
    from koordctl.explain_pod import explain_pod  # noqa: PLC0415

    return explain_pod(args, render_explain)
