"""The ``koord-scheduler`` command: a LoadAware and CPU-binding extender for kube-scheduler.

kube-scheduler calls it over HTTPS (``extenders`` in its KubeSchedulerConfiguration): filter
and prioritize by real node load (NodeMetric plus what was placed since), bind LSE/LSR pods
to whole CPUs. The chart renders the configuration snippet; see docs/scheduler.md.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

from koordapi import logsetup
from koordapi.settings import add_arguments, flag, load
from scheduler.extender import ExtenderConfig
from scheduler.loadaware import LoadAwareArgs


@dataclass(frozen=True, kw_only=True)
class SchedulerOptions:
    """koord-scheduler's settings, a settings table (koordapi.settings): its flags."""

    kubeconfig: str | None = field(
        default=None,
        metadata=flag(
            "kubeconfig",
            "kubeconfig file; default: in-cluster credentials, else $KUBECONFIG or ~/.kube/config",
        ),
    )
    port: int = field(default=10443, metadata=flag("port", "HTTPS port of the extender", ours=True))
    cert_dir: Path = field(  # no default: a required flag
        metadata=flag(
            "cert-dir", "folder with tls.crt and tls.key (reloaded when they change)", ours=True
        )
    )
    url_prefix: str = field(
        default="/scheduler",
        metadata=flag("url-prefix", "the extender's urlPrefix path", ours=True),
    )
    metrics_addr: str = field(
        default=":8081", metadata=flag("metrics-addr", "/metrics, /healthz, /readyz", ours=True)
    )
    load_aware_config: str | None = field(
        default=None,
        metadata=flag(
            "load-aware-config",
            "YAML with Koordinator's LoadAwareSchedulingArgs fields (usageThresholds, "
            "resourceWeights, estimatedScalingFactors, nodeMetricExpirationSeconds, ...)",
            ours=True,
        ),
    )


# The settings tables of the command line, in --help's order.
TABLES = (SchedulerOptions, logsetup.LogOptions)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-scheduler",
        description="A kube-scheduler extender: LoadAware filter and score from NodeMetrics, "
        "and CPU binding (FullPCPUs / SpreadByPCPUs) for LSE and LSR pods at bind time.",
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    return p


def options_from_args(args: argparse.Namespace) -> SchedulerOptions:
    return load(SchedulerOptions, args)


def extender_config(path: str | None) -> ExtenderConfig:
    """The LoadAware arguments from the file (Koordinator's defaults without one)."""
    if not path:
        return ExtenderConfig()
    data: Any = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold a mapping of LoadAwareSchedulingArgs fields")
    return ExtenderConfig(loadaware=LoadAwareArgs.from_koordinator(data))


async def serve(args: argparse.Namespace) -> int:
    # Imported after argument parsing: --help and bad flags answer fast.
    from aiohttp import web  # noqa: PLC0415

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.probes import serve_probes  # noqa: PLC0415
    from scheduler.server import ExtenderServer  # noqa: PLC0415
    from scheduler.state import InformerClusterView  # noqa: PLC0415

    log = logging.getLogger("koord-scheduler")
    options = options_from_args(args)
    try:
        config = extender_config(options.load_aware_config)
    except (OSError, ValueError, yaml.YAMLError) as err:
        print(f"koord-scheduler: --load-aware-config: {err}", file=sys.stderr)
        return 2
    folder = options.cert_dir
    missing = [f for f in ("tls.crt", "tls.key") if not (folder / f).is_file()]
    if missing:
        print(f"koord-scheduler: no {' and '.join(missing)} in {folder}", file=sys.stderr)
        return 2
    try:
        api = KubeApi(build_client(options.kubeconfig))
    except Exception as err:
        print(f"koord-scheduler: no Kubernetes credentials: {err}", file=sys.stderr)
        return 2
    view = InformerClusterView(api)
    server = ExtenderServer(
        api, view, port=options.port, cert_dir=folder, prefix=options.url_prefix, config=config
    )
    informers = [asyncio.create_task(i.run()) for i in view.informers]
    runner: web.AppRunner | None = None
    if options.metrics_addr:
        runner = await serve_probes(
            options.metrics_addr, view.synced, lambda: requests_exposition(server.requests)
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        await stop.wait()
    finally:
        log.info("koord-scheduler stopping")
        await server.stop()
        if runner is not None:
            await runner.cleanup()
        for task in informers:
            task.cancel()
        await asyncio.gather(*informers, return_exceptions=True)
    return 0


def requests_exposition(requests: dict[str, int]) -> tuple[bytes, str]:
    """The extender's request counts per verb, in Prometheus' text format."""
    lines = ["# TYPE koord_scheduler_extender_requests_total counter"]
    lines += [
        f'koord_scheduler_extender_requests_total{{verb="{verb}"}} {count}'
        for verb, count in sorted(requests.items())
    ]
    return ("\n".join(lines) + "\n").encode(), "text/plain; charset=utf-8"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure(args.log_level)
    return asyncio.run(serve(args))
