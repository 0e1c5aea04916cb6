"""``FakeKubeAPI``: an in-process Kubernetes API server for tests, served as an httpx2 transport.

lightkube's ``AsyncClient(transport=...)`` sends its requests straight to ``FakeKubeAPI``, so
tests need no sockets and no cluster::

    api = FakeKubeAPI()
    api.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {...}})
    kube = api.kube_api()                      # a koordkube.client.KubeApi on this fake
    node = await kube.get(Node, "n1")
    api.fail("update", r"/nodes/n1$", 409)     # the next PUT to that node gets a Conflict
    assert api.calls("patch", r"/nodes/n1/status$")

What it does as the real server does (tests/kubescenario.py runs one scenario of the product's
kinds and verbs on both; the cluster tier compares, tests/kubescenario.json keeps what the real
server answered): one global, increasing resourceVersion; 409 AlreadyExists on create and 409
Conflict on a stale resourceVersion (PUT, or a patch carrying one); status subresources (the
main resource ignores status changes, ``/status`` changes only status, and for Nodes and Pods
labels and annotations too; a custom resource's status is dropped on create when its CRD has a
status subresource, kept when not, and its generation counts everything but metadata and such
a status); merge and JSON patches (a JSON patch that fails is 422 without detail), strategic
merge patches refused on custom resources (415); resource quantities stored in their
canonical form ("3000m" → "3", "1000" → "1k") in Node capacity and allocatable (allocatable
defaulted from capacity, negative or fractional extended resources 422) and Pod resources; a
Namespace's ``kubernetes.io/metadata.name`` label; a Lease's MicroTimes parsed strictly (six
digits) and stored in UTC; label selectors, and field selectors on the fields each kind indexes
(``FIELDS``; others 400); watches from a resourceVersion with history replay, ADDED/MODIFIED/
DELETED as seen through the selectors (an object leaving them is DELETED as it last matched),
bookmarks when asked, ``timeoutSeconds``, and 410 Expired below a compaction point the test sets
(a real server's watch cache: it serves any version since the API server started, whatever
etcd compacted); binding and eviction with their UID preconditions, an eviction that fails one
answered only after ``eviction_retry_seconds`` (past a client's read timeout, ReadTimeout);
Status error bodies with the real reasons and messages.

Simplified on purpose: strategic merge patches on built-in kinds are merge patches (lists
replace; the product sends only merge patches), no server-side apply (415), no finalizers or
graceful deletion (a delete is immediate, a deleted Namespace leaves its objects), no admission
(namespaces need not exist, no ServiceAccount is needed), custom resources are not checked
against their CRD's schema (no pruning, defaulting or validation:
tests/unit/charts/test_crd_schemas.py holds what the product writes to the schemas), other
built-in validation only as above, ``limit`` is ignored, and a created Pod's status becomes
``{"phase": "Pending"}`` (no qosClass).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx2
from lightkube import AsyncClient, KubeConfig
from lightkube.config.models import Cluster, User

from koordapi.quantity import parse_quantity
from koordkube.client import FIELD_MANAGER, KubeApi
from koordkube.resources import CONFIG_GROUP, SCHEDULING_GROUP, SLO_GROUP, Object

BASE_URL = "http://fake-kube-api.invalid"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
EVICTION_RETRY_SECONDS = 10.5
"""How long a real API server takes to refuse an eviction whose delete conflicts (a UID
precondition that fails): it retries for about ten seconds first (EvictionsRetry: 20 tries,
0.5 s apart with jitter); measured past a 10 s client timeout on the cluster tier."""
MICRO_TIME = "2006-01-02T15:04:05.000000Z07:00"
"""Go's layout of a MicroTime (metav1.RFC3339Micro), which the server parses strictly."""
_DEFAULT_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
FIELDS = {
    "Pod": frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    "Node": frozenset({"metadata.name", "spec.unschedulable"}),
    "Namespace": frozenset({"metadata.name", "status.phase"}),
    "Secret": frozenset({"metadata.name", "metadata.namespace", "type"}),
    "Event": frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
}
"""The field selectors each built-in kind takes (its field label conversion); the others, and
custom resources, take metadata.name and metadata.namespace."""
_FIELD_ALIASES = {("Event", "source"): "source.component"}


