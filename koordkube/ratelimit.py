"""Token buckets in front of koord-manager's webhooks and koord-scheduler's extender verbs.

One bucket for the whole server and one per client identity (the TLS client certificate's CN
when the caller presented one, else its address). A request takes a token from its client's
bucket first and only then from the overall one: a client past its own rate is refused
without spending the overall budget, so one flooding caller cannot starve the others (it
holds at most its own rate of the overall budget). A refused request gets HTTP 429 with a
Retry-After in whole seconds, before its body is read. The probe paths are never limited.

The per-client table is bounded: a bucket that has refilled to its burst is forgotten (a new
one would be the same), and past ``max_clients`` the least recently seen is dropped, so many
source addresses cannot grow memory without bound (they still share the overall bucket).

Nothing here imports aiohttp at import time: koord-scheduler's flags parse with it unloaded.

    limiter = RateLimiter(RateLimits(qps=2000, burst=4000, per_client_qps=1000,
                                     per_client_burst=2000))
    app = web.Application(middlewares=[rate_limit_middleware(limiter, label=route_of)])
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

log = logging.getLogger(__name__)

Clock = Callable[[], float]

# The defaults of both components' flags, sized so that a normal caller is never refused.
# koord-manager: the API server calls /mutate-pod once per pod CREATE and /validate-pod once
# per pod CREATE and UPDATE; a big cluster peaks at a few hundred pod creates a second (the
# controllers' own client limits keep it there), so one kube-apiserver sends well under 1,000
# calls a second. koord-scheduler: kube-scheduler's leader calls filter, prioritize and bind
# once per pod; its throughput is about 100 pods/s by default and a few hundred in bursts,
# again under 1,000 calls a second. Each client may therefore sustain 1,000 calls/s with a
# burst of 2 s of that; the overall bucket is twice a client's (several API servers, a
# kube-scheduler hand-over) and bounds what many callers together make a replica do.
# A caller keeps one connection to one replica, so each replica must take all of it alone.
DEFAULT_QPS = 2000.0
DEFAULT_BURST = 4000
DEFAULT_PER_CLIENT_QPS = 1000.0
DEFAULT_PER_CLIENT_BURST = 2000
# 4,096 buckets are a few hundred KiB; past that the least recently seen client is forgotten.
DEFAULT_MAX_CLIENTS = 4096
# One warning line per interval at most, summing up what was refused since the last one.
LOG_INTERVAL = 10.0
# Paths the kubelet's probes and Prometheus call: never limited.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/livez", "/metrics"})
_WINDOW_CLIENTS = 64  # distinct clients counted for the warning line (the rest: "others")


def parse_qps(text: str) -> float:
    """A flag's requests per second: a number >= 0 (0: that limit is off)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a rate >= 0 (requests per second): {text!r}")
    return value


def parse_burst(text: str) -> int:
    """A flag's burst: a whole number of requests >= 1."""
    value = int(text)
    if value < 1:
        raise ValueError(f"not a burst >= 1 (requests): {text!r}")
    return value


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; starts full. Times are the caller's clock."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, not {rate}/{burst}")
        self.rate, self.burst = float(rate), float(burst)
        self.tokens, self.stamp = self.burst, now

    def _refill(self, now: float) -> None:
        if now > self.stamp:  # a clock that stands still or steps back adds nothing
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def take(self, now: float) -> bool:
        """One token if there is one."""
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def give_back(self) -> None:
        """Return a token taken for a request that was refused further on."""
        self.tokens = min(self.burst, self.tokens + 1)

    def wait(self, now: float) -> float:
        """Seconds until a token is there (0: now)."""
        self._refill(now)
        return max(0.0, (1 - self.tokens) / self.rate)

    def full(self, now: float) -> bool:
        """Refilled to its burst: indistinguishable from a new bucket."""
        self._refill(now)
        return self.tokens >= self.burst


