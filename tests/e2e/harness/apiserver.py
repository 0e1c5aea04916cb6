"""koordkube's FakeKubeAPI served over HTTPS on a real socket, for components in containers.

The unit tests hand ``FakeKubeAPI`` to a client as its transport; a koord-manager or
koord-scheduler started from the image talks to an API server over the network with its
service account, as in a cluster. This serves the same fake behind TLS (a throwaway CA from
trustme, a serving certificate for the listening address) and checks the bearer token: a
request without the token the test projected into the pod gets 401, as the real server answers,
and is counted. The fake runs on this server's own event loop in a thread; tests reach it
through ``call`` so that its watches are fed from that loop.

Usage::

    with ApiServer(fake, host="10.44.3.1", token="t0k3n") as api:
        api.ca_pem, api.port                     # what the pod's service account gets
        api.call(fake.get, "NodeSLO", "node-a")  # read the fake from its own loop
"""

from __future__ import annotations

import asyncio
import secrets
import ssl
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import httpx2
import trustme
from aiohttp import web

from tests.fakekube import FakeKubeAPI

T = TypeVar("T")
METHODS_WITH_BODY = ("POST", "PUT", "PATCH")


class ApiServer:
    """See the module docstring."""

    def __init__(self, fake: FakeKubeAPI, host: str, token: str | None = None) -> None:
        self.fake, self.host = fake, host
        self.token = token or secrets.token_urlsafe(24)
        self.unauthorized = 0
        ca = trustme.CA()
        self.ca_pem = ca.cert_pem.bytes()
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(host).configure_cert(self._context)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> ApiServer:
        self._thread.start()
        self.port = asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(30)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            self.call(self.fake.close_watches)  # open watches would hold the shutdown up
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the server's loop (the fake is not thread-safe); its result."""

        async def run() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(30)

    async def _serve(self) -> int:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self._context)
        await site.start()
        server = site._server  # the bound port: aiohttp offers no public accessor
        assert isinstance(server, asyncio.base_events.Server)
        return int(server.sockets[0].getsockname()[1])

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            self.unauthorized += 1
            status: dict[str, object] = {"kind": "Status", "apiVersion": "v1"}
            status |= {"status": "Failure", "code": 401, "reason": "Unauthorized"}
            status["message"] = "Unauthorized"
            return web.json_response(status, status=401)
        body = await request.read() if request.method in METHODS_WITH_BODY else b""
        forwarded = httpx2.Request(
            request.method,
            f"https://{self.host}{request.rel_url}",
            headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
            content=body,
        )
        answer = await self.fake.handle_async_request(forwarded)
        headers = {k: v for k, v in answer.headers.items() if k.lower() == "content-type"}
        try:
            return web.Response(status=answer.status_code, headers=headers, body=answer.content)
        except httpx2.ResponseNotRead:
            pass  # a watch: streamed as the fake yields its events
        reply = web.StreamResponse(status=answer.status_code, headers=headers)
        await reply.prepare(request)
        try:
            async for chunk in answer.aiter_raw():
                await reply.write(chunk)
            await reply.write_eof()
        except ConnectionResetError:
            pass  # the client ended the watch
        finally:
            await answer.aclose()
        return reply