@dataclass(frozen=True)
class Kind:
    """One kind the fake serves."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    status: bool = False  # has a status subresource
    custom: bool = False  # a CRD: status is dropped on create, generation tracks spec

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural`` or ``plural.group``, as the server names it in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


KINDS = (
    Kind("", "v1", "Node", "nodes", False, status=True),
    Kind("", "v1", "Pod", "pods", True, status=True),
    Kind("", "v1", "ConfigMap", "configmaps", True),
    Kind("", "v1", "Secret", "secrets", True),
    Kind("", "v1", "Event", "events", True),
    Kind("", "v1", "Namespace", "namespaces", False, status=True),
    Kind("coordination.k8s.io", "v1", "Lease", "leases", True),
    Kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
    Kind(SLO_GROUP, "v1alpha1", "NodeMetric", "nodemetrics", False, status=True, custom=True),
    Kind(SLO_GROUP, "v1alpha1", "NodeSLO", "nodeslos", False, status=True, custom=True),
    Kind(
        CONFIG_GROUP,
        "v1alpha1",
        "ClusterColocationProfile",
        "clustercolocationprofiles",
        False,
        status=True,
        custom=True,
    ),
    Kind(
        SCHEDULING_GROUP,
        "v1alpha1",
        "PodMigrationJob",
        "podmigrationjobs",
        False,
        status=True,
        custom=True,
    ),
    Kind(
        SCHEDULING_GROUP,
        "v1alpha1",
        "Reservation",
        "reservations",
        False,
        status=True,
        custom=True,
    ),
    # Koordinator's Device CRD has no status subresource (its spec is the whole report)
    Kind(SCHEDULING_GROUP, "v1alpha1", "Device", "devices", False, custom=True),
    # scheduler-plugins' kinds as Koordinator's CRDs define them: namespaced, no status
    # subresource (its scheduler patches status through the object)
    Kind("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota", "elasticquotas", True, custom=True),
    Kind("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup", "podgroups", True, custom=True),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    Kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
)

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the fake saw it; ``verb`` is the audit verb (get, list, watch, create,
    update, patch, delete)."""

    method: str
    verb: str
    path: str
    params: dict[str, str]
    body: Any
    content_type: str


