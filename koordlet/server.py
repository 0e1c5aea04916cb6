"""koordlet's HTTP server on ``--addr``: Prometheus metrics and a small read-only status API.

    GET /metrics                     Prometheus text format (koordlet's registry)
    GET /healthz                     "ok"
    GET /api/v1/node                 the node: CPUs, memory, usage, kernel features
    GET /api/v1/pods                 known pods: QoS class, containers, applied values, usage
    GET /api/v1/nodemetric           the NodeMetric status (Koordinator's shape)
    GET /api/v1/query?metric=NAME&window=5m&agg=p95[&label.KEY=VALUE...]
                                     aggregates of the matching series over the window
    GET /api/v1/explain?pod=UID|NAMESPACE/NAME    a pod's values and the QoS actions behind them
    GET /api/v1/inspect[?pod=UID|NAMESPACE/NAME|NAME]
                                     run-queue latency of each pod, class and the node over the
                                     latest window (with pod: its histograms and containers);
                                     "available": false and the reason while the collector is off

/metrics and /healthz answer anyone who can reach the address (Prometheus, the kubelet's
probes); the JSON API answers clients on this machine's loopback only, unless
``--status-api-remote``. It serves from its own threads and only reads: the views it is given
do the work. Bad query parameters get a 400 with a one-line JSON error. Whoever can reach the
address cannot wear koordlet down: at most ``max_connections`` are served at once, a connection
that sends nothing for ``idle_seconds`` is closed, and past the bound the connection that has
waited longest without a whole request makes room for the new one (one closed unserved is
counted), so a slowloris holds neither threads nor file descriptors for long, nor keeps a
scrape or a probe out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_WINDOW_SECONDS = 7 * 24 * 3600


class Views(Protocol):
    def node(self) -> dict[str, Any]: ...

    def pods(self) -> list[dict[str, Any]]: ...

    def node_metric(self) -> dict[str, Any]: ...

    def explain(self, pod: str) -> dict[str, Any] | None: ...

    def inspect(self, pod: str | None = None) -> dict[str, Any] | None: ...

    def query(
        self, metric: str, window_seconds: float, agg: str, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]: ...


class BadRequest(ValueError):
    pass


def parse_window(text: str) -> float:
    """ "5m", "30s", "1h", "300" → seconds; refuses anything else or above a week."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise BadRequest(f"window {text!r} is not a duration like 30s, 5m or 1h") from None
    if not 0 < seconds <= MAX_WINDOW_SECONDS:
        raise BadRequest(f"window {text!r} must be above 0 and at most 7 days")
    return seconds


