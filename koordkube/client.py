"""The lightkube client of every component and dict-in, dict-out calls through it.

``build_client`` makes a lightkube ``AsyncClient`` from a kubeconfig or the in-cluster service
account (``in_cluster_config``). ``KubeApi`` sends plain JSON dicts through that client's HTTP
connection (auth, TLS, base URL) and returns the server's JSON unchanged: no model decoding, so
no field a newer API server adds is dropped on a read-modify-write, and timestamps keep the
exact format written (a Lease's MicroTime needs six fractional digits, which lightkube's
datetime encoding omits when the microseconds are zero). A failed call raises a
``koordkube.errors.KubeError`` (``NotFound``, ``Conflict``, ``TransportError``...), translated
here once from lightkube's ``ApiError`` or httpx2's error, which stays its ``__cause__``.

``update_with_retry`` and ``create_or_update`` are the optimistic-concurrency loops
controllers use for writes.

``KubeApi(..., observe=f)`` calls ``f(verb, resource, code, seconds)`` after every request:
the Kubernetes verb (get, list, watch, create, update, patch, delete), the resource's plural
with its subresource (``nodes``, ``nodes/status``, ``pods/eviction``), the HTTP status as a
string or ``error`` when no response came, and the time until the response was read (for a
watch, until it started streaming). Object names never appear, so the values stay few.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import httpx2
from lightkube import ApiError, AsyncClient, ConfigError, KubeConfig
from lightkube.config.models import Cluster, User
from lightkube.core import resource as lkres
from lightkube.models import meta_v1
from lightkube.types import PatchType

from koordkube import errors
from koordkube.resources import Object, is_namespaced, with_type_meta

log = logging.getLogger(__name__)

FIELD_MANAGER = "koord-manager"
"""The default field manager (koord-manager and koord-scheduler write as it; koordlet passes
its own)."""
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
WATCH_READ_MARGIN = 30.0
"""Seconds a watch may stay silent past its timeoutSeconds before the connection counts as dead."""

T = TypeVar("T")
JSONPatch = Mapping[str, Any] | list[Any]
"""A merge patch (object) or a JSON patch (list of operations)."""
RequestObserver = Callable[[str, str, str, float], None]
"""Told (verb, resource, code, seconds) after each API request (see the module docstring)."""


class RetryError(Exception):
    """A retried API call gave up; ``__cause__`` is the last error."""


# -- building the client ---------------------------------------------------------------------


def build_client(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    timeout: float = 10.0,
) -> AsyncClient:
    """Return a lightkube AsyncClient writing as field manager ``koord-manager``.

    With ``kubeconfig`` the file is used (``context`` picks a context); without it the
    in-cluster service account is used when ``KUBERNETES_SERVICE_HOST`` is set, else
    ``$KUBECONFIG`` or ``~/.kube/config``, as kubectl does. lightkube's ``ConfigError`` when
    the chosen source has no usable credentials.
    """
    if kubeconfig is not None:
        config = KubeConfig.from_file(kubeconfig).get(context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        in_cluster = in_cluster_config(service_account_dir)
        if in_cluster is None:
            raise ConfigError(f"no service account token in {service_account_dir}")
        config = in_cluster.get()
    else:
        path = os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
        config = KubeConfig.from_file(path).get(context)
    return AsyncClient(config, timeout=httpx2.Timeout(timeout), field_manager=FIELD_MANAGER)


def in_cluster_config(
    service_account_dir: str | os.PathLike[str] = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
) -> KubeConfig | None:
    """The pod's service account as a kubeconfig, or None outside a cluster (no
    ``KUBERNETES_SERVICE_HOST`` or no token file).

    The server is ``https://HOST:PORT`` (an IPv6 host in brackets, the port 443 when
    ``KUBERNETES_SERVICE_PORT`` is unset); the CA is ``ca.crt`` when the folder has one, else
    the system's trusted certificates; the token file is read again for every request, so a
    rotated (bound) token is picked up.
    """
    env = os.environ if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST")
    account = Path(service_account_dir)
    token_file = account / "token"
    if not host or not token_file.is_file():
        return None
    host = f"[{host}]" if ":" in host else host
    port = env.get("KUBERNETES_SERVICE_PORT") or "443"
    ca, namespace = account / "ca.crt", account / "namespace"
    return KubeConfig.from_one(
        cluster=Cluster(
            server=f"https://{host}:{port}",
            certificate_auth=str(ca) if ca.is_file() else None,
        ),
        user=User(token=token_file.read_text().strip(), token_file=str(token_file)),
        namespace=namespace.read_text().strip() if namespace.is_file() else "default",
    )


# -- errors ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _boundary(verb: str, resource: str) -> Iterator[None]:
    """Raise lightkube's and httpx2's errors from inside as ``koordkube.errors``, from the
    original: the one place they are translated (httpx's ``map_httpcore_exceptions``)."""
    try:
        yield
    except httpx2.HTTPError as exc:
        raise _translate(exc, verb, resource) from exc


def _translate(exc: httpx2.HTTPError, verb: str, resource: str) -> errors.KubeError:
    """The ``KubeError`` for ``exc``: by the Status the server sent (its code, else the HTTP
    status), or ``TransportError`` when no answer came."""
    if isinstance(exc, httpx2.TransportError):
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return errors.TransportError(text, verb=verb, resource=resource)
    if not isinstance(exc, httpx2.HTTPStatusError):  # a broken encoding, too many redirects
        return errors.KubeError(f"{type(exc).__name__}: {exc}", verb=verb, resource=resource)
    # A watch's ERROR event comes as an ApiError with a Status and no response of its own.
    response: httpx2.Response | None = exc.response
    status = exc.status if isinstance(exc, ApiError) else None
    code = (status.code if status is not None else None) or (
        response.status_code if response is not None else None
    )
    reason = (status.reason if status is not None else None) or ""
    message = (
        (status.message if status is not None else None)
        or reason
        or (response.reason_phrase if response is not None else "")
        or f"HTTP {code}"
    )
    return errors.for_status(code, reason)(
        message,
        code=code,
        reason=reason,
        verb=verb,
        resource=resource,
        retry_after=_retry_after(status, response),
    )


def _retry_after(status: meta_v1.Status | None, response: httpx2.Response | None) -> float | None:
    """The server's hint in seconds: the Status's ``retryAfterSeconds``, else a
    ``Retry-After`` header in seconds (one without a Status body: a proxy's, say)."""
    details = status.details if status is not None else None
    seconds = details.retryAfterSeconds if details is not None else None
    if not seconds and response is not None:
        header = response.headers.get("Retry-After", "").strip()
        seconds = int(header) if header.isdigit() else None
    return float(seconds) if seconds else None


def _raise_for_status(response: httpx2.Response) -> None:
    """lightkube's ``ApiError`` for an error answer with a Status body, httpx2's
    ``HTTPStatusError`` for one without (``_boundary`` translates either)."""
    if response.status_code < 400:
        return
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            raise ApiError(request=response.request, response=response)
    response.raise_for_status()


def _json(data: bytes | str, code: int, verb: str, resource: str) -> Any:
    """Decode an answer (or a watch line); a ``KubeError`` with the answer's code when it is
    not JSON (a proxy's page in place of the server's reply)."""
    try:
        return json.loads(data)
    except ValueError as exc:
        raise errors.KubeError(
            f"the answer to {verb} {resource} is not JSON: {exc}",
            code=code,
            verb=verb,
            resource=resource,
        ) from exc


# -- dict-level API --------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectList:
    """A LIST result: the items (with apiVersion/kind filled) and the list's resourceVersion."""

    items: list[Object]
    resource_version: str


class KubeApi:
    """JSON dicts in and out through a lightkube AsyncClient's connection.

    ``res`` arguments are lightkube resource classes (``Node``, ``Pod``, ``NodeMetric``...) and
    only name the endpoint. Namespaced kinds need an explicit namespace for single objects
    (``create`` and ``replace`` read it from the object); ``list``/``watch`` without one span
    all namespaces::

        api = KubeApi(build_client())
        node = await api.get(Node, "node-1")
        await api.patch(Node, "node-1", {"status": {...}}, subresource="status")
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        field_manager: str = FIELD_MANAGER,
        observe: RequestObserver | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.client = client
        self.field_manager = field_manager
        self.observe = observe
        self.clock = clock
        # lightkube 1.0 keeps its configured httpx2 client (base URL, auth, TLS) here; this is
        # the one private attribute koordkube touches, and the unit tests go through it.
        self._http: httpx2.AsyncClient = client._client._client

    async def get(
        self,
        res: type[lkres.Resource],
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Object:
        path = _path(res, namespace=namespace, name=name, subresource=subresource)
        return await self._call("GET", path, verb="get", resource=_resource(res, subresource))

    async def list(
        self,
        res: type[lkres.Resource],
        *,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> ObjectList:
        """LIST with optional label/field selectors in Kubernetes syntax (``a=b,c!=d``)."""
        params = _selectors(labels, fields)
        path = _path(res, namespace=namespace, listing=True)
        body = await self._call(
            "GET", path, params=params, verb="list", resource=_resource(res, listing=True)
        )
        items = [with_type_meta(res, item) for item in body.get("items") or []]
        return ObjectList(items, str((body.get("metadata") or {}).get("resourceVersion", "")))

    async def create(
        self, res: type[lkres.Resource], obj: Mapping[str, Any], *, namespace: str | None = None
    ) -> Object:
        body = with_type_meta(res, copy.deepcopy(dict(obj)))
        namespace = namespace or (body.get("metadata") or {}).get("namespace")
        if is_namespaced(res) and not namespace:
            raise ValueError(f"{res.__name__} is namespaced: a namespace is required")
        path = _path(res, namespace=namespace, listing=True)
        return await self._call(
            "POST",
            path,
            body=body,
            write=True,
            verb="create",
            resource=_resource(res, listing=True),
        )

    async def replace(
        self, res: type[lkres.Resource], obj: Mapping[str, Any], *, subresource: str | None = None
    ) -> Object:
        """PUT ``obj``; its ``metadata.resourceVersion`` makes the write conditional."""
        body = with_type_meta(res, copy.deepcopy(dict(obj)))
        meta = body.get("metadata") or {}
        path = _path(
            res, namespace=meta.get("namespace"), name=meta.get("name"), subresource=subresource
        )
        resource = _resource(res, subresource)
        return await self._call(
            "PUT", path, body=body, write=True, verb="update", resource=resource
        )

    async def patch(
        self,
        res: type[lkres.Resource],
        name: str,
        patch: JSONPatch,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> Object:
        path = _path(res, namespace=namespace, name=name, subresource=subresource)
        return await self._call(
            "PATCH",
            path,
            body=patch,
            write=True,
            content_type=patch_type.value,
            verb="patch",
            resource=_resource(res, subresource),
        )

    async def bind_pod(
        self, namespace: str, name: str, node: str, *, uid: str | None = None
    ) -> Object:
        """POST a Binding to ``pods/NAME/binding`` (what a scheduler does to place a pod);
        ``uid`` makes it conditional on the pod still being the one decided for."""
        from lightkube.resources.core_v1 import Pod  # noqa: PLC0415 - one kind, one use

        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        return await self.create_subresource(Pod, name, "binding", body, namespace=namespace)

    async def create_subresource(
        self,
        res: type[lkres.Resource],
        name: str,
        subresource: str,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        timeout: float | None = None,
    ) -> Object:
        """POST ``body`` to a subresource of one object (``pods/NAME/binding``,
        ``pods/NAME/eviction``); ``timeout`` seconds in place of the client's own (an
        eviction can take the server longer)."""
        path = _path(res, namespace=namespace, name=name, subresource=subresource)
        resource = _resource(res, subresource)
        return await self._call(
            "POST", path, body=body, write=True, verb="create", resource=resource, timeout=timeout
        )

    async def delete(
        self, res: type[lkres.Resource], name: str, *, namespace: str | None = None
    ) -> None:
        path = _path(res, namespace=namespace, name=name)
        await self._call("DELETE", path, verb="delete", resource=_resource(res))

    async def watch(
        self,
        res: type[lkres.Resource],
        *,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> AsyncGenerator[tuple[str, Object], None]:
        """Yield (type, object) for one WATCH request until the server ends it.

        An ERROR event is raised as the ``KubeError`` for its Status (``Gone`` when
        ``resource_version`` is older than the server keeps), a dropped stream as
        ``TransportError``. lightkube's own watch is not used: in 1.0.1 it cannot ask for
        bookmarks and decodes into models.
        """
        params = _selectors(labels, fields)
        params["watch"] = "true"
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version:
            params["resourceVersion"] = resource_version
        read: float | None = None
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(timeout_seconds)
            read = timeout_seconds + WATCH_READ_MARGIN
        path = _path(res, namespace=namespace, listing=True)
        resource = _resource(res, listing=True)
        request = self._http.build_request(
            "GET", path, params=params, timeout=httpx2.Timeout(10.0, read=read)
        )
        with _boundary("watch", resource):
            response = await self._timed(
                "watch", resource, lambda: self._http.send(request, stream=True)
            )
        try:
            with _boundary("watch", resource):
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for_status(response)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    event = _json(line, response.status_code, "watch", resource)
                    kind, obj = event.get("type", ""), event.get("object") or {}
                    if kind == "ERROR":
                        status = cast(meta_v1.Status, meta_v1.Status.from_dict(obj))
                        raise ApiError(status=status)
                    yield kind, obj
        finally:
            await response.aclose()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        write: bool = False,
        content_type: str = "application/json",
        verb: str,
        resource: str,
        timeout: float | None = None,
    ) -> Object:
        """One request; ``verb`` and ``resource`` name it to ``observe`` and in its error;
        ``timeout``, when given, replaces the client's."""
        params = dict(params or {})
        if write:
            params.setdefault("fieldManager", self.field_manager)
        content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        limit: dict[str, Any] = {} if timeout is None else {"timeout": httpx2.Timeout(timeout)}
        with _boundary(verb, resource):
            response = await self._timed(
                verb,
                resource,
                lambda: self._http.request(
                    method, path, params=params, content=content, headers=headers, **limit
                ),
            )
            _raise_for_status(response)
        if not response.content:
            return {}
        result = _json(response.content, response.status_code, verb, resource)
        return result if isinstance(result, dict) else {}

    async def _timed(
        self, verb: str, resource: str, send: Callable[[], Awaitable[httpx2.Response]]
    ) -> httpx2.Response:
        """``send()``, told to ``observe``: the status, or ``error`` when no response came (a
        cancelled request is not a failure of the server's and is not counted)."""
        if self.observe is None:
            return await send()
        start = self.clock()
        try:
            response = await send()
        except Exception:
            self.observe(verb, resource, "error", self.clock() - start)
            raise
        self.observe(verb, resource, str(response.status_code), self.clock() - start)
        return response