class StatusError(Exception):
    """Raised inside the fake to answer with a Status; tests can raise it from hooks too."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: Object | None = None,
        delay: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.delay = delay  # seconds the server takes to give this answer

    def body(self) -> Object:
        status: Object = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


@dataclass
class _Failure:
    verb: str
    path: re.Pattern[str]
    times: int
    error: StatusError | None = None
    exception: type[httpx2.TransportError] | None = None


@dataclass(frozen=True)
class _Event:
    version: int
    kind: Kind
    type: str
    obj: Object
    old: Object | None


@dataclass(eq=False)  # identity hashing: watchers live in a set
class _Watcher:
    kind: Kind
    namespace: str | None
    labels: list[tuple[str, str, list[str]]]
    fields: list[tuple[str, str, str]]
    bookmarks: bool
    deadline: float | None
    queue: asyncio.Queue[bytes | BaseException | None] = field(default_factory=asyncio.Queue)


class _WatchStream(httpx2.AsyncByteStream):
    def __init__(self, api: FakeKubeAPI, watcher: _Watcher) -> None:
        self.api, self.watcher = api, watcher

    async def __aiter__(self) -> AsyncIterator[bytes]:
        loop = asyncio.get_running_loop()
        while True:
            timeout = None
            if self.watcher.deadline is not None:
                timeout = self.watcher.deadline - loop.time()
                if timeout <= 0:
                    return  # the server ends the watch at timeoutSeconds
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
            # that arrives together with an item, and the watch would never stop.
            try:
                async with asyncio.timeout(timeout):
                    item = await self.watcher.queue.get()
            except TimeoutError:
                return
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        self.api._watchers.discard(self.watcher)


class FakeKubeAPI(httpx2.AsyncBaseTransport):
    """The Kubernetes API surface the components use, in memory (see the module docstring)."""

    def __init__(self, kinds: Iterable[Kind] = KINDS) -> None:
        self.kinds = tuple(kinds)
        self.resource_version = 0
        self.compacted = 0
        """Watches from a resourceVersion below this get 410 Expired."""
        self.requests: list[RecordedRequest] = []
        self._objects: dict[tuple[Kind, str, str], Object] = {}
        self._history: list[_Event] = []
        self._watchers: set[_Watcher] = set()
        self._failures: list[_Failure] = []
        self.blocked_evictions: set[str] = set()  # "namespace/name": a PDB says no (429)
        self.eviction_retry_seconds = EVICTION_RETRY_SECONDS
        """How long an eviction whose UID precondition fails takes to answer 409 (tests that
        do not time it shorten it)."""

    # -- clients -------------------------------------------------------------------------------

    def client(
        self, *, field_manager: str = FIELD_MANAGER, timeout: float | None = None
    ) -> AsyncClient:
        """A lightkube AsyncClient whose requests this fake answers (``timeout``: lightkube's
        10 s unless given; the fake holds a client to its read timeout where it answers
        slowly, as ``eviction_retry_seconds``)."""
        user = User(token="fake")
        config = KubeConfig.from_one(cluster=Cluster(server=BASE_URL), user=user)
        limit = httpx2.Timeout(timeout) if timeout is not None else None
        return AsyncClient(
            config, transport=self, trust_env=False, field_manager=field_manager, timeout=limit
        )

    def kube_api(self) -> KubeApi:
        return KubeApi(self.client())

    # -- test helpers --------------------------------------------------------------------------

    def seed(self, *objs: Object) -> list[Object]:
        """Store objects as given (status included), creating or replacing, with watch events."""
        stored = []
        for obj in objs:
            kind = self._kind_of(obj)
            body = copy.deepcopy(obj)
            meta = body.setdefault("metadata", {})
            if kind.namespaced:
                meta.setdefault("namespace", "default")
            else:
                meta.pop("namespace", None)
            key = (kind, meta.get("namespace", ""), meta["name"])
            old = self._objects.get(key)
            if old is None:
                self._fill_new_meta(kind, body)
            else:
                meta["uid"] = old["metadata"]["uid"]
                meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            stored.append(self._store(kind, key, body, old))
        return stored

    def get(self, kind: str, name: str, namespace: str | None = None) -> Object | None:
        """The stored object (a copy), by kind name (``"Node"``), or None."""
        k = self._kind_named(kind)
        obj = self._objects.get((k, (namespace or "default") if k.namespaced else "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def objects(self, kind: str, namespace: str | None = None) -> list[Object]:
        k = self._kind_named(kind)
        return [
            copy.deepcopy(obj)
            for (kk, ns, _), obj in sorted(self._objects.items(), key=lambda i: i[0][1:])
            if kk == k and (namespace is None or ns == namespace)
        ]

    def remove(self, kind: str, name: str, namespace: str | None = None) -> None:
        """Delete an object directly (with a DELETED watch event)."""
        k = self._kind_named(kind)
        self._delete(k, (k, (namespace or "default") if k.namespaced else "", name))

    def compact(self, resource_version: int | None = None) -> None:
        """Forget history up to ``resource_version`` (default: now), like etcd compaction."""
        self.compacted = self.resource_version if resource_version is None else resource_version
        self._history = [e for e in self._history if e.version > self.compacted]

    def bookmark(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to watches that allow bookmarks."""
        for watcher in list(self._watchers):
            if watcher.bookmarks:
                obj = {
                    "apiVersion": watcher.kind.api_version,
                    "kind": watcher.kind.kind,
                    "metadata": {"resourceVersion": str(self.resource_version)},
                }
                watcher.queue.put_nowait(_line("BOOKMARK", obj))

    def close_watches(self, *, error: bool = False) -> None:
        """End every open watch: cleanly, or as a dropped connection (``httpx2.ReadError``)."""
        for watcher in list(self._watchers):
            watcher.queue.put_nowait(
                httpx2.ReadError("connection reset by fake") if error else None
            )
        self._watchers.clear()

    @property
    def watch_count(self) -> int:
        """Open watch streams."""
        return len(self._watchers)

    def fail(
        self,
        verb: str,
        path: str,
        code: int,
        *,
        times: int = 1,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer the next ``times`` requests of ``verb`` whose path matches the regex ``path``
        with a Status error of ``code`` (before the request takes effect)."""
        details = {"retryAfterSeconds": retry_after} if retry_after else None
        error = StatusError(code, message or f"injected {REASONS.get(code, code)}", details=details)
        self._failures.append(_Failure(verb, re.compile(path), times, error=error))

    def disconnect(self, verb: str, path: str, *, times: int = 1) -> None:
        """Fail the next ``times`` matching requests with ``httpx2.ConnectError``."""
        self._failures.append(
            _Failure(verb, re.compile(path), times, exception=httpx2.ConnectError)
        )

    def calls(self, verb: str | None = None, path: str | None = None) -> list[RecordedRequest]:
        """Recorded requests, filtered by verb and a regex searched in the path."""
        return [
            r
            for r in self.requests
            if (verb is None or r.verb == verb) and (path is None or re.search(path, r.path))
        ]

    # -- transport -----------------------------------------------------------------------------

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raw = await request.aread()
        params = dict(request.url.params)
        path = request.url.path
        content_type = request.headers.get("content-type", "")
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        try:
            route = self._route(path)
            verb = _verb(request.method, route[2], params, route[3])
        except StatusError as exc:
            self.requests.append(
                RecordedRequest(request.method, "", path, params, body, content_type)
            )
            return _response(exc.code, exc.body())
        self.requests.append(
            RecordedRequest(request.method, verb, path, params, body, content_type)
        )
        try:
            self._inject(verb, path)
            if verb == "watch":
                return self._watch(route[0], route[1], params, request)
            code, result = self._dispatch(verb, route, params, body, content_type)
        except StatusError as exc:
            if exc.delay:
                await _answer_after(exc.delay, request)
            return _response(exc.code, exc.body())
        return _response(code, result)

    async def aclose(self) -> None:
        # Each lightkube client closes its transport; several clients share this fake.
        return None

    # -- routing -------------------------------------------------------------------------------

    def _route(self, path: str) -> tuple[Kind, str | None, str | None, str | None]:
        """Return (kind, namespace, name, subresource) for a REST path."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _not_found_path()
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and self._find(group, version, rest[2], True):
            namespace, rest = rest[1], rest[2:]
        kind = self._find(group, version, rest[0], namespace is not None)
        if kind is None or len(rest) > 3:
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub in ("binding", "eviction") and kind.kind == "Pod":
            return kind, namespace, name, sub
        if sub is not None and (sub != "status" or not kind.status):
            raise _not_found_path()
        return kind, namespace, name, sub

    def _find(self, group: str, version: str, plural: str, namespaced: bool) -> Kind | None:
        for kind in self.kinds:
            if (kind.group, kind.version, kind.plural) == (group, version, plural):
                return kind if kind.namespaced or not namespaced else None
        return None

    def _inject(self, verb: str, path: str) -> None:
        for failure in self._failures:
            if failure.times > 0 and failure.verb == verb and failure.path.search(path):
                failure.times -= 1
                if failure.exception is not None:
                    raise failure.exception("injected by FakeKubeAPI")
                assert failure.error is not None
                raise failure.error

    def _dispatch(
        self,
        verb: str,
        route: tuple[Kind, str | None, str | None, str | None],
        params: dict[str, str],
        body: Any,
        content_type: str,
    ) -> tuple[int, Object]:
        kind, namespace, name, sub = route
        if verb == "list":
            return 200, self._list(kind, namespace, params)
        if verb == "create" and sub == "binding":
            assert name is not None
            return 201, self._bind((kind, namespace or "", name), _object_body(body))
        if verb == "create" and sub == "eviction":
            assert name is not None
            return 201, self._evict((kind, namespace or "", name), _object_body(body))
        if verb == "create":
            return 201, self._create(kind, namespace, _object_body(body))
        assert name is not None
        key = (kind, namespace or "", name)
        if verb == "get":
            return 200, copy.deepcopy(self._existing(key))
        if verb == "update":
            return 200, self._update(key, _object_body(body), sub)
        if verb == "patch":
            return 200, self._patch(key, body, content_type, sub)
        if verb == "delete":
            return 200, self._delete(kind, key)
        raise StatusError(405, "the server does not allow this method on the requested resource")

    # -- verbs ---------------------------------------------------------------------------------

    def _list(self, kind: Kind, namespace: str | None, params: dict[str, str]) -> Object:
        labels = _parse_labels(params.get("labelSelector", ""))
        fields = _field_terms(kind, _parse_fields(params.get("fieldSelector", "")))
        items = []
        for (k, ns, _), obj in sorted(self._objects.items(), key=lambda i: i[0][1:]):
            if (
                k == kind
                and (namespace is None or ns == namespace)
                and _matches(obj, labels, fields)
            ):
                item = copy.deepcopy(obj)
                if not kind.custom:  # built-in kinds' list items carry no type meta
                    item.pop("apiVersion", None)
                    item.pop("kind", None)
                items.append(item)
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": items,
        }

    def _create(self, kind: Kind, namespace: str | None, body: Object) -> Object:
        self._check_type(kind, body)
        meta = body.setdefault("metadata", {})
        if kind.namespaced and namespace is None:
            raise StatusError(
                405, "the server does not allow this method on the requested resource"
            )
        if kind.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise StatusError(
                    400,
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise StatusError(
                    422,
                    f'{kind.kind} "" is invalid: metadata.name: Required value: name or '
                    "generateName is required",
                    details=self._details(kind, ""),
                )
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = (kind, meta.get("namespace", "") if kind.namespaced else "", meta["name"])
        if key in self._objects:
            raise StatusError(
                409,
                f'{kind.resource} "{meta["name"]}" already exists',
                reason="AlreadyExists",
                details=self._details(kind, meta["name"]),
            )
        if kind.custom and kind.status:  # a CRD without a status subresource keeps it
            body.pop("status", None)
        elif kind.kind == "Pod":
            body["status"] = {"phase": "Pending"}
        elif kind.kind == "Namespace":
            body["status"] = {"phase": "Active"}
        for transient in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp"):
            meta.pop(transient, None)
        self._fill_new_meta(kind, body)
        _prepare(kind, body)
        return self._store(kind, key, body, None)

    def _evict(self, key: tuple[Kind, str, str], body: Object) -> Object:
        """POST pods/NAME/eviction: 429 while a disruption budget blocks the pod (the test's
        ``blocked_evictions``), 409 on a UID precondition that does not match, else deleted."""
        kind, namespace, name = key
        old = self._existing(key)
        if f"{namespace}/{name}" in self.blocked_evictions:
            raise StatusError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                reason="TooManyRequests",
            )
        wanted = ((body.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if wanted and wanted != old["metadata"].get("uid"):
            raise StatusError(
                409,
                f'Operation cannot be fulfilled on Pod "{name}": the UID in the precondition '
                f"({wanted}) does not match the UID in record ({old['metadata'].get('uid')}). "
                "The object might have been deleted and then recreated",
                reason="Conflict",
                delay=self.eviction_retry_seconds,
            )
        self._delete(kind, key)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _bind(self, key: tuple[Kind, str, str], body: Object) -> Object:
        """POST pods/NAME/binding: set spec.nodeName once, as the API server's binding REST."""
        kind, _, name = key
        old = self._existing(key)
        target = (body.get("target") or {}).get("name")
        if body.get("kind") != "Binding" or not target:
            raise StatusError(400, "a Binding with target.name is required")
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != old["metadata"].get("uid"):
            namespace = key[1]
            raise StatusError(
                409,
                f'Operation cannot be fulfilled on pods "{name}": StorageError: invalid object, '
                f"Code: 4, Key: /registry/pods/{namespace}/{name}, ResourceVersion: 0, "
                f"AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in "
                f"object meta: {old['metadata'].get('uid')}",
                reason="Conflict",
            )
        current = (old.get("spec") or {}).get("nodeName")
        if current:
            raise StatusError(
                409,
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already '
                f'assigned to node "{current}"',
                reason="Conflict",
            )
        bound = copy.deepcopy(old)
        bound.setdefault("spec", {})["nodeName"] = target
        conditions = bound.setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
        self._store(kind, key, bound, old)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _update(self, key: tuple[Kind, str, str], body: Object, sub: str | None) -> Object:
        kind, _, name = key
        old = self._existing(key)
        self._check_type(kind, body)
        meta = body.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise StatusError(
                400,
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})",
            )
        self._check_version(kind, name, meta.get("resourceVersion"), old)
        return self._write(key, old, body, sub)

    def _patch(
        self, key: tuple[Kind, str, str], patch: Any, content_type: str, sub: str | None
    ) -> Object:
        kind, _, name = key
        old = self._existing(key)
        media = content_type.split(";", maxsplit=1)[0].strip()
        # the real server's lists; server-side apply is in them but not done here (415 too)
        accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
        if not kind.custom:  # strategic merge patches need Go types: built-in kinds only
            accepted.insert(2, STRATEGIC_MERGE_PATCH)
        if media not in accepted or media == APPLY_PATCH:
            raise StatusError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(accepted)}",
                reason="UnsupportedMediaType",
            )
        if media in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
            if not isinstance(patch, dict):
                raise StatusError(400, "a merge patch must be a JSON object")
            patched = _merge_patch(old, patch)
        else:
            if not isinstance(patch, list):
                raise StatusError(400, "a JSON patch must be a JSON array")
            try:
                patched = _json_patch(old, patch)
            except StatusError as exc:  # the real server says no more than this
                raise StatusError(
                    422, "the server rejected our request due to an error in our request"
                ) from exc
        if not isinstance(patched, dict):
            raise StatusError(422, "the patched object is not a JSON object")
        self._check_version(kind, name, (patched.get("metadata") or {}).get("resourceVersion"), old)
        return self._write(key, old, patched, sub)

    def _delete(self, kind: Kind, key: tuple[Kind, str, str]) -> Object:
        old = self._existing(key)
        del self._objects[key]
        self.resource_version += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.resource_version)
        self._emit(_Event(self.resource_version, kind, "DELETED", gone, old))
        return copy.deepcopy(gone)

    def _write(
        self, key: tuple[Kind, str, str], old: Object, new: Object, sub: str | None
    ) -> Object:
        kind = key[0]
        if sub == "status":
            # /status changes the status only; the Node and Pod status strategies also keep
            # label and annotation changes (they reset only spec), CRDs do not.
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = copy.deepcopy(new["status"])
            else:
                result.pop("status", None)
            if not kind.custom:
                new_meta = new.get("metadata") or {}
                for field in ("labels", "annotations"):
                    if field in new_meta:
                        result["metadata"][field] = copy.deepcopy(new_meta[field])
        else:
            result = copy.deepcopy(new)
            if kind.status:  # the main resource ignores status changes
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
        meta, old_meta = result.setdefault("metadata", {}), old["metadata"]
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        result.setdefault("apiVersion", kind.api_version)
        result.setdefault("kind", kind.kind)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        _prepare(kind, result)
        if result == old:
            return copy.deepcopy(old)  # a no-op write stores nothing and keeps the version
        if kind.custom and _spec_of(kind, result) != _spec_of(kind, old):
            meta["generation"] = int(old_meta.get("generation", 1)) + 1
        return self._store(kind, key, result, old)

    # -- watch ---------------------------------------------------------------------------------

    def _watch(
        self, kind: Kind, namespace: str | None, params: dict[str, str], request: httpx2.Request
    ) -> httpx2.Response:
        labels = _parse_labels(params.get("labelSelector", ""))
        fields = _field_terms(kind, _parse_fields(params.get("fieldSelector", "")))
        since = params.get("resourceVersion", "")
        timeout = params.get("timeoutSeconds")
        loop = asyncio.get_running_loop()
        watcher = _Watcher(
            kind,
            namespace,
            labels,
            fields,
            bookmarks=params.get("allowWatchBookmarks") in ("true", "1"),
            deadline=loop.time() + float(timeout) if timeout else None,
        )
        if since not in ("", "0"):
            try:
                version = int(since)
            except ValueError:
                raise StatusError(400, f'invalid resource version: "{since}"') from None
            if version < self.compacted:
                expired = StatusError(
                    410, f"too old resource version: {version} ({self.compacted})"
                )
                watcher.queue.put_nowait(_line("ERROR", expired.body()))
                watcher.queue.put_nowait(None)
                return _stream(_WatchStream(self, watcher), request)
            for event in self._history:
                if event.version > version:
                    self._offer(watcher, event)
        else:
            for (k, ns, _), obj in sorted(self._objects.items(), key=lambda i: i[0][1:]):
                mine = k == kind and (namespace is None or ns == namespace)
                if mine and _matches(obj, labels, fields):
                    watcher.queue.put_nowait(_line("ADDED", obj))
        self._watchers.add(watcher)
        return _stream(_WatchStream(self, watcher), request)

    def _emit(self, event: _Event) -> None:
        self._history.append(event)
        for watcher in list(self._watchers):
            self._offer(watcher, event)

    @staticmethod
    def _offer(watcher: _Watcher, event: _Event) -> None:
        """Queue ``event`` as this watcher sees it through its namespace and selectors."""
        if event.kind != watcher.kind:
            return
        ns = event.obj["metadata"].get("namespace")
        if watcher.namespace is not None and ns != watcher.namespace:
            return
        now = _matches(event.obj, watcher.labels, watcher.fields)
        before = event.old is not None and _matches(event.old, watcher.labels, watcher.fields)
        obj = event.obj
        if event.type == "MODIFIED":
            kind = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else ""
            if kind == "DELETED" and event.old is not None:
                # out of the selector: the watch cache sends what the watcher last matched,
                # at the event's resourceVersion
                obj = copy.deepcopy(event.old)
                obj["metadata"]["resourceVersion"] = str(event.version)
        else:
            kind = event.type if now else ""
        if kind:
            watcher.queue.put_nowait(_line(kind, obj))

    # -- storage -------------------------------------------------------------------------------

    def _store(
        self, kind: Kind, key: tuple[Kind, str, str], obj: Object, old: Object | None
    ) -> Object:
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        self._objects[key] = obj
        event_type = "ADDED" if old is None else "MODIFIED"
        self._emit(_Event(self.resource_version, kind, event_type, copy.deepcopy(obj), old))
        return copy.deepcopy(obj)

    def _fill_new_meta(self, kind: Kind, obj: Object) -> None:
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        if kind.custom:
            meta.setdefault("generation", 1)

    def _existing(self, key: tuple[Kind, str, str]) -> Object:
        obj = self._objects.get(key)
        if obj is None:
            kind, _, name = key
            raise StatusError(
                404, f'{kind.resource} "{name}" not found', details=self._details(kind, name)
            )
        return obj

    def _check_version(self, kind: Kind, name: str, version: Any, old: Object) -> None:
        if version and str(version) != old["metadata"]["resourceVersion"]:
            raise StatusError(
                409,
                f'Operation cannot be fulfilled on {kind.resource} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                details=self._details(kind, name),
            )

    @staticmethod
    def _check_type(kind: Kind, body: Object) -> None:
        api_version, kind_name = body.get("apiVersion"), body.get("kind")
        if (api_version and api_version != kind.api_version) or (
            kind_name and kind_name != kind.kind
        ):
            raise StatusError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({kind.api_version})"
                if api_version != kind.api_version
                else f"the kind in the data ({kind_name}) does not match {kind.kind}",
            )

    @staticmethod
    def _details(kind: Kind, name: str) -> Object:
        details: Object = {"name": name, "kind": kind.plural}
        if kind.group:
            details["group"] = kind.group
        return details

    def _kind_of(self, obj: Object) -> Kind:
        for kind in self.kinds:
            if (kind.api_version, kind.kind) == (obj.get("apiVersion"), obj.get("kind")):
                return kind
        raise ValueError(f"FakeKubeAPI does not serve {obj.get('apiVersion')} {obj.get('kind')}")

    def _kind_named(self, name: str) -> Kind:
        for kind in self.kinds:
            if kind.kind == name:
                return kind
        raise ValueError(f"FakeKubeAPI does not serve kind {name}")


