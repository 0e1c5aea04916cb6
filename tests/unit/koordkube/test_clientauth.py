"""Client authentication (koordkube.clientauth) and the client CA in CertificateReloader: the
decision per request, the token file, the rate-limited warning, and over real TLS the
handshake's verification with a CA bundle that is rotated without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
import trustme
from aiohttp import web

from koordkube import clientauth
from koordkube.clientauth import (
    FORBIDDEN,
    UNAUTHENTICATED,
    ClientAuth,
    ClientAuthenticator,
    TokenFile,
    bearer_token,
    certificate_names,
    parse_names,
    read_tokens,
)
from koordkube.tlsreload import CertificateReloader
from tests.unit.koordkube.tlsclients import (
    client_cert,
    client_context,
    install_serving_pair,
    request,
    write_atomically,
    write_ca_bundle,
)

SERVER_NAME = "server.test"


def peercert(cn: str, *dns: str) -> dict[str, Any]:
    """What SSLObject.getpeercert() gives for a verified certificate."""
    return {
        "subject": ((("organizationName", "test"),), (("commonName", cn),)),
        "subjectAltName": tuple(("DNS", name) for name in dns),
    }


# -- configuration ------------------------------------------------------------------------


def test_off_by_default(tmp_path: Path) -> None:
    config = ClientAuth()
    assert not config.enabled
    assert config.verify_mode == ssl.CERT_NONE
    assert ClientAuth.of(None, [""], "") == config
    assert config.problems() == []


def test_verify_mode_required_alone_optional_beside_tokens(tmp_path: Path) -> None:
    ca_file, tokens = tmp_path / "ca.crt", tmp_path / "tokens"
    assert ClientAuth.of(ca_file).verify_mode == ssl.CERT_REQUIRED
    assert ClientAuth.of(ca_file, token_file=tokens).verify_mode == ssl.CERT_OPTIONAL
    assert ClientAuth.of(token_file=tokens).verify_mode == ssl.CERT_NONE
    assert ClientAuth.of(token_file=tokens).enabled


def test_problems_name_missing_files_and_names_without_a_ca(tmp_path: Path) -> None:
    config = ClientAuth.of(tmp_path / "ca.crt", ["kube-apiserver"], tmp_path / "tokens")
    assert config.problems() == [
        f"client CA file {tmp_path / 'ca.crt'} is not a readable file",
        f"token file {tmp_path / 'tokens'} is not a readable file",
    ]
    assert ClientAuth.of(allowed_names=["x"]).problems() == [
        "allowed client names need a client CA file"
    ]


def test_parsers() -> None:
    assert parse_names(" kube-apiserver, ,system:kube-scheduler ") == {
        "kube-apiserver",
        "system:kube-scheduler",
    }
    assert read_tokens("# a comment\n\n  s3cret  \nother\n") == {b"s3cret", b"other"}
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer   abc ") == "abc"
    assert bearer_token("Basic dXNlcjpwYXNz") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


def test_certificate_names_are_the_cn_and_dns_sans() -> None:
    assert certificate_names(peercert("kube-apiserver", "a.svc", "b.svc")) == {
        "kube-apiserver",
        "a.svc",
        "b.svc",
    }
    assert certificate_names({}) == frozenset()
    assert certificate_names(None) == frozenset()


# -- the decision -------------------------------------------------------------------------


def authenticator(tmp_path: Path, **config: Any) -> ClientAuthenticator:
    return ClientAuthenticator(ClientAuth.of(**config), component="test")


def test_certificates_with_allowed_names(tmp_path: Path) -> None:
    auth = authenticator(tmp_path, ca_file=tmp_path / "ca.crt", allowed_names=["kube-apiserver"])
    assert auth.decide(peercert("kube-apiserver"), None).allowed
    assert auth.decide(peercert("other", "kube-apiserver"), None).allowed  # a DNS SAN counts
    refused = auth.decide(peercert("mallory"), None)
    assert (refused.status, refused.reason) == (
        403,
        "client certificate ['mallory'] is not an allowed name",
    )
    assert auth.decide(None, None).status == 401
    assert auth.decide({}, "Bearer anything").status == 401  # no token file: tokens mean nothing


def test_any_certificate_of_the_ca_without_allowed_names(tmp_path: Path) -> None:
    auth = authenticator(tmp_path, ca_file=tmp_path / "ca.crt")
    assert auth.decide(peercert("whoever"), None).allowed


def test_tokens_right_wrong_missing(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("s3cret\n")
    auth = authenticator(tmp_path, token_file=tmp_path / "tokens")
    assert auth.decide(None, "Bearer s3cret").allowed
    wrong = auth.decide(None, "Bearer s3cre")
    assert (wrong.status, wrong.reason) == (401, "bearer token not accepted")
    missing = auth.decide(None, None)
    assert (missing.status, missing.reason) == (401, "no client certificate or bearer token")
    # a certificate means nothing without a client CA (the handshake verified none)
    assert auth.decide(peercert("kube-apiserver"), None).status == 401


def test_either_credential_is_enough(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("s3cret\n")
    auth = authenticator(
        tmp_path,
        ca_file=tmp_path / "ca.crt",
        allowed_names=["kube-apiserver"],
        token_file=tmp_path / "tokens",
    )
    assert auth.decide(peercert("kube-apiserver"), None).allowed
    assert auth.decide(None, "Bearer s3cret").allowed
    assert auth.decide(peercert("mallory"), "Bearer s3cret").allowed
    assert auth.decide(peercert("mallory"), "Bearer wrong").status == 403
    assert auth.decide(None, "Bearer wrong").status == 401


def test_every_token_is_compared_even_after_a_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tokens").write_text("one\ntwo\nthree\n")
    tokens = TokenFile(tmp_path / "tokens")
    compared: list[bytes] = []

    def compare(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return a == b

    monkeypatch.setattr(clientauth, "hmac", SimpleNamespace(compare_digest=compare))
    for presented in ("one", "two", "three", "nope"):
        compared.clear()
        assert tokens.accepts(presented) is (presented != "nope")
        assert sorted(compared) == [b"one", b"three", b"two"]


def test_token_file_follows_its_file_and_keeps_the_last_good_one(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    write_atomically(path, b"old\n")
    tokens = TokenFile(path)
    assert tokens.accepts("old")
    write_atomically(path, b"new\n")
    assert tokens.accepts("new")
    assert not tokens.accepts("old")
    assert tokens.reloads == 1
    path.unlink()
    assert tokens.accepts("new")  # a vanished file keeps what was read last
    assert tokens.reloads == 1


def test_a_missing_token_file_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ClientAuthenticator(ClientAuth.of(token_file=tmp_path / "none"), component="test")


# -- the middleware: status codes, counts, the warning once a minute ------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def plain_server(auth: ClientAuthenticator) -> AsyncIterator[str]:
    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello\n")

    app = web.Application(middlewares=[auth.middleware])
    app.router.add_get("/hello", hello)
    app.router.add_get("/healthz", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def test_refusals_are_counted_and_warned_at_most_once_an_interval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "tokens").write_text("s3cret\n")
    clock = Clock()
    auth = ClientAuthenticator(
        ClientAuth.of(token_file=tmp_path / "tokens"),
        component="test",
        clock=clock,
        warning_interval=60,
    )

    async def scenario() -> list[tuple[int, str, str | None]]:
        answers = []
        async with plain_server(auth) as base, aiohttp.ClientSession() as session:
            for token in (None, "wrong", "wrong", "s3cret"):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with session.get(base + "/hello", headers=headers) as response:
                    answers.append(
                        (
                            response.status,
                            await response.text(),
                            response.headers.get("WWW-Authenticate"),
                        )
                    )
            clock.now += 61
            async with session.get(base + "/hello") as response:
                assert response.status == 401
            async with session.get(base + "/healthz") as response:
                assert (response.status, await response.text()) == (200, "hello\n")
        return answers

    with caplog.at_level(logging.WARNING, logger="koordkube.clientauth"):
        answers = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert answers == [
        (401, "Unauthorized: no client certificate or bearer token\n", "Bearer"),
        (401, "Unauthorized: bearer token not accepted\n", "Bearer"),
        (401, "Unauthorized: bearer token not accepted\n", "Bearer"),
        (200, "hello\n", None),
    ]
    assert auth.refusals == {UNAUTHENTICATED: 4, FORBIDDEN: 0}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert warnings[0].startswith("test refused GET /hello from 127.0.0.1: 401 no client")
    assert warnings[1].endswith("(2 more refused since the last warning)")


# -- the client CA in CertificateReloader, over real TLS -----------------------------------


@contextlib.asynccontextmanager
async def tls_server(
    reloader: CertificateReloader, auth: ClientAuthenticator | None = None
) -> AsyncIterator[str]:
    async def whoami(request: web.Request) -> web.Response:
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        return web.Response(text=",".join(sorted(certificate_names(cert))) or "-")

    app = web.Application(middlewares=[auth.middleware] if auth else [])
    app.router.add_get("/whoami", whoami)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=reloader.context)
    await site.start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}/whoami"
    finally:
        await runner.cleanup()


def test_without_a_client_ca_nothing_is_asked(tmp_path: Path) -> None:
    server_ca = trustme.CA()
    install_serving_pair(tmp_path, server_ca, SERVER_NAME)
    reloader = CertificateReloader(tmp_path)
    assert reloader.context.verify_mode == ssl.CERT_NONE

    async def scenario() -> None:
        async with tls_server(reloader) as url:
            status, text = await request(
                "GET", url, client_context(server_ca), server_name=SERVER_NAME
            )
            assert (status, text) == (200, "-")

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_client_ca_rotation_is_picked_up_without_a_restart(tmp_path: Path) -> None:
    server_ca, old_ca, new_ca = trustme.CA(), trustme.CA(), trustme.CA()
    install_serving_pair(tmp_path, server_ca, SERVER_NAME)
    ca_file = write_ca_bundle(tmp_path / "client-ca.crt", old_ca)
    reloader = CertificateReloader(tmp_path, client_ca_file=ca_file)
    assert reloader.context.verify_mode == ssl.CERT_REQUIRED
    old_client = client_context(server_ca, client_cert(old_ca, "kube-apiserver"))
    new_client = client_context(server_ca, client_cert(new_ca, "kube-apiserver"))

    async def scenario() -> None:
        async with tls_server(reloader) as url:
            assert await request("GET", url, old_client, server_name=SERVER_NAME) == (
                200,
                "client.invalid,kube-apiserver",
            )
            with pytest.raises(aiohttp.ClientConnectionError):
                await request("GET", url, new_client, server_name=SERVER_NAME)
            write_ca_bundle(ca_file, new_ca)
            assert (await request("GET", url, new_client, server_name=SERVER_NAME))[0] == 200
            assert reloader.reloads == 1
            with pytest.raises(aiohttp.ClientConnectionError):
                await request("GET", url, old_client, server_name=SERVER_NAME)
            # a garbled bundle (half written) keeps the one in use
            write_atomically(ca_file, b"-----BEGIN CERTIFICATE-----\nnot base64\n")
            assert (await request("GET", url, new_client, server_name=SERVER_NAME))[0] == 200
            assert reloader.reloads == 1

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_optional_client_certificate_is_still_verified(tmp_path: Path) -> None:
    server_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA()
    install_serving_pair(tmp_path, server_ca, SERVER_NAME)
    ca_file = write_ca_bundle(tmp_path / "client-ca.crt", client_ca)
    reloader = CertificateReloader(
        tmp_path, client_ca_file=ca_file, client_verify=ssl.CERT_OPTIONAL
    )

    async def scenario() -> None:
        async with tls_server(reloader) as url:
            anonymous = client_context(server_ca)
            assert await request("GET", url, anonymous, server_name=SERVER_NAME) == (200, "-")
            signed = client_context(server_ca, client_cert(client_ca, "kube-scheduler"))
            status, text = await request("GET", url, signed, server_name=SERVER_NAME)
            assert (status, text) == (200, "client.invalid,kube-scheduler")
            forged = client_context(server_ca, client_cert(other_ca, "kube-scheduler"))
            with pytest.raises(aiohttp.ClientConnectionError):
                await request("GET", url, forged, server_name=SERVER_NAME)

    asyncio.run(asyncio.wait_for(scenario(), 30))
