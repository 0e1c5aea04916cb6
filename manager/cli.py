"""The ``koord-manager`` command: batch resources, NodeSLOs and NodeMetrics, pod webhooks.

Flag names are Koordinator's where it has the setting (``--config-namespace``,
``--slo-config-name``, ``--enable-leader-election``, ``--metrics-addr``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from importlib.metadata import version
from pathlib import Path

from manager.app import Manager, ManagerOptions


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-manager",
        description="Koordinator's manager, in Python: batch and mid resources on each Node "
        "from its NodeMetric, each node's NodeSLO from the slo-controller-config ConfigMap, "
        "NodeMetric collect policies, and the pod and ConfigMap admission webhooks.",
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file; default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config",
    )
    p.add_argument("--config-namespace", default="koordinator-system")
    p.add_argument("--slo-config-name", default="slo-controller-config")
    p.add_argument(
        "--webhook-port", type=int, default=9876, help="HTTPS port of the admission webhooks"
    )
    p.add_argument(
        "--webhook-cert-dir",
        default="/tmp/k8s-webhook-server/serving-certs",  # controller-runtime's default
        help="folder with tls.crt and tls.key (reloaded when they change)",
    )
    p.add_argument(
        "--disable-webhooks", action="store_true", help="run the controllers only, no webhooks"
    )
    p.add_argument("--metrics-addr", default=":8080", help="/metrics, /healthz, /readyz")
    p.add_argument("--enable-leader-election", default="true", choices=["true", "false"])
    p.add_argument("--leader-election-namespace", default="koordinator-system")
    p.add_argument("--leader-election-id", default="koord-manager", help="the Lease's name")
    p.add_argument("--workers", type=int, default=4, help="concurrent reconciles per controller")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def options_from_args(args: argparse.Namespace) -> ManagerOptions:
    return ManagerOptions(
        config_namespace=args.config_namespace,
        slo_config_name=args.slo_config_name,
        webhook_port=None if args.disable_webhooks else args.webhook_port,
        webhook_cert_dir=Path(args.webhook_cert_dir),
        metrics_addr=args.metrics_addr,
        leader_elect=args.enable_leader_election == "true",
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id,
        workers=max(1, args.workers),
    )


async def serve(args: argparse.Namespace) -> int:
    from manager.kube.client import KubeApi, build_client  # noqa: PLC0415 - after arg parsing

    options = options_from_args(args)
    if options.webhook_port is not None:
        folder = options.webhook_cert_dir
        missing = [f for f in ("tls.crt", "tls.key") if not (folder / f).is_file()]
        if missing:
            print(
                f"koord-manager: no {' and '.join(missing)} in {options.webhook_cert_dir} "
                "(--webhook-cert-dir); --disable-webhooks runs without the webhooks",
                file=sys.stderr,
            )
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return asyncio.run(serve(args))
