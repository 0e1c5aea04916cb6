"""The probe server koord-manager and koord-scheduler share, over real HTTP on localhost."""

from __future__ import annotations

import asyncio
import socket

import aiohttp

from koordkube.probes import serve_probes, split_addr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readyz_follows_readiness_and_metrics_are_served() -> None:
    async def scenario() -> None:
        ready = {"now": False}
        exposition = (b'requests_total{verb="filter"} 3\n', "text/plain; charset=utf-8")
        port = free_port()
        runner = await serve_probes(f"127.0.0.1:{port}", lambda: ready["now"], lambda: exposition)
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{base}/healthz") as reply:
                    assert reply.status == 200
                async with session.get(f"{base}/readyz") as reply:
                    assert reply.status == 503
                ready["now"] = True
                async with session.get(f"{base}/readyz") as reply:
                    assert reply.status == 200
                async with session.get(f"{base}/metrics") as reply:
                    text = await reply.text()
                    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
            assert 'requests_total{verb="filter"} 3' in text
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_addresses_without_a_host_listen_everywhere() -> None:
    assert split_addr(":8080") == ("0.0.0.0", 8080)  # noqa: S104
    assert split_addr("127.0.0.1:8081") == ("127.0.0.1", 8081)
