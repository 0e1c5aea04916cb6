"""The ``koord-descheduler`` command: LowNodeLoad rounds and the migration controller.

Koordinator's flags where they apply (cmd/koord-descheduler/app/options): ``--config`` (a
DeschedulerConfiguration file, descheduler/v1alpha2), the leader election flags (``--leader-
elect``, ``--leader-elect-lease-duration``, ... ``--leader-elect-resource-name``, ``--leader-
elect-resource-namespace``: given, they win over the file's leaderElection, as upstream), and
the deprecated insecure serving ``--address``/``--port`` (/healthz and /metrics; ignored with
``--config``, whose healthzBindAddress and metricsBindAddress say where). ``--dry-run`` is ours
(Koordinator has only the file's ``dryRun``, and LowNodeLoadArgs' and
MigrationControllerArgs'): any of them makes a dry run. ``--write-config-to`` writes the
effective configuration and exits 0, ``--feature-gates`` takes Koordinator's descheduler gates
(descheduler.features), ``--v`` sets the log level (koordapi.goflags). Written as for
Koordinator's Go binary if need be (koordapi.goflags). Every other flag of Koordinator v1.8's
koord-descheduler (secure serving, metrics, the other logging flags: KOORDINATOR_ONLY) is
accepted and changes nothing: said in --help, at start-up in one WARNING line, and by
koord_descheduler_flag_unimplemented{flag}."""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import signal
import sys
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from descheduler import features
from descheduler.config import (
    DEFAULT_INSECURE_PORT,
    ConfigError,
    DeschedulerConfig,
    LeaderElection,
    dump_config,
    parse_config,
)
from descheduler.features import DeschedulerGates
from koordapi import goflags, logsetup
from koordapi.goflags import Ignored
from koordapi.settings import BOOLEANS, add_arguments, flag, load, parse_bool

if TYPE_CHECKING:
    from descheduler.app import AppOptions

_ELECTION = "leader election"
T = TypeVar("T")


@dataclass(frozen=True)
class DeschedulerOptions:
    """koord-descheduler's flags, a settings table (koordapi.settings). A leader election
    flag left unset (None) takes the configuration file's value, else Koordinator's
    default."""

    config: str | None = field(
        default=None,
        metadata=flag("config", "DeschedulerConfiguration file (descheduler/v1alpha2)"),
    )
    write_config_to: str | None = field(
        default=None,
        metadata=flag(
            "write-config-to",
            "write the effective configuration (the file's, defaulted, with the flags) to this "
            "file as a DeschedulerConfiguration and exit",
        ),
    )
    feature_gates: DeschedulerGates = field(
        default_factory=DeschedulerGates,
        metadata=flag("feature-gates", features.help_text(), parse=DeschedulerGates.parse),
    )
    logging_format: str = field(
        default="text",
        metadata=flag(
            "logging-format",
            "Koordinator's one format here too: lines of text (koordapi.logsetup's)",
            choices=("text",),
        ),
    )
    kubeconfig: str | None = field(
        default=None,
        metadata=flag(
            "kubeconfig",
            "kubeconfig file; default: the file's clientConnection.kubeconfig, else in-cluster "
            "credentials, else $KUBECONFIG or ~/.kube/config",
            ours=True,
        ),
    )
    address: str = field(
        default="0.0.0.0",  # noqa: S104 - Koordinator's default: reached through the pod IP
        metadata=flag("address", "where --port listens; ignored with --config"),
    )
    port: int = field(
        default=DEFAULT_INSECURE_PORT,
        metadata=flag(
            "port", "/healthz, /readyz and /metrics over HTTP; 0: none; ignored with --config"
        ),
    )
    dry_run: bool = field(
        default=False,
        metadata=flag(
            "dry-run",
            "choose pods as usual but move none: each choice is written down as a "
            "PodMigrationJob in status DryRun (never carried out), with an Event on the pod; "
            "as the configuration's dryRun",
            ours=True,
            parse=parse_bool,
            choices=BOOLEANS,
        ),
    )
    leader_elect: bool | None = field(
        default=None,
        metadata=flag(
            "leader-elect",
            "run the loop and the controller only while holding the Lease (default true)",
            group=_ELECTION,
            parse=parse_bool,
            choices=BOOLEANS,
        ),
    )
    leader_elect_lease_duration: float | None = field(
        default=None,
        metadata=flag("leader-elect-lease-duration", "default 15s", group=_ELECTION),
    )
    leader_elect_renew_deadline: float | None = field(
        default=None,
        metadata=flag("leader-elect-renew-deadline", "default 10s", group=_ELECTION),
    )
    leader_elect_retry_period: float | None = field(
        default=None,
        metadata=flag("leader-elect-retry-period", "default 2s", group=_ELECTION),
    )
    leader_elect_resource_lock: str | None = field(
        default=None,
        metadata=flag(
            "leader-elect-resource-lock", "only leases", group=_ELECTION, choices=("leases",)
        ),
    )
    leader_elect_resource_name: str | None = field(
        default=None,
        metadata=flag(
            "leader-elect-resource-name", "the Lease (default koord-descheduler)", group=_ELECTION
        ),
    )
    leader_elect_resource_namespace: str | None = field(
        default=None,
        metadata=flag(
            "leader-elect-resource-namespace",
            "the Lease's namespace (default koordinator-system)",
            group=_ELECTION,
        ),
    )


