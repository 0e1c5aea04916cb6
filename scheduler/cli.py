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
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from koordapi import goflags, logsetup
from koordapi.goflags import Ignored
from koordapi.settings import add_arguments, flag, load
from koordkube import ratelimit
from koordkube.clientauth import (
    ClientAuth,
    ClientAuthenticator,
    parse_names,
    refusals_exposition,
)
from scheduler import features, schedulerconfig
from scheduler.extender import ExtenderConfig
from scheduler.features import SchedulerGates
from scheduler.loadaware import LoadAwareArgs
from scheduler.metrics import SchedulerMetrics
from scheduler.schedulerconfig import SchedulerConfig

if TYPE_CHECKING:
    from koordkube.certkeeper import CertificateKeeper
    from koordkube.client import KubeApi
    from scheduler.audit import BindAudit
    from scheduler.server import ExtenderServer


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
    config: str | None = field(
        default=None,
        metadata=flag(
            "config",
            "a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1, YAML or JSON): the "
            "args of LoadAwareScheduling, NodeNUMAResource and DeviceShare in its profiles' "
            "pluginConfig are followed, the rest is accepted with no effect (said at start-up)",
        ),
    )
    secure_port: int = field(
        default=10443,
        metadata=flag(
            "secure-port",
            "HTTPS port of the extender (kube-scheduler's HTTPS serving port; Koordinator's "
            "default is 10259)",
        ),
    )
    bind_address: str = field(
        default="0.0.0.0",  # noqa: S104 - reached through a Service
        metadata=flag("bind-address", "address of the extender's HTTPS port"),
    )
    port: int | None = field(
        default=None,
        metadata=flag(
            "port",
            "Koordinator's plain-HTTP port: /healthz, /readyz and /metrics on --address:PORT "
            "in place of --metrics-addr (0: none); unset: --metrics-addr",
        ),
    )
    address: str = field(
        default="0.0.0.0",  # noqa: S104 - Koordinator's default
        metadata=flag("address", "address of --port"),
    )
    feature_gates: SchedulerGates = field(
        default_factory=SchedulerGates,
        metadata=flag("feature-gates", features.help_text(), parse=SchedulerGates.parse),
    )
    cert_dir: Path | None = field(
        default=None,
        metadata=flag(
            "cert-dir",
            "folder with tls.crt and tls.key (reloaded when they change); unset, and no "
            "--cert-secret: a self-signed pair made at start, as kube-scheduler does",
        ),
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
        epilog="Accepted for Koordinator's koord-scheduler Deployment, with no effect here: "
        + goflags.by_reason(KOORDINATOR_ONLY),
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    return p


_NO_AUTH = "the extender's callers are checked by --client-ca-file and --client-token-file only"
_NO_ELECTION = "no leader election: every replica answers from its own informer caches"
_NO_TLS_OPTION = "the serving pair is tls.crt and tls.key in --cert-dir, with Python's TLS defaults"
_NO_FRAMEWORK = "the scheduling framework is the stock kube-scheduler's, not this extender's"
_NO_METRICS_OPTION = "every metric is always exported"
_LOGS = "logs always go to stderr, one line per record (--log-level sets the level)"
_API = "the API client is configured by --kubeconfig or in-cluster credentials alone"
# Koordinator v1.8 koord-scheduler's flags (cmd/koord-scheduler and pkg/scheduler, and the
# kube-scheduler options it embeds: k8s.io/kubernetes cmd/kube-scheduler/app/options with
# k8s.io/apiserver's serving, authentication and authorization options and component-base's
# leader election, metrics, logs and compatibility flags) that have no counterpart here:
# accepted, said at start-up, in --help and by koord_scheduler_flag_unimplemented.
KOORDINATOR_ONLY: dict[str, Ignored] = {
    "write-config-to": Ignored("the configuration is not written back"),
    "master": Ignored(_API),
    "kube-api-content-type": Ignored(_API),
    "kube-api-qps": Ignored(_API),
    "kube-api-burst": Ignored(_API),
    "profiling": Ignored("no pprof; py-spy profiles a running koord-scheduler", boolean=True),
    "contention-profiling": Ignored("no pprof", boolean=True),
    "pod-max-in-unschedulable-pods-duration": Ignored(_NO_FRAMEWORK),
    "disable-http2-serving": Ignored("the extender serves HTTP/1.1 only", boolean=True),
    "tls-cert-file": Ignored(_NO_TLS_OPTION),
    "tls-private-key-file": Ignored(_NO_TLS_OPTION),
    "tls-cipher-suites": Ignored(_NO_TLS_OPTION),
    "tls-curve-preferences": Ignored(_NO_TLS_OPTION),
    "tls-min-version": Ignored(_NO_TLS_OPTION),
    "tls-sni-cert-key": Ignored(_NO_TLS_OPTION),
    "http2-max-streams-per-connection": Ignored("the extender serves HTTP/1.1 only"),
    "permit-port-sharing": Ignored("no SO_REUSEPORT", boolean=True),
    "permit-address-sharing": Ignored("no SO_REUSEADDR choice", boolean=True),
    "requestheader-username-headers": Ignored(_NO_AUTH),
    "requestheader-uid-headers": Ignored(_NO_AUTH),
    "requestheader-group-headers": Ignored(_NO_AUTH),
    "requestheader-extra-headers-prefix": Ignored(_NO_AUTH),
    "requestheader-client-ca-file": Ignored(_NO_AUTH),
    "requestheader-allowed-names": Ignored(_NO_AUTH),
    "authentication-kubeconfig": Ignored(_NO_AUTH),
    "authentication-token-webhook-cache-ttl": Ignored(_NO_AUTH),
    "authentication-skip-lookup": Ignored(_NO_AUTH, boolean=True),
    "authentication-tolerate-lookup-failure": Ignored(_NO_AUTH, boolean=True),
    "authorization-kubeconfig": Ignored(_NO_AUTH),
    "authorization-webhook-cache-authorized-ttl": Ignored(_NO_AUTH),
    "authorization-webhook-cache-unauthorized-ttl": Ignored(_NO_AUTH),
    "authorization-always-allow-paths": Ignored(_NO_AUTH),
    "leader-elect": Ignored(_NO_ELECTION, boolean=True),
    "leader-elect-lease-duration": Ignored(_NO_ELECTION),
    "leader-elect-renew-deadline": Ignored(_NO_ELECTION),
    "leader-elect-retry-period": Ignored(_NO_ELECTION),
    "leader-elect-resource-lock": Ignored(_NO_ELECTION),
    "leader-elect-resource-name": Ignored(_NO_ELECTION),
    "leader-elect-resource-namespace": Ignored(_NO_ELECTION),
    "emulated-version": Ignored("no emulated Kubernetes versions"),
    "min-compatibility-version": Ignored("no emulated Kubernetes versions"),
    "show-hidden-metrics-for-version": Ignored(_NO_METRICS_OPTION),
    "allow-metric-labels": Ignored(_NO_METRICS_OPTION),
    "allow-metric-labels-manifest": Ignored(_NO_METRICS_OPTION),
    "disabled-metrics": Ignored(_NO_METRICS_OPTION),
    "logging-format": Ignored("the log format is fixed"),
    "log-flush-frequency": Ignored(_LOGS),
    "log-text-split-stream": Ignored(_LOGS, boolean=True),
    "log-text-info-buffer-size": Ignored(_LOGS),
    "log-json-split-stream": Ignored(_LOGS, boolean=True),
    "log-json-info-buffer-size": Ignored(_LOGS),
    "enable-network-topology-manager": Ignored(
        "no network topology (Coscheduling) here", boolean=True
    ),
    "sync-barrier-pod-namespace": Ignored(_NO_ELECTION),
    "sync-barrier-pod-name": Ignored(_NO_ELECTION),
    "sync-hard-timeout": Ignored(_NO_ELECTION),
    "debug-scores": Ignored(_NO_FRAMEWORK),
    "debug-filters": Ignored(_NO_FRAMEWORK, boolean=True),
    "debug-diagnosis": Ignored(_NO_FRAMEWORK, boolean=True),
    "debug-diagnosis-blocking": Ignored(_NO_FRAMEWORK, boolean=True),
    "debug-diagnosis-queue-size": Ignored(_NO_FRAMEWORK),
    "debug-diagnosis-worker-count": Ignored(_NO_FRAMEWORK),
    "controller-plugins": Ignored("no scheduler controllers here"),
    "scheduler-monitor-period": Ignored(_NO_FRAMEWORK),
    "scheduling-timeout": Ignored(_NO_FRAMEWORK),
    "scheduling-drop-unhandled-timeout": Ignored(_NO_FRAMEWORK),
}


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags, from ours or Koordinator's (Go) syntax, and the Koordinator flags
    given that change nothing here (their names, without dashes)."""
    translated = goflags.translate(argv, TABLES, KOORDINATOR_ONLY)
    given = [note.removeprefix("ignored --").split(":")[0] for note in translated.notes]
    return build_parser().parse_args(translated.argv), given


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


def plugin_config(options: SchedulerOptions, log: logging.Logger) -> SchedulerConfig:
    """The extender's plugin args from --config and --load-aware-config, said in one line
    each; --load-aware-config's LoadAwareSchedulingArgs win over --config's (the narrower
    file is the one meant). Raises OSError, ValueError or yaml.YAMLError, naming the flag."""
    config = SchedulerConfig()
    if options.config:
        try:
            config = schedulerconfig.read(options.config)
        except (OSError, ValueError) as err:
            raise ValueError(f"--config: {err}") from None
        log.info("%s", config.describe(options.config))
    if options.load_aware_config:
        try:
            loadaware = extender_config(options.load_aware_config).loadaware
        except (OSError, ValueError, yaml.YAMLError) as err:
            raise ValueError(f"--load-aware-config: {err}") from None
        if options.config:
            log.info(
                "LoadAwareSchedulingArgs from --load-aware-config %s, not --config",
                options.load_aware_config,
            )
        config = replace(config, extender=replace(config.extender, loadaware=loadaware))
    return config


def said_unimplemented(
    options: SchedulerOptions, flags: list[str], log: logging.Logger
) -> dict[str, str]:
    """One WARNING line for the gates on and the flags given that change nothing here; the
    gates, for the metric."""
    gates = options.feature_gates.unimplemented()
    ignored = {**goflags.KLOG, **KOORDINATOR_ONLY}
    if gates or flags:
        log.warning(
            "accepted with no effect here: feature gates %s; flags %s (see --help)",
            ", ".join(f"{name} ({why})" for name, why in gates.items()) or "none",
            ", ".join(f"--{name} ({ignored[name].why})" for name in flags) or "none",
        )
    return gates


def self_signed(folder: Path) -> None:
    """tls.crt and tls.key in ``folder``, signed by a CA made for the purpose and thrown away,
    as kube-scheduler makes its own pair when it is given none."""
    import datetime as dt  # noqa: PLC0415

    from koordkube import certs  # noqa: PLC0415
    from koordkube.certkeeper import write_atomically  # noqa: PLC0415

    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = certs.new_ca(now)
    cert, key = certs.issue(ca_cert, ca_key, ["koord-scheduler", "localhost", "127.0.0.1"], now)
    write_atomically(folder / "tls.crt", cert + ca_cert, 0o644)
    write_atomically(folder / "tls.key", key)


def start_up(
    options: SchedulerOptions, flags: list[str], log: logging.Logger
) -> tuple[ExtenderConfig, SchedulerMetrics]:
    """The plugin args (--config, --load-aware-config) and the metrics, with what was accepted
    to no effect said (logged and in the metrics); ValueError for a flag that cannot be
    followed."""
    problems = options.client_auth().problems()
    if problems:
        raise ValueError("\nkoord-scheduler: ".join(f"{p} (--client-*)" for p in problems))
    schedconfig = plugin_config(options, log)
    gates = said_unimplemented(options, flags, log)
    metrics = SchedulerMetrics(profile=schedconfig.scheduler_name)
    metrics.unimplemented(gates, flags)
    return schedconfig.extender, metrics


def certificate_folder(
    options: SchedulerOptions, log: logging.Logger
) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """--cert-dir, else a scratch folder (removed at the end) for --cert-secret's pair or, with
    neither flag, a self-signed one."""
    if options.cert_dir is not None:
        folder = options.cert_dir
        missing = [f for f in ("tls.crt", "tls.key") if not (folder / f).is_file()]
        if missing and not options.cert_secret:
            raise ValueError(f"no {' and '.join(missing)} in {folder}")
        return folder, None
    scratch = tempfile.TemporaryDirectory(prefix="koord-scheduler-certs-")
    if not options.cert_secret:
        self_signed(Path(scratch.name))
        log.info("no --cert-dir: serving a self-signed certificate made at start")
    return Path(scratch.name), scratch


async def serve(args: argparse.Namespace, ignored_flags: list[str] | None = None) -> int:
    # Imported after argument parsing: --help and bad flags answer fast.
    from aiohttp import web  # noqa: PLC0415

    from koordkube.client import KubeApi, build_client  # noqa: PLC0415
    from koordkube.probes import serve_probes  # noqa: PLC0415
    from scheduler.server import ExtenderServer  # noqa: PLC0415
    from scheduler.state import InformerClusterView  # noqa: PLC0415

    log = logging.getLogger("koord-scheduler")
    options = options_from_args(args)
    try:
        config, metrics = start_up(options, list(ignored_flags or []), log)
    except (ValueError, yaml.YAMLError) as err:
        print(f"koord-scheduler: {err}", file=sys.stderr)
        return 2
    try:
        folder, scratch = certificate_folder(options, log)
    except ValueError as err:
        print(f"koord-scheduler: {err}", file=sys.stderr)
        return 2
    client_auth = options.client_auth()
    try:
        api = KubeApi(build_client(options.kubeconfig))
    except Exception as err:
        print(f"koord-scheduler: no Kubernetes credentials: {err}", file=sys.stderr)
        return 2
    background: list[asyncio.Task[None]] = []
    keeper = None
    if options.cert_secret:
        try:
            keeper = await keep_certificate(api, options, folder, background)
        except Exception as err:
            print(f"koord-scheduler: --cert-secret {options.cert_secret}: {err}", file=sys.stderr)
            return 2
    view = InformerClusterView(api)
    limiter = rate_limiter(options)
    server = ExtenderServer(
        api,
        view,
        host=options.bind_address,
        port=options.secure_port,
        cert_dir=folder,
        prefix=options.url_prefix,
        config=config,
        client_auth=client_auth,
        rate_limiter=limiter,
        metrics=metrics,
    )
    informers = [asyncio.create_task(i.run()) for i in view.informers]
    runner: web.AppRunner | None = None
    probes = probes_address(options)
    if probes:
        runner = await serve_probes(
            probes,
            view.synced,
            lambda: exposition(server, limiter, keeper),
            server.binder.audit.routes(),  # GET /explain/pods/{namespace}/{name}
        )
    stop = stop_on_signals()
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
        if scratch is not None:
            scratch.cleanup()
    return 0


def exposition(
    server: ExtenderServer, limiter: ratelimit.RateLimiter, keeper: CertificateKeeper | None
) -> tuple[bytes, str]:
    """Everything /metrics says."""
    return with_certificate(
        with_client_auth_refusals(
            with_rate_limited(
                requests_exposition(server.requests, server.binder.audit, server.metrics),
                limiter.refused,
            ),
            server.authenticator,
        ),
        keeper,
    )


def stop_on_signals() -> asyncio.Event:
    """An event that SIGINT or SIGTERM sets."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def probes_address(options: SchedulerOptions) -> str:
    """Where /healthz, /readyz and /metrics are served over HTTP: Koordinator's --address and
    --port when --port is given (0: nowhere), else --metrics-addr ("": nowhere)."""
    if options.port is None:
        return options.metrics_addr
    if options.port == 0:
        return ""
    host = f"[{options.address}]" if ":" in options.address else options.address
    return f"{host}:{options.port}"


async def keep_certificate(
    api: KubeApi, options: SchedulerOptions, folder: Path, background: list[asyncio.Task[None]]
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
        folder,
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
    requests: dict[str, int],
    binds: BindAudit | None = None,
    metrics: SchedulerMetrics | None = None,
) -> tuple[bytes, str]:
    """The extender's request counts per verb, in Prometheus' text format, with ``binds``
    its bind results (koord_scheduler_extender_binds_total) and with ``metrics`` Koordinator's
    series and the no-effect gates and flags (scheduler.metrics)."""
    lines = ["# TYPE koord_scheduler_extender_requests_total counter"]
    lines += [
        f'koord_scheduler_extender_requests_total{{verb="{verb}"}} {count}'
        for verb, count in sorted(requests.items())
    ]
    text = "\n".join(lines) + "\n" + (binds.exposition() if binds is not None else "")
    extra = metrics.exposition() if metrics is not None else b""
    return text.encode() + extra, "text/plain; charset=utf-8"


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
    args, ignored = parse_args(sys.argv[1:] if argv is None else argv)
    logsetup.configure(args.log_level)
    return asyncio.run(serve(args, ignored))
