"""The ``koord-manager`` command: batch resources, NodeSLOs and NodeMetrics, pod webhooks.

Flag names are Koordinator's where it has the setting (``--config-namespace``,
``--slo-config-name``, ``--enable-leader-election``, ``--metrics-addr``, ``--health-probe-addr``,
``--sync-period``, ``--feature-gates``), written as for Koordinator's Go binary if need be
(koordapi.goflags). Koordinator's manager takes its webhook settings from the environment
(pkg/webhook/util: ``WEBHOOK_PORT``, ``WEBHOOK_CERT_DIR``, ``SECRET_NAME``, ``SERVICE_NAME``,
``MUTATING_WEBHOOK_NAME``, ``VALIDATING_WEBHOOK_NAME``): here they are the defaults of the flags
that hold them, so its Deployment starts unchanged and a flag given still wins. Given no
serving certificate (no ``tls.crt`` and ``tls.key`` in the cert dir, no
``--webhook-cert-secret``), it keeps its own in Koordinator's Secret, as Koordinator does.

Koordinator's flags and gates that are accepted but change nothing here are said in one
WARNING line at start-up, in ``--help`` and by ``koord_manager_flag_unimplemented{flag}`` and
``koord_manager_feature_gate_unimplemented{gate}``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from typing import Any

from koordapi import goflags, logsetup
from koordapi.features import MANAGER_GATES, manager_gate_states, manager_gates_unfollowed
from koordapi.goflags import Ignored
from koordapi.settings import add_arguments, flag, load, settings
from manager.app import Manager, ManagerOptions


@dataclass(frozen=True)
class Command:
    """The flags of the command that are not ManagerOptions, a settings table."""

    kubeconfig: str | None = field(
        default=None,
        metadata=flag(
            "kubeconfig",
            "kubeconfig file; default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config",
        ),
    )
    disable_webhooks: bool = field(
        default=False,
        metadata=flag(
            "disable-webhooks", "run the controllers only, no webhooks", bare=True, ours=True
        ),
    )


# The settings tables of the command line, in --help's order.
TABLES = (Command, ManagerOptions, logsetup.LogOptions)

_ALL_CONTROLLERS = "noderesource, nodeslo and nodemetric always run"
# Koordinator's koord-manager flags (v1.8) whose concept does not exist here.
KOORDINATOR_ONLY: dict[str, Ignored] = {
    "rest-config-qps": Ignored("API calls are not rate limited on the client side here"),
    "rest-config-burst": Ignored("API calls are not rate limited on the client side here"),
    "leader-elect-resource-lock": Ignored("leader election always uses a Lease"),
    "namespace": Ignored("the caches always watch every namespace"),
    "enable-pprof": Ignored("no pprof; py-spy profiles a running manager", boolean=True),
    "pprof-addr": Ignored("no pprof; py-spy profiles a running manager"),
    "controllers": Ignored(_ALL_CONTROLLERS),
    "noderesource-plugins": Ignored("batch and mid resources are always computed"),
    "pod-enhanced-validator-config-namespace": Ignored("no pod enhanced validator"),
    "pod-enhanced-validator-config-name": Ignored("no pod enhanced validator"),
    "pod-enhanced-validator-reconcile-interval": Ignored("no pod enhanced validator"),
}


# Koordinator's webhook environment (pkg/webhook/util/util.go) → the flag whose default it sets.
KOORDINATOR_ENV: Mapping[str, str] = {
    "WEBHOOK_PORT": "webhook-port",
    "WEBHOOK_CERT_DIR": "webhook-cert-dir",
    "SECRET_NAME": "webhook-cert-secret",
    "SERVICE_NAME": "webhook-service-name",
    "MUTATING_WEBHOOK_NAME": "mutating-webhook-configuration",
    "VALIDATING_WEBHOOK_NAME": "validating-webhook-configuration",
}
# Koordinator's Secret for the certificate it keeps when SECRET_NAME is not set.
DEFAULT_CERT_SECRET = "koordinator-webhook-certs"  # noqa: S105 - a Secret's name
# Koordinator's webhook environment that is read there and not here, and why.
KOORDINATOR_ENV_IGNORED: Mapping[str, str] = {
    "WEBHOOK_HOST": "the webhook configurations keep their Service; no URL is written",
    "WEBHOOK_CERT_WRITER": "the certificate is kept in a Secret or given as files",
}


def _unfollowed_help() -> str:
    gates = ", ".join(
        f"{name} (default {str(gate.default).lower()})"
        for name, gate in MANAGER_GATES.items()
        if gate.unfollowed is not None
    )
    flags = ", ".join(f"--{name}" for name in KOORDINATOR_ONLY)
    return (
        "Accepted from Koordinator's koord-manager but not followed here (said at start-up "
        f"when given or on): gates {gates}; flags {flags}; environment "
        f"{', '.join(KOORDINATOR_ENV_IGNORED)}. Koordinator's webhook environment "
        f"{', '.join(KOORDINATOR_ENV)} sets the defaults of the flags that hold the same."
    )


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """The parser; ``environ`` (default: none) gives Koordinator's webhook environment."""
    p = argparse.ArgumentParser(
        prog="koord-manager",
        description="Koordinator's manager, in Python: batch and mid resources on each Node "
        "from its NodeMetric, each node's NodeSLO from the slo-controller-config ConfigMap, "
        "NodeMetric collect policies, and the pod and ConfigMap admission webhooks.",
        epilog=_unfollowed_help(),
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    p.set_defaults(**env_defaults(environ or {}, p))
    return p


def env_defaults(environ: Mapping[str, str], parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The flags' defaults from Koordinator's webhook environment (an empty variable is unset,
    as there); a value the flag would refuse stops the command, as Koordinator's does."""
    known = {s.flag.name: s for table in TABLES for s in settings(table)}
    out: dict[str, Any] = {}
    for env, name in KOORDINATOR_ENV.items():
        text = environ.get(env, "")
        if not text:
            continue
        setting = known[name]
        try:
            out[setting.dest] = setting.convert(text)
        except ValueError as err:
            parser.error(f"{env}={text!r}: {err}")
    return out


def options_from_args(args: argparse.Namespace) -> ManagerOptions:
    options = load(ManagerOptions, args)
    command = load(Command, args)
    # WebhookFramework off: no webhook server and no certificate, as in Koordinator
    framework = manager_gate_states(options.feature_gates)["WebhookFramework"]
    return replace(
        options,
        webhook_port=None if command.disable_webhooks or not framework else options.webhook_port,
        workers=max(1, options.workers),
    )


def certificate_source(options: ManagerOptions) -> ManagerOptions:
    """Where the serving certificate comes from: the Secret named, else the files in the cert
    dir, else (neither given) a Secret koord-manager keeps itself, Koordinator's by default."""
    if options.webhook_port is None or options.webhook_cert_secret:
        return options
    folder = options.webhook_cert_dir
    if all((folder / name).is_file() for name in ("tls.crt", "tls.key")):
        return options
    logging.getLogger("koord-manager").info(
        "no tls.crt and tls.key in %s (--webhook-cert-dir): keeping the serving certificate "
        "in Secret %s/%s, as Koordinator's manager does",
        folder,
        options.config_namespace,
        DEFAULT_CERT_SECRET,
    )
    return replace(options, webhook_cert_secret=DEFAULT_CERT_SECRET)


async def serve(args: argparse.Namespace, ignored_flags: Sequence[str] = ()) -> int:
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415 - after arg parsing

    options = certificate_source(options_from_args(args))
    problems = options.webhook_client_auth().problems() if options.webhook_port is not None else []
    for problem in problems:
        print(f"koord-manager: {problem} (--webhook-client-*)", file=sys.stderr)
    if problems:
        return 2
    try:
        client = build_client(args.kubeconfig)
    except Exception as err:
        print(f"koord-manager: no Kubernetes credentials: {err}", file=sys.stderr)
        return 2
    manager = Manager(KubeApi(client), options, ignored_flags=ignored_flags)
    task = asyncio.create_task(manager.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        logging.getLogger(__name__).info("koord-manager stopped")
        return 0
    return 1  # the Lease was lost: exit so that the replica restarts as a follower


def given_flags(argv: Sequence[str], names: Mapping[str, object]) -> list[str]:
    """The flags among ``names`` that ``argv`` gives (Go's syntax: one dash or two, ``=`` or a
    separate value), in the order first given; ``--`` ends the flags."""
    given: list[str] = []
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            continue
        name = arg.lstrip("-").partition("=")[0]
        if name in names and name not in given:
            given.append(name)
    return given


@dataclass(frozen=True)
class Parsed:
    """A parsed command line: argparse's namespace, notes to log at info, what is not followed
    (Koordinator flags given, gates on or off against what this manager does, environment)."""

    args: argparse.Namespace
    notes: list[str]
    flags: list[str]
    gates: dict[str, str]
    env: list[str]

    def warning(self) -> str | None:
        """The one start-up line naming everything accepted and not followed; None if none."""
        parts = [f"feature gate {why}" for why in self.gates.values()]
        parts += [f"--{name} ({KOORDINATOR_ONLY[name].why})" for name in self.flags]
        parts += [f"${name} ({KOORDINATOR_ENV_IGNORED[name]})" for name in self.env]
        if not parts:
            return None
        return "accepted from Koordinator but not followed here: " + "; ".join(parts)


def parse_command_line(argv: list[str], environ: Mapping[str, str] | None = None) -> Parsed:
    """The parsed flags, from ours or Koordinator's syntax, with Koordinator's environment."""
    env = os.environ if environ is None else environ
    translated = goflags.translate(argv, TABLES, KOORDINATOR_ONLY)
    args = build_parser(env).parse_args(translated.argv)
    flags = given_flags(argv, KOORDINATOR_ONLY)
    # the flags not followed are in the warning line; klog's output flags stay notes
    notes = [n for n in translated.notes if not any(n.startswith(f"ignored --{f}:") for f in flags)]
    return Parsed(
        args=args,
        notes=notes,
        flags=flags,
        gates=manager_gates_unfollowed(args.feature_gates),
        env=[name for name in KOORDINATOR_ENV_IGNORED if env.get(name)],
    )


def parse_args(
    argv: list[str], environ: Mapping[str, str] | None = None
) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags and the notes to log at info (``parse_command_line``, shorter)."""
    parsed = parse_command_line(argv, environ)
    return parsed.args, parsed.notes


def main(argv: list[str] | None = None) -> int:
    parsed = parse_command_line(sys.argv[1:] if argv is None else argv)
    logsetup.configure(parsed.args.log_level)
    log = logging.getLogger("koord-manager")
    for note in parsed.notes:
        log.info("%s", note)
    warning = parsed.warning()
    if warning is not None:
        log.warning("%s", warning)
    return asyncio.run(serve(parsed.args, parsed.flags))