# -- helpers -----------------------------------------------------------------------------------


def _verb(method: str, name: str | None, params: dict[str, str], sub: str | None = None) -> str:
    if method == "POST" and sub in ("binding", "eviction"):
        return "create"  # pods/NAME/binding and /eviction: a create on the pod's subresource
    if method == "GET":
        if name is not None:
            return "get"
        return "watch" if params.get("watch") in ("true", "1") else "list"
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    if method not in verbs or (method == "POST") != (name is None):
        raise StatusError(405, "the server does not allow this method on the requested resource")
    return verbs[method]


async def _answer_after(seconds: float, request: httpx2.Request) -> None:
    """Take ``seconds`` to answer, as a slow server does: a client whose read timeout is
    shorter gets ``httpx2.ReadTimeout`` when it runs out (a transport enforces timeouts)."""
    read = (request.extensions.get("timeout") or {}).get("read")
    if read is not None and read < seconds:
        await asyncio.sleep(read)
        raise httpx2.ReadTimeout(
            "the fake's answer took longer than the read timeout", request=request
        )
    await asyncio.sleep(seconds)


def _response(code: int, body: Object) -> httpx2.Response:
    headers = {"Content-Type": "application/json"}
    retry_after = (body.get("details") or {}).get("retryAfterSeconds") if code >= 400 else None
    if retry_after:  # the server sends the hint both ways
        headers["Retry-After"] = str(retry_after)
    return httpx2.Response(code, headers=headers, content=json.dumps(body).encode())


