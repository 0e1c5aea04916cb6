"""/healthz, /readyz and /metrics on one address, for koord-manager, koord-scheduler and
koord-descheduler (which adds its read-only /explain routes there)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from aiohttp import web

Exposition = Callable[[], tuple[bytes, str]]  # (body, content type)


def split_addr(addr: str) -> tuple[str, int]:
    """ ":8080" → ("0.0.0.0", 8080); "127.0.0.1:8080" → ("127.0.0.1", 8080)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 - a server's default


async def serve_probes(
    addr: str,
    ready: Callable[[], bool],
    metrics: Exposition,
    routes: Iterable[web.AbstractRouteDef] = (),
) -> web.AppRunner:
    """Serve the three endpoints on ``addr``, and ``routes`` besides them (``web.get(...)``);
    /readyz answers 503 until ``ready()``."""

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_request: web.Request) -> web.Response:
        ok = ready()
        return web.Response(text="ok\n" if ok else "caches not synced\n", status=200 if ok else 503)

    async def exposition(_request: web.Request) -> web.Response:
        body, content_type = metrics()
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", exposition)
    app.router.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = split_addr(addr)
    await web.TCPSite(runner, host, port).start()
    return runner
