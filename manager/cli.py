"""The ``koord-manager`` command: batch resources, NodeSLOs and NodeMetrics, pod webhooks.

Flag names are Koordinator's where it has the setting (``--config-namespace``,
``--slo-config-name``, ``--enable-leader-election``, ``--metrics-addr``, ``--health-probe-addr``,
``--sync-period``, ``--feature-gates``), written as for Koordinator's Go binary if need be
(koordapi.goflags); its flags with no counterpart here are accepted and said at start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from dataclasses import dataclass, field, replace
from importlib.metadata import version

from koordapi import goflags, logsetup
from koordapi.features import ALL_ALPHA, ALL_BETA, MANAGER_GATES
from koordapi.goflags import Ignored
from koordapi.settings import add_arguments, flag, load
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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-manager",
        description="Koordinator's manager, in Python: batch and mid resources on each Node "
        "from its NodeMetric, each node's NodeSLO from the slo-controller-config ConfigMap, "
        "NodeMetric collect policies, and the pod and ConfigMap admission webhooks.",
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    return p


def options_from_args(args: argparse.Namespace) -> ManagerOptions:
    options = load(ManagerOptions, args)
    command = load(Command, args)
    return replace(
        options,
        webhook_port=None if command.disable_webhooks else options.webhook_port,
        workers=max(1, options.workers),
    )


async def serve(args: argparse.Namespace) -> int:
    from koordkube.client import KubeApi, build_client  # noqa: PLC0415 - after arg parsing

    options = options_from_args(args)
    if options.webhook_port is not None and not options.webhook_cert_secret:
        folder = options.webhook_cert_dir
        missing = [f for f in ("tls.crt", "tls.key") if not (folder / f).is_file()]
        if missing:
            print(
                f"koord-manager: no {' and '.join(missing)} in {options.webhook_cert_dir} "
                "(--webhook-cert-dir); --webhook-cert-secret=NAME makes and keeps them, "
                "--disable-webhooks runs without the webhooks",
                file=sys.stderr,
            )
            return 2
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
    manager = Manager(KubeApi(client), options)
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


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags, from ours or Koordinator's syntax, and what is not followed (to log)."""
    translated = goflags.translate(argv, TABLES, KOORDINATOR_ONLY)
    args = build_parser().parse_args(translated.argv)
    notes = list(translated.notes)
    for name, value in args.feature_gates.items():
        why = (
            "sets the gates of its stage, none of which this manager follows"
            if name in (ALL_ALPHA, ALL_BETA)
            else MANAGER_GATES[name]
        )
        notes.append(f"feature gate {name}={str(value).lower()} accepted, not followed: {why}")
    return args, notes


def main(argv: list[str] | None = None) -> int:
    args, notes = parse_args(sys.argv[1:] if argv is None else argv)
    logsetup.configure(args.log_level)
    for note in notes:
        logging.getLogger("koord-manager").info("%s", note)
    return asyncio.run(serve(args))