def _stream(stream: _WatchStream, request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(
        200,
        headers={"Content-Type": "application/json"},
        stream=stream,
        request=request,
    )


def _line(event_type: str, obj: Object) -> bytes:
    return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"


def _not_found_path() -> StatusError:
    return StatusError(404, "the server could not find the requested resource", details={})


def _object_body(body: Any) -> Object:
    if not isinstance(body, dict):
        raise StatusError(400, "the request body must be a JSON object")
    return copy.deepcopy(body)


def _spec_of(kind: Kind, obj: Object) -> Object:
    """What a custom resource's generation counts: all but metadata, and status when it has a
    subresource of its own."""
    skipped = ("metadata", "status") if kind.status else ("metadata",)
    return {k: v for k, v in obj.items() if k not in skipped}


# -- what the API server's strategies do to an object before storing it ------------------------


def _prepare(kind: Kind, obj: Object) -> None:
    """Fill and check ``obj`` as the kind's strategy does on every write: a Namespace's
    ``kubernetes.io/metadata.name`` label, resource quantities in their canonical form (Node
    capacity and allocatable, Pod container resources and overhead), Node quantities
    validated."""
    try:
        _prepare_kind(kind, obj)
    except StatusError as exc:
        if exc.code != 400:
            raise
        raise StatusError(
            400,
            f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: '
            f"{exc.message}",
        ) from exc


def _prepare_kind(kind: Kind, obj: Object) -> None:
    meta = obj.setdefault("metadata", {})
    if kind.kind == "Namespace":
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name")
    elif kind.kind == "Lease":
        spec = obj.get("spec") or {}
        for field in ("acquireTime", "renewTime"):
            if spec.get(field) is not None:
                spec[field] = micro_time(spec[field])
    elif kind.kind == "Node":
        status = obj.get("status") or {}
        if status.get("capacity") is not None and status.get("allocatable") is None:
            status["allocatable"] = copy.deepcopy(status["capacity"])  # SetDefaults_NodeStatus
        problems = []
        for section in ("capacity", "allocatable"):
            for name, value in _canonical_map(status.get(section)).items():
                problems += _node_quantity_problems(f"status.{section}.{name}", name, value)
        if problems:
            summary = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
            raise StatusError(
                422,
                f'Node "{meta.get("name", "")}" is invalid: {summary}',
                details={"name": meta.get("name", ""), "kind": "Node"},
            )
    elif kind.kind == "Pod":
        spec = obj.get("spec") or {}
        for field in ("containers", "initContainers", "ephemeralContainers"):
            for container in spec.get(field) or []:
                _canonical_resources(container.get("resources"))
        _canonical_resources(spec.get("resources"))
        _canonical_map(spec.get("overhead"))


_MICRO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{6})?(.*)$")


