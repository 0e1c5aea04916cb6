"""The probe server koord-manager and koord-scheduler share, over real HTTP on localhost."""

from __future__ import annotations

import asyncio
import socket

import aiohttp

from manager.probes import serve_probes, split_addr
from scheduler.cli import requests_exposition


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_readyz_follows_readiness_and_metrics_are_served() -> None:
    async def scenario() -> None:
        ready = {"now": False}
        counts = {"filter": 3, "bind": 1}
        port = free_port()
        runner = await serve_probes(
            f"127.0.0.1:{port}", lambda: ready["now"], lambda: requests_exposition(counts)
        )
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
            assert 'koord_scheduler_extender_requests_total{verb="filter"} 3' in text
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_addresses_without_a_host_listen_everywhere() -> None:
    assert split_addr(":8080") == ("0.0.0.0", 8080)  # noqa: S104
    assert split_addr("127.0.0.1:8081") == ("127.0.0.1", 8081)
