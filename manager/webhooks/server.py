"""koord-manager's admission webhook server: aiohttp over HTTPS, thin wrappers over the pure
webhook functions.

Routes: POST /mutate-pod, /validate-pod, /validate-configmap; with a ``quota_tree``, POST
/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota and
/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota (``quota_routes``: which of the two,
by the gates ElasticMutatingWebhook and ElasticValidatingWebhook); GET /healthz. A body that is
not an AdmissionReview v1 request gets HTTP 400 (there is no uid to answer to); any review
gets HTTP 200 with an AdmissionReview answer, including "allowed, with a warning" for a kind
the route does not handle and "denied, 500" if a webhook function fails unexpectedly.
Every answered review goes to ``audit`` (``manager.webhooks.audit``): counted, and logged as
one "admission ..." line when it mutates or denies.

State (profiles, PriorityClasses, namespace labels) comes from a ``StateProvider`` the
controllers feed from their caches; handlers only read it, never the API server, so a slow
apiserver cannot make admission slow. The serving certificate is ``tls.crt``/``tls.key`` in
``cert_dir`` and is reloaded when the files change (see ``CertificateReloader``). With
``client_auth`` (``koordkube.clientauth``; off by default) a caller must present the
kube-apiserver's client certificate or a bearer token; /healthz stays open. With
``rate_limiter`` (``koordkube.ratelimit``), checked before that, a client past its rate or
the server's gets 429 with Retry-After.

    server = WebhookServer("0.0.0.0", 9443, "/certs", provider, "koordinator-system",
                           "slo-controller-config")
    await server.start()
    ...
    await server.stop()
"""

from __future__ import annotations

import logging
import os
import random
import ssl
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from koordkube.clientauth import ClientAuth, ClientAuthenticator
from koordkube.ratelimit import RateLimiter, rate_limit_middleware
from koordkube.tlsreload import CertificateReloader
from manager.webhooks import configmap_validating, elasticquota, pod_mutating, pod_validating
from manager.webhooks.admission import (
    AdmissionRequest,
    AdmissionResponse,
    ReviewError,
    allowed,
    denied,
    parse_review,
    review_response,
    warn_unexpected_kind,
)
from manager.webhooks.audit import AdmissionAudit
from manager.webhooks.profiles import RandIntn

log = logging.getLogger(__name__)

MUTATE_POD = "/mutate-pod"
VALIDATE_POD = "/validate-pod"
VALIDATE_CONFIGMAP = "/validate-configmap"
HEALTHZ = "/healthz"
QUOTA_ROUTES = frozenset({elasticquota.MUTATE_PATH, elasticquota.VALIDATE_PATH})
ROUTES = frozenset({MUTATE_POD, VALIDATE_POD, VALIDATE_CONFIGMAP, *QUOTA_ROUTES})
# A review carries object and oldObject, each up to etcd's 1.5 MiB object limit.
MAX_REVIEW_BYTES = 8 * 1024 * 1024


class StateProvider(Protocol):
    """What the webhooks read from the cluster; implementations answer from local caches."""

    def profiles(self) -> Sequence[Mapping[str, Any]]:
        """Every ClusterColocationProfile object (metadata, spec), in any order."""
        ...

    def priority_classes(self) -> Mapping[str, Mapping[str, Any]]:
        """PriorityClass name → object (``value``, optional ``preemptionPolicy``)."""
        ...

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        """The labels of namespace ``name``; empty when unknown."""
        ...


@dataclass
class StaticStateProvider:
    """A StateProvider over fixed data, for tests, benchmarks and a cluster-less start."""

    profile_list: list[Mapping[str, Any]] = field(default_factory=list)
    priority_class_map: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)

    def profiles(self) -> Sequence[Mapping[str, Any]]:
        return self.profile_list

    def priority_classes(self) -> Mapping[str, Mapping[str, Any]]:
        return self.priority_class_map

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        return self.namespaces.get(name, {})


