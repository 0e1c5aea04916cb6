"""koordlet's command line, from its settings table (koordlet.config.Config): the Config a
command line gives is the one the hand-written parser gave, and Go's durations are taken.

Every flag's name, default and choices: tests/unit/test_command_lines.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from koordapi.features import FeatureGates
from koordlet.cli import build_parser, config_from_args, parse_args
from koordlet.config import Config
from runtimehooks.registry import FailurePolicy
from tests.unit.commandline import refusal


def test_defaults_in_help_read_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at hyphens too
    text = " ".join(build_parser().format_help().split())
    for said in (
        "NRI socket, relative to --var-run-root-dir (default nri/nri.sock)",
        "fewest CPUs the cpuset policy leaves to BE pods (default 2)",
        "CRI socket for evictions, relative to --var-run-root-dir (default "
        "containerd/containerd.sock)",
        "the Node address used to reach the kubelet (default InternalIP)",
        "the kubelet's read-only port; 0: the authenticated port (default 10255)",
        "QoS manager:",
        "kubelet (cluster mode):",
    ):
        assert said in text


def test_a_representative_command_line_gives_the_same_config_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both syntaxes, every kind of value; the Config the hand-written parser made of it."""
    monkeypatch.setenv("NODE_NAME", "node-a")
    argv = [
        "--cgroup-root-dir=/host/cgroup",
        "--cgroup-driver",
        "systemd",
        "--var-run-root-dir=/host/run/",
        "--sys-root-dir=/host/sys",
        "--proc-root-dir=/host/proc",
        "--sys-fs-root-dir=/host/sys/fs",
        "--enable-nri-runtime-hook=false",
        "--runtime-hooks-nri-socket-path=/run/nri/nri.sock",
        "--runtime-hooks-nri-plugin-name=koord",
        "--runtime-hooks-nri-plugin-index=10",
        "--runtime-hooks-plugin-failure-policy=Fail",
        "--runtime-hooks-reconcile-interval=90s",
        "--disable-unset-cpu-quota=true",
        "--hami-core-library-directory-path=/opt/vgpu/libvgpu.so",
        "--feature-gates=CPUBurst=true,BECPUSuppress=false",
        "--addr=127.0.0.1:9999",
        "--status-api-remote",
        "true",
        "--node-slo-file=/etc/koordlet/nodeslo.yaml",
        "--kubeconfig=",
        "--collect-res-used-interval=500ms",
        "--psi-collector-interval=30",
        "--cpi-collector-interval=2m",
        "--collect-cpi-timewindow=15s",
        "--sched-latency-interval=5s",
        "--sched-latency-sample-seconds=1.5",
        "--tsdb-path=",
        "--tsdb-retention-duration=90m",
        "--tsdb-max-bytes=209715200",
        "--node-metric-file=/tmp/nm.json",
        "--node-metric-report-interval=45s",
        "--reconcile-interval-seconds=2",
        "--cpu-suppress-interval-seconds=3",
        "--cpu-suppress-min-cpus=4",
        "--cpu-evict-interval-seconds=5",
        "--memory-evict-interval-seconds=6",
        "--memory-evict-cool-time-seconds=7",
        "--cpu-evict-cool-time-seconds=8",
        "--resource-force-update-seconds=9",
        "--only-evict-by-api=true",
        "--containerd-endpoint=/run/containerd/containerd.sock",
        "--kubelet-preferred-address-type=Hostname",
        "--kubelet-sync-interval=0",
        "--kubelet-sync-timeout=2s",
        "--kubelet-insecure-tls=true",
        "--kubelet-read-only-port=0",
        "--kubelet-ca-file=/etc/kubernetes/pki/ca.crt",
        "--log-level=debug",
    ]
    args = build_parser().parse_args(argv)
    assert args.log_level == "debug"
    assert config_from_args(args) == Config(
        node_name="node-a",
        cgroup_root=Path("/host/cgroup"),
        cgroup_driver="systemd",
        var_run_root=Path("/host/run"),
        sys_root=Path("/host/sys"),
        proc_root=Path("/host/proc"),
        resctrl_root=Path("/host/sys/fs/resctrl"),
        nri_enabled=False,
        nri_socket_path="/run/nri/nri.sock",
        nri_plugin_name="koord",
        nri_plugin_index="10",
        failure_policy=FailurePolicy.FAIL,
        reconcile_interval=90.0,
        feature_gates=FeatureGates({"CPUBurst": True, "BECPUSuppress": False}),
        metrics_addr="127.0.0.1:9999",
        status_api_remote=True,
        node_slo_file=Path("/etc/koordlet/nodeslo.yaml"),
        kubeconfig=None,
        disable_unset_cpu_quota=True,
        hami_core_library="/opt/vgpu/libvgpu.so",
        collect_interval=0.5,
        psi_interval=30.0,
        cpi_interval=120.0,
        cpi_window=15.0,
        sched_latency_interval=5.0,
        sched_latency_sample=1.5,
        tsdb_path=None,
        tsdb_retention=5400.0,
        tsdb_max_bytes=209715200,
        node_metric_file=Path("/tmp/nm.json"),
        node_metric_interval=45.0,
        qos_reconcile_interval=2,
        cpu_suppress_interval=3,
        cpu_suppress_min_cpus=4,
        cpu_evict_interval=5,
        cpu_evict_cool_time=8,
        memory_evict_interval=6,
        memory_evict_cool_time=7,
        only_evict_by_api=True,
        resource_force_update_seconds=9,
        containerd_endpoint="/run/containerd/containerd.sock",
        kubelet_preferred_address_type="Hostname",
        kubelet_sync_interval=0.0,
        kubelet_sync_timeout=2.0,
        kubelet_insecure_tls=True,
        kubelet_read_only_port=0,
        kubelet_ca_file=Path("/etc/kubernetes/pki/ca.crt"),
    )


