"""The ``koordctl`` command: look at what the node agent and the runtime see.

Subcommands:
    top          live node and per-pod usage grouped by QoS class (from the local koordlet)
    pods         known pods, their QoS class and the values koordlet applied
    query        aggregates of a metric over a window (avg, p50 ... p99, last, count)
    inspect      live run-queue latency of each pod (eBPF), with CPU, throttling, PSI and CPI;
                 with --pod, one pod's latency histogram
    nri-events   register as an external NRI plugin and print every NRI message as a JSON line
    kernel       the kernel interfaces koordlet would use here (cgroup version, group identity
                 mechanism, core scheduling, resctrl)
    install      put koordlet on this node: a systemd service (--systemd) or containerd's
                 pre-installed NRI plugin (--nri-plugin); turns NRI on in containerd's config
    status       a node's chain: measured usage → NodeMetric → batch resources → NodeSLO →
                 applied values (koordlet's view; the cluster part with --kubeconfig)
    doctor       check this node for koordlet: containerd's NRI settings and socket, koordlet's
                 registration, cgroups, kernel features, devices; a fix for each problem
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from koordapi import logsetup
from koordlet.executor.resctrl import Resctrl
from koordlet.states.topology import detect_kernel
from nri_plugin import DEFAULT_SOCKET_PATH, NriError, Stub
from nri_plugin.eventlog import EventLog

DEFAULT_ADDR = "127.0.0.1:9316"


def nri_events(args: argparse.Namespace) -> int:
    """Print NRI messages until interrupted (or until the runtime goes away, with --once)."""
    try:
        stub = Stub(
            EventLog(sys.stdout),
            name=args.name,
            index=args.idx,
            socket_path=args.socket,
            reconnect=not args.once,
        )
    except NriError as err:
        print(f"koordctl nri-events: {err}", file=sys.stderr)
        return 2

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stub.stop)
        await stub.run()

    try:
        asyncio.run(main())
    except NriError as err:
        print(f"koordctl nri-events: {err}", file=sys.stderr)
        return 1
    return 0


QOS_ORDER = ("LSE", "LSR", "LS", "BE", "SYSTEM", "none")


class KoordletUnreachable(Exception):
    pass


def fetch(addr: str, path: str) -> Any:
    """GET koordlet's JSON API at ``addr`` (HOST:PORT)."""
    url = f"http://{addr}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace").strip()
        raise KoordletUnreachable(f"{url}: HTTP {err.code}: {detail}") from None
    except (OSError, ValueError) as err:
        raise KoordletUnreachable(
            f"cannot reach koordlet at {addr} ({err}); is it running with --addr {addr}?"
        ) from None


def cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value / (1 << 20):.0f}Mi"


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


def live(command: str, screen: Callable[[], str], once: bool, interval: float) -> int:
    """Print ``screen()`` once, or redraw it every ``interval`` seconds until interrupted."""
    try:
        while True:
            text = screen()
            if once:
                print(text)
                return 0
            sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
            sys.stdout.flush()
            time.sleep(interval)
    except KoordletUnreachable as err:
        print(f"koordctl {command}: {err}", file=sys.stderr)
        return 1


def top(args: argparse.Namespace) -> int:
    def screen() -> str:
        return render_top(fetch(args.addr, "/api/v1/node"), fetch(args.addr, "/api/v1/pods"))

    return live("top", screen, args.once, args.interval)


def pods(args: argparse.Namespace) -> int:
    try:
        data = fetch(args.addr, "/api/v1/pods")
    except KoordletUnreachable as err:
        print(f"koordctl pods: {err}", file=sys.stderr)
        return 1
    print(json.dumps(data) if args.json else render_pods(data))
    return 0


