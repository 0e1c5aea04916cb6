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
    devices      the GPUs and RDMA NICs koordlet reports in the node's Device (NVML, sysfs)
    quota        the ElasticQuota tree (min, max, used, runtime, request per quota); with
                 `why NAMESPACE/POD`, why a pod of a quota or a gang is not running
    reservation  every Reservation by node: the room it holds now, what its owners took, who
                 they are, when it expires; with `why NAMESPACE/POD`, whether a pod went into
                 one and why (not)
    whatif       replay this node's recorded history (the metric cache) under another NodeSLO
                 or colocation config: batch/mid capacity, suppress, evictions, per hour
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import pathlib
from importlib.metadata import version
from typing import Any

from koordapi import logsetup
from koordctl.client import DEFAULT_ADDR
from koordlet.states.pods import DEFAULT_KUBE_DIR, parse_kube_dir
from nri_plugin import DEFAULT_SOCKET_PATH

# Each subcommand's module (koordctl.<module>, imported when the command runs) has
# ``run(args) -> int``.
COMMANDS = {
    "nri-events": "nri_events",
    "top": "top",
    "pods": "pods",
    "query": "query",
    "explain": "explain",
    "inspect": "inspect",
    "install": "install",
    "kernel": "kernel",
    "doctor": "doctor",
    "status": "status",
    "devices": "devices",
    "quota": "quota",
    "reservation": "reservation",
    "whatif": "whatif",
}


def run(args: argparse.Namespace) -> int:
    """Run the parsed subcommand."""
    module = importlib.import_module(f"koordctl.{COMMANDS[args.command]}")
    return int(module.run(args))


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


def add_devices_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "devices",
        help="this node's GPUs and RDMA NICs as koordlet reports them (the Device object)",
        description="The GPUs (through NVML: minor, UUID, health, memory, NUMA node, PCIe root "
        "and bus) and RDMA NICs (from sysfs) that koordlet reports in this node's Device "
        "object, read on this node. No GPUs is not an error: the reason is printed.",
    )
    cmd.add_argument("--sys-root-dir", default="/sys/")
    cmd.add_argument("--node", help="with --json: the Device's name (default: this host's)")
    cmd.add_argument("--json", action="store_true", help="one JSON object")


def add_quota_parser(sub: Any) -> None:
    kube_help = "default: in-cluster, $KUBECONFIG or ~/.kube/config"
    quota = sub.add_parser(
        "quota",
        help="the ElasticQuota tree: min, max, used, runtime, request; `why POD`: why it waits",
        description="Every ElasticQuota as a tree (one block per tree-id, children under their "
        "parent) with min, max, status.used and koord-manager's runtime and request "
        "annotations, marked where used exceeds runtime (being reclaimed) or used or request "
        "exceeds max. `koordctl quota why NAMESPACE/POD`: the pod's quota, gang, PodGroup, "
        "scheduling gate, PodScheduled condition and scheduling events, and why it waits.",
    )
    quota.add_argument("--kubeconfig", help=kube_help)
    quota.add_argument("--json", action="store_true", help="the rows as JSON")
    why = quota.add_subparsers(dest="quota_command", metavar="why").add_parser(
        "why", help="why a pod of a quota or a gang is not running"
    )
    why.add_argument("pod", help="NAMESPACE/NAME")
    # SUPPRESS: given before `why` they are kept (a subcommand's default would overwrite them)
    why.add_argument("--kubeconfig", default=argparse.SUPPRESS, help=kube_help)
    why.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object"
    )


def add_reservation_parser(sub: Any) -> None:
    kube_help = "default: in-cluster, $KUBECONFIG or ~/.kube/config"
    cmd = sub.add_parser(
        "reservation",
        help="Reservations by node: held, allocated, owners, expiry; `why POD`: did it use one",
        description="Every Reservation (scheduling.koordinator.sh/v1alpha1), by node, with the "
        "room it holds against other pods now, what its owners took (the pods annotated "
        "scheduling.koordinator.sh/reservation-allocated with it), those owners (else who may "
        "go in) and when it expires; a Pending one with kube-scheduler's Unschedulable "
        "message. `koordctl reservation why NAMESPACE/POD`: the Reservation the pod went "
        "into, else each one it is an owner of with why it is not in it, the reservations "
        "held against it on the nodes it could go to, and its FailedScheduling events.",
    )
    cmd.add_argument("--kubeconfig", help=kube_help)
    cmd.add_argument("--json", action="store_true", help="the rows as JSON")
    why = cmd.add_subparsers(dest="reservation_command", metavar="why").add_parser(
        "why", help="whether a pod went into a Reservation, and why (not)"
    )
    why.add_argument("pod", help="NAMESPACE/NAME")
    # SUPPRESS: given before `why` they are kept (a subcommand's default would overwrite them)
    why.add_argument("--kubeconfig", default=argparse.SUPPRESS, help=kube_help)
    why.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object"
    )