class WebhookServer:
    """The HTTPS admission server; ``port`` 0 binds a free port (read ``bound_port``)."""

    def __init__(  # noqa: PLR0917 - the positional order is the documented constructor
        self,
        host: str,
        port: int,
        cert_dir: str | os.PathLike[str],
        provider: StateProvider,
        config_namespace: str,
        slo_config_name: str = "slo-controller-config",
        *,
        rand_intn: RandIntn = random.randrange,
        slo_validator: configmap_validating.SloValidator | None = None,
        slo_advisor: configmap_validating.SloAdvisor | None = configmap_validating.slo_advice,
        schedulers: Collection[str] = (),
        audit: AdmissionAudit | None = None,
        client_auth: ClientAuth | None = None,
        rate_limiter: RateLimiter | None = None,
        quota_tree: elasticquota.QuotaTree | None = None,
        quota_routes: Collection[str] = QUOTA_ROUTES,
    ) -> None:
        self.host = host
        self.port = port
        self.cert_dir = Path(cert_dir)
        self.provider = provider
        self.config_namespace = config_namespace
        self.slo_config_name = slo_config_name
        self.rand_intn = rand_intn
        self.slo_validator = slo_validator
        self.slo_advisor = slo_advisor  # admission warnings: what is accepted but not used
        self.schedulers = frozenset(schedulers)  # pod_mutating.mutate_pod's
        # every decision counted; each that mutates or denies logged and kept for /explain
        self.audit = audit if audit is not None else AdmissionAudit()
        self.certificates: CertificateReloader | None = None
        # None: any client that reaches the port is served (the default)
        self.client_auth = client_auth if client_auth and client_auth.enabled else None
        self.authenticator = (
            ClientAuthenticator(self.client_auth, component="koord-manager webhook")
            if self.client_auth is not None
            else None
        )
        # None: no rate limit (tests; koord-manager always passes one, see koordkube.ratelimit)
        self.rate_limiter = rate_limiter if rate_limiter and rate_limiter.enabled else None
        # None: no ElasticQuota webhook (404, as Koordinator's server without the handler)
        self.quota_tree = quota_tree
        self.quota_routes = frozenset(quota_routes) & QUOTA_ROUTES if quota_tree else frozenset()
        self._runner: web.AppRunner | None = None

    def application(self) -> web.Application:
        middlewares = []
        if self.rate_limiter is not None:  # first: a refused request costs no authentication
            middlewares.append(rate_limit_middleware(self.rate_limiter, label=_route_label))
        if self.authenticator is not None:
            middlewares.append(self.authenticator.middleware)
        app = web.Application(client_max_size=MAX_REVIEW_BYTES, middlewares=middlewares)
        app.router.add_post(MUTATE_POD, self._mutate_pod)
        app.router.add_post(VALIDATE_POD, self._validate_pod)
        app.router.add_post(VALIDATE_CONFIGMAP, self._validate_configmap)
        if elasticquota.MUTATE_PATH in self.quota_routes:
            app.router.add_post(elasticquota.MUTATE_PATH, self._mutate_quota)
        if elasticquota.VALIDATE_PATH in self.quota_routes:
            app.router.add_post(elasticquota.VALIDATE_PATH, self._validate_quota)
        app.router.add_get(HEALTHZ, self._healthz)
        return app

    async def start(self) -> None:
        """Load the certificate (raises when missing or invalid) and start listening."""
        auth = self.client_auth
        self.certificates = CertificateReloader(
            self.cert_dir,
            client_ca_file=auth.ca_file if auth is not None else None,
            client_verify=auth.verify_mode if auth is not None else ssl.CERT_REQUIRED,
        )
        runner = web.AppRunner(self.application(), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, ssl_context=self.certificates.context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("serving admission webhooks on https://%s:%d", self.host, self.bound_port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def listening(self) -> bool:
        return self._runner is not None

    @property
    def bound_port(self) -> int:
        if self._runner is None or not self._runner.addresses:
            raise RuntimeError("the webhook server is not started")
        port: int = self._runner.addresses[0][1]
        return port

    # -- handlers --------------------------------------------------------------------------

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _mutate_pod(self, request: web.Request) -> web.Response:
        def decide(review: AdmissionRequest) -> AdmissionResponse:
            return pod_mutating.mutate_pod(
                review,
                profiles=self.provider.profiles(),
                priority_classes=self.provider.priority_classes(),
                namespace_labels=self.provider.namespace_labels(_namespace(review)),
                rand_intn=self.rand_intn,
                schedulers=self.schedulers,
            )

        return await self._serve(request, "Pod", decide)

    async def _validate_pod(self, request: web.Request) -> web.Response:
        tree = self.quota_tree

        def decide(review: AdmissionRequest) -> AdmissionResponse:
            # the quota checks once the tree is listed (before, it knows no parent quota)
            quotas = tree.topology if tree is not None and tree.synced() else None
            return pod_validating.validate_pod(review, quotas)

        return await self._serve(request, "Pod", decide)

    async def _validate_configmap(self, request: web.Request) -> web.Response:
        def decide(review: AdmissionRequest) -> AdmissionResponse:
            return configmap_validating.validate_configmap(
                review,
                namespace=self.config_namespace,
                name=self.slo_config_name,
                validator=self.slo_validator,
                advisor=self.slo_advisor,
            )

        return await self._serve(request, "ConfigMap", decide)

    async def _mutate_quota(self, request: web.Request) -> web.Response:
        tree = self.quota_tree
        assert tree is not None  # the route exists only with a tree

        def decide(review: AdmissionRequest) -> AdmissionResponse:
            return elasticquota.mutate_quota(review, tree)

        return await self._serve(request, elasticquota.KIND, decide, elasticquota.GROUP)

    async def _validate_quota(self, request: web.Request) -> web.Response:
        tree = self.quota_tree
        assert tree is not None  # the route exists only with a tree

        def decide(review: AdmissionRequest) -> AdmissionResponse:
            return elasticquota.validate_quota(review, tree)

        return await self._serve(request, elasticquota.KIND, decide, elasticquota.GROUP)

    async def _serve(
        self,
        request: web.Request,
        kind: str,
        decide: Callable[[AdmissionRequest], AdmissionResponse],
        group: str = "",
    ) -> web.Response:
        route = request.path
        try:
            review = parse_review(await request.read())
        except ReviewError as err:
            log.warning("reject request to %s: %s", route, err)
            return web.Response(status=400, text=f"bad AdmissionReview: {err}\n")
        key = f"{review.kind} {_namespace(review)}/{review.name}"
        seconds: float | None = None  # the webhook's own work, when it ran
        if review.sub_resource:  # pods/status, pods/binding...: no QoS decision (as upstream)
            response = allowed()
        elif review.kind != kind or review.group != group:
            log.warning("ignore %s on %s: this route handles %s only", key, route, kind)
            response = warn_unexpected_kind(review, kind, route)
        else:
            start = time.perf_counter()
            try:
                response = decide(review)
            except Exception:  # a bug must answer (and fail closed), not drop the connection
                log.exception("fail %s %s on %s", review.operation, key, route)
                response = denied(f"internal error in koord-manager {route}", 500)
            seconds = time.perf_counter() - start
        self.audit.decide(route, review, response, _namespace(review), seconds)
        return web.json_response(review_response(review.uid, response))


def _route_label(request: web.Request) -> str:
    """A refused request's metric label: its route, or "other" (a scan's paths are many)."""
    return request.path if request.path in ROUTES else "other"


def _namespace(review: AdmissionRequest) -> str:
    if review.namespace:
        return review.namespace
    meta = (review.object or {}).get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return namespace if isinstance(namespace, str) else ""
