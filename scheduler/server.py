"""koord-scheduler's HTTPS server: the extender verbs under one URL prefix.

POST {prefix}/filter and {prefix}/prioritize answer from the informer view through the pure
functions of scheduler.extender; POST {prefix}/bind writes the pod's resource-status
annotation (for LSE/LSR pods pinned to CPUs), device-allocated annotation (for pods given
GPUs) and reservation-allocated annotation (for an owner going into a Reservation) in one
update, and then creates the Binding. A reserve pod (koordapi.reservation.reservepod) is not
bound: its Reservation is marked Available on the node kube-scheduler chose, held from then
on, and the reserve pod deleted (kube-scheduler forgets an assumed pod that is deleted). Replies are
PascalCase JSON with status 200; a request that cannot be answered gets the verb's error
field (Error), never a 500 with a traceback. The verbs share one DecisionCache and run
without awaiting in the event loop, so they never interleave; bind awaits its writes after
the decision, with the pod already counted on the node (assumed). Every bind, bound or failed,
is logged as one "extender bind ..." line and counted (``scheduler.audit``). With ``client_auth``
(``koordkube.clientauth``; off by default) a caller must present kube-scheduler's client
certificate (the extender's ``tlsConfig`` certFile/keyFile) or a bearer token; /healthz stays
open. With ``rate_limiter`` (``koordkube.ratelimit``), checked before that, a client past its
rate or the server's gets 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from koordapi.errors import ModelError
from koordapi.quota.runtime import resource_list
from koordapi.reservation.model import (
    Reservation,
    allocated_to,
    available_status,
    is_reserve_pod,
    reserve_pod_reservation,
)
from koordkube.client import KubeApi, update_with_retry
from koordkube.clientauth import ClientAuth, ClientAuthenticator
from koordkube.errors import NotFound
from koordkube.ratelimit import RateLimiter, rate_limit_middleware
from koordkube.resources import Reservation as ReservationResource
from koordkube.resources import object_key
from koordkube.tlsreload import CertificateReloader
from scheduler import extender
from scheduler.audit import BindAudit
from scheduler.extender import DecisionCache, ExtenderArgsError, ExtenderConfig, ci_get
from scheduler.metrics import SchedulerMetrics
from scheduler.requeue import Requeuer
from scheduler.state import InformerClusterView

log = logging.getLogger(__name__)

MAX_BODY = 64 << 20  # a NodeList of a large cluster (nodeCacheCapable false)


def _error_reply(verb: str, message: str) -> Any:
    if verb == "prioritize":
        return []  # kube-scheduler ignores prioritize errors; an empty list scores nothing
    if verb == "filter":
        return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "Error": message}
    return {"Error": message}


def _node_count(message: Any) -> int:
    """The nodes of ExtenderArgs or ExtenderFilterResult: NodeNames, else the NodeList's
    items."""
    if not isinstance(message, dict):
        return 0
    names = ci_get(message, "NodeNames")
    if isinstance(names, list):
        return len(names)
    nodes = ci_get(message, "Nodes")
    items = ci_get(nodes, "Items") if isinstance(nodes, dict) else None
    return len(items) if isinstance(items, list) else 0


def _bind_target(args: Any) -> tuple[str, str, str]:
    """(namespace/name, uid, node) of ExtenderBindingArgs, "" for what it lacks."""
    if not isinstance(args, dict):
        return "", "", ""
    got = [ci_get(args, key) for key in ("PodNamespace", "PodName", "PodUID", "Node")]
    namespace, name, uid, node = (v if isinstance(v, str) else "" for v in got)
    return f"{namespace}/{name}" if namespace or name else "", uid, node


class Binder:
    """bind: decide the CPUs and GPUs, count the pod on the node, write the annotations, bind."""

    def __init__(
        self,
        api: KubeApi,
        view: InformerClusterView,
        config: ExtenderConfig,
        cache: DecisionCache,
        *,
        audit: BindAudit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.view, self.config, self.cache = api, view, config, cache
        self.clock = clock
        # every bind logged and counted, bound or failed, and kept for /explain
        self.audit = audit if audit is not None else BindAudit()

    async def bind(self, args: Any) -> dict[str, str]:
        try:
            reply = await self._bind(args)
        except Exception as err:  # the handler answers it in Error; audited here all the same
            self.audit.failed(*_bind_target(args), f"bind failed: {type(err).__name__}: {err}")
            raise
        if reply["Error"]:
            self.audit.failed(*_bind_target(args), reply["Error"])
        return reply

    async def _bind(self, args: Any) -> dict[str, str]:
        if not isinstance(args, dict):
            return {"Error": "ExtenderBindingArgs must be a JSON object"}
        name, namespace = ci_get(args, "PodName"), ci_get(args, "PodNamespace")
        uid, node = ci_get(args, "PodUID"), ci_get(args, "Node")
        if not all(isinstance(v, str) and v for v in (name, namespace, node)):
            return {"Error": "ExtenderBindingArgs needs PodName, PodNamespace and Node"}
        pod = self.view.pod(namespace, name)
        if pod is None:
            from lightkube.resources.core_v1 import Pod  # noqa: PLC0415

            try:
                pod = await self.api.get(Pod, name, namespace=namespace)
            except Exception as err:
                return {"Error": f"pod {namespace}/{name}: {err}"}
        if uid and (pod.get("metadata") or {}).get("uid") not in (None, uid):
            return {"Error": f"pod {namespace}/{name} is not the one scheduled (uid {uid})"}
        if is_reserve_pod(pod):
            return await self._place(pod, node)
        plan = extender.bind_decision(pod, node, self.view, config=self.config, cache=self.cache)
        if plan.error:
            return {"Error": plan.error}
        self.view.assume(pod, node, plan.annotations)
        try:
            if plan.annotations:
                await self._annotate(namespace, name, dict(plan.annotations))
            await self.api.bind_pod(namespace, name, node, uid=uid or None)
        except Exception as err:
            self.view.forget(pod)
            return {"Error": f"binding {namespace}/{name} to {node}: {err}"}
        pod_uid = str((pod.get("metadata") or {}).get("uid") or uid or "")
        into = allocated_to({"metadata": {"annotations": dict(plan.annotations)}})
        self.audit.bound(
            object_key(pod),
            pod_uid,
            node,
            cpuset=plan.cpuset,
            gpus=plan.gpus,
            reservation=into[0] if into else "",
        )
        return {"Error": ""}

    async def _place(self, pod: Mapping[str, Any], node: str) -> dict[str, str]:
        """A reserve pod's bind: its Reservation Available on ``node`` (SetReservationAvailable,
        conditional on the version read), held by the view at once, the reserve pod deleted."""
        from lightkube.resources.core_v1 import Pod  # noqa: PLC0415

        meta = pod.get("metadata") or {}
        key, name = object_key(pod), reserve_pod_reservation(pod)
        reservation = self.view.reservation(name)
        owner = [o.get("uid") for o in meta.get("ownerReferences") or []]
        if reservation is None or reservation.uid not in owner:
            return {"Error": f"reserve pod {key}: its Reservation {name} is gone"}
        if not reservation.pending:
            return {"Error": f"reserve pod {key}: Reservation {name} is {reservation.phase}"}
        try:
            allocatable = resource_list(reservation.requests())
        except ModelError as err:
            return {"Error": f"Reservation {name}: {err}"}
        patch = {
            "metadata": {"resourceVersion": reservation.resource_version},
            "status": available_status(node, allocatable, self.clock()),
        }
        try:
            written = await self.api.patch(ReservationResource, name, patch, subresource="status")
            self.view.place(Reservation.from_dict(written))
        except Exception as err:  # a conflict included: kube-scheduler tries the pod again
            return {"Error": f"placing Reservation {name} on {node}: {err}"}
        try:
            await self.api.delete(Pod, str(meta.get("name")), namespace=str(meta.get("namespace")))
        except NotFound:
            pass
        except Exception as err:  # koord-manager deletes it later: the Reservation is placed
            log.warning("reserve pod %s of Reservation %s: delete failed: %s", key, name, err)
        self.audit.bound(key, str(meta.get("uid") or ""), node, reservation=name)
        return {"Error": ""}

    async def _annotate(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """The annotations, with the pod's resourceVersion: a concurrent change is re-read."""
        from lightkube.resources.core_v1 import Pod  # noqa: PLC0415

        def mutate(current: dict[str, Any]) -> dict[str, Any] | None:
            meta = current.setdefault("metadata", {})
            present = meta.get("annotations") or {}
            if all(present.get(k) == v for k, v in annotations.items()):
                return None
            meta["annotations"] = {**present, **annotations}
            return current

        await update_with_retry(
            lambda: self.api.get(Pod, name, namespace=namespace),
            mutate,
            lambda pod: self.api.replace(Pod, pod),
            what=f"annotate pod {namespace}/{name}",
        )


