"""The webhook server's rate limit over real HTTPS: 429 with Retry-After past a client's
bucket, /healthz never limited, each refusal counted in koord_manager_webhook_rate_limited by
route (the limiter koord-manager builds from its flags), and no limiter: nothing refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from koordkube.ratelimit import RateLimiter, RateLimits
from manager.app import Manager, ManagerOptions
from tests.fakekube import FakeKubeAPI
from tests.unit.manager.webhooks.builders import pod, review
from tests.unit.manager.webhooks.test_server import SERVER_NAME, Harness, run

REVIEW = review(pod(name="web"))


class FrozenClock:
    """Time stands still: a bucket refills only when a test moves it."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def manager_with(**limits: Any) -> Manager:
    options = ManagerOptions(webhook_port=None, metrics_addr="", **limits)
    return Manager(FakeKubeAPI().kube_api(), options)


def test_a_client_past_its_bucket_gets_429_and_each_refusal_is_counted_by_route(
    tmp_path: Path,
) -> None:
    clock = FrozenClock()
    manager = manager_with(
        webhook_rate_limit_qps=0,
        webhook_rate_limit_per_client_qps=2,
        webhook_rate_limit_per_client_burst=3,
    )
    limiter = manager.webhook_rate_limiter()
    limiter.clock = clock
    assert limiter.limits == RateLimits(qps=0, per_client_qps=2, per_client_burst=3)

    async def scenario(h: Harness) -> None:
        answers = [await h.post("/mutate-pod", REVIEW) for _ in range(4)]
        assert [status for status, _ in answers] == [200, 200, 200, 429]
        assert answers[0][1]["response"]["allowed"] is True, answers[0]
        assert answers[3][1] == "too many requests (client rate limit); retry after 1s\n"
        for _ in range(20):
            async with h.session.get(
                h.base + "/healthz", ssl=h.context, server_hostname=SERVER_NAME
            ) as probe:
                assert probe.status == 200
        status, _ = await h.post("/validate-pod", REVIEW)
        assert status == 429
        status, _ = await h.post("/wp-login.php", b"")
        assert status == 429
        clock.now += 0.5  # one token at 2/s
        status, answer = await h.post("/validate-pod", REVIEW)
        assert status == 200 and answer["response"]["allowed"] is True

    run(tmp_path, scenario, rate_limiter=limiter)
    assert set(limiter.clients) == {"ip:127.0.0.1"}
    exposition = generate_latest(manager.metrics.registry).decode()
    for route, count in (("/mutate-pod", 1), ("/validate-pod", 1), ("other", 1)):
        line = f'koord_manager_webhook_rate_limited_total{{route="{route}"}} {count}.0'
        assert line in exposition, exposition


def test_retry_after_is_read_by_the_client_from_the_header(tmp_path: Path) -> None:
    clock = FrozenClock()
    limiter = RateLimiter(RateLimits(qps=0.2, burst=1, per_client_qps=0), clock=clock)

    async def scenario(h: Harness) -> None:
        assert (await h.post("/mutate-pod", REVIEW))[0] == 200
        async with h.session.post(
            h.base + "/mutate-pod",
            json=REVIEW,
            ssl=h.context,
            server_hostname=SERVER_NAME,
        ) as reply:
            assert reply.status == 429
            assert reply.headers["Retry-After"] == "5"  # one request every 5 s overall
            assert "overall rate limit" in await reply.text()

    run(tmp_path, scenario, rate_limiter=limiter)
    assert limiter.refused == {"/mutate-pod": 1}


def test_without_a_limiter_or_with_both_rates_zero_nothing_is_refused(tmp_path: Path) -> None:
    off = RateLimiter(RateLimits(qps=0, per_client_qps=0))

    async def scenario(h: Harness) -> None:
        assert h.server.rate_limiter is None  # an all-off limiter is not installed at all
        statuses = {(await h.post("/validate-pod", REVIEW))[0] for _ in range(50)}
        assert statuses == {200}

    for folder, limiter in ((tmp_path / "off", off), (tmp_path / "none", None)):
        folder.mkdir()
        run(folder, scenario, rate_limiter=limiter)
