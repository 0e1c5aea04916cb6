"""The ``koordlet`` command: the node QoS daemon, standalone by default.

Flag names are Koordinator's where it has the setting, so existing DaemonSet arguments work.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from importlib.metadata import version
from pathlib import Path

from koordapi.errors import ModelError
from koordapi.features import NOT_IMPLEMENTED, FeatureGates
from koordlet.daemon import Config, Koordlet
from koordlet.states.pods import CGROUP_DRIVERS
from runtimehooks.registry import FailurePolicy


def duration(text: str) -> float:
    """A Go-style duration ("10s", "500ms", "1m") or plain seconds, as seconds."""
    text = text.strip()
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 10s, 500ms)") from None


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """The metrics and status server's address, and who may read its JSON API."""
    p.add_argument("--addr", default=":9316", help="metrics address; empty to disable")
    p.add_argument(
        "--status-api-remote",
        default="false",
        choices=["true", "false"],
        help="answer the JSON status API (/api/v1/...) for remote clients too; by default only "
        "this machine's loopback may read pods, uids and cgroup paths",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koordlet", description="Koordinator's node QoS daemon, in Python."
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    p.add_argument("--cgroup-root-dir", default="/sys/fs/cgroup/", help="cgroup mount point")
    p.add_argument(
        "--cgroup-driver",
        default="",
        choices=["", *CGROUP_DRIVERS],
        help="the kubelet's cgroup driver; by default the pods' cgroup paths or the kubepods "
        "directory tell",
    )
    p.add_argument("--var-run-root-dir", default="/var/run/", help="parent of the NRI socket")
    p.add_argument("--sys-root-dir", default="/sys/", help="sysfs mount point")
    p.add_argument("--proc-root-dir", default="/proc/", help="procfs mount point")
    p.add_argument("--sys-fs-root-dir", default="/sys/fs/", help="resctrl lives in its resctrl/")
    p.add_argument("--enable-nri-runtime-hook", default="true", choices=["true", "false"])
    p.add_argument(
        "--runtime-hooks-nri-socket-path",
        default="nri/nri.sock",
        help="NRI socket, relative to --var-run-root-dir (default %(default)s)",
    )
    p.add_argument("--runtime-hooks-nri-plugin-name", default="koordlet_nri")
    p.add_argument("--runtime-hooks-nri-plugin-index", default="00")
    p.add_argument(
        "--runtime-hooks-plugin-failure-policy", default="Ignore", choices=["Ignore", "Fail"]
    )
    p.add_argument("--runtime-hooks-reconcile-interval", default="10s", type=duration)
    p.add_argument("--disable-unset-cpu-quota", default="false", choices=["true", "false"])
    p.add_argument("--hami-core-library-directory-path", default="/usr/local/vgpu/libvgpu.so")
    p.add_argument(
        "--feature-gates",
        default="",
        help="e.g. CPUNormalization=true,GroupIdentity=false; accepted but not implemented "
        f"(they change nothing): {', '.join(sorted(NOT_IMPLEMENTED))}",
    )
    add_server_flags(p)
    p.add_argument(
        "--node-slo-file",
        default=None,
        help="NodeSLO spec (YAML or JSON) with optional node inputs; reloaded on change",
    )
    p.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file for cluster mode (default: in-cluster credentials when present; "
        "standalone when neither, or with --node-slo-file)",
    )
    p.add_argument("--collect-res-used-interval", default="1s", type=duration)
    p.add_argument("--psi-collector-interval", default="10s", type=duration)
    p.add_argument("--cpi-collector-interval", default="60s", type=duration)
    p.add_argument("--collect-cpi-timewindow", default="10s", type=duration)
    p.add_argument(
        "--sched-latency-interval",
        default="10s",
        type=duration,
        help="how often run-queue latency histograms are read (gate SchedLatencyCollector)",
    )
    p.add_argument(
        "--sched-latency-sample-seconds",
        default="2s",
        type=duration,
        help="how long the probes stay attached in each interval (sampling keeps their cost "
        "low; at least the interval: always attached)",
    )
    p.add_argument(
        "--tsdb-path",
        default="/var/lib/koordlet/metric-data/",
        help="metric cache folder; empty keeps metrics in memory",
    )
    p.add_argument("--tsdb-retention-duration", default="12h", type=duration)
    p.add_argument("--tsdb-max-bytes", default=100 << 20, type=int)
    p.add_argument(
        "--node-metric-file",
        default="/var/lib/koordlet/nodemetric.json",
        help="where the NodeMetric report is written in standalone mode; empty: nowhere",
    )
    p.add_argument("--node-metric-report-interval", default="60s", type=duration)
    q = p.add_argument_group("QoS manager")
    q.add_argument("--reconcile-interval-seconds", default=1, type=int)
    q.add_argument("--cpu-suppress-interval-seconds", default=1, type=int)
    q.add_argument(
        "--cpu-suppress-min-cpus",
        default=2,
        type=int,
        help="fewest CPUs the cpuset policy leaves to BE pods (default %(default)s)",
    )
    q.add_argument("--cpu-evict-interval-seconds", default=1, type=int)
    q.add_argument("--memory-evict-interval-seconds", default=1, type=int)
    q.add_argument("--memory-evict-cool-time-seconds", default=4, type=int)
    q.add_argument("--cpu-evict-cool-time-seconds", default=20, type=int)
    q.add_argument(
        "--resource-force-update-seconds",
        default=60,
        type=int,
        help="the QoS manager trusts a value it wrote or saw this long before reading it again",
    )
    q.add_argument(
        "--only-evict-by-api",
        default="false",
        choices=["true", "false"],
        help="evict through the Kubernetes Eviction API instead of stopping containers over CRI",
    )
    q.add_argument(
        "--containerd-endpoint",
        default="containerd/containerd.sock",
        help="CRI socket for evictions, relative to --var-run-root-dir (default %(default)s)",
    )
    k = p.add_argument_group("kubelet (cluster mode)")
    k.add_argument(
        "--kubelet-preferred-address-type",
        default="InternalIP",
        help="the Node address used to reach the kubelet (default %(default)s)",
    )
    k.add_argument(
        "--kubelet-sync-interval",
        default="10s",
        type=duration,
        help="how often the kubelet's pods are listed; 0 turns the list off",
    )
    k.add_argument(
        "--kubelet-sync-timeout", default="3s", type=duration, help="one kubelet request's limit"
    )
    k.add_argument(
        "--kubelet-insecure-tls",
        default="false",
        choices=["true", "false"],
        help="plain HTTP on the kubelet's read-only port instead of HTTPS with the token",
    )
    k.add_argument(
        "--kubelet-read-only-port",
        default=10255,
        type=int,
        help="the kubelet's read-only port; 0: the authenticated port (default %(default)s)",
    )
    k.add_argument(
        "--kubelet-ca-file",
        default="",
        help="CA of the kubelet's serving certificate; empty: not verified, as in Koordinator",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    gates = FeatureGates.parse(args.feature_gates)
    sys_fs = Path(args.sys_fs_root_dir)
    return Config(
        node_name=os.environ.get("NODE_NAME") or socket.gethostname(),
        cgroup_root=Path(args.cgroup_root_dir),
        cgroup_driver=args.cgroup_driver,
        var_run_root=Path(args.var_run_root_dir),
        sys_root=Path(args.sys_root_dir),
        proc_root=Path(args.proc_root_dir),
        resctrl_root=sys_fs / "resctrl",
        nri_enabled=args.enable_nri_runtime_hook == "true",
        nri_socket_path=args.runtime_hooks_nri_socket_path,
        nri_plugin_name=args.runtime_hooks_nri_plugin_name,
        nri_plugin_index=args.runtime_hooks_nri_plugin_index,
        failure_policy=FailurePolicy(args.runtime_hooks_plugin_failure_policy),
        reconcile_interval=args.runtime_hooks_reconcile_interval,
        feature_gates=gates,
        metrics_addr=args.addr,
        status_api_remote=args.status_api_remote == "true",
        node_slo_file=Path(args.node_slo_file) if args.node_slo_file else None,
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
        disable_unset_cpu_quota=args.disable_unset_cpu_quota == "true",
        hami_core_library=args.hami_core_library_directory_path,
        collect_interval=args.collect_res_used_interval,
        psi_interval=args.psi_collector_interval,
        cpi_interval=args.cpi_collector_interval,
        cpi_window=args.collect_cpi_timewindow,
        sched_latency_interval=args.sched_latency_interval,
        sched_latency_sample=args.sched_latency_sample_seconds,
        tsdb_path=Path(args.tsdb_path) if args.tsdb_path else None,
        tsdb_retention=args.tsdb_retention_duration,
        tsdb_max_bytes=args.tsdb_max_bytes,
        node_metric_file=Path(args.node_metric_file) if args.node_metric_file else None,
        node_metric_interval=args.node_metric_report_interval,
        qos_reconcile_interval=args.reconcile_interval_seconds,
        cpu_suppress_interval=args.cpu_suppress_interval_seconds,
        cpu_suppress_min_cpus=args.cpu_suppress_min_cpus,
        cpu_evict_interval=args.cpu_evict_interval_seconds,
        cpu_evict_cool_time=args.cpu_evict_cool_time_seconds,
        memory_evict_interval=args.memory_evict_interval_seconds,
        memory_evict_cool_time=args.memory_evict_cool_time_seconds,
        only_evict_by_api=args.only_evict_by_api == "true",
        containerd_endpoint=args.containerd_endpoint,
        resource_force_update_seconds=args.resource_force_update_seconds,
        kubelet_preferred_address_type=args.kubelet_preferred_address_type,
        kubelet_sync_interval=args.kubelet_sync_interval,
        kubelet_sync_timeout=args.kubelet_sync_timeout,
        kubelet_insecure_tls=args.kubelet_insecure_tls == "true",
        kubelet_read_only_port=args.kubelet_read_only_port,
        kubelet_ca_file=Path(args.kubelet_ca_file) if args.kubelet_ca_file else None,
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = config_from_args(args)
        daemon = Koordlet(config)
    except (ModelError, OSError) as err:
        print(f"koordlet: {err}", file=sys.stderr)
        return 2
    asyncio.run(daemon.run())
    return 0