class ExtenderServer:
    """The extender endpoints over HTTPS (``cert_dir`` None: plain HTTP, for tests only)."""

    def __init__(
        self,
        api: KubeApi,
        view: InformerClusterView,
        *,
        host: str = "0.0.0.0",  # noqa: S104 - reached through a Service
        port: int = 10443,
        cert_dir: str | os.PathLike[str] | None = None,
        prefix: str = "/scheduler",
        config: ExtenderConfig | None = None,
        clock: Callable[[], float] = time.time,
        client_auth: ClientAuth | None = None,
        rate_limiter: RateLimiter | None = None,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.view, self.clock = view, clock
        # Koordinator's scheduler_* series and the verbs' durations (scheduler.metrics)
        self.metrics = metrics if metrics is not None else SchedulerMetrics()
        self.config = config or ExtenderConfig()
        self.cache = DecisionCache()
        self.binder = Binder(
            api, view, self.config, self.cache, audit=BindAudit(clock=clock), clock=clock
        )
        self.host, self.port = host, port
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        # None: any client that reaches the port is served (the default)
        self.client_auth = client_auth if client_auth and client_auth.enabled else None
        self.authenticator = (
            ClientAuthenticator(self.client_auth, component="koord-scheduler extender")
            if self.client_auth is not None
            else None
        )
        auth = self.client_auth
        self.certificates = (
            CertificateReloader(
                cert_dir,
                client_ca_file=auth.ca_file if auth is not None else None,
                client_verify=auth.verify_mode if auth is not None else ssl.CERT_REQUIRED,
            )
            if cert_dir is not None
            else None
        )
        # None: no rate limit (tests; koord-scheduler always passes one, see koordkube.ratelimit)
        self.rate_limiter = rate_limiter if rate_limiter and rate_limiter.enabled else None
        self._runner: web.AppRunner | None = None
        self.requests: dict[str, int] = {"filter": 0, "prioritize": 0, "bind": 0}
        self.requeuer = Requeuer(api, view, clock=clock)
        self._requeue_task: asyncio.Task[None] | None = None

    def application(self) -> web.Application:
        middlewares = []
        if self.rate_limiter is not None:  # first: a refused request costs no authentication
            middlewares.append(rate_limit_middleware(self.rate_limiter, label=self._verb_label))
        if self.authenticator is not None:
            middlewares.append(self.authenticator.middleware)
        app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
        for verb in ("filter", "prioritize", "bind"):
            app.router.add_post(f"{self.prefix}/{verb}", self._handler(verb))
        app.router.add_get("/healthz", self._healthz)
        return app

    def _verb_label(self, request: web.Request) -> str:
        """A refused request's metric label: its verb, or "other" (a scan's paths are many)."""
        prefix, _, verb = request.path.rpartition("/")
        return verb if prefix == self.prefix and verb in self.requests else "other"

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    def _handler(self, verb: str) -> Callable[[web.Request], Any]:
        async def handle(request: web.Request) -> web.Response:
            self.requests[verb] += 1
            try:
                args = json.loads(await request.read())
            except ValueError as err:
                return web.json_response(_error_reply(verb, f"request body is not JSON: {err}"))
            with self.metrics.timed(verb) as status:
                try:
                    reply = await self._answer(verb, args)
                except ExtenderArgsError as err:
                    reply = _error_reply(verb, str(err))
                except Exception as err:  # never a 500 with a traceback: the verb's error field
                    log.exception("%s failed", verb)
                    reply = _error_reply(verb, f"{verb} failed: {type(err).__name__}: {err}")
                # prioritize answers an error with an empty list: timed as a success
                failed = isinstance(reply, dict) and bool(ci_get(reply, "Error"))
                if failed:
                    status[0] = "Error"
            if verb == "filter" and not failed:
                self.metrics.filtered(_node_count(args), _node_count(reply))
            return web.json_response(reply)

        return handle

    async def _answer(self, verb: str, args: Any) -> Any:
        now = self.clock()
        if verb == "filter":
            return extender.filter(args, self.view, now, config=self.config, cache=self.cache)
        if verb == "prioritize":
            return extender.prioritize(args, self.view, now, config=self.config, cache=self.cache)
        return await self.binder.bind(args)

    async def start(self) -> None:
        self._runner = web.AppRunner(self.application(), access_log=None)
        await self._runner.setup()
        context: ssl.SSLContext | None = None
        if self.certificates is not None:
            context = self.certificates.context
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=context)
        await site.start()
        if self._runner.addresses:
            self.port = int(self._runner.addresses[0][1])  # the bound one, when 0 was asked
        self._requeue_task = asyncio.create_task(self.requeuer.run())
        log.info("extender on %s:%d%s", self.host, self.port, self.prefix)

    async def stop(self) -> None:
        if self._requeue_task is not None:
            self._requeue_task.cancel()
            await asyncio.gather(self._requeue_task, return_exceptions=True)
            self._requeue_task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