def test_durations_take_gos_compound_form_too() -> None:
    """The hand-written parser refused "1m30s"; the one duration parser takes it."""
    args = build_parser().parse_args(
        [
            "--runtime-hooks-reconcile-interval=1m30s",
            "--kubelet-sync-timeout",
            "500ms",
            "--psi-collector-interval=10",
            "--tsdb-retention-duration=1h30m",
        ]
    )
    config = config_from_args(args)
    assert config.reconcile_interval == 90.0
    assert config.kubelet_sync_timeout == 0.5
    assert config.psi_interval == 10.0
    assert config.tsdb_retention == 5400.0
    assert "argument --kubelet-sync-timeout: not a duration: '3 s'" in refusal(
        build_parser, ["--kubelet-sync-timeout=3 s"]
    )


def test_a_bad_feature_gate_is_a_usage_error() -> None:
    said = refusal(build_parser, ["--feature-gates=Nope=true"])
    assert "argument --feature-gates: unknown feature gate 'Nope'" in said


def test_choices_are_refused_as_before() -> None:
    said = refusal(build_parser, ["--enable-nri-runtime-hook=yes"])
    assert "argument --enable-nri-runtime-hook: invalid choice: 'yes' (choose from 'true', " in said
    assert "invalid choice: 'Abort'" in refusal(
        build_parser, ["--runtime-hooks-plugin-failure-policy=Abort"]
    )


def test_cgroup_kube_dir_in_either_syntax_and_refused_when_not_below_the_root() -> None:
    assert config_from_args(build_parser().parse_args([])).cgroup_kube_dir == "kubepods/"
    for argv in (
        ["-cgroup-kube-dir=koordk8s/kubepods/"],
        ["--cgroup-kube-dir", "koordk8s/kubepods/"],
    ):
        args, notes = parse_args(argv)
        assert config_from_args(args).cgroup_kube_dir == "koordk8s/kubepods/" and not notes
    for bad in ("", "/", "../kubepods", "koordk8s/../kubepods"):
        said = refusal(build_parser, [f"--cgroup-kube-dir={bad}"])
        assert "argument --cgroup-kube-dir: not a cgroup directory below the hierarchy root" in said
