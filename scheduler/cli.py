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
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from koordapi import logsetup
from koordapi.settings import add_arguments, flag, load
from koordkube import ratelimit
from koordkube.clientauth import (
    ClientAuth,
    ClientAuthenticator,
    parse_names,
    refusals_exposition,
)
from scheduler.extender import ExtenderConfig
from scheduler.loadaware import LoadAwareArgs

if TYPE_CHECKING:
    from koordkube.certkeeper import CertificateKeeper
    from koordkube.client import KubeApi
    from scheduler.audit import BindAudit


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
    # empty: tls.crt and tls.key are given in --cert-dir
    cert_secret: str = field(
        default="",
        metadata=flag(
            "cert-secret",
            "NAMESPACE/NAME of a Secret holding the CA kube-scheduler trusts (ca-cert.pem, "
            "ca-key.pem): koord-scheduler issues its serving certificate from it, renews it six "
            "months before its end and writes it to --cert-dir",
            ours=True,
        ),
    )
    cert_service: str = field(
        default="koord-scheduler-service",
        metadata=flag(
            "cert-service",
            "with --cert-secret: the extender's Service (in the Secret's namespace), whose "
            "names the certificate is for",
            ours=True,
        ),
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
    # The extender's rate limit (koordkube.ratelimit, where the defaults are explained): a token
    # bucket per client (the TLS client certificate's CN, else the address) and one overall.
    rate_limit_qps: float = field(
        default=ratelimit.DEFAULT_QPS,
        metadata=flag(
            "rate-limit-qps",
            "extender requests a second this replica serves in all, beyond them HTTP 429 with "
            "Retry-After; 0: no overall limit",
            parse=ratelimit.parse_qps,
            ours=True,
        ),
    )
    rate_limit_burst: int = field(
        default=ratelimit.DEFAULT_BURST,
        metadata=flag(
            "rate-limit-burst",
            "extender requests served at once above --rate-limit-qps",
            parse=ratelimit.parse_burst,
            ours=True,
        ),
    )
    rate_limit_per_client_qps: float = field(
        default=ratelimit.DEFAULT_PER_CLIENT_QPS,
        metadata=flag(
            "rate-limit-per-client-qps",
            "extender requests a second served to one client (its client certificate's CN, "
            "else its address); 0: no per-client limit",
            parse=ratelimit.parse_qps,
            ours=True,
        ),
    )
    rate_limit_per_client_burst: int = field(
        default=ratelimit.DEFAULT_PER_CLIENT_BURST,
        metadata=flag(
            "rate-limit-per-client-burst",
            "extender requests served at once to one client above its rate",
            parse=ratelimit.parse_burst,
            ours=True,
        ),
    )
    # Client authentication of the extender's callers (koordkube.clientauth); all empty: none.
    client_ca_file: Path | None = field(
        default=None,
        metadata=flag(
            "client-ca-file",
            "PEM CA bundle: callers must present a client certificate it signed (kube-scheduler's, "
            "from the extender's tlsConfig certFile/keyFile); reloaded when it changes",
            ours=True,
        ),
    )
    client_allowed_names: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "client-allowed-names",
            "with --client-ca-file: the client certificate's subject CN or a DNS SAN must be "
            "one of these, comma-separated; empty: any certificate of the CA",
            parse=lambda text: tuple(sorted(parse_names(text))),
            ours=True,
        ),
    )
    client_token_file: Path | None = field(
        default=None,
        metadata=flag(
            "client-token-file",
            "bearer tokens accepted from callers, one a line; reloaded when it changes; beside "
            "--client-ca-file, either credential is enough (kube-scheduler sends no token)",
            ours=True,
        ),
    )

    def rate_limits(self) -> ratelimit.RateLimits:
        """The extender's rate limit (--rate-limit-*)."""
        return ratelimit.RateLimits(
            qps=self.rate_limit_qps,
            burst=self.rate_limit_burst,
            per_client_qps=self.rate_limit_per_client_qps,
            per_client_burst=self.rate_limit_per_client_burst,
        )

    def client_auth(self) -> ClientAuth:
        """Who may call the extender (--client-*); all unset: anyone."""
        return ClientAuth.of(self.client_ca_file, self.client_allowed_names, self.client_token_file)


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
    if missing and not options.cert_secret:
        print(f"koord-scheduler: no {' and '.join(missing)} in {folder}", file=sys.stderr)
        return 2
    client_auth = options.client_auth()
    for problem in client_auth.problems():
        print(f"koord-scheduler: {problem} (--client-*)", file=sys.stderr)
    if client_auth.problems():
        return 2
    try:
        api = KubeApi(build_client(options.kubeconfig))
    except Exception as err:
        print(f"koord-scheduler: no Kubernetes credentials: {err}", file=sys.stderr)
        return 2
    background: list[asyncio.Task[None]] = []
    keeper = None
    if options.cert_secret:
        try:
            keeper = await keep_certificate(api, options, background)
        except Exception as err:
            print(f"koord-scheduler: --cert-secret {options.cert_secret}: {err}", file=sys.stderr)
            return 2
    view = InformerClusterView(api)
    limiter = rate_limiter(options)
    server = ExtenderServer(
        api,
        view,
        port=options.port,
        cert_dir=folder,
        prefix=options.url_prefix,
        config=config,
        client_auth=client_auth,
        rate_limiter=limiter,
    )
    informers = [asyncio.create_task(i.run()) for i in view.informers]
    runner: web.AppRunner | None = None
    if options.metrics_addr:
        runner = await serve_probes(
            options.metrics_addr,
            view.synced,
            lambda: with_certificate(
                with_client_auth_refusals(
                    with_rate_limited(
                        requests_exposition(server.requests, server.binder.audit),
                        limiter.refused,
                    ),
                    server.authenticator,
                ),
                keeper,
            ),
            server.binder.audit.routes(),  # GET /explain/pods/{namespace}/{name}
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
        for task in (*informers, *background):
            task.cancel()
        await asyncio.gather(*informers, *background, return_exceptions=True)
    return 0


async def keep_certificate(
    api: KubeApi, options: SchedulerOptions, background: list[asyncio.Task[None]]
) -> CertificateKeeper:
    """--cert-secret's keeper, once its first pass wrote the files (raises what that pass
    raised), its later passes running as a task added to ``background``."""
    from koordkube.certkeeper import CertificateKeeper, webhook_names  # noqa: PLC0415

    namespace, _, name = options.cert_secret.partition("/")
    if not (namespace and name):
        raise ValueError("must be NAMESPACE/NAME")
    keeper = CertificateKeeper(
        api,
        namespace,
        name,
        webhook_names(options.cert_service, namespace),
        options.cert_dir,
        fixed_ca=True,  # kube-scheduler holds the CA in its own configuration
    )
    await keeper.first_sync()
    background.append(asyncio.create_task(keeper.run(keeper.interval)))
    return keeper


def with_certificate(
    exposition: tuple[bytes, str], keeper: CertificateKeeper | None
) -> tuple[bytes, str]:
    """``exposition`` and, with --cert-secret, the serving certificate kept: pairs issued and
    passes failed (koord_scheduler_certificate_events_total, as koord-manager's
    koord_manager_webhook_certificate_events_total) and when the pair in use ends."""
    if keeper is None:
        return exposition
    events = "koord_scheduler_certificate_events_total"
    not_after = "koord_scheduler_certificate_not_after_timestamp_seconds"
    lines = [
        f"# TYPE {events} counter",
        f'{events}{{event="failed"}} {keeper.failures}',
        f'{events}{{event="issued"}} {keeper.renewals}',
        f"# TYPE {not_after} gauge",
        f"{not_after} {keeper.not_after():.0f}",
    ]
    body, content_type = exposition
    return body + ("\n".join(lines) + "\n").encode(), content_type


def requests_exposition(
    requests: dict[str, int], binds: BindAudit | None = None
) -> tuple[bytes, str]:
    """The extender's request counts per verb, in Prometheus' text format, and with ``binds``
    its bind results (koord_scheduler_extender_binds_total)."""
    lines = ["# TYPE koord_scheduler_extender_requests_total counter"]
    lines += [
        f'koord_scheduler_extender_requests_total{{verb="{verb}"}} {count}'
        for verb, count in sorted(requests.items())
    ]
    text = "\n".join(lines) + "\n" + (binds.exposition() if binds is not None else "")
    return text.encode(), "text/plain; charset=utf-8"


def rate_limiter(options: SchedulerOptions) -> ratelimit.RateLimiter:
    """The extender's limiter (--rate-limit-*), said at start-up."""
    limits = options.rate_limits()
    logging.getLogger("koord-scheduler").info("extender rate limit: %s", limits.describe())
    return ratelimit.RateLimiter(limits, component="koord-scheduler extender")


def with_client_auth_refusals(
    exposition: tuple[bytes, str], authenticator: ClientAuthenticator | None
) -> tuple[bytes, str]:
    """``exposition`` and, with --client-ca-file or --client-token-file, the requests refused
    for their credentials (koord_scheduler_extender_client_auth_refused_total, by reason:
    unauthenticated is a 401, forbidden a 403)."""
    body, content_type = exposition
    metric = "koord_scheduler_extender_client_auth_refused_total"
    return body + refusals_exposition(metric, authenticator), content_type


def with_rate_limited(
    exposition: tuple[bytes, str], refused: Mapping[str, int]
) -> tuple[bytes, str]:
    """``exposition`` and the requests the rate limit refused per verb ("other": any path that
    is not a verb), in Prometheus' text format; each verb is there from the start, at 0."""
    counts = {"bind": 0, "filter": 0, "prioritize": 0, "other": 0, **refused}
    lines = ["# TYPE koord_scheduler_extender_rate_limited_total counter"]
    lines += [
        f'koord_scheduler_extender_rate_limited_total{{verb="{verb}"}} {count}'
        for verb, count in sorted(counts.items())
    ]
    body, content_type = exposition
    return body + ("\n".join(lines) + "\n").encode(), content_type


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure(args.log_level)
    return asyncio.run(serve(args))
