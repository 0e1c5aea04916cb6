"""The extender's rate limit over real HTTPS, fed by informers on the in-process fake API:
a client flooding from one address (127.0.0.2) is refused with 429 and Retry-After while
kube-scheduler, from another (127.0.0.1), keeps being served; /healthz never limited;
refusals counted per verb in koord_scheduler_extender_rate_limited_total; the flags build
the limiter."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from koordkube.ratelimit import RateLimiter, RateLimits
from scheduler import cli
from scheduler.server import ExtenderServer
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.scheduler.objects import make_node, make_pod

SERVER_NAME = "koord-scheduler.koordinator-system.svc"
FILTER_ARGS = {"Pod": make_pod("p", requests={"cpu": "1"}), "NodeNames": ["node-1"]}


class FrozenClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, trustme.CA]:
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("certs")
    cert = ca.issue_cert(SERVER_NAME)
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    return folder, ca


class Caller:
    """One client: a session whose connections come from ``address`` (any 127/8 is local)."""

    def __init__(self, ca: trustme.CA, address: str, base: str) -> None:
        self.context = ssl.create_default_context()
        ca.configure_trust(self.context)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(local_addr=(address, 0))
        )
        self.base = base

    async def post(self, path: str) -> tuple[int, str, str]:
        async with self.session.post(
            self.base + path,
            data=json.dumps(FILTER_ARGS).encode(),
            ssl=self.context,
            server_hostname=SERVER_NAME,
        ) as reply:
            return reply.status, reply.headers.get("Retry-After", ""), await reply.text()

    async def get(self, path: str) -> int:
        async with self.session.get(
            self.base + path, ssl=self.context, server_hostname=SERVER_NAME
        ) as reply:
            return reply.status


@asynccontextmanager
async def serving(
    pki: tuple[Path, trustme.CA], limiter: RateLimiter | None
) -> AsyncIterator[tuple[str, ExtenderServer]]:
    folder, _ = pki
    api = FakeKubeAPI()
    api.seed({"apiVersion": "v1", "kind": "Node", **make_node("node-1")})
    view = InformerClusterView(api.kube_api())
    tasks = [asyncio.create_task(i.run()) for i in view.informers]
    server = ExtenderServer(
        api.kube_api(),
        view,
        host="127.0.0.1",
        port=0,
        cert_dir=folder,
        rate_limiter=limiter,
    )
    await server.start()
    try:
        await eventually(view.synced)
        yield f"https://127.0.0.1:{server.port}", server
    finally:
        await server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_flooding_client_is_refused_while_kube_scheduler_is_served(
    pki: tuple[Path, trustme.CA],
) -> None:
    clock = FrozenClock()
    limiter = RateLimiter(
        RateLimits(qps=100, burst=100, per_client_qps=1, per_client_burst=5), clock=clock
    )

    async def scenario() -> None:
        async with serving(pki, limiter) as (base, server):
            flooder = Caller(pki[1], "127.0.0.2", base)
            scheduler = Caller(pki[1], "127.0.0.1", base)
            try:
                flood = [await flooder.post("/scheduler/filter") for _ in range(50)]
                assert [status for status, _, _ in flood] == [200] * 5 + [429] * 45
                assert {retry for _, retry, _ in flood[5:]} == {"1"}
                assert server.requests["filter"] == 5  # the refused never reached the verb
                for verb in ("filter", "prioritize", "bind", "filter", "prioritize"):
                    status, _, text = await scheduler.post(f"/scheduler/{verb}")
                    assert status == 200, text
                assert (await flooder.post("/scheduler/bind"))[0] == 429
                assert (await flooder.post("/admin"))[0] == 429
                assert {await flooder.get("/healthz") for _ in range(20)} == {200}
            finally:
                await flooder.session.close()
                await scheduler.session.close()

    run(scenario())
    assert limiter.refused == {"filter": 45, "bind": 1, "other": 1}
    assert set(limiter.clients) == {"ip:127.0.0.2", "ip:127.0.0.1"}
    assert limiter.overall is not None and limiter.overall.tokens == 100 - 10


def test_refusals_are_exposed_per_verb_beside_the_request_counts() -> None:
    exposition = cli.with_rate_limited(
        cli.requests_exposition({"filter": 3, "prioritize": 0, "bind": 1}), {"filter": 7}
    )
    body, content_type = exposition
    lines = body.decode().splitlines()
    assert content_type == "text/plain; charset=utf-8"
    assert lines[-5:] == [
        "# TYPE koord_scheduler_extender_rate_limited_total counter",
        'koord_scheduler_extender_rate_limited_total{verb="bind"} 0',
        'koord_scheduler_extender_rate_limited_total{verb="filter"} 7',
        'koord_scheduler_extender_rate_limited_total{verb="other"} 0',
        'koord_scheduler_extender_rate_limited_total{verb="prioritize"} 0',
    ]
    assert 'koord_scheduler_extender_requests_total{verb="filter"} 3' in lines


def test_the_flags_build_the_limiter_and_zero_turns_it_off() -> None:
    def options(*argv: str) -> Any:
        return cli.options_from_args(cli.build_parser().parse_args(["--cert-dir=/c", *argv]))

    assert options().rate_limits() == RateLimits()  # the documented defaults
    tuned = options(
        "--rate-limit-qps=50",
        "--rate-limit-burst=60",
        "--rate-limit-per-client-qps=0.5",
        "--rate-limit-per-client-burst=2",
    )
    assert tuned.rate_limits() == RateLimits(
        qps=50, burst=60, per_client_qps=0.5, per_client_burst=2
    )
    assert cli.rate_limiter(tuned).enabled
    off = options("--rate-limit-qps=0", "--rate-limit-per-client-qps=0")
    assert not cli.rate_limiter(off).enabled
    for bad in ("--rate-limit-qps=-1", "--rate-limit-burst=0"):
        with pytest.raises(SystemExit):
            options(bad)