# The settings tables of the command line, in --help's order.
TABLES = (DeschedulerOptions, logsetup.LogOptions)

_NO_HTTPS = "no HTTPS serving: /healthz, /readyz and /metrics are served over HTTP"
_METRICS = "the metrics are fixed: none hidden, none disabled, labels not filtered"
_LOGS = "logs are lines on stderr, flushed as written; --v or --log-level sets the level"
# The flags of Koordinator v1.8's koord-descheduler whose concept does not exist here, from
# cmd/koord-descheduler/app/options/options.go (initFlags) and what it embeds: the secure
# serving of k8s.io/apiserver's SecureServingOptions.AddFlags, component-base's metrics
# Options.AddFlags and logs api/v1 AddFlags (v0.35, as Koordinator v1.8's go.mod).
KOORDINATOR_ONLY: dict[str, Ignored] = {
    "bind-address": Ignored(_NO_HTTPS),
    "secure-port": Ignored(_NO_HTTPS),
    "disable-http2-serving": Ignored(_NO_HTTPS, boolean=True),
    "cert-dir": Ignored(_NO_HTTPS),
    "tls-cert-file": Ignored(_NO_HTTPS),
    "tls-private-key-file": Ignored(_NO_HTTPS),
    "tls-cipher-suites": Ignored(_NO_HTTPS),
    "tls-min-version": Ignored(_NO_HTTPS),
    "tls-sni-cert-key": Ignored(_NO_HTTPS),
    "http2-max-streams-per-connection": Ignored(_NO_HTTPS),
    "permit-port-sharing": Ignored(_NO_HTTPS, boolean=True),
    "permit-address-sharing": Ignored(_NO_HTTPS, boolean=True),
    "show-hidden-metrics-for-version": Ignored(_METRICS),
    "disabled-metrics": Ignored(_METRICS),
    "allow-metric-labels": Ignored(_METRICS),
    "allow-metric-labels-manifest": Ignored(_METRICS),
    "log-flush-frequency": Ignored(_LOGS),
    "vmodule": Ignored("no per-file verbosity; --v is for the whole daemon"),
    "log-text-split-stream": Ignored(_LOGS, boolean=True),
    "log-text-info-buffer-size": Ignored(_LOGS),
}
_NOTE = re.compile(r"^ignored --(?P<flag>[\w.-]+): (?P<why>.*)$")


def _unimplemented_help() -> str:
    said = goflags.by_reason(KOORDINATOR_ONLY)
    return (
        "Koordinator's flags accepted with no effect here (said at start-up and by "
        f"koord_descheduler_flag_unimplemented): {said}."
    )


def unimplemented_flags(notes: list[str]) -> tuple[list[str], str]:
    """The flags goflags.translate passed over (its notes) and one line saying them, each
    reason once."""
    by_why: dict[str, list[str]] = {}
    for note in notes:
        match = _NOTE.match(note)
        if match:
            by_why.setdefault(match["why"], []).append(match["flag"])
    names = [name for group in by_why.values() for name in group]
    line = "; ".join(
        f"{', '.join(f'--{n}' for n in group)}: {why}" for why, group in by_why.items()
    )
    return names, line


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-descheduler",
        description="Koordinator's descheduler, in Python: LowNodeLoad moves pods off nodes "
        "whose NodeMetric shows them hot, through PodMigrationJobs that the migration "
        "controller arbitrates and carries out with the Eviction API.",
        allow_abbrev=False,
        epilog=_unimplemented_help(),
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    return p


def options_from_args(args: argparse.Namespace) -> DeschedulerOptions:
    return load(DeschedulerOptions, args)