@dataclass(frozen=True)
class RateLimits:
    """A server's limits; a rate of 0 turns that bucket off (both 0: nothing is limited)."""

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    per_client_qps: float = DEFAULT_PER_CLIENT_QPS
    per_client_burst: int = DEFAULT_PER_CLIENT_BURST
    max_clients: int = DEFAULT_MAX_CLIENTS

    def __post_init__(self) -> None:
        if self.qps < 0 or self.per_client_qps < 0:
            raise ValueError("rates must be >= 0")
        if self.burst < 1 or self.per_client_burst < 1 or self.max_clients < 1:
            raise ValueError("bursts and max_clients must be >= 1")

    def describe(self) -> str:
        def one(qps: float, burst: int) -> str:
            return f"{qps:g}/s burst {burst}" if qps > 0 else "off"

        return (
            f"overall {one(self.qps, self.burst)}, "
            f"per client {one(self.per_client_qps, self.per_client_burst)}"
        )


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused: its client's bucket ("client") or the server's ("overall")."""

    scope: str
    client: str
    retry_after: int  # whole seconds, >= 1 (the Retry-After header)


def _whole_seconds(wait: float) -> int:
    return max(1, math.ceil(wait))


class RateLimiter:
    """The overall bucket and the bounded table of per-client buckets, on a monotonic clock.

    ``on_refused(label, refusal)`` is called for each refused request (a metric's increment);
    ``refused`` counts them by label as well.
    """

    def __init__(
        self,
        limits: RateLimits,
        *,
        clock: Clock = time.monotonic,
        on_refused: Callable[[str, Refusal], None] | None = None,
        log_interval: float = LOG_INTERVAL,
        component: str = "server",
    ) -> None:
        self.limits, self.clock, self.on_refused = limits, clock, on_refused
        self.log_interval, self.component = log_interval, component
        now = clock()
        self.overall = TokenBucket(limits.qps, limits.burst, now) if limits.qps > 0 else None
        self.clients: OrderedDict[str, TokenBucket] = OrderedDict()  # least recently seen first
        self.refused: Counter[str] = Counter()
        self.evicted = 0  # per-client buckets dropped while not yet full (the table was full)
        self._last_log: float | None = None
        self._window: Counter[str] = Counter()  # refusals by client since the last line

    @property
    def enabled(self) -> bool:
        return self.overall is not None or self.limits.per_client_qps > 0

    def admit(self, client: str) -> Refusal | None:
        """Take a token for one request of ``client``; None when it may proceed."""
        now = self.clock()
        bucket = self._bucket(client, now)
        if bucket is not None and not bucket.take(now):
            # refused by its own bucket: the overall one is not touched
            return Refusal("client", client, _whole_seconds(bucket.wait(now)))
        if self.overall is not None and not self.overall.take(now):
            if bucket is not None:
                bucket.give_back()  # this request is not served: it costs the client nothing
            return Refusal("overall", client, _whole_seconds(self.overall.wait(now)))
        return None

    def _bucket(self, client: str, now: float) -> TokenBucket | None:
        if self.limits.per_client_qps <= 0:
            return None
        bucket = self.clients.get(client)
        if bucket is not None:
            self.clients.move_to_end(client)
            return bucket
        self._prune(now)
        bucket = TokenBucket(self.limits.per_client_qps, self.limits.per_client_burst, now)
        self.clients[client] = bucket
        return bucket

    def _prune(self, now: float) -> None:
        """Room for one more client: idle (full) buckets first, then the least recently seen."""
        while self.clients:
            oldest = next(iter(self.clients.values()))
            if not oldest.full(now):
                break
            self.clients.popitem(last=False)
        while len(self.clients) >= self.limits.max_clients:
            self.clients.popitem(last=False)
            self.evicted += 1

    def record(self, label: str, refusal: Refusal) -> None:
        """Count a refused request under ``label`` and log now and then (never once each)."""
        self.refused[label] += 1
        if self.on_refused is not None:
            self.on_refused(label, refusal)
        if refusal.client in self._window or len(self._window) < _WINDOW_CLIENTS:
            self._window[refusal.client] += 1
        else:
            self._window["others"] += 1
        now = self.clock()
        if self._last_log is not None and now - self._last_log < self.log_interval:
            return
        since = "" if self._last_log is None else f" in the last {now - self._last_log:.0f}s"
        top = ", ".join(f"{client} {n}" for client, n in self._window.most_common(3))
        log.warning(
            "%s rate limit: refused %d requests%s with 429 (most from: %s); latest on %s by "
            "the %s limit (%s)",
            self.component,
            sum(self._window.values()),
            since,
            top,
            label,
            refusal.scope,
            self.limits.describe(),
        )
        self._last_log = now
        self._window.clear()


def client_identity(request: web.Request) -> str:
    """The TLS client certificate's subject CN when the peer presented one, else "ip:ADDR"."""
    transport = request.transport
    if transport is not None:
        common_name = _common_name(transport.get_extra_info("peercert"))
        if common_name:
            return common_name
    return f"ip:{request.remote or 'unknown'}"


def _common_name(cert: Any) -> str | None:
    """The CN of ``ssl.SSLSocket.getpeercert()``'s dict (empty when not verified)."""
    if not isinstance(cert, Mapping):
        return None
    for rdn in cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName" and isinstance(value, str) and value:
                return value
    return None


def rate_limit_middleware(
    limiter: RateLimiter,
    *,
    label: Callable[[web.Request], str] = lambda _request: "all",
    exempt: Collection[str] = PROBE_PATHS,
    identity: Callable[[web.Request], str] = client_identity,
) -> Middleware:
    """An aiohttp middleware: 429 with Retry-After when ``limiter`` refuses the request.

    ``label`` names what a refusal is counted under (a route or verb: keep it to a few values,
    it becomes a metric label); paths in ``exempt`` are never limited.
    """
    from aiohttp import web  # noqa: PLC0415 - see the module docstring

    @web.middleware
    async def rate_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in exempt:
            return await handler(request)
        refusal = limiter.admit(identity(request))
        if refusal is None:
            return await handler(request)
        limiter.record(label(request), refusal)
        return web.Response(
            status=429,
            text=f"too many requests ({refusal.scope} rate limit); "
            f"retry after {refusal.retry_after}s\n",
            headers={"Retry-After": str(refusal.retry_after)},
        )

    return rate_limit
