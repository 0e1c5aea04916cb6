"""``koordctl inspect``: live run-queue latency of each pod (eBPF) with CPU, throttling, PSI and
CPI; with ``--pod``, one pod's latency histogram."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from typing import Any

from koordctl import client
from koordctl.render import QOS_ORDER, cores, latency, live, percent, ratio


def _class_rank(qos: str) -> tuple[int, str]:
    return (QOS_ORDER.index(qos) if qos in QOS_ORDER else len(QOS_ORDER), qos)


INSPECT_HEADER = (
    f"{'POD':38}{'QOS':7}{'RUNQ p50':>10}{'RUNQ p99':>10}{'WAITS':>9}{'CPU':>7}"
    f"{'THROTTLED':>11}{'PSI':>7}{'CPI':>6}"
)


def render_inspect(data: dict[str, Any]) -> str:
    """The ``koordctl inspect`` table: pods by QoS class, slowest p99 first, a line per class."""
    window = data.get("window_seconds") or 0
    lines = [f"RUN-QUEUE LATENCY (time runnable threads waited for a CPU), last {window:.0f}s"]
    if not window:
        lines.append("waiting for the first window: the collector compares two reads")
    lines += ["", INSPECT_HEADER]
    classes = data.get("classes", {})
    pods = data.get("pods", [])
    for qos in sorted({p["qos"] for p in pods} | set(classes), key=_class_rank):
        group = [p for p in pods if p["qos"] == qos]
        group.sort(key=lambda p: (p["runq_p99_us"] is None, -(p["runq_p99_us"] or 0), p["name"]))
        for pod in group:
            name = f"{pod['namespace']}/{pod['name']}"[:37]
            lines.append(
                f"{name:38}{qos:7}{latency(pod['runq_p50_us']):>10}"
                f"{latency(pod['runq_p99_us']):>10}{pod['waits']:>9}{cores(pod['cpu_cores']):>7}"
                f"{percent(pod['throttled'], 100):>11}{percent(pod['psi_cpu_some_avg10'], 1, 1):>7}"
                f"{ratio(pod['cpi']):>6}"
            )
        summary = classes.get(qos)
        if summary is not None:
            lines.append(
                f"{'= ' + qos + ' class':38}{'':7}{latency(summary['p50_us']):>10}"
                f"{latency(summary['p99_us']):>10}{summary['waits']:>9}"
            )
    node = data.get("node")
    if node is not None:
        lines.append(
            f"{'= outside pods (system)':38}{'':7}{latency(node['p50_us']):>10}"
            f"{latency(node['p99_us']):>10}{node['waits']:>9}"
        )
    return "\n".join(lines)


BAR_WIDTH = 40


def render_bars(slots: list[dict[str, Any]]) -> list[str]:
    """One line per log2 slot: its range, its count and a bar scaled to the fullest slot."""
    if not slots:
        return ["  no waits"]
    peak = max(s["count"] for s in slots) or 1
    lines = []
    for s in slots:
        bar = "#" * max(1 if s["count"] else 0, round(BAR_WIDTH * s["count"] / peak))
        span = f"{latency(s['low_us'])} - {latency(s['high_us'])}"
        lines.append(f"  {span:>18}{s['count']:>10} {bar}")
    return lines


def render_inspect_pod(data: dict[str, Any]) -> str:
    """One pod's run-queue latency: figures, both histograms as bars, its containers."""
    window = data.get("window_seconds") or 0
    lines = [
        f"pod {data['namespace']}/{data['name']} (uid {data['uid']}), QoS {data['qos']}",
        f"  run-queue latency p50 {latency(data['runq_p50_us'])}, "
        f"p99 {latency(data['runq_p99_us'])}, {data['waits']} waits in the last {window:.0f}s",
        f"  cpu {cores(data['cpu_cores'])} cores, throttled {percent(data['throttled'], 100)}, "
        f"psi cpu some {percent(data['psi_cpu_some_avg10'], 1, 1)}, cpi {ratio(data['cpi'])}",
        f"latest window ({window:.0f}s):",
        *render_bars(data["histogram"]["window"]),
        "since koordlet started:",
        *render_bars(data["histogram"]["total"]),
        "containers (latest window):",
    ]
    for c in data.get("containers", []):
        lines.append(
            f"  {c['name']:24} p50 {latency(c['p50_us']):>8}  p99 {latency(c['p99_us']):>8}"
            f"  waits {c['waits']}"
        )
    if not data.get("containers"):
        lines.append("  no container waits (or no container cgroups in the v2 tree)")
    return "\n".join(lines)


class NotAvailable(Exception):
    """koordlet cannot measure run-queue latency; the message says why."""


def run(args: argparse.Namespace) -> int:
    path = "/api/v1/inspect"
    if args.pod:
        path += "?" + urllib.parse.urlencode({"pod": args.pod})

    def screen() -> str:
        data = client.fetch(args.addr, path)
        if not data.get("available"):
            if args.json:
                print(json.dumps(data))
            raise NotAvailable(data.get("reason"))
        if args.json:
            return json.dumps(data)
        return render_inspect_pod(data) if args.pod else render_inspect(data)

    try:
        return live("inspect", screen, args.once or bool(args.pod) or args.json, args.interval)
    except NotAvailable as err:
        print(f"koordctl inspect: run-queue latency is not available: {err}", file=sys.stderr)
        return 1
