"""koordlet takes every flag of Koordinator v1.8's koordlet, finds the host's folders in its
DaemonSet layout, and says in one warning (and two gauges) what it accepted without effect."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from koordapi.features import FeatureGates
from koordlet import cli
from koordlet.config import (
    DS_MODE,
    HOST_MODE,
    KOORDINATOR_ONLY,
    Config,
    HostLayout,
    choose_layout,
)
from koordlet.daemon import Koordlet

# Every flag Koordinator v1.8.0's koordlet registers, written out from its sources with a value
# unlike its default (by the flag's Go type): cmd/koordlet/options/options.go,
# pkg/koordlet/config/config.go, pkg/koordlet/util/system/config.go,
# pkg/koordlet/statesinformer/impl/config.go, pkg/koordlet/metricsadvisor/framework/config.go,
# pkg/koordlet/metriccache/config.go, pkg/koordlet/qosmanager/framework/config.go and
# extension.go, pkg/koordlet/runtimehooks/config.go, pkg/koordlet/audit/config.go,
# pkg/koordlet/prediction/config.go, pkg/koordlet/resourceexecutor/config.go; and
# controller-runtime's --kubeconfig (its client config package registers it). klog's flags:
# tests/unit/koordapi/test_goflags.py. (pkg/koordlet/util/system/cgroup_driver_linux.go's
# --cgroup-driver and --config belong to a flag set that parses the kubelet's command line.)
KOORDINATOR_V18_FLAGS: dict[str, str] = {
    # cmd/koordlet/options
    "addr": ":9477",
    "enable-pprof": "true",
    "pprof-addr": ":9478",
    "kube-api-qps": "17.5",
    "kube-api-burst": "43",
    # config
    "configmap-name": "koordlet-config-b",
    "configmap-namespace": "ns-b",
    "feature-gates": "CPICollector=true",
    # util/system
    "cgroup-root-dir": "/h/cg/",
    "sys-root-dir": "/h/sys/",
    "sys-fs-root-dir": "/h/sysfs/",
    "proc-root-dir": "/h/proc/",
    "var-run-root-dir": "/h/vr/",
    "var-lib-kubelet-dir": "/h/kubelet/",
    "run-root-dir": "/h/run/",
    "containerd-endpoint": "ctrd/c.sock",
    "docker-endpoint": "/h/docker.sock",
    "pouch-endpoint": "/h/pouch.sock",
    "default-runtime-type": "docker",
    "hami-core-library-directory-path": "/opt/v/libvgpu.so",
    "pod-resources-proxy-path": "/h/pr",
    "xpu-device-infos-dir": "/h/xpu/",
    # statesinformer
    "kubelet-preferred-address-type": "Hostname",
    "kubelet-sync-interval": "37s",
    "kubelet-sync-timeout": "7s",
    "kubelet-insecure-tls": "true",
    "kubelet-read-only-port": "10977",
    "node-topology-sync-interval": "13s",
    "disable-query-kubelet-config": "true",
    "report-interval": "71s",
    "enable-node-metric-report": "false",
    "enable-pod-taskids": "true",
    "xpu-enforce-collect-from-device-infos": "true",
    # metricsadvisor
    "collect-res-used-interval": "3s",
    "collect-sys-metric-outdated-interval": "17s",
    "collect-node-cpu-info-interval": "61s",
    "collect-node-storage-info-interval": "62s",
    "cpi-collector-interval": "77s",
    "psi-collector-interval": "19s",
    "collect-cpi-timewindow": "11s",
    "coldpage-collector-interval": "9s",
    "enable-pagecache-collector": "true",
    "enable-resctrl-collector": "true",
    "resctrl-collector-interval": "8s",
    # metriccache
    "metric-gc-interval-seconds": "333",
    "metric-expire-seconds": "444",
    "tsdb-path": "/h/tsdb/",
    "tsdb-retention-duration": "7h",
    "tsdb-enable-prometheus-metric": "true",
    "tsdb-stripe-size": "4096",
    "tsdb-max-bytes": "123456789",
    "tsdb-wal-segment-size": "777",
    "tsdb-max-block-chunk-segment-size": "888",
    "tsdb-min-block-duration": "2h",
    "tsdb-max-block-duration": "3h",
    "tsdb-head-chunks-write-buffer-size": "999",
    # qosmanager
    "reconcile-interval-seconds": "3",
    "cpu-suppress-interval-seconds": "4",
    "cpu-evict-interval-seconds": "5",
    "memory-evict-interval-seconds": "6",
    "memory-evict-cool-time-seconds": "9",
    "cpu-evict-cool-time-seconds": "31",
    "only-evict-by-api": "true",
    "qos-extension-plugins": "SomePlugin=true",
    # resourceexecutor
    "resource-force-update-seconds": "97",
    # runtimehooks
    "runtime-hooks-network": "tcp",
    "runtime-hooks-addr": "/h/k.sock",
    "runtime-hooks-failure-policy": "Fail",
    "runtime-hooks-plugin-failure-policy": "Fail",
    "runtime-hooks-config-path": "/h/hookserver.d",
    "runtime-hooks-host-endpoint": "/h/koordlet.sock",
    "runtime-hooks-disable-stages": "PreRunPodSandbox,PreStartContainer",
    "runtime-hooks-nri-connect-timeout": "9s",
    "runtime-hooks-nri-backoff-duration": "3s",
    "runtime-hooks-nri-backoff-cap": "40s",
    "runtime-hooks-nri-backoff-steps": "12",
    "runtime-hooks-nri-backoff-factor": "1.5",
    "runtime-hooks-nri-socket-path": "nri/other.sock",
    "runtime-hooks-nri-plugin-name": "koordlet_b",
    "runtime-hooks-nri-plugin-index": "07",
    "enable-nri-runtime-hook": "false",
    "runtime-hooks-reconcile-interval": "23s",
    "disable-unset-cpu-quota": "true",
    # audit
    "audit-log-dir": "/h/audit",
    "audit-verbose": "5",
    "audit-max-disk-space-mb": "21",
    "audit-max-concurrent-readers": "3",
    "audit-max-events-limit": "55",
    # prediction
    "prediction-checkpoint-filepath": "/h/ckpt",
    "prediction-cold-start-duration": "5m",
    "prediction-safety-margin-percent": "12",
    "prediction-memory-histogram-decay-halflife": "9h",
    "prediction-cpu-histogram-decay-halflife": "8h",
    "prediction-training-interval": "2m",
    "prediction-model-expiration-duration": "29m",
    "prediction-model-checkpoint-interval": "14m",
    "prediction-model-checkpoint-max-per-step": "6",
    # controller-runtime
    "kubeconfig": "/h/kubeconfig",
}


@pytest.mark.parametrize(("name", "value"), sorted(KOORDINATOR_V18_FLAGS.items()))
def test_each_koordinator_flag_is_taken_and_either_followed_or_named_without_effect(
    name: str, value: str
) -> None:
    """Go's one-dash form; a followed flag changes the Config, any other is named as ignored."""
    args, _ = cli.parse_args([f"-{name}={value}"])
    translated = cli.translate([f"-{name}={value}"])
    config = cli.config_from_args(args, ignored=translated.ignored)
    if name in translated.ignored:
        assert name in KOORDINATOR_ONLY
        assert config.ignored_flags == ((name, KOORDINATOR_ONLY[name].why),)
    else:
        assert config != cli.config_from_args(cli.parse_args([])[0]), f"-{name} changed nothing"


