"""The extender with client authentication, over real TLS on localhost: the caller presents
kube-scheduler's client certificate (the extender's tlsConfig certFile/keyFile) or a bearer
token; off by default any client is served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import trustme

from koordkube.clientauth import FORBIDDEN, UNAUTHENTICATED, ClientAuth
from scheduler.cli import build_parser, options_from_args, serve, with_client_auth_refusals
from scheduler.server import ExtenderServer
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.tlsclients import (
    client_cert,
    client_context,
    install_serving_pair,
    request,
    write_ca_bundle,
)
from tests.unit.scheduler.objects import make_pod

SERVER_NAME = "koord-scheduler.koordinator-system.svc"
KUBE_SCHEDULER = "system:kube-scheduler"
TOKEN = "extender-token-0123456789"
# prioritize over no nodes: an empty list, whatever the cluster holds
PRIORITIZE = json.dumps({"Pod": make_pod("web"), "NodeNames": []}).encode()


@dataclass
class Setup:
    server: ExtenderServer
    server_ca: trustme.CA
    client_ca: trustme.CA
    ca_file: Path

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.port}{path}"

    async def prioritize(
        self, context: ssl.SSLContext, token: str | None = None
    ) -> tuple[int, str]:
        return await request(
            "POST",
            self.url("/scheduler/prioritize"),
            context,
            server_name=SERVER_NAME,
            token=token,
            body=PRIORITIZE,
        )

    def client(self, ca: trustme.CA | None = None, name: str = KUBE_SCHEDULER) -> ssl.SSLContext:
        return client_context(self.server_ca, client_cert(ca or self.client_ca, name))

    def anonymous(self) -> ssl.SSLContext:
        return client_context(self.server_ca)


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, *, certs: bool = True, tokens: bool = False, names: tuple[str, ...] = ()
) -> AsyncIterator[Setup]:
    server_ca, client_ca = trustme.CA(), trustme.CA()
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    install_serving_pair(cert_dir, server_ca, SERVER_NAME)
    ca_file = write_ca_bundle(tmp_path / "client-ca.crt", client_ca)
    (tmp_path / "tokens").write_text(f"# for the test\n{TOKEN}\n")
    api = FakeKubeAPI().kube_api()
    server = ExtenderServer(
        api,
        InformerClusterView(api),
        host="127.0.0.1",
        port=0,
        cert_dir=cert_dir,
        client_auth=ClientAuth.of(
            ca_file if certs else None, names, tmp_path / "tokens" if tokens else None
        ),
    )
    await server.start()
    try:
        yield Setup(server, server_ca, client_ca, ca_file)
    finally:
        await server.stop()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_off_by_default_any_client_is_served(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, certs=False) as s:
            assert s.server.authenticator is None
            assert with_client_auth_refusals((b"x\n", "t"), None) == (b"x\n", "t")
            assert await s.prioritize(s.anonymous()) == (200, "[]")

    run(scenario)


def test_kube_scheduler_certificate_is_served_others_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, names=(KUBE_SCHEDULER,)) as s:
            assert await s.prioritize(s.client()) == (200, "[]")
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.prioritize(s.anonymous())
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.prioritize(s.client(trustme.CA()))
            status, text = await s.prioritize(s.client(name="system:anonymous"))
            assert status == 403
            assert "not an allowed name" in text
            assert s.server.requests["prioritize"] == 1  # the refused never reached the verb
            assert s.server.authenticator is not None
            assert s.server.authenticator.refusals == {UNAUTHENTICATED: 0, FORBIDDEN: 1}
            body, _ = with_client_auth_refusals((b"", "text/plain"), s.server.authenticator)
            assert body.decode().splitlines() == [
                "# TYPE koord_scheduler_extender_client_auth_refused_total counter",
                'koord_scheduler_extender_client_auth_refused_total{reason="forbidden"} 1',
                'koord_scheduler_extender_client_auth_refused_total{reason="unauthenticated"} 0',
            ]

    run(scenario)


def test_bearer_token_right_wrong_missing_and_healthz_open(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, tokens=True) as s:
            assert await s.prioritize(s.anonymous(), token=TOKEN) == (200, "[]")
            assert await s.prioritize(s.client()) == (200, "[]")
            assert (await s.prioritize(s.anonymous(), token="x" + TOKEN))[0] == 401
            assert (await s.prioritize(s.anonymous()))[0] == 401
            status, text = await request(
                "GET", s.url("/healthz"), s.anonymous(), server_name=SERVER_NAME
            )
            assert (status, text) == (200, "ok\n")
            assert s.server.requests["prioritize"] == 2

    run(scenario)


def test_client_ca_rotation_reaches_the_next_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path) as s:
            new_ca = trustme.CA()
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.prioritize(s.client(new_ca))
            write_ca_bundle(s.ca_file, new_ca)
            assert await s.prioritize(s.client(new_ca)) == (200, "[]")
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.prioritize(s.client())

    run(scenario)


# -- the command line -----------------------------------------------------------------------


def test_flags_give_the_client_auth(tmp_path: Path) -> None:
    base = ["--cert-dir", str(tmp_path)]
    assert options_from_args(build_parser().parse_args(base)).client_auth() == ClientAuth()
    args = build_parser().parse_args(
        [
            *base,
            f"--client-ca-file={tmp_path / 'ca.crt'}",
            "--client-allowed-names=system:kube-scheduler, kube-scheduler",
            f"--client-token-file={tmp_path / 'tokens'}",
        ]
    )
    assert options_from_args(args).client_auth() == ClientAuth(
        ca_file=tmp_path / "ca.crt",
        allowed_names=frozenset({"system:kube-scheduler", "kube-scheduler"}),
        token_file=tmp_path / "tokens",
    )


def test_a_missing_client_ca_file_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install_serving_pair(tmp_path, trustme.CA(), SERVER_NAME)
    args = build_parser().parse_args(
        ["--cert-dir", str(tmp_path), f"--client-ca-file={tmp_path / 'none.crt'}"]
    )
    assert asyncio.run(serve(args)) == 2
    assert f"client CA file {tmp_path / 'none.crt'} is not a readable file" in (
        capsys.readouterr().err
    )