def config_from_options(options: DeschedulerOptions) -> DeschedulerConfig:
    """The configuration file (Koordinator's defaults without one) with the flags applied;
    ConfigError when the file is refused."""
    if options.config:
        try:
            text = Path(options.config).read_text()
        except OSError as err:
            raise ConfigError(f"{options.config}: {err.strerror or err}") from None
        config = parse_config(text, options.config)
    else:
        addr = f"{options.address}:{options.port}" if options.port else ""
        config = DeschedulerConfig(healthz_bind_address=addr, metrics_bind_address=addr)
    file = config.leader_election

    def pick(flag_value: T | None, file_value: T) -> T:
        return file_value if flag_value is None else flag_value

    election = LeaderElection(
        leader_elect=pick(options.leader_elect, file.leader_elect),
        lease_duration=pick(options.leader_elect_lease_duration, file.lease_duration),
        renew_deadline=pick(options.leader_elect_renew_deadline, file.renew_deadline),
        retry_period=pick(options.leader_elect_retry_period, file.retry_period),
        resource_name=pick(options.leader_elect_resource_name, file.resource_name),
        resource_namespace=pick(options.leader_elect_resource_namespace, file.resource_namespace),
    )
    kubeconfig = options.kubeconfig or config.kubeconfig
    dry_run = config.dry_run or options.dry_run
    return replace(config, leader_election=election, kubeconfig=kubeconfig, dry_run=dry_run)


async def serve(config: DeschedulerConfig, app_options: AppOptions | None = None) -> int:
    from descheduler.app import Descheduler  # noqa: PLC0415 - after arg parsing
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415

    try:
        client = build_client(config.kubeconfig or None)
    except Exception as err:
        print(f"koord-descheduler: no Kubernetes credentials: {err}", file=sys.stderr)
        return 2
    try:
        descheduler = Descheduler(
            KubeApi(client, field_manager="koord-descheduler"), config, app_options
        )
    except ValueError as err:  # leader election timings client-go refuses
        print(f"koord-descheduler: {err}", file=sys.stderr)
        return 2
    task = asyncio.create_task(descheduler.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        logging.getLogger("koord-descheduler").info("koord-descheduler stopped")
        return 0
    return 1  # the Lease was lost: exit so that the replica restarts as a follower


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags, from ours or Koordinator's syntax, and what is not followed (to log).
    A bare ``--leader-elect`` or ``--dry-run`` (Go's bool syntax) means true."""
    bare = {"-leader-elect": "--leader-elect=true", "--leader-elect": "--leader-elect=true"}
    bare |= {"-dry-run": "--dry-run=true", "--dry-run": "--dry-run=true"}
    argv = [bare.get(a, a) for a in argv]
    translated = goflags.translate(argv, TABLES, KOORDINATOR_ONLY)
    return build_parser().parse_args(translated.argv), list(translated.notes)


def main(argv: list[str] | None = None) -> int:
    args, notes = parse_args(sys.argv[1:] if argv is None else argv)
    logsetup.configure(args.log_level)
    log = logging.getLogger("koord-descheduler")
    flags, line = unimplemented_flags(notes)
    if line:
        log.warning("Koordinator's flags accepted, with no effect here: %s", line)
    options = options_from_args(args)
    gates = options.feature_gates.changed()
    if gates:
        log.warning(
            "feature gates set, with no effect here: %s",
            "; ".join(f"{name}: {why}" for name, why in gates.items()),
        )
    try:
        config = config_from_options(options)
    except ConfigError as err:
        print(f"koord-descheduler: --config {err}", file=sys.stderr)
        return 2
    for note in config.notes:
        log.info("%s", note)
    if options.write_config_to:
        # Koordinator's LogOrWriteConfig: write, say so, exit 0 without starting
        try:
            Path(options.write_config_to).write_text(dump_config(config))
        except OSError as err:
            print(f"koord-descheduler: --write-config-to {err}", file=sys.stderr)
            return 1
        log.info("wrote the configuration to %s", options.write_config_to)
        return 0
    if config.effective_dry_run:
        log.info(
            "dry run: no pod is moved; each would-be migration is a PodMigrationJob in status "
            "DryRun (never carried out) and an Event on the pod"
        )
    from descheduler.app import AppOptions  # noqa: PLC0415 - after arg parsing

    app_options = AppOptions(
        unimplemented_flags=tuple(flags),
        unimplemented_gates=tuple(gates),
        disable_pvc_reservation=options.feature_gates.enabled("DisablePVCReservation"),
    )
    return asyncio.run(serve(config, app_options))
