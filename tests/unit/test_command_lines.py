"""The three daemons' command lines come from their settings tables and keep every flag.

The flags, their defaults (as written in the hand-written parsers: the text the flag would
take, or a number; None: no default) and their choices are listed here as the hand-written
parsers of koordlet, koord-manager and koord-scheduler had them; the chart, the docs, the
systemd unit and the e2e harness pass them. Also: no command takes an abbreviation for a flag,
and the four commands log through koordapi.logsetup.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from descheduler import cli as descheduler_cli
from koordapi.settings import settings
from koordlet import cli as koordlet_cli
from koordlet.config import Config
from manager import cli as manager_cli
from manager.app import ManagerOptions
from scheduler import cli as scheduler_cli
from tests.unit.commandline import refusal
from tests.unit.manager.test_koordinator_deployment import DEPLOYMENT_ARGS

OldFlags = dict[str, tuple[str | int | bool | None, list[str] | None]]

OLD_KOORDLET: OldFlags = {
    "--cgroup-root-dir": ("/sys/fs/cgroup/", None),
    "--cgroup-driver": ("", ["", "cgroupfs", "systemd"]),
    "--cgroup-kube-dir": ("kubepods/", None),  # added later, Koordinator's (v0.6 to v1.4)
    "--var-run-root-dir": ("/var/run/", None),
    "--sys-root-dir": ("/sys/", None),
    "--proc-root-dir": ("/proc/", None),
    "--dev-root-dir": ("/dev/", None),
    "--sys-fs-root-dir": ("/sys/fs/", None),
    "--enable-nri-runtime-hook": ("true", ["true", "false"]),
    "--runtime-hooks-nri-socket-path": ("nri/nri.sock", None),
    "--runtime-hooks-nri-plugin-name": ("koordlet_nri", None),
    "--runtime-hooks-nri-plugin-index": ("00", None),
    "--runtime-hooks-plugin-failure-policy": ("Ignore", ["Ignore", "Fail"]),
    "--runtime-hooks-reconcile-interval": ("10s", None),
    "--disable-unset-cpu-quota": ("false", ["true", "false"]),
    "--hami-core-library-directory-path": ("/usr/local/vgpu/libvgpu.so", None),
    "--feature-gates": ("", None),
    "--addr": (":9316", None),
    "--status-api-remote": ("false", ["true", "false"]),
    "--node-slo-file": (None, None),
    "--kubeconfig": (None, None),
    "--collect-res-used-interval": ("1s", None),
    "--psi-collector-interval": ("10s", None),
    "--cpi-collector-interval": ("60s", None),
    "--collect-cpi-timewindow": ("10s", None),
    "--sched-latency-interval": ("10s", None),
    "--sched-latency-sample-seconds": ("2s", None),
    "--tsdb-path": ("/var/lib/koordlet/metric-data/", None),
    "--tsdb-retention-duration": ("12h", None),
    "--tsdb-max-bytes": (100 << 20, None),
    "--node-metric-file": ("/var/lib/koordlet/nodemetric.json", None),
    "--node-metric-report-interval": ("60s", None),
    "--reconcile-interval-seconds": (1, None),
    "--cpu-suppress-interval-seconds": (1, None),
    "--cpu-suppress-min-cpus": (2, None),
    "--cpu-evict-interval-seconds": (1, None),
    "--memory-evict-interval-seconds": (1, None),
    "--memory-evict-cool-time-seconds": (4, None),
    "--cpu-evict-cool-time-seconds": (20, None),
    "--resource-force-update-seconds": (60, None),
    "--only-evict-by-api": ("false", ["true", "false"]),
    "--containerd-endpoint": ("containerd/containerd.sock", None),
    "--kubelet-preferred-address-type": ("InternalIP", None),
    "--kubelet-sync-interval": ("10s", None),
    "--kubelet-sync-timeout": ("3s", None),
    "--kubelet-insecure-tls": ("false", ["true", "false"]),
    "--kubelet-read-only-port": (10255, None),
    "--kubelet-ca-file": ("", None),
    "--log-level": ("info", ["debug", "info", "warning", "error"]),
    # added later, Koordinator's (pkg/koordlet/prediction/config.go): the peak predictor
    "--prediction-cold-start-duration": ("24h", None),
    "--prediction-safety-margin-percent": (10, None),
    "--prediction-memory-histogram-decay-halflife": ("24h", None),
    "--prediction-cpu-histogram-decay-halflife": ("12h", None),
    "--prediction-training-interval": ("1m", None),
    "--prediction-model-expiration-duration": ("30m", None),
    "--prediction-model-checkpoint-interval": ("10m", None),
    "--prediction-model-checkpoint-max-per-step": (12, None),
    # added later, ours: containerd 1.7 does not send its NRI request timeout
    "--runtime-hooks-nri-request-timeout": ("2s", None),
}


OLD_MANAGER: OldFlags = {
    "--kubeconfig": (None, None),
    "--config-namespace": ("koordinator-system", None),
    "--slo-config-name": ("slo-controller-config", None),
    "--webhook-port": (9876, None),
    "--webhook-cert-dir": ("/tmp/k8s-webhook-server/serving-certs", None),
    "--disable-webhooks": (False, None),  # a bare flag (store_true)
    "--metrics-addr": (":8080", None),
    "--enable-leader-election": ("true", ["true", "false"]),
    "--leader-election-namespace": ("koordinator-system", None),
    "--leader-election-id": ("koord-manager", None),
    "--workers": (4, None),
    "--log-level": ("info", ["debug", "info", "warning", "error"]),
    # added later, Koordinator's (koord-manager's Deployment passes them)
    "--health-probe-addr": ("", None),
    "--sync-period": ("0", None),
    "--feature-gates": ("", None),
    "--schedulers": ("", None),  # ours
    "--elastic-quota-args": ("", None),  # ours: Koordinator's ElasticQuotaArgs (quota reclaim)
    # ours: the webhooks' rate limit (koordkube.ratelimit)
    "--webhook-rate-limit-qps": ("2000", None),
    "--webhook-rate-limit-burst": ("4000", None),
    "--webhook-rate-limit-per-client-qps": ("1000", None),
    "--webhook-rate-limit-per-client-burst": ("2000", None),
    # ours: who may call the webhooks (koordkube.clientauth)
    "--webhook-client-ca-file": (None, None),
    "--webhook-client-allowed-names": ("", None),
    "--webhook-client-token-file": (None, None),
    # ours: the serving certificate kept by koord-manager (koordkube.certkeeper)
    "--webhook-cert-secret": ("", None),
    "--webhook-service-name": ("koordinator-webhook-service", None),
    "--mutating-webhook-configuration": ("koordinator-mutating-webhook-configuration", None),
    "--validating-webhook-configuration": ("koordinator-validating-webhook-configuration", None),
}


OLD_SCHEDULER: OldFlags = {
    "--kubeconfig": (None, None),
    "--secure-port": (10443, None),  # was --port; Koordinator's --port is plain HTTP
    "--cert-dir": ("", None),  # required before Koordinator's args had to start it
    # Koordinator's, followed (issue 34)
    "--config": (None, None),
    "--bind-address": ("0.0.0.0", None),  # noqa: S104 - reached through a Service
    "--port": ("", None),  # unset: --metrics-addr
    "--address": ("0.0.0.0", None),  # noqa: S104 - Koordinator's default
    "--feature-gates": ("", None),
    "--url-prefix": ("/scheduler", None),
    "--metrics-addr": (":8081", None),
    "--load-aware-config": (None, None),
    "--log-level": ("info", ["debug", "info", "warning", "error"]),
    # ours: the extender's rate limit (koordkube.ratelimit)
    "--rate-limit-qps": ("2000", None),
    "--rate-limit-burst": ("4000", None),
    "--rate-limit-per-client-qps": ("1000", None),
    "--rate-limit-per-client-burst": ("2000", None),
    # ours: who may call the extender (koordkube.clientauth)
    "--client-ca-file": (None, None),
    "--client-allowed-names": ("", None),
    "--client-token-file": (None, None),
    # ours: the serving certificate kept by koord-scheduler (koordkube.certkeeper)
    "--cert-secret": ("", None),
    "--cert-service": ("koord-scheduler-service", None),
}


# koord-descheduler's, from its settings table alone (there was no hand-written parser):
# Koordinator's flags, an unset leader election flag (None) taking the config file's value.
OLD_DESCHEDULER: OldFlags = {
    "--config": (None, None),
    "--write-config-to": (None, None),  # Koordinator's (issue 34)
    "--feature-gates": ("", None),  # Koordinator's (issue 34)
    "--logging-format": ("text", ["text"]),  # Koordinator's, its one format (issue 34)
    "--kubeconfig": (None, None),
    "--address": ("0.0.0.0", None),  # noqa: S104 - Koordinator's default
    "--port": (10251, None),
    "--dry-run": (False, ["true", "false"]),  # ours (Koordinator: the file's dryRun only)
    "--leader-elect": (None, ["true", "false"]),
    "--leader-elect-lease-duration": (None, None),
    "--leader-elect-renew-deadline": (None, None),
    "--leader-elect-retry-period": (None, None),
    "--leader-elect-resource-lock": (None, ["leases"]),
    "--leader-elect-resource-name": (None, None),
    "--leader-elect-resource-namespace": (None, None),
    "--log-level": ("info", ["debug", "info", "warning", "error"]),
}


@dataclass(frozen=True)
class Command:
    build_parser: Callable[[], argparse.ArgumentParser]
    tables: tuple[type[Any], ...]
    old: OldFlags
    table: type[Any]  # the settings object the command builds
    build: Callable[[argparse.Namespace], Any]  # ... from the parsed flags
    default: Any  # that object with no flags given
    required: tuple[str, ...] = ()  # the least command line

    def parse(self, argv: list[str] | None = None) -> argparse.Namespace:
        return self.build_parser().parse_args([*self.required, *(argv or [])])


COMMANDS = {
    "koordlet": Command(
        koordlet_cli.build_parser,
        koordlet_cli.TABLES,
        OLD_KOORDLET,
        Config,
        koordlet_cli.config_from_args,
        Config(),
    ),
    "koord-manager": Command(
        manager_cli.build_parser,
        manager_cli.TABLES,
        OLD_MANAGER,
        ManagerOptions,
        manager_cli.options_from_args,
        ManagerOptions(),
    ),
    "koord-scheduler": Command(
        scheduler_cli.build_parser,
        scheduler_cli.TABLES,
        OLD_SCHEDULER,
        scheduler_cli.SchedulerOptions,
        scheduler_cli.options_from_args,
        scheduler_cli.SchedulerOptions(),
    ),
    "koord-descheduler": Command(
        descheduler_cli.build_parser,
        descheduler_cli.TABLES,
        OLD_DESCHEDULER,
        descheduler_cli.DeschedulerOptions,
        descheduler_cli.options_from_args,
        descheduler_cli.DeschedulerOptions(),
    ),
}
FLAGS = [
    pytest.param(name, option, id=f"{name} {option}")
    for name, command in COMMANDS.items()
    for option in sorted(command.old)
    if f"{option}=" not in " ".join(command.required)  # a required flag has no default
]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_flag_of_the_hand_written_parser_is_still_there_and_no_other(name: str) -> None:
    parser = COMMANDS[name].build_parser()
    assert set(parser._option_string_actions) - {"-h", "--help"} == {
        "--version",
        *COMMANDS[name].old,
    }
    assert not parser.allow_abbrev


@pytest.mark.parametrize(("name", "option"), FLAGS)
def test_each_flag_keeps_its_default_and_choices(name: str, option: str) -> None:
    command = COMMANDS[name]
    old_default, old_choices = command.old[option]
    (setting,) = [s for table in command.tables for s in settings(table) if s.option == option]
    if not setting.flag.bare:
        assert list(setting.choices) == (old_choices or [])
    # the old default's text as the flag reads it ("" of a path: None)
    expected = setting.convert(old_default) if isinstance(old_default, str) else old_default
    assert getattr(command.parse(), setting.dest) == expected


@pytest.mark.parametrize("name", COMMANDS)
def test_the_parsers_defaults_are_the_tables_defaults(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Walks the table: a flag not given is the field's default, so the two cannot drift."""
    monkeypatch.delenv("NODE_NAME", raising=False)  # koordlet's node name: the host's
    command = COMMANDS[name]
    parsed = command.parse()
    for setting in settings(command.table):
        assert getattr(parsed, setting.dest) == getattr(command.default, setting.field)
    assert command.build(parsed) == command.default


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        pytest.param("koordlet", ["--kubelet-sync", "5s"], id="koordlet --kubelet-sync"),
        pytest.param("koordlet", ["--kubelet-sync=5s"], id="koordlet --kubelet-sync="),
        pytest.param("koordlet", ["--log", "debug"], id="koordlet --log"),
        pytest.param("koordlet", ["--v=4"], id="koordlet --v"),  # argparse: "ambiguous"
        pytest.param("koord-manager", ["--enable-leader", "false"], id="manager --enable-leader"),
        pytest.param("koord-manager", ["--disable-web"], id="manager --disable-web"),
        pytest.param("koord-manager", ["--work=2"], id="manager --work"),
        pytest.param("koord-scheduler", ["--url", "/x"], id="scheduler --url"),
        pytest.param("koord-descheduler", ["--conf", "/x"], id="descheduler --conf"),
    ],
)
def test_abbreviations_are_errors(name: str, argv: list[str]) -> None:
    """argparse would take a unique prefix of a flag for the whole flag."""
    command = COMMANDS[name]
    said = refusal(command.build_parser, [*command.required, *argv])
    assert f"unrecognized arguments: {' '.join(argv)}" in said