def test_the_new_flags_of_the_issue_are_named_with_why() -> None:
    translated = cli.translate(
        [
            "--enable-pprof",
            "--pprof-addr=:6061",
            "--kube-api-qps",
            "33",
            "--kube-api-burst=66",
            "--qos-extension-plugins=X=true",
            "--runtime-hooks-disable-stages=PreStartContainer",
            "-addr=:9555",
        ]
    )
    assert translated.argv == ["--addr=:9555"]  # each flag took its own value with it
    assert list(translated.ignored) == [
        "enable-pprof",
        "pprof-addr",
        "kube-api-qps",
        "kube-api-burst",
        "qos-extension-plugins",
        "runtime-hooks-disable-stages",
    ]
    assert "rate limited" in translated.ignored["kube-api-qps"]


def test_help_lists_each_flag_without_effect_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "1000")
    text = cli.build_parser().format_help()
    after = text[text.index("Koordinator's flags accepted with no effect here") :]
    for name, why in KOORDINATOR_ONLY.items():
        entry = " ".join(f"--{name}  no effect: {why.why}".split())
        assert entry in " ".join(after.split()), name


# Koordinator v1.8.0's NewDsModeConfig (pkg/koordlet/util/system/config.go) and its
# metriccache default, as a DaemonSet koordlet sees them.
DS_CGROUP, DS_SYS, DS_SYSFS, DS_VAR_RUN = (
    "/host-cgroup/",
    "/host-sys/",
    "/host-sys-fs/",
    "/host-var-run/",
)


def layout_of(env: dict[str, str], *folders: str) -> HostLayout:
    return choose_layout(env, lambda path: path in folders)


def test_koordinators_daemonset_layout_gives_its_mounts_as_the_paths() -> None:
    layout = layout_of({}, "/host-cgroup/", "/metric-data/")
    assert layout.mode == DS_MODE and "/host-cgroup/ is mounted" in layout.why
    args = cli.build_parser(layout).parse_args(["--cgroup-root-dir=/host-cgroup/"])
    config = cli.config_from_args(args, layout=layout)
    assert config.cgroup_root == Path(DS_CGROUP)
    assert config.sys_root == Path(DS_SYS)
    assert config.resctrl_root == Path(DS_SYSFS) / "resctrl"
    assert config.proc_root == Path("/proc")  # hostPID: the host's own
    assert config.nri_socket == Path(DS_VAR_RUN) / "nri" / "nri.sock"
    assert config.cri_socket == Path(DS_VAR_RUN) / "containerd" / "containerd.sock"
    assert config.tsdb_path == Path("/metric-data")
    assert config.layout.startswith("dsMode (")


