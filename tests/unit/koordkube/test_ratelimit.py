"""koordkube.ratelimit: the bucket's arithmetic on a fake clock, the limiter's per-client and
overall buckets (a flooding client cannot spend the others' budget), its bounded client
table, its warning that is itself rate limited, and the middleware over a real aiohttp server
(429 with Retry-After, probes never limited, the client certificate's CN as the identity)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from koordkube.ratelimit import (
    RateLimiter,
    RateLimits,
    Refusal,
    TokenBucket,
    client_identity,
    parse_burst,
    parse_qps,
    rate_limit_middleware,
)
from tests.unit.koordkube.fakes import run


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def limiter(clock: FakeClock, **limits: Any) -> RateLimiter:
    return RateLimiter(RateLimits(**limits), clock=clock)


# -- the bucket ---------------------------------------------------------------------------------


def test_a_bucket_starts_full_and_serves_its_burst_then_refuses() -> None:
    bucket = TokenBucket(rate=2, burst=5, now=0.0)
    assert [bucket.take(0.0) for _ in range(6)] == [True] * 5 + [False]


def test_a_bucket_refills_at_its_rate_and_never_beyond_its_burst() -> None:
    bucket = TokenBucket(rate=2, burst=5, now=0.0)
    for _ in range(5):
        bucket.take(0.0)
    assert not bucket.take(0.4)  # 0.8 of a token
    assert bucket.take(0.5)  # one token after 1/rate seconds
    assert not bucket.take(0.5)
    assert bucket.wait(0.5) == pytest.approx(0.5)
    assert bucket.full(100.0) and bucket.tokens == 5  # an hour idle: still 5, not 200
    assert sum(bucket.take(100.0) for _ in range(10)) == 5


def test_a_clock_stepping_back_adds_no_tokens() -> None:
    bucket = TokenBucket(rate=10, burst=1, now=50.0)
    assert bucket.take(50.0)
    assert not bucket.take(40.0)
    assert not bucket.take(50.05)  # half a token since the last real refill at 50.0


def test_a_bucket_needs_a_rate_and_a_burst() -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        TokenBucket(rate=0, burst=1, now=0)
    with pytest.raises(ValueError, match="burst >= 1"):
        TokenBucket(rate=1, burst=0, now=0)


@pytest.mark.parametrize(
    ("rate", "elapsed", "retry_after"),
    [
        (100.0, 0.0, 1),  # 10 ms to the next token: whole seconds, at least 1
        (0.25, 0.0, 4),  # a token every 4 s
        (0.25, 1.5, 3),  # 2.5 s to go: rounded up
        (0.1, 0.0, 10),
    ],
)
def test_retry_after_is_the_wait_for_a_token_in_whole_seconds_at_least_one(
    rate: float, elapsed: float, retry_after: int
) -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=0, per_client_qps=rate, per_client_burst=1)
    assert rl.admit("a") is None
    clock.advance(elapsed)
    assert rl.admit("a") == Refusal("client", "a", retry_after)


# -- the limiter --------------------------------------------------------------------------------


def test_a_flooding_client_is_refused_by_its_own_bucket_and_spends_no_overall_tokens() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=10, burst=10, per_client_qps=2, per_client_burst=3)
    outcomes = [rl.admit("ip:10.0.0.66") for _ in range(100)]
    assert outcomes[:3] == [None] * 3
    assert {o.scope for o in outcomes[3:] if o is not None} == {"client"}
    assert None not in outcomes[3:]
    assert rl.overall is not None and rl.overall.tokens == 7  # only the 3 it was served
    # the API server, within the overall budget, is served its whole burst
    assert [rl.admit("kube-apiserver") for _ in range(3)] == [None] * 3


def test_a_request_refused_overall_costs_its_client_nothing() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=1, burst=2, per_client_qps=5, per_client_burst=5)
    assert rl.admit("a") is None and rl.admit("a") is None  # the overall burst
    refusal = rl.admit("b")
    assert refusal == Refusal("overall", "b", 1)
    assert rl.clients["b"].tokens == 5  # its token was given back
    clock.advance(1.0)
    assert rl.admit("b") is None


def test_many_clients_together_are_held_to_the_overall_rate() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=50, burst=50, per_client_qps=10, per_client_burst=10)
    served = 0
    for second in range(10):
        clock.now = 1000.0 + second
        served += sum(rl.admit(f"ip:10.1.0.{i}") is None for i in range(20) for _ in range(10))
    assert served == 50 + 9 * 50  # the burst, then 50 a second


def test_limits_of_zero_turn_a_bucket_off() -> None:
    clock = FakeClock()
    off = limiter(clock, qps=0, per_client_qps=0)
    assert not off.enabled
    assert all(off.admit("a") is None for _ in range(10_000))
    overall_only = limiter(clock, qps=1, burst=2, per_client_qps=0)
    assert overall_only.enabled and not overall_only.clients
    assert [overall_only.admit(c) is None for c in "abc"] == [True, True, False]
    assert not overall_only.clients  # no per-client bucket is kept


def test_limits_refuse_impossible_values() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        RateLimits(qps=-1)
    with pytest.raises(ValueError, match=">= 1"):
        RateLimits(per_client_burst=0)
    assert RateLimits().describe() == "overall 2000/s burst 4000, per client 1000/s burst 2000"
    assert RateLimits(qps=0).describe().startswith("overall off,")


def test_the_client_table_is_bounded_when_many_addresses_call_at_once() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=0, per_client_qps=1, per_client_burst=5, max_clients=100)
    for i in range(10_000):  # a scan from 10,000 addresses within one instant
        rl.admit(f"ip:10.2.{i // 256}.{i % 256}")
    assert len(rl.clients) == 100
    assert rl.evicted == 9_900
    assert next(reversed(rl.clients)) == "ip:10.2.39.15"  # the most recent stays


def test_idle_clients_are_forgotten_once_their_bucket_is_full_again() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=0, per_client_qps=1, per_client_burst=5)
    for client in ("a", "b", "c"):
        rl.admit(client)
    clock.advance(0.5)
    rl.admit("d")
    assert list(rl.clients) == ["a", "b", "c", "d"]  # none refilled yet
    clock.advance(0.6)  # a, b, c are full again (4 + 1.1 tokens): forgetting them is harmless
    rl.admit("e")
    assert list(rl.clients) == ["d", "e"]
    assert rl.evicted == 0


def test_a_known_client_keeps_its_bucket_and_moves_to_the_recent_end() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=0, per_client_qps=1, per_client_burst=1, max_clients=2)
    rl.admit("a")
    rl.admit("b")
    assert rl.admit("a") is not None  # the same (empty) bucket: refused
    rl.admit("c")  # the table is full: the least recently seen (b) goes, not a
    assert list(rl.clients) == ["a", "c"]


# -- counting and the warning -------------------------------------------------------------------


def test_refusals_are_counted_by_label_and_handed_to_the_callback() -> None:
    clock = FakeClock()
    seen: list[tuple[str, str]] = []
    rl = RateLimiter(
        RateLimits(qps=0, per_client_qps=1, per_client_burst=1),
        clock=clock,
        on_refused=lambda label, refusal: seen.append((label, refusal.client)),
    )
    rl.admit("a")
    for label in ("/mutate-pod", "/mutate-pod", "other"):
        refusal = rl.admit("a")
        assert refusal is not None
        rl.record(label, refusal)
    assert rl.refused == {"/mutate-pod": 2, "other": 1}
    assert seen == [("/mutate-pod", "a"), ("/mutate-pod", "a"), ("other", "a")]


def test_the_warning_is_one_line_per_interval_not_one_per_refusal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    rl = RateLimiter(
        RateLimits(qps=0, per_client_qps=1, per_client_burst=1),
        clock=clock,
        log_interval=10.0,
        component="koord-manager webhook",
    )
    caplog.set_level(logging.WARNING, logger="koordkube.ratelimit")

    def flood(client: str, times: int) -> None:
        for _ in range(times):
            refusal = rl.admit(client)
            if refusal is not None:
                rl.record("/mutate-pod", refusal)

    flood("ip:10.0.0.66", 1001)  # the first is served, 1,000 refused
    clock.advance(5)
    flood("ip:10.0.0.66", 1)  # refilled one token: served
    flood("ip:10.0.0.66", 500)
    assert len(caplog.records) == 1  # the first refusal, at once
    clock.advance(5)  # 10 s after the first line
    flood("ip:10.0.0.77", 2)  # one served, one refused: the second line
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("koord-manager webhook rate limit: refused 1 requests with 429")
    assert "in the last 10s" in lines[1] and "refused 1500 requests" in lines[1]
    assert "most from: ip:10.0.0.66 1499, ip:10.0.0.77 1" in lines[1]
    assert "by the client limit (overall off, per client 1/s burst 1)" in lines[1]


# -- identity -----------------------------------------------------------------------------------


def fake_request(peercert: Any, remote: str | None = "10.0.0.5", transport: bool = True) -> Any:
    extra = {"peercert": peercert}
    handle = SimpleNamespace(get_extra_info=extra.get) if transport else None
    return SimpleNamespace(transport=handle, remote=remote)


def test_the_identity_is_the_client_certificates_cn_else_the_address() -> None:
    cert = {
        "subject": ((("organizationName", "system:masters"),), (("commonName", "apiserver"),)),
    }
    assert client_identity(fake_request(cert)) == "apiserver"
    assert client_identity(fake_request({})) == "ip:10.0.0.5"  # no verified certificate
    assert client_identity(fake_request(None)) == "ip:10.0.0.5"
    no_cn = {"subject": ((("organizationName", "x"),),)}
    assert client_identity(fake_request(no_cn)) == "ip:10.0.0.5"
    assert client_identity(fake_request(cert, transport=False)) == "ip:10.0.0.5"
    assert client_identity(fake_request({}, remote=None)) == "ip:unknown"


# -- flags --------------------------------------------------------------------------------------


def test_the_flags_parsers_take_what_a_limit_can_be() -> None:
    assert parse_qps("0") == 0 and parse_qps("12.5") == 12.5
    assert parse_burst("1") == 1
    for text in ("-1", "nan", "inf", "x"):
        with pytest.raises(ValueError):
            parse_qps(text)
    for text in ("0", "-3", "1.5"):
        with pytest.raises(ValueError):
            parse_burst(text)


# -- the middleware over a real server ----------------------------------------------------------


@asynccontextmanager
async def serving(
    rl: RateLimiter, context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[str, list[str]]]:
    """A server of POST /work, GET /healthz and /metrics behind the middleware; the list
    collects the identity each served request had."""
    served: list[str] = []

    async def work(request: web.Request) -> web.Response:
        served.append(client_identity(request))
        return web.Response(text="done\n")

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    app = web.Application(middlewares=[rate_limit_middleware(rl, label=lambda r: r.path)])
    app.router.add_post("/work", work)
    app.router.add_get("/healthz", ok)
    app.router.add_get("/metrics", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    port = runner.addresses[0][1]
    try:
        yield f"{'https' if context else 'http'}://127.0.0.1:{port}", served
    finally:
        await runner.cleanup()


def test_a_refused_request_gets_429_with_retry_after_and_probes_are_never_limited() -> None:
    clock = FakeClock()
    rl = limiter(clock, qps=0, per_client_qps=0.5, per_client_burst=2)

    async def scenario() -> None:
        async with serving(rl) as (base, served), aiohttp.ClientSession() as session:
            statuses = []
            for _ in range(3):
                async with session.post(f"{base}/work", data=b"{}") as reply:
                    statuses.append(reply.status)
                    text, headers = await reply.text(), reply.headers
            assert statuses == [200, 200, 429]
            assert headers["Retry-After"] == "2"  # a token every 2 s
            assert text == "too many requests (client rate limit); retry after 2s\n"
            assert len(served) == 2  # the handler never saw the refused one
            for path in ("/healthz", "/metrics") * 50:
                async with session.get(base + path) as probe:
                    assert probe.status == 200
            async with session.post(f"{base}/nowhere") as missing:
                assert missing.status == 429  # a scan of other paths is limited too
            clock.advance(2)
            async with session.post(f"{base}/work", data=b"{}") as reply:
                assert reply.status == 200

    run(scenario())
    assert rl.refused == {"/work": 1, "/nowhere": 1}


def test_each_client_certificate_is_its_own_client_over_tls() -> None:
    """Two certificates from the same address are two clients; no certificate is the address."""
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_context)
    ca.configure_trust(server_context)
    server_context.verify_mode = ssl.CERT_OPTIONAL

    def client_context(common_name: str | None) -> ssl.SSLContext:
        context = ssl.create_default_context()
        ca.configure_trust(context)
        if common_name is not None:
            ca.issue_cert(f"{common_name}.example", common_name=common_name).configure_cert(context)
        return context

    clock = FakeClock()
    rl = limiter(clock, qps=100, burst=100, per_client_qps=1, per_client_burst=2)

    async def scenario() -> None:
        async with serving(rl, server_context) as (base, served):
            for name in ("kube-apiserver", "intruder", None):
                context = client_context(name)
                async with aiohttp.ClientSession() as session:
                    statuses = []
                    for _ in range(3):
                        async with session.post(
                            f"{base}/work", data=b"{}", ssl=context, server_hostname="localhost"
                        ) as reply:
                            statuses.append(reply.status)
                    assert statuses == [200, 200, 429], name
            assert served == ["kube-apiserver"] * 2 + ["intruder"] * 2 + ["ip:127.0.0.1"] * 2

    run(scenario())
    assert set(rl.clients) == {"kube-apiserver", "intruder", "ip:127.0.0.1"}
