"""The webhook server with client authentication, over real TLS on localhost: the caller
presents the kube-apiserver's client certificate (as the apiserver does from the kubeconfig of
its admission configuration) or a bearer token; off by default any client is served."""

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
from manager.cli import options_from_args, parse_args, serve
from manager.webhooks.server import StaticStateProvider, WebhookServer
from tests.unit.koordkube.tlsclients import (
    client_cert,
    client_context,
    install_serving_pair,
    request,
    write_ca_bundle,
)
from tests.unit.manager.webhooks import builders

SERVICE, NAMESPACE = "koord-manager", "koordinator-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
APISERVER = "kube-apiserver"
TOKEN = "0123456789abcdef-apiserver-token"
REVIEW = json.dumps(builders.review(builders.pod())).encode()


@dataclass
class Setup:
    server: WebhookServer
    server_ca: trustme.CA
    client_ca: trustme.CA
    ca_file: Path

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.server.bound_port}{path}"

    async def post(self, context: ssl.SSLContext, token: str | None = None) -> tuple[int, str]:
        return await request(
            "POST",
            self.url("/validate-pod"),
            context,
            server_name=SERVER_NAME,
            token=token,
            body=REVIEW,
        )

    def client(self, ca: trustme.CA | None = None, name: str = APISERVER) -> ssl.SSLContext:
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
    install_serving_pair(cert_dir, server_ca, SERVICE, f"{SERVICE}.{NAMESPACE}", SERVER_NAME)
    ca_file = write_ca_bundle(tmp_path / "client-ca.crt", client_ca)
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    auth = ClientAuth.of(ca_file if certs else None, names, tmp_path / "tokens" if tokens else None)
    server = WebhookServer(
        "127.0.0.1",
        0,
        cert_dir,
        StaticStateProvider(),
        NAMESPACE,
        client_auth=auth,
    )
    await server.start()
    try:
        yield Setup(server, server_ca, client_ca, ca_file)
    finally:
        await server.stop()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


def allowed(status: int, text: str) -> bool:
    assert status == 200, text
    answer = json.loads(text)
    return bool(answer["response"]["allowed"])


def test_off_by_default_any_client_is_served(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, certs=False) as s:
            assert s.server.authenticator is None
            assert s.server.certificates is not None
            assert s.server.certificates.context.verify_mode == ssl.CERT_NONE
            assert allowed(*await s.post(s.anonymous()))

    run(scenario)


def test_the_apiserver_certificate_is_served_others_refused(tmp_path: Path) -> None:
    refused: list[str] = []

    async def scenario() -> None:
        async with serving(tmp_path, names=(APISERVER,)) as s:
            assert s.server.authenticator is not None
            s.server.authenticator.on_refused = refused.append  # as koord-manager's metric
            assert allowed(*await s.post(s.client()))
            # no certificate: the handshake itself fails (ssl.CERT_REQUIRED)
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.post(s.anonymous())
            # a certificate of another CA: likewise
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.post(s.client(trustme.CA()))
            # the right CA, a name not allowed
            status, text = await s.post(s.client(name="system:node:worker-1"))
            assert status == 403
            assert text.startswith("Forbidden: client certificate")
            assert s.server.authenticator is not None
            assert s.server.authenticator.refusals == {UNAUTHENTICATED: 0, FORBIDDEN: 1}
            assert refused == [FORBIDDEN]

    run(scenario)


def test_bearer_token_beside_certificates(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, tokens=True, names=(APISERVER,)) as s:
            assert s.server.certificates is not None
            assert s.server.certificates.context.verify_mode == ssl.CERT_OPTIONAL
            assert allowed(*await s.post(s.anonymous(), token=TOKEN))
            assert allowed(*await s.post(s.client()))
            status, text = await s.post(s.anonymous(), token=TOKEN[:-1])
            assert (status, text) == (401, "Unauthorized: bearer token not accepted\n")
            status, _ = await s.post(s.anonymous())
            assert status == 401
            with pytest.raises(aiohttp.ClientConnectionError):  # verified even when optional
                await s.post(s.client(trustme.CA()), token=TOKEN)
            status, text = await request(
                "GET", s.url("/healthz"), s.anonymous(), server_name=SERVER_NAME
            )
            assert (status, text) == (200, "ok\n")

    run(scenario)


def test_tokens_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path, certs=False, tokens=True) as s:
            assert allowed(*await s.post(s.anonymous(), token=TOKEN))
            assert (await s.post(s.anonymous(), token="guess"))[0] == 401
            # a client certificate is not asked for, so it proves nothing
            assert (await s.post(s.client()))[0] == 401

    run(scenario)


def test_client_ca_rotation_reaches_the_next_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with serving(tmp_path) as s:
            new_ca = trustme.CA()
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.post(s.client(new_ca))
            write_ca_bundle(s.ca_file, s.client_ca, new_ca)  # both, during a rotation
            assert allowed(*await s.post(s.client(new_ca)))
            assert allowed(*await s.post(s.client()))
            write_ca_bundle(s.ca_file, new_ca)  # the old one retired
            with pytest.raises(aiohttp.ClientConnectionError):
                await s.post(s.client())

    run(scenario)


# -- the command line -----------------------------------------------------------------------


def test_flags_give_the_client_auth(tmp_path: Path) -> None:
    args, _ = parse_args([])
    assert options_from_args(args).webhook_client_auth() == ClientAuth()
    args, _ = parse_args(
        [
            f"--webhook-client-ca-file={tmp_path / 'ca.crt'}",
            "--webhook-client-allowed-names=kube-apiserver,apiserver-loopback-client",
            f"--webhook-client-token-file={tmp_path / 'tokens'}",
        ]
    )
    assert options_from_args(args).webhook_client_auth() == ClientAuth(
        ca_file=tmp_path / "ca.crt",
        allowed_names=frozenset({APISERVER, "apiserver-loopback-client"}),
        token_file=tmp_path / "tokens",
    )


def test_a_missing_token_file_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install_serving_pair(tmp_path, trustme.CA(), SERVER_NAME)
    args, _ = parse_args(
        [f"--webhook-cert-dir={tmp_path}", f"--webhook-client-token-file={tmp_path / 'none'}"]
    )
    assert asyncio.run(serve(args)) == 2
    assert f"token file {tmp_path / 'none'} is not a readable file" in capsys.readouterr().err