def test_a_flags_prefix_is_not_the_flag() -> None:
    said = refusal(scheduler_cli.build_parser, ["--cert=/c"])
    assert "unrecognized arguments: --cert=/c" in said


def test_the_four_commands_share_one_logging_set_up() -> None:
    """No command configures logging itself: the format is koordapi.logsetup's alone."""
    root = Path(__file__).resolve().parents[2]
    for path in (
        "koordlet/cli.py",
        "koordctl/__init__.py",
        "manager/cli.py",
        "scheduler/cli.py",
        "descheduler/cli.py",
    ):
        source = (root / path).read_text()
        assert "logsetup.configure(" in source, path
        assert "basicConfig" not in source and "%(asctime)s" not in source, path


# Koordinator v1.8.0's chart (templates/koordlet.yaml) with its default values, written out.
KOORDINATOR_KOORDLET_ARGS = [
    "-addr=:9316",
    "-cgroup-root-dir=/host-cgroup/",
    "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true",
    "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
    "--logtostderr=true",
    "--v=4",
]


def test_koordlet_takes_koordinators_chart_arguments() -> None:
    args, notes = koordlet_cli.parse_args(KOORDINATOR_KOORDLET_ARGS)
    assert (args.addr, str(args.cgroup_root_dir), args.log_level) == (
        ":9316",
        "/host-cgroup",
        "debug",
    )
    gates = args.feature_gates
    assert all(gates.enabled(g) for g in ("BECPUEvict", "BEMemoryEvict", "Accelerators"))
    assert [n.split(":")[0] for n in notes] == [
        "ignored --runtime-hooks-host-endpoint",
        "ignored --logtostderr",
    ]