def _path(
    res: type[lkres.Resource],
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
    listing: bool = False,
) -> str:
    """Build the REST path (relative to the server URL) lightkube would use for ``res``."""
    info = lkres.api_info(res)
    base = info.parent or info.resource
    parts = ["api", base.version] if not base.group else ["apis", base.group, base.version]
    if is_namespaced(res):
        if namespace:
            parts += ["namespaces", namespace]
        elif not listing:
            raise ValueError(f"{base.kind} is namespaced: a namespace is required")
    parts.append(info.plural)
    if not listing:
        if not name:
            raise ValueError(f"{base.kind}: an object name is required")
        parts.append(name)
        action = subresource or info.action
        if action:
            parts.append(action)
    return "/".join(parts)


def _resource(
    res: type[lkres.Resource], subresource: str | None = None, *, listing: bool = False
) -> str:
    """The metrics name of a request's resource: the plural, with the subresource of a single
    object's request (``nodes/status``; ``Node.Status`` names its own), as ``_path`` builds it."""
    info = lkres.api_info(res)
    action = None if listing else subresource or info.action
    return f"{info.plural}/{action}" if action else info.plural


def _selectors(labels: str | None, fields: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if labels:
        params["labelSelector"] = labels
    if fields:
        params["fieldSelector"] = fields
    return params


# -- retries ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """Capped exponential delays with jitter: ``min(cap, initial * factor**n)`` plus up to
    ``jitter`` times that again, spread at random (k8s ``wait.Backoff``: jitter after the cap,
    so clients that hit the cap together do not retry together)."""

    initial: float = 0.05
    factor: float = 2.0
    cap: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        base = min(self.cap, self.initial * self.factor ** max(0, attempt))
        return base + base * self.jitter * rand()


WRITE_BACKOFF = Backoff()
MAX_RETRY_AFTER = 30.0
"""The longest server ``retryAfterSeconds`` hint a write retry waits for."""
RETRIED: tuple[type[errors.KubeError], ...] = (errors.Conflict, *errors.RETRYABLE)
"""What ``update_with_retry`` tries again: a stale read (read again), and ``RETRYABLE``."""
Sleep = Callable[[float], Awaitable[None]]


async def update_with_retry(
    get: Callable[[], Awaitable[T]],
    mutate: Callable[[T], T | None],
    write: Callable[[T], Awaitable[T]],
    *,
    attempts: int = 5,
    backoff: Backoff = WRITE_BACKOFF,
    what: str = "update",
    sleep: Sleep = asyncio.sleep,
) -> T:
    """Get, modify and write an object until the write lands; return what the server stored.

    ``mutate`` gets a freshly read object and returns the object to write (it may change it in
    place) or None when nothing needs writing, in which case the read object is returned. The
    write must carry the read ``resourceVersion`` so a concurrent change fails with 409
    ``Conflict``; then the object is read again and ``mutate`` runs on the new state.
    ``Throttled``, ``ServerError`` and ``TransportError`` are retried as well (after the
    server's ``retry_after`` when it sent one); any other error propagates at once. After
    ``attempts`` tries ``RetryError`` is raised from the last error.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    last: errors.KubeError | None = None
    for attempt in range(attempts):
        if attempt:
            hint = last.retry_after if last is not None else None
            await sleep(max(backoff.delay(attempt - 1), min(hint or 0.0, MAX_RETRY_AFTER)))
        try:
            current = await get()
            desired = mutate(current)
            if desired is None:
                return current
            return await write(desired)
        except RETRIED as exc:
            log.debug("%s: attempt %d failed (%s), retrying", what, attempt + 1, exc)
            last = exc
    raise RetryError(f"{what}: gave up after {attempts} attempts: {last}") from last


Outcome = Literal["created", "updated", "unchanged"]


def merge_into(desired: Mapping[str, Any]) -> Callable[[Object], Object | None]:
    """Return a mutate function making an existing object match ``desired``.

    Top-level fields other than metadata and status (``spec``, ``data``...) are replaced; labels
    and annotations of ``desired`` are merged in, others are kept. Returns None when the object
    already matches, so no write happens.
    """

    def mutate(current: Object) -> Object | None:
        updated = copy.deepcopy(current)
        for key, value in desired.items():
            if key not in ("apiVersion", "kind", "metadata", "status"):
                updated[key] = copy.deepcopy(value)
        meta = updated.setdefault("metadata", {})
        for field in ("labels", "annotations"):
            wanted = (desired.get("metadata") or {}).get(field) or {}
            if wanted:
                meta[field] = {**(meta.get(field) or {}), **wanted}
        return None if updated == current else updated

    return mutate


async def create_or_update(
    api: KubeApi,
    res: type[lkres.Resource],
    desired: Mapping[str, Any],
    *,
    mutate: Callable[[Object], Object | None] | None = None,
    attempts: int = 5,
    backoff: Backoff = WRITE_BACKOFF,
    sleep: Sleep = asyncio.sleep,
) -> tuple[Object, Outcome]:
    """Create ``desired``, or bring the existing object in line with it (``merge_into`` unless
    ``mutate`` is given). Returns the stored object and what happened."""
    meta = desired.get("metadata") or {}
    name, namespace = str(meta.get("name", "")), meta.get("namespace")
    what = f"{res.__name__} {namespace + '/' if namespace else ''}{name}"
    try:
        return await api.create(res, desired), "created"
    except errors.AlreadyExists:
        pass  # bring the existing one in line
    change = mutate or merge_into(desired)
    changed = False

    def tracked(current: Object) -> Object | None:
        nonlocal changed
        result = change(current)
        changed = result is not None
        return result

    stored = await update_with_retry(
        lambda: api.get(res, name, namespace=namespace),
        tracked,
        lambda obj: api.replace(res, obj),
        attempts=attempts,
        backoff=backoff,
        what=f"update {what}",
        sleep=sleep,
    )
    return stored, "updated" if changed else "unchanged"