def micro_time(value: Any) -> str:
    """A MicroTime as the server reads and writes it: six fractional digits required, stored
    in UTC (``2031-05-06T07:08:09.000001Z``); anything else is its 400."""
    text = str(value)
    match = _MICRO_TIME.match(text)
    if match is None or match[2] is None or not re.fullmatch(r"Z|[+-]\d{2}:\d{2}", match[3]):
        rest = text if match is None else text[len(match[1]) :]
        wanted = "2006" if match is None else ".000000" if match[2] is None else "Z07:00"
        rest = rest if match is None or match[2] is None else match[3]
        raise StatusError(
            400, f'parsing time "{text}" as "{MICRO_TIME}": cannot parse "{rest}" as "{wanted}"'
        )
    stamp = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _canonical_resources(resources: Any) -> None:
    if isinstance(resources, dict):
        for section in ("requests", "limits"):
            _canonical_map(resources.get(section))


def _canonical_map(quantities: Any) -> dict[str, str]:
    """Rewrite a resource map's quantities in place in their canonical form; the map."""
    if not isinstance(quantities, dict):
        return {}
    for name, value in quantities.items():
        quantities[name] = canonical_quantity(value)
    return quantities


def _node_quantity_problems(path: str, name: str, value: str) -> list[str]:
    """ValidateResourceQuantityValue: not negative, and whole for an extended resource (a
    name with a domain other than kubernetes.io)."""
    amount = parse_quantity(value)
    problems = []
    if amount < 0:
        problems.append(f'{path}: Invalid value: "{value}": must be greater than or equal to 0')
    extended = "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
    if extended and amount != amount.to_integral_value():
        problems.append(f'{path}: Invalid value: "{value}": must be an integer')
    return problems