def test_a_flag_given_wins_over_the_layout() -> None:
    layout = layout_of({}, "/host-cgroup/")
    args = cli.build_parser(layout).parse_args(
        ["--var-run-root-dir=/elsewhere/run/", "--tsdb-path="]
    )
    config = cli.config_from_args(args, layout=layout)
    assert config.nri_socket == Path("/elsewhere/run/nri/nri.sock")
    assert config.tsdb_path is None
    assert config.sys_root == Path(DS_SYS)


def test_without_the_metric_data_volume_the_cache_stays_in_our_folder() -> None:
    """Our chart mounts /var/lib/koordlet, not /metric-data/."""
    layout = layout_of({}, "/host-cgroup/")
    config = cli.config_from_args(cli.build_parser(layout).parse_args([]), layout=layout)
    assert config.tsdb_path == Config().tsdb_path


@pytest.mark.parametrize(
    ("env", "folders", "mode"),
    [
        pytest.param({}, (), HOST_MODE, id="a-host"),
        pytest.param({"agent_mode": "hostMode"}, ("/host-cgroup/",), HOST_MODE, id="hostMode"),
        pytest.param({"agent_mode": "dsMode"}, (), DS_MODE, id="dsMode"),
        # Koordinator: anything but hostMode is the DaemonSet's
        pytest.param({"agent_mode": "other"}, (), DS_MODE, id="other"),
    ],
)
def test_the_mode_is_chosen_as_koordinator_does_unless_nothing_says_so(
    env: dict[str, str], folders: tuple[str, ...], mode: str
) -> None:
    layout = layout_of(env, *folders)
    assert layout.mode == mode
    config = cli.config_from_args(cli.build_parser(layout).parse_args([]), layout=layout)
    if mode == HOST_MODE:  # the host's own folders: Config's defaults
        assert (config.cgroup_root, config.var_run_root) == (
            Config().cgroup_root,
            Config().var_run_root,
        )
    else:
        assert (config.cgroup_root, config.var_run_root) == (Path(DS_CGROUP), Path(DS_VAR_RUN))


def test_start_up_says_the_layout_and_everything_without_effect_in_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "cgroup" / "cpu" / "kubepods").mkdir(parents=True)
    (tmp_path / "nodeslo.yaml").write_text("")
    translated = cli.translate(
        ["-pprof-addr=:6063", "--kube-api-burst", "61", "-cgroup-root-dir", str(tmp_path)]
    )
    config = Config(
        node_name="node-q",
        cgroup_root=tmp_path / "cgroup",
        var_run_root=tmp_path / "vr",
        resctrl_root=tmp_path / "sys" / "resctrl",
        node_slo_file=tmp_path / "nodeslo.yaml",
        metrics_addr="",
        tsdb_path=None,
        node_metric_file=None,
        feature_gates=FeatureGates.parse("SchedLatencyCollector=false,HugePageReport=true"),
        ignored_flags=tuple(translated.ignored.items()),
        layout="dsMode (a test)",
    )
    with caplog.at_level(logging.INFO, logger="koordlet.daemon"):
        daemon = Koordlet(config)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    (said,) = [w for w in warnings if "no effect" in w]
    for part in (
        "--pprof-addr (no pprof",
        "--kube-api-burst (koordlet's API calls are not rate limited",
        "feature gate HugePageReport (no huge pages are reported)",
        # on by default in Koordinator, and not implemented here
        "feature gate NodeTopologyReport (no NodeResourceTopology is reported)",
    ):
        assert part in said
    assert "--cgroup-root-dir" not in said  # followed
    (layout_line,) = [r.getMessage() for r in caplog.records if "host layout" in r.getMessage()]
    assert f"dsMode (a test): cgroups {tmp_path / 'cgroup'}" in layout_line
    assert f"NRI socket {tmp_path / 'vr' / 'nri' / 'nri.sock'}" in layout_line

    flags = daemon.metrics.unimplemented_flags
    gates = daemon.metrics.unimplemented_gates
    assert {s.labels["flag"] for s in next(iter(flags.collect())).samples} == {
        "pprof-addr",
        "kube-api-burst",
    }
    assert {s.labels["gate"] for s in next(iter(gates.collect())).samples} == {
        "HugePageReport",
        "NodeTopologyReport",
    }
    assert all(s.labels["node"] == "node-q" for s in next(iter(flags.collect())).samples)
