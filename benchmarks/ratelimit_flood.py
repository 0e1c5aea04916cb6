"""A flood of the admission webhook against its rate limit, over HTTPS on localhost.

The real WebhookServer runs in its own process (one event loop, as in koord-manager) with the
rate limit under test. A legitimate client (the "API server", from 127.0.0.1, one keep-alive
connection) posts /mutate-pod AdmissionReviews at a steady rate, first alone and then while a
flooding client (its own process, from 127.0.0.2: another identity, ``-c`` connections) posts
as fast as it can. For each rate-limit setting it reports, per phase: the legitimate client's
answers (200 and 429) and latency (p50, p99, max; client side, request sent to answer read),
and the flood's requests a second sent, served (200) and refused (429). Settings:

- off: no limiter (what a flood does without one);
- defaults: the flags' defaults (koordkube.ratelimit: 2000/s overall, 1000/s per client);
- tight: ``--tight-qps`` overall and ``--tight-per-client-qps`` per client (1000 and 200,
  above the legitimate rate), to show the mechanism where this machine cannot reach the
  defaults.

Prints one JSON line per setting; nothing is asserted (figures vary with the machine).

    PYTHONPATH=. .venv/bin/python benchmarks/ratelimit_flood.py [-d 5] [-r 100] [-c 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import ssl
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import trustme

from benchmarks.webhook_latency import NAMESPACE, PRIORITY_CLASSES, PROFILE, SERVER_NAME, SERVICE
from benchmarks.webhook_latency import review as make_review
from koordkube.ratelimit import RateLimiter, RateLimits
from manager.webhooks.server import StaticStateProvider, WebhookServer

LEGIT_ADDRESS, FLOOD_ADDRESS = "127.0.0.1", "127.0.0.2"
ROUTE = "/mutate-pod"
REVIEW = make_review(0)


def _serve(cert_dir: str, limits: RateLimits | None, ports: Any) -> None:
    async def main() -> None:
        provider = StaticStateProvider([PROFILE], dict(PRIORITY_CLASSES), {})
        limiter = None
        if limits is not None:
            limiter = RateLimiter(limits, component="koord-manager webhook")
        server = WebhookServer("127.0.0.1", 0, cert_dir, provider, NAMESPACE, rate_limiter=limiter)
        await server.start()
        ports.put(server.bound_port)
        await asyncio.Event().wait()  # until terminated

    asyncio.run(main())


def _context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.load_verify_locations(cadata=ca_pem.decode())
    return context


@dataclass
class Tally:
    """Answers by status within the measured window, and the 200s' latencies."""

    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    errors: int = 0

    def add(self, status: int, seconds: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status == 200:
            self.latencies.append(seconds)


async def _post(
    session: aiohttp.ClientSession, url: str, context: ssl.SSLContext
) -> tuple[int, float]:
    start = time.perf_counter()
    async with session.post(
        url,
        data=REVIEW,
        headers={"Content-Type": "application/json"},
        ssl=context,
        server_hostname=SERVER_NAME,
    ) as response:
        await response.read()
    return response.status, time.perf_counter() - start


def _session(address: str, connections: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=connections, local_addr=(address, 0))
    return aiohttp.ClientSession(connector=connector)


def _flood(port: int, ca_pem: bytes, clients: int, window: tuple[float, float], out: Any) -> None:
    """As fast as ``clients`` connections go until the window ends; counts within it."""

    async def main() -> Tally:
        tally = Tally()
        context, url = _context(ca_pem), f"https://127.0.0.1:{port}{ROUTE}"
        start, end = window
        async with _session(FLOOD_ADDRESS, clients) as session:

            async def one() -> None:
                while (now := time.monotonic()) < end:
                    try:
                        status, seconds = await _post(session, url, context)
                    except aiohttp.ClientError:
                        tally.errors += 1
                        continue
                    if now >= start:
                        tally.add(status, seconds)

            await asyncio.gather(*(one() for _ in range(clients)))
        return tally

    tally = asyncio.run(main())
    out.put((tally.statuses, tally.errors))


async def _legitimate(port: int, ca_pem: bytes, rate: float, window: tuple[float, float]) -> Tally:
    """One request every 1/rate seconds (sent late, never skipped, when answers are slow)."""
    tally = Tally()
    context, url = _context(ca_pem), f"https://127.0.0.1:{port}{ROUTE}"
    start, end = window
    async with _session(LEGIT_ADDRESS, 1) as session:
        await _post(session, url, context)  # the TLS handshake, outside the figures
        next_send = time.monotonic()
        while next_send < end:
            delay = next_send - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                status, seconds = await _post(session, url, context)
            except aiohttp.ClientError:
                tally.errors += 1
                status, seconds = 0, 0.0
            if next_send >= start:
                tally.add(status, seconds)
            next_send += 1 / rate
    return tally


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def _legit_figures(tally: Tally, seconds: float) -> dict[str, Any]:
    return {
        "served_per_s": round(tally.statuses.get(200, 0) / seconds, 1),
        "refused_429": tally.statuses.get(429, 0),
        "errors": tally.errors,
        "p50_ms": _percentile(tally.latencies, 0.50),
        "p99_ms": _percentile(tally.latencies, 0.99),
        "max_ms": round(max(tally.latencies) * 1000, 2) if tally.latencies else None,
    }


def run_setting(
    name: str, limits: RateLimits | None, ca: trustme.CA, cert_dir: str, args: argparse.Namespace
) -> dict[str, Any]:
    spawn = multiprocessing.get_context("spawn")
    ports = spawn.Queue()
    server = spawn.Process(target=_serve, args=(cert_dir, limits, ports), daemon=True)
    server.start()
    ca_pem = ca.cert_pem.bytes()
    seconds, warmup = args.duration, 1.0
    try:
        port = ports.get(timeout=30)
        now = time.monotonic()
        alone = (now + warmup, now + warmup + seconds)
        baseline = asyncio.run(_legitimate(port, ca_pem, args.rate, alone))
        # the flood starts, settles for a second, and is measured with the legitimate client
        results = spawn.Queue()
        now = time.monotonic()
        window = (now + 2 * warmup, now + 2 * warmup + seconds)
        flooder = spawn.Process(
            target=_flood, args=(port, ca_pem, args.clients, window, results), daemon=True
        )
        flooder.start()
        during = asyncio.run(_legitimate(port, ca_pem, args.rate, window))
        flood_statuses, flood_errors = results.get(timeout=30 + seconds)
        flooder.join(10)
    finally:
        server.terminate()
        server.join(10)
    sent = sum(flood_statuses.values())
    return {
        "setting": name,
        "limits": limits.describe() if limits is not None else "off",
        "seconds": seconds,
        "legit_rate": args.rate,
        "legit_alone": _legit_figures(baseline, seconds),
        "legit_during_flood": _legit_figures(during, seconds),
        "flood": {
            "connections": args.clients,
            "answered_per_s": round(sent / seconds, 1),
            "served_per_s": round(flood_statuses.get(200, 0) / seconds, 1),
            "refused_per_s": round(flood_statuses.get(429, 0) / seconds, 1),
            "errors": flood_errors,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-d", "--duration", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("-r", "--rate", type=float, default=100.0, help="legitimate requests/s")
    parser.add_argument("-c", "--clients", type=int, default=8, help="flood connections")
    parser.add_argument("--tight-qps", type=float, default=1000.0)
    parser.add_argument("--tight-per-client-qps", type=float, default=200.0)
    parser.add_argument(
        "--settings", default="off,defaults,tight", help="comma-separated: off, defaults, tight"
    )
    args = parser.parse_args(argv)
    tight = RateLimits(
        qps=args.tight_qps,
        burst=max(1, int(args.tight_qps)),
        per_client_qps=args.tight_per_client_qps,
        per_client_burst=max(1, int(args.tight_per_client_qps)),
    )
    settings: dict[str, RateLimits | None] = {"off": None, "defaults": RateLimits(), "tight": tight}

    ca = trustme.CA()
    with tempfile.TemporaryDirectory() as cert_dir:
        cert = ca.issue_cert(SERVICE, f"{SERVICE}.{NAMESPACE}", SERVER_NAME)
        Path(cert_dir, "tls.crt").write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
        Path(cert_dir, "tls.key").write_bytes(cert.private_key_pem.bytes())
        for name in args.settings.split(","):
            result = run_setting(name, settings[name], ca, cert_dir, args)
            result["python"] = sys.version.split()[0]
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