_QUANTITY = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE]|)$"
)
_DECIMAL_SUFFIXES = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIXES = {0: "", 1: "Ki", 2: "Mi", 3: "Gi", 4: "Ti", 5: "Pi", 6: "Ei"}


def canonical_quantity(value: Any) -> str:
    """A quantity as the API server stores and returns it (resource.Quantity's
    ``CanonicalizeBytes``): "3000m" → "3", "1048576Ki" → "1Gi", "1000" → "1k", "0.5Gi" →
    "512Mi", "1500m" stays. The suffix family (decimal, binary, exponent) is kept, the number
    written with the largest suffix that keeps it whole. A string that is no quantity is the
    server's 400."""
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise StatusError(
            400,
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        )
    amount, suffix = parse_quantity(text), match[2]
    if amount == 0:
        return "0"
    exponent_form = len(suffix) > 1 and suffix[0] in "eE"  # "E" alone is exa
    if suffix.endswith("i") and abs(amount) >= 1024 and amount == amount.to_integral_value():
        whole, power = int(amount), 0
        while whole % 1024 == 0 and power < 6:
            whole, power = whole // 1024, power + 1
        return f"{whole}{_BINARY_SUFFIXES[power]}"
    # decimal: the mantissa without trailing zeros, the exponent brought down to a multiple of 3
    sign, digits, exponent = amount.normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits)))
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    number = f"{'-' if sign else ''}{mantissa}"
    if exponent_form:
        return number if exponent == 0 else f"{number}e{exponent}"
    if exponent in _DECIMAL_SUFFIXES:
        return f"{number}{_DECIMAL_SUFFIXES[exponent]}"
    return f"{number}e{exponent}"