def _kube_dir(text: str) -> str:
    """--cgroup-kube-dir as given, once it names a directory below the hierarchy root."""
    try:
        parse_kube_dir(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


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
    doc.add_argument(
        "--cgroup-kube-dir",
        default=DEFAULT_KUBE_DIR,
        type=_kube_dir,
        help="koordlet's --cgroup-kube-dir (default %(default)s)",
    )
    doc.add_argument("--json", action="store_true", help="one JSON object")


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


def add_whatif_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "whatif",
        help="replay this node's recorded history under another NodeSLO or colocation config",
        description="Replay the node's metric cache (koordlet's recorded usage) under another "
        "NodeSLO and/or colocation strategy with koord-manager's batch and mid formulas and "
        "koordlet's suppress and eviction rules, and compare it hour by hour with the "
        "baseline: batch and mid capacity, BE CPU suppress seconds, eviction triggers, and "
        "the LS pods' recorded PSI and run-queue latency. The database is only read. Exits 2 "
        "on unusable input.",
    )
    cmd.add_argument(
        "--db", help="koordlet's metric cache (default: metrics.db in koordlet's --tsdb-path)"
    )
    cmd.add_argument(
        "--since", default="24h", help="window ending at the newest sample, or 'all' (24h)"
    )
    cmd.add_argument(
        "--nodeslo",
        type=pathlib.Path,
        help="proposal: slo-controller-config ConfigMap, NodeSLO or its spec (YAML/JSON)",
    )
    cmd.add_argument(
        "--colocation",
        type=pathlib.Path,
        help="proposal: colocation-config JSON/YAML, or the ConfigMap",
    )
    cmd.add_argument(
        "--baseline", type=pathlib.Path, help="the configuration in force (default: Koordinator's)"
    )
    cmd.add_argument("--capacity", help="cpu=QTY,memory=QTY (default: koordlet's node API)")
    cmd.add_argument("--reserved", help="cpu=QTY,memory=QTY kept for the system (default 0)")
    cmd.add_argument("--prod-requests", help="cpu=QTY,memory=QTY: Σ requests of prod pods")
    cmd.add_argument(
        "--be-pod",
        action="append",
        default=[],
        metavar="UID",
        help="a BE pod's uid (repeatable): its memory is not counted as LS usage",
    )
    cmd.add_argument(
        "--node-label", action="append", default=[], help="KEY=VALUE for nodeSelectors"
    )
    cmd.add_argument("--addr", default=DEFAULT_ADDR, help="koordlet's --addr (capacity)")
    cmd.add_argument("--plot", metavar="FILE.svg", help="write an SVG of capacity against usage")
    cmd.add_argument(
        "--pressure-psi",
        type=float,
        default=10.0,
        help="LS cpu PSI some avg10 (%%) that marks an hour as under pressure (default 10)",
    )
    cmd.add_argument("--json", action="store_true", help="the hours as JSON")


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
    addr_help = "koordlet's --addr (default %(default)s)"
    top_cmd = sub.add_parser("top", help="live node and pod usage by QoS class")
    top_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    top_cmd.add_argument("--once", action="store_true", help="print one table and exit")
    top_cmd.add_argument("--interval", type=float, default=2.0, help="refresh period (seconds)")
    pods_cmd = sub.add_parser("pods", help="known pods, QoS class and applied values")
    pods_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    pods_cmd.add_argument("--json", action="store_true")
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
    explain_cmd = sub.add_parser(
        "explain",
        help="a pod's applied values and the QoS actions (with reasons) behind them, with "
        "--manager/--scheduler their admission decisions and binds; "
        "`explain node NAME`: a node's batch resources and how koord-manager computed them",
    )
    explain_cmd.add_argument("pod", help="pod uid, NAMESPACE/NAME or name; or `node`")
    explain_cmd.add_argument("name", nargs="?", help="with `node`: the node's name")
    explain_cmd.add_argument("--kubeconfig", help="with `node`: default in-cluster or ~/.kube")
    explain_cmd.add_argument(
        "--descheduler",
        metavar="URL",
        help="with `node`: koord-descheduler's address (e.g. http://127.0.0.1:10251) for its "
        "last round's view of the node (default: $KOORD_DESCHEDULER_URL; neither: not asked)",
    )
    explain_cmd.add_argument(
        "--manager",
        metavar="URL",
        help="with a pod: koord-manager's metrics address (e.g. http://127.0.0.1:8080) for its "
        "admission decisions on the pod (default: $KOORD_MANAGER_URL; neither: not asked)",
    )
    explain_cmd.add_argument(
        "--scheduler",
        metavar="URL",
        help="with a pod: koord-scheduler's metrics address (e.g. http://127.0.0.1:8081) for "
        "its extender binds of the pod (default: $KOORD_SCHEDULER_URL; neither: not asked)",
    )
    explain_cmd.add_argument("--addr", default=DEFAULT_ADDR, help=addr_help)
    explain_cmd.add_argument("--json", action="store_true")
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
    add_install_parser(sub)
    kern = sub.add_parser("kernel", help="the kernel interfaces koordlet would use on this node")
    kern.add_argument("--cgroup-root-dir", default="/sys/fs/cgroup/")
    kern.add_argument("--sys-fs-root-dir", default="/sys/fs/")
    kern.add_argument("--json", action="store_true", help="one JSON object")
    add_doctor_parser(sub)
    add_status_parser(sub)
    add_devices_parser(sub)
    add_quota_parser(sub)
    add_reservation_parser(sub)
    add_whatif_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure(logging.INFO if args.verbose else logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        return run(args)
    return 130