def query(args: argparse.Namespace) -> int:
    params = {"metric": args.metric, "window": args.window, "agg": args.agg}
    for label in args.label:
        key, sep, value = label.partition("=")
        if not sep:
            print(f"koordctl query: --label {label!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        params[f"label.{key}"] = value
    try:
        data = fetch(args.addr, "/api/v1/query?" + urllib.parse.urlencode(params))
    except KoordletUnreachable as err:
        print(f"koordctl query: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(data))
    else:
        for item in data:
            labels = ",".join(f"{k}={v}" for k, v in sorted(item["labels"].items()))
            value = item[args.agg]
            print(f"{item['metric']}{{{labels}}} {args.agg}={value:.6g} count={item['count']}")
        if not data:
            print(f"no samples of {args.metric} in the last {args.window}")
    return 0


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
    from lightkube.resources.core_v1 import Node  # noqa: PLC0415 - only this command needs it

    from koordapi.explanation import render_node_explanation  # noqa: PLC0415
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        return await KubeApi(build_client(args.kubeconfig)).get(Node, args.name)

    try:
        node = asyncio.run(read())
    except Exception as err:
        print(f"koordctl explain node: cannot read node {args.name}: {err}", file=sys.stderr)
        return 1
    print(json.dumps(node) if args.json else render_node_explanation(node))
    return 0


def explain(args: argparse.Namespace) -> int:
    if args.pod == "node" and args.name:
        return explain_node(args)
    path = "/api/v1/explain?" + urllib.parse.urlencode({"pod": args.pod})
    try:
        data = fetch(args.addr, path)
    except KoordletUnreachable as err:
        print(f"koordctl explain: {err}", file=sys.stderr)
        return 1
    print(json.dumps(data) if args.json else render_explain(data))
    return 0


def read_cluster(node: str, kubeconfig: str | None) -> dict[str, Any]:
    """The Node, its NodeMetric and NodeSLO from the API server (None for one that is absent)."""
    from lightkube.resources.core_v1 import Node  # noqa: PLC0415 - only this command needs it

    from koordkube.client import KubeApi, build_client, is_not_found  # noqa: PLC0415
    from koordkube.resources import NodeMetric, NodeSLO  # noqa: PLC0415

    async def read() -> dict[str, Any]:
        api = KubeApi(build_client(kubeconfig))
        found: dict[str, Any] = {}
        for key, res in (("node", Node), ("nodeMetric", NodeMetric), ("nodeSLO", NodeSLO)):
            try:
                found[key] = await api.get(res, node)
            except Exception as err:
                if not is_not_found(err):
                    raise
                found[key] = None
        return found

    return asyncio.run(read())


def has_cluster_credentials(kubeconfig: str | None) -> bool:
    if kubeconfig or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    path = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
    return Path(path).is_file()


def status(args: argparse.Namespace) -> int:
    """The node's chain: usage → NodeMetric → batch resources → NodeSLO → applied values."""
    from koordlet import chain  # noqa: PLC0415 - only this command needs it

    local: dict[str, Any] = {}
    local_error = None
    try:
        local["local_node"] = fetch(args.addr, "/api/v1/node")
        local["local_pods"] = fetch(args.addr, "/api/v1/pods")
        local["local_metric"] = fetch(args.addr, "/api/v1/nodemetric")
    except KoordletUnreachable as err:
        local_error = str(err)
    node = args.node or (local.get("local_node") or {}).get("name") or socket.gethostname()
    cluster, cluster_error = None, None
    if has_cluster_credentials(args.kubeconfig):
        try:
            cluster = read_cluster(node, args.kubeconfig)
        except Exception as err:
            cluster_error = f"{type(err).__name__}: {err}"
    report = chain.assemble(
        node_name=node,
        local_error=local_error,
        cluster=cluster,
        cluster_error=cluster_error,
        **local,
    )
    print(json.dumps(report) if args.json else chain.render(report))
    return 1 if local_error and cluster is None else 0


def add_status_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "status",
        help="a node's chain: usage, NodeMetric, batch resources, NodeSLO, applied values",
        description="One node's chain from measured usage to applied values: koordlet's usage "
        "and NodeMetric report, the API server's NodeMetric, the Node's batch and mid "
        "resources with koord-manager's explanation, the NodeSLO's key settings, and the "
        "values koordlet applied to BE pods. The cluster part needs --kubeconfig or "
        "in-cluster credentials. Exits 1 when neither koordlet nor the API server answers.",
    )
    cmd.add_argument("--node", help="node name (default: koordlet's, else this host's)")
    cmd.add_argument("--kubeconfig", help="default: in-cluster, $KUBECONFIG or ~/.kube/config")
    cmd.add_argument("--addr", default=DEFAULT_ADDR, help="koordlet's --addr (default %(default)s)")
    cmd.add_argument("--json", action="store_true", help="one JSON object")
    cmd.set_defaults(func=status)


def latency(us: float | None) -> str:
    """Microseconds in human units: "850us", "1.20ms", "12.5ms", "250ms"."""
    if us is None:
        return "-"
    if round(us) < 1000:
        return f"{us:.0f}us"
    ms = us / 1000
    if ms < 9.995:
        return f"{ms:.2f}ms"
    return f"{ms:.1f}ms" if ms < 99.95 else f"{ms:.0f}ms"


def percent(value: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}%"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


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


def inspect(args: argparse.Namespace) -> int:
    path = "/api/v1/inspect"
    if args.pod:
        path += "?" + urllib.parse.urlencode({"pod": args.pod})

    def screen() -> str:
        data = fetch(args.addr, path)
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


def kernel(args: argparse.Namespace) -> int:
    """Print what koordlet detects on this node, as it detects it at start."""
    found = detect_kernel(
        Path(args.cgroup_root_dir), Resctrl(Path(args.sys_fs_root_dir) / "resctrl")
    )
    report = {
        "cgroup_version": found.cgroup_version,
        "group_identity": found.group_identity_mechanism,
        "cpu_idle": found.cpu_idle,
        "bvt": found.bvt,
        "core_scheduling": found.core_sched,
        "resctrl": found.resctrl,
        "memory_qos_on_cgroup_v1": found.memory_qos_v1,
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:24} {value}")
    return 0


def doctor(args: argparse.Namespace) -> int:
    """Check the node for koordlet; 1 when any check fails."""
    from koordlet import doctor as checks  # noqa: PLC0415 - only this command needs it

    config = checks.DoctorConfig(
        proc_root=Path(args.proc_root_dir),
        sys_root=Path(args.sys_root_dir),
        cgroup_root=Path(args.cgroup_root_dir),
        containerd_config=Path(args.containerd_config),
        containerd_bin=args.containerd_bin,
        nri_socket=Path(args.nri_socket) if args.nri_socket else None,
        addr=args.addr,
    )
    results = checks.run_checks(config)
    print(json.dumps(checks.to_json(results)) if args.json else checks.render(results))
    return checks.exit_status(results)


def add_doctor_parser(sub: Any) -> None:
    doc = sub.add_parser(
        "doctor",
        help="check this node for koordlet: containerd's NRI, cgroups, kernel features, devices",
        description="One line per check (OK, WARN or FAIL) with the fix for each WARN and FAIL: "
        "containerd's version and NRI settings, the NRI socket, koordlet's registration, the "
        "cgroup layout and driver, optional kernel features, GPUs and RDMA devices. Exits 1 "
        "when any check fails.",
    )
    doc.add_argument("--containerd-config", default="/etc/containerd/config.toml")
    doc.add_argument("--containerd-bin", default="containerd", help="for its version")
    doc.add_argument("--nri-socket", help="NRI socket (default: containerd's socket_path)")
    doc.add_argument("--addr", default=DEFAULT_ADDR, help="koordlet's --addr (default %(default)s)")
    doc.add_argument("--proc-root-dir", default="/proc/")
    doc.add_argument("--sys-root-dir", default="/sys/")
    doc.add_argument("--cgroup-root-dir", default="/sys/fs/cgroup/")
    doc.add_argument("--json", action="store_true", help="one JSON object")
    doc.set_defaults(func=doctor)


def install(args: argparse.Namespace) -> int:
    from koordlet.install.installer import (  # noqa: PLC0415 - only this command needs it
        InstallError,
        InstallOptions,
        install_nri_plugin,
        install_systemd,
    )

    options = InstallOptions(
        root=Path(args.root),
        containerd_config=Path(args.containerd_config),
        containerd_bin=args.containerd_bin,
        config_dir=Path(args.config_dir),
        plugin_path=Path(args.plugin_path) if args.plugin_path else None,
        koordlet_args=args.koordlet_args,
        start=not args.no_start,
    )
    try:
        steps = install_systemd(options) if args.systemd else install_nri_plugin(options)
    except InstallError as err:
        print(f"koordctl install: {err}; nothing was installed", file=sys.stderr)
        return 1
    for step in steps:
        print(step)
    return 0


def add_install_parser(sub: Any) -> None:
    inst = sub.add_parser(
        "install",
        help="install koordlet on this node (systemd service or pre-installed NRI plugin)",
        description="Install koordlet as a systemd service that connects to containerd's NRI "
        "socket (--systemd), or as an executable in containerd's NRI plugin folder that "
        "containerd launches itself (--nri-plugin). Either turns NRI on in containerd's "
        "configuration when it is off. Checks come first; on any failure nothing stays written.",
    )
    mode = inst.add_mutually_exclusive_group(required=True)
    mode.add_argument("--systemd", action="store_true", help="koordlet.service, enabled")
    mode.add_argument(
        "--nri-plugin", action="store_true", help="00-koordlet in containerd's NRI plugin folder"
    )
    inst.add_argument(
        "--plugin-path",
        help="NRI plugin folder (default: containerd's plugin_path, normally /opt/nri/plugins)",
    )
    inst.add_argument("--containerd-config", default="/etc/containerd/config.toml")
    inst.add_argument("--containerd-bin", default="containerd", help="for its version")
    inst.add_argument("--config-dir", default="/etc/koordlet", help="where koordlet.env is kept")
    inst.add_argument("--koordlet-args", default="", help="koordlet's flags for a new koordlet.env")
    inst.add_argument(
        "--root", default="/", help="install into this file tree instead (systemctl offline)"
    )
    inst.add_argument(
        "--no-start", action="store_true", help="enable koordlet.service but do not start it"
    )
    inst.set_defaults(func=install)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koordctl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log protocol details to stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    events = sub.add_parser(
        "nri-events",
        help="print every NRI message as a JSON line",
        description="Register as an external NRI plugin and print every message the runtime "
        "sends (configure, synchronize, each pod and container event) as one JSON object per "
        "line. It changes nothing. It reconnects when the runtime restarts.",
    )
    events.add_argument(
        "--socket", default=str(DEFAULT_SOCKET_PATH), help="NRI socket (default %(default)s)"
    )
    events.add_argument("--name", default="nri-events", help="plugin name (default %(default)s)")
    events.add_argument(
        "--idx", default="99", help="plugin index, two digits; 99 runs after every other plugin"
    )
    events.add_argument("--once", action="store_true", help="exit when the connection closes")
    events.set_defaults(func=nri_events)
    addr_help = "koordlet's --addr (default %(default)s)"
    top_cmd = sub.add_parser("top", help="live node and pod usage by QoS class")
    top_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    top_cmd.add_argument("--once", action="store_true", help="print one table and exit")
    top_cmd.add_argument("--interval", type=float, default=2.0, help="refresh period (seconds)")
    top_cmd.set_defaults(func=top)
    pods_cmd = sub.add_parser("pods", help="known pods, QoS class and applied values")
    pods_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    pods_cmd.add_argument("--json", action="store_true")
    pods_cmd.set_defaults(func=pods)
    query_cmd = sub.add_parser("query", help="aggregate a metric over a window")
    query_cmd.add_argument("metric", help="e.g. pod_cpu_usage, node_memory_usage")
    query_cmd.add_argument("--window", default="5m", help="e.g. 30s, 5m, 1h (default %(default)s)")
    query_cmd.add_argument(
        "--agg", default="avg", choices=["avg", "p50", "p90", "p95", "p99", "last", "count"]
    )
    query_cmd.add_argument(
        "--label", action="append", default=[], help="KEY=VALUE filter, repeatable"
    )
    query_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    query_cmd.add_argument("--json", action="store_true")
    query_cmd.set_defaults(func=query)
    explain_cmd = sub.add_parser(
        "explain",
        help="a pod's applied values and the QoS actions (with reasons) behind them; "
        "`explain node NAME`: a node's batch resources and how koord-manager computed them",
    )
    explain_cmd.add_argument("pod", help="pod uid, NAMESPACE/NAME or name; or `node`")
    explain_cmd.add_argument("name", nargs="?", help="with `node`: the node's name")
    explain_cmd.add_argument("--kubeconfig", help="with `node`: default in-cluster or ~/.kube")
    explain_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    explain_cmd.add_argument("--json", action="store_true")
    explain_cmd.set_defaults(func=explain)
    inspect_cmd = sub.add_parser(
        "inspect",
        help="live run-queue latency of each pod (eBPF) with CPU, throttling, PSI and CPI",
        description="How long each pod's runnable threads waited for a CPU over koordlet's "
        "latest window (the SchedLatencyCollector feature gate), next to its CPU usage, CFS "
        "throttling, CPU pressure and CPI. With --pod, one pod's latency histogram. Exits 1 "
        "with the reason when the collector cannot run on this node.",
    )
    inspect_cmd.add_argument("--pod", help="one pod (uid, NAMESPACE/NAME or name): its histogram")
    inspect_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    inspect_cmd.add_argument("--once", action="store_true", help="print one table and exit")
    inspect_cmd.add_argument("--interval", type=float, default=2.0, help="refresh period (seconds)")
    inspect_cmd.add_argument("--json", action="store_true", help="print the API's JSON and exit")
    inspect_cmd.set_defaults(func=inspect)
    add_install_parser(sub)
    kern = sub.add_parser("kernel", help="the kernel interfaces koordlet would use on this node")
    kern.add_argument("--cgroup-root-dir", default="/sys/fs/cgroup/")
    kern.add_argument("--sys-fs-root-dir", default="/sys/fs/")
    kern.add_argument("--json", action="store_true", help="one JSON object")
    kern.set_defaults(func=kernel)
    add_doctor_parser(sub)
    add_status_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure(logging.INFO if args.verbose else logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        return int(args.func(args))
    return 130