def test_koordlet_still_refuses_unknown_flags_and_bad_values() -> None:
    with pytest.raises(SystemExit):
        koordlet_cli.parse_args(["-no-such-flag=1"])
    with pytest.raises(SystemExit):
        koordlet_cli.parse_args(["--enable-nri-runtime-hook=maybe"])


# Koordinator v1.8.0's chart (templates/koord-manager.yaml) with its default values.
KOORDINATOR_MANAGER_ARGS = DEPLOYMENT_ARGS


def test_koord_manager_takes_koordinators_chart_arguments() -> None:
    args, notes = manager_cli.parse_args(KOORDINATOR_MANAGER_ARGS)
    options = manager_cli.options_from_args(args)
    assert options.leader_elect and options.leader_election_namespace == "koordinator-system"
    assert (options.metrics_addr, options.health_probe_addr) == (":8080", ":8000")
    assert (options.sync_period, options.feature_gates, args.log_level) == (0.0, {}, "debug")
    assert notes == [
        "ignored --logtostderr: logs always go to stderr, one line per record (--log-level "
        "sets the level)"
    ]


def test_koord_manager_accepts_its_gates_and_says_which_it_does_not_follow() -> None:
    parsed = manager_cli.parse_command_line(
        [
            "-feature-gates=PodMutatingWebhook=false,AllBeta=true",
            "-enable-pprof",
            "-sync-period=1h",
        ],
        environ={},
    )
    assert manager_cli.options_from_args(parsed.args).sync_period == 3600.0
    assert parsed.notes == []  # the flag is in the one warning line instead
    assert parsed.flags == ["enable-pprof"]
    # AllBeta turns on the beta DisablePVCReservation; the beta Pod webhooks stay as named
    assert sorted(parsed.gates) == [
        "ConfigMapValidatingWebhook",
        "DisablePVCReservation",
        "PodMutatingWebhook",
    ]
    warning = parsed.warning()
    assert warning is not None
    assert "feature gate PodMutatingWebhook=false: /mutate-pod is served" in warning
    assert "--enable-pprof (no pprof; py-spy profiles a running manager)" in warning
    with pytest.raises(SystemExit):
        manager_cli.parse_args(["--feature-gates=NoSuchGate=true"])