MAX_CONNECTIONS = 32
IDLE_SECONDS = 10.0


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` of them.

    When every slot is taken, the connection that has waited longest without sending a whole
    request is closed and its slot passes to the new one, so idle or trickling clients cannot
    keep a scrape or the kubelet's probe out; when every slot is busy with a request, the new
    connection is closed. Either way the connection closed unserved is counted
    (``on_refused``). A closed one's thread ends as soon as its read returns.
    """

    daemon_threads = True
    # socketserver's default backlog of 5 makes a burst of connections wait out TCP's SYN
    # retries (seconds) instead of being accepted and, past the slots, closed at once.
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        max_connections: int,
        on_refused: Callable[[], None],
    ) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(max_connections)
        self.on_refused = on_refused
        self._lock = threading.Lock()
        self._waiting: dict[socket.socket, None] = {}  # no whole request yet, oldest first
        self._handed_over: set[socket.socket] = set()  # closed to make room: slot passed on

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False) and not self._make_room():
            self.on_refused()
            self.shutdown_request(request)
            return
        with self._lock:
            self._waiting[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.request_started(request)
            self.slots.release()
            raise

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for its request, for its slot."""
        with self._lock:
            oldest = next(iter(self._waiting), None)
            if oldest is None:
                return False
            del self._waiting[oldest]
            self._handed_over.add(oldest)
            with contextlib.suppress(OSError):
                oldest.shutdown(socket.SHUT_RDWR)  # its thread's read ends at once
        self.on_refused()
        return True

    def request_started(self, request: socket.socket) -> bool:
        """A whole request arrived: False when its connection was closed to make room."""
        with self._lock:
            return self._waiting.pop(request, False) is None

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._waiting.pop(request, None)
                handed_over = request in self._handed_over
                self._handed_over.discard(request)
            if not handed_over:
                self.slots.release()


def is_loopback(host: str) -> bool:
    """Whether a client address is this machine's loopback (IPv4, IPv6 or IPv4-mapped)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool((mapped or address).is_loopback)


class StatusServer:
    """See the module docstring. ``start()`` returns the port (useful with port 0)."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        views: Views,
        *,
        max_connections: int = MAX_CONNECTIONS,
        idle_seconds: float = IDLE_SECONDS,
        on_refused: Callable[[], None] = lambda: None,
        api_remote: bool = False,
        is_local: Callable[[str], bool] = is_loopback,
    ) -> None:
        self.registry = registry
        self.views = views
        self.api_remote = api_remote
        self.is_local = is_local
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = idle_seconds  # per read: a client that sends nothing is let go

            def parse_request(self) -> bool:
                # no answer on a connection closed to make room while its request came in
                httpd = self.server
                assert isinstance(httpd, BoundedHTTPServer)
                return super().parse_request() and httpd.request_started(self.request)

            def do_GET(self) -> None:
                server.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http: " + format, *args)

        self.httpd = BoundedHTTPServer((host, port), Handler, max_connections, on_refused)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> int:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="koordlet-http", daemon=True
        )
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- routing ------------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        url = urlparse(request.path)
        routes: dict[str, Callable[[dict[str, list[str]]], tuple[int, str, bytes]]] = {
            "/metrics": self._metrics,
            "/healthz": lambda q: (200, "text/plain", b"ok\n"),
            "/api/v1/node": lambda q: self._json(self.views.node()),
            "/api/v1/pods": lambda q: self._json(self.views.pods()),
            "/api/v1/nodemetric": lambda q: self._json(self.views.node_metric()),
            "/api/v1/query": self._query,
            "/api/v1/explain": self._explain,
            "/api/v1/inspect": self._inspect,
        }
        route = routes.get(url.path)
        client = str(request.client_address[0]) if request.client_address else ""
        try:
            if url.path.startswith("/api/") and not self.api_remote and not self.is_local(client):
                # pod names, uids and cgroup paths are for the node's own operators
                message = "the status API answers this machine only (--status-api-remote)"
                status, kind, body = (
                    403,
                    "application/json",
                    json.dumps({"error": message}).encode(),
                )
            elif route is None:
                status, kind, body = 404, "application/json", b'{"error": "not found"}\n'
            else:
                status, kind, body = route(parse_qs(url.query))
        except BadRequest as err:
            status, kind, body = 400, "application/json", json.dumps({"error": str(err)}).encode()
        except Exception as err:  # a view's bug: a 500 for this request, the server stays
            log.exception("http: %s failed", url.path)
            status, kind, body = 500, "application/json", json.dumps({"error": str(err)}).encode()
        request.send_response(status)
        request.send_header("Content-Type", kind)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        request.wfile.write(body)

    def _metrics(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    @staticmethod
    def _json(data: Any) -> tuple[int, str, bytes]:
        return 200, "application/json", (json.dumps(data) + "\n").encode()

    def _explain(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        pod = (query.get("pod") or [""])[0]
        if not pod:
            raise BadRequest("pod is required (uid, namespace/name or name)")
        found = self.views.explain(pod)
        if found is None:
            body = json.dumps({"error": f"no pod {pod!r} on this node"}).encode()
            return 404, "application/json", body
        return self._json(found)

    def _inspect(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        unknown = sorted(set(query) - {"pod"})
        if unknown:
            raise BadRequest(f"unknown parameter {unknown[0]!r}: inspect takes only pod")
        pods = query.get("pod", [])
        if len(pods) > 1:
            raise BadRequest("pod given more than once: one uid, namespace/name or name")
        pod = pods[0] if pods else None
        found = self.views.inspect(pod)
        if found is None:
            body = json.dumps({"error": f"no pod {pod!r} on this node"}).encode()
            return 404, "application/json", body
        return self._json(found)

    def _query(self, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        metric = (query.get("metric") or [""])[0]
        if not metric:
            raise BadRequest("metric is required")
        window = parse_window((query.get("window") or ["5m"])[0])
        agg = (query.get("agg") or ["avg"])[0]
        if agg not in ("avg", "p50", "p90", "p95", "p99", "last", "count"):
            raise BadRequest(f"agg {agg!r} must be avg, p50, p90, p95, p99, last or count")
        labels = {k[len("label.") :]: v[0] for k, v in query.items() if k.startswith("label.")}
        return self._json(self.views.query(metric, window, agg, labels))