# -- selectors ---------------------------------------------------------------------------------

_LABEL_TERM = re.compile(
    r"^\s*(?P<not>!)?\s*(?P<key>[A-Za-z0-9._/-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*)"
    r"|\s(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t for t in terms if t.strip()]


def _parse_labels(selector: str) -> list[tuple[str, str, list[str]]]:
    """Parse a label selector into (key, op, values) with op in =, !=, in, notin, exists, !."""
    terms: list[tuple[str, str, list[str]]] = []
    for term in _split_terms(selector):
        match = _LABEL_TERM.match(term)
        if match is None or (match["not"] and (match["op"] or match["setop"])):
            raise StatusError(400, f"unable to parse requirement: {term!r}")
        key = match["key"]
        if match["not"]:
            terms.append((key, "!", []))
        elif match["op"]:
            terms.append((key, "!=" if match["op"] == "!=" else "=", [match["value"]]))
        elif match["setop"]:
            values = [v.strip() for v in match["values"].split(",") if v.strip()]
            terms.append((key, match["setop"], values))
        else:
            terms.append((key, "exists", []))
    return terms


def _parse_fields(selector: str) -> list[tuple[str, str, str]]:
    terms: list[tuple[str, str, str]] = []
    for term in _split_terms(selector):
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if match is None:
            raise StatusError(400, f"invalid field selector: {term!r}")
        terms.append((match[1], "!=" if match[2] == "!=" else "=", match[3]))
    return terms


def _field_terms(kind: Kind, terms: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The terms with the paths they select on; a field the kind does not index is the
    server's 400, worded as the kind's field label conversion words it."""
    supported = FIELDS.get(kind.kind, _DEFAULT_FIELDS) if not kind.custom else _DEFAULT_FIELDS
    for path, _, _ in terms:
        if path in supported:
            continue
        if kind.custom or kind.kind in FIELDS:
            raise StatusError(400, f"field label not supported: {path}")
        raise StatusError(
            400,
            f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"',
        )
    return [(_FIELD_ALIASES.get((kind.kind, path), path), op, v) for path, op, v in terms]


def _matches(
    obj: Object, labels: list[tuple[str, str, list[str]]], fields: list[tuple[str, str, str]]
) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, values in labels:
        present, value = key in have, have.get(key)
        ok = {
            "=": present and value in values,
            "!=": not present or value not in values,
            "in": present and value in values,
            "notin": not present or value not in values,
            "exists": present,
            "!": not present,
        }[op]
        if not ok:
            return False
    for path, op, wanted in fields:
        found: Any = obj
        for part in path.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        actual = (
            "" if found is None else str(found).lower() if isinstance(found, bool) else str(found)
        )
        if (actual == wanted) != (op == "="):
            return False
    return True


# -- patches -----------------------------------------------------------------------------------


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _json_patch(target: Object, ops: list[Any]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test); failures are 422."""
    doc: Any = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise StatusError(422, f"invalid JSON patch operation: {op!r}")
        name, path = op["op"], op["path"]
        if name == "test":
            if _pointer_get(doc, path) != op.get("value"):
                raise StatusError(422, f"testing value {path} failed")
        elif name == "remove":
            doc = _pointer_remove(doc, path)
        elif name in ("add", "replace"):
            if name == "replace":
                _pointer_get(doc, path)  # must exist
                doc = _pointer_remove(doc, path)
            doc = _pointer_add(doc, path, copy.deepcopy(op.get("value")))
        elif name in ("move", "copy"):
            value = copy.deepcopy(_pointer_get(doc, op.get("from", "")))
            if name == "move":
                doc = _pointer_remove(doc, op["from"])
            doc = _pointer_add(doc, path, value)
        else:
            raise StatusError(422, f"unknown JSON patch operation {name!r}")
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise StatusError(422, f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str], path: str) -> Any:
    for token in tokens:
        if isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        elif isinstance(doc, dict) and token in doc:
            doc = doc[token]
        else:
            raise StatusError(422, f"path {path!r} does not exist")
    return doc


def _pointer_get(doc: Any, path: str) -> Any:
    return _resolve(doc, _tokens(path), path)


def _pointer_add(doc: Any, path: str, value: Any) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent, last = _resolve(doc, tokens[:-1], path), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list) and (
        last == "-" or (last.isdigit() and int(last) <= len(parent))
    ):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        raise StatusError(422, f"path {path!r} does not exist")
    return doc


def _pointer_remove(doc: Any, path: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        raise StatusError(422, "cannot remove the whole document")
    parent, last = _resolve(doc, tokens[:-1], path), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        del parent[int(last)]
    else:
        raise StatusError(422, f"path {path!r} does not exist")
    return doc
