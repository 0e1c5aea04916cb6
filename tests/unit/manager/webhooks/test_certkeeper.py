"""koord-manager keeps its webhook certificate (koordkube.certkeeper with the caBundle writer)
against the fake API server, with an injectable clock, and a real HTTPS server that serves
whatever the keeper wrote: created when missing, renewed before its end, the caBundle of both
webhook configurations set and restored after a helm upgrade blanks it, a handshake with the
new certificate checked by the caBundle the API server would trust.

Clocks: OpenSSL checks a certificate against the real time, so each scenario starts its fake
clock in the past by the amount it later moves forward, ending at the real now."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509 import DNSName
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from koordkube import certs
from koordkube.certkeeper import CertificateKeeper, RaceLost, webhook_names
from koordkube.errors import Forbidden
from manager.webhooks.cabundle import (
    DEFAULT_MUTATING,
    DEFAULT_VALIDATING,
    MUTATING,
    VALIDATING,
    CABundleWriter,
)
from manager.webhooks.server import StaticStateProvider, WebhookServer
from tests.fakekube import FakeKubeAPI

NAMESPACE, SECRET, SERVICE = "koordinator-system", "koordinator-webhook-certs", "koord-manager"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
DAY = 86400.0
VALIDATING_HOOKS = ["vpod.koordinator.sh", "vcm.koordinator.sh"]
CONFIGURATIONS = [(MUTATING, DEFAULT_MUTATING), (VALIDATING, DEFAULT_VALIDATING)]


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def configuration(kind: str, name: str, hooks: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": hook,
                "clientConfig": {
                    "service": {"name": SERVICE, "namespace": NAMESPACE, "path": f"/{hook}"},
                },
            }
            for hook in hooks
        ],
    }


def cluster(*, secret: bool = True) -> FakeKubeAPI:
    """What the chart installs: the empty Secret and both configurations without a caBundle."""
    fake = FakeKubeAPI()
    fake.seed(
        configuration(MUTATING, DEFAULT_MUTATING, ["mpod.koordinator.sh"]),
        configuration(VALIDATING, DEFAULT_VALIDATING, VALIDATING_HOOKS),
    )
    if secret:
        fake.seed(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": SECRET, "namespace": NAMESPACE},
                "type": "Opaque",
            }
        )
    return fake


def keeper(fake: FakeKubeAPI, cert_dir: Path, clock: Clock) -> CertificateKeeper:
    return CertificateKeeper(
        fake.kube_api(),
        NAMESPACE,
        SECRET,
        webhook_names(SERVICE, NAMESPACE),
        cert_dir,
        on_ca=CABundleWriter(fake.kube_api(), CONFIGURATIONS),
        clock=clock,
    )


def ca_bundles(fake: FakeKubeAPI) -> set[str]:
    return {
        hook["clientConfig"].get("caBundle", "")
        for kind, name in CONFIGURATIONS
        for hook in (fake.get(kind, name) or {})["webhooks"]
    }


def secret_data(fake: FakeKubeAPI) -> dict[str, bytes]:
    secret = fake.get("Secret", SECRET, NAMESPACE) or {}
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


async def served_certificate(port: int, ca_bundle: str) -> bytes:
    """The PEM certificate a new connection gets, verified as the API server would: the
    configuration's caBundle as the only trust, the Service's DNS name."""
    context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME
    )
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    return ssl.DER_cert_to_PEM_cert(der).encode()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_created_renewed_and_served_without_a_restart(tmp_path: Path) -> None:
    fake = cluster()
    clock = Clock(time.time() - 200 * DAY)  # the first pair has 165 days left at the real now

    async def scenario() -> None:
        k = keeper(fake, tmp_path, clock)
        first = await k.first_sync()
        data = secret_data(fake)
        assert data["tls.crt"] == data["cert.pem"] == first.cert
        assert (tmp_path / "tls.crt").read_bytes() == first.cert
        assert (tmp_path / "tls.key").read_bytes() == first.key
        assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0
        (bundle,) = ca_bundles(fake)
        assert base64.b64decode(bundle) == first.ca_cert
        server = WebhookServer("127.0.0.1", 0, tmp_path, StaticStateProvider(), NAMESPACE)
        await server.start()
        try:
            assert await served_certificate(server.bound_port, bundle) == first.cert
            # 100 days on: 265 days left, nothing is written
            clock.now += 100 * DAY
            writes = len(fake.calls("update"))
            assert await k.sync() == first
            assert len(fake.calls("update")) == writes and k.renewals == 1
            # 200 days on (the real now): 165 days left, under six months: renewed
            clock.now += 100 * DAY
            second = await k.sync()
            assert second.cert != first.cert and second.ca_cert == first.ca_cert
            assert k.renewals == 2
            assert secret_data(fake)["tls.crt"] == second.cert
            assert ca_bundles(fake) == {bundle}  # same CA: the configurations are untouched
            assert await served_certificate(server.bound_port, bundle) == second.cert
            assert server.certificates is not None and server.certificates.reloads == 1
        finally:
            await server.stop()

    run(scenario())


def test_a_new_ca_reaches_the_ca_bundles_and_the_next_handshake(tmp_path: Path) -> None:
    fake = cluster()
    # the CA made 9.5 years ago has half a year left at the real now: a new CA
    clock = Clock(time.time() - 9.5 * 365 * DAY)

    async def scenario() -> None:
        k = keeper(fake, tmp_path, clock)
        old = await k.first_sync()
        server = WebhookServer("127.0.0.1", 0, tmp_path, StaticStateProvider(), NAMESPACE)
        await server.start()
        try:
            clock.now = time.time()
            new = await k.sync()
            assert new.ca_cert != old.ca_cert
            assert new.previous_cas == old.ca_cert  # half a year left: still trusted
            assert secret_data(fake)["ca-cert-previous.pem"] == old.ca_cert
            (bundle,) = ca_bundles(fake)
            assert base64.b64decode(bundle) == new.ca_cert + old.ca_cert
            assert await served_certificate(server.bound_port, bundle) == new.cert
            new_only = base64.b64encode(new.ca_cert).decode()
            assert await served_certificate(server.bound_port, new_only) == new.cert
            with pytest.raises(ssl.SSLCertVerificationError):
                await served_certificate(server.bound_port, base64.b64encode(old.ca_cert).decode())
        finally:
            await server.stop()

    run(scenario())


def test_a_blanked_ca_bundle_is_restored_and_a_missing_secret_created(tmp_path: Path) -> None:
    fake = cluster(secret=False)  # a manager run outside the chart: it creates the Secret
    clock = Clock(time.time())

    async def scenario() -> None:
        k = keeper(fake, tmp_path, clock)
        bundle = await k.first_sync()
        assert fake.calls("create", "/secrets$")
        assert certs.Bundle.from_secret_data(secret_data(fake)) == bundle
        # helm upgrade renders the configuration again, without a caBundle
        fake.seed(configuration(MUTATING, DEFAULT_MUTATING, ["mpod.koordinator.sh"]))
        assert "" in ca_bundles(fake)
        await k.sync()
        assert ca_bundles(fake) == {base64.b64encode(bundle.ca_cert).decode()}
        assert k.renewals == 1  # the Secret's pair was kept

    run(scenario())


def test_replicas_share_the_pair_the_first_one_wrote(tmp_path: Path) -> None:
    fake = cluster()
    clock = Clock(time.time())

    async def scenario() -> None:
        a = keeper(fake, tmp_path / "a", clock)
        b = keeper(fake, tmp_path / "b", clock)
        first = await a.first_sync()
        assert await b.first_sync() == first and b.renewals == 0
        assert (tmp_path / "b" / "tls.crt").read_bytes() == first.cert

    run(scenario())


def test_a_lost_race_is_read_again(tmp_path: Path) -> None:
    fake = cluster()
    clock = Clock(time.time())

    async def scenario() -> None:
        k = keeper(fake, tmp_path, clock)
        fake.fail("update", f"/namespaces/{NAMESPACE}/secrets/{SECRET}$", 409)
        with pytest.raises(RaceLost):
            await k.sync()
        assert not (tmp_path / "tls.crt").exists()  # nothing served that the Secret lacks
        bundle = await k.first_sync()
        assert certs.Bundle.from_secret_data(secret_data(fake)) == bundle

    run(scenario())


def test_a_failing_api_server_is_retried_and_missing_configurations_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeKubeAPI()  # no webhook configurations at all
    clock = Clock(time.time())

    async def scenario() -> None:
        k = keeper(fake, tmp_path, clock)
        k.interval = 0.01
        fake.fail("get", f"/secrets/{SECRET}$", 500)
        bundle = await k.first_sync()
        assert (tmp_path / "tls.crt").read_bytes() == bundle.cert
        await k.sync()

    run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("serving certificate not ready yet" in w for w in warnings)
    # each missing configuration is said once, not on every pass
    assert sum(DEFAULT_MUTATING in w for w in warnings) == 1
    assert sum(DEFAULT_VALIDATING in w for w in warnings) == 1


def test_a_secret_with_only_a_ca_is_used_as_it_is(tmp_path: Path) -> None:
    """The extender's case (fixed_ca): the chart made the CA kube-scheduler trusts."""
    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = certs.new_ca(now)
    fake = cluster(secret=False)
    fake.seed(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "data": {
                "ca-cert.pem": base64.b64encode(ca_cert).decode(),
                "ca-key.pem": base64.b64encode(ca_key).decode(),
                "other": base64.b64encode(b"kept").decode(),
            },
        }
    )
    k = CertificateKeeper(
        fake.kube_api(),
        NAMESPACE,
        SECRET,
        ["koord-scheduler.koordinator-system.svc"],
        tmp_path,
        fixed_ca=True,
        clock=Clock(now.timestamp()),
    )
    bundle = run(k.first_sync())
    assert bundle.ca_cert == ca_cert
    data = secret_data(fake)
    assert data["tls.crt"] == bundle.cert and data["other"] == b"kept"


def trusts(ca_bundle: str, cert_pem: bytes, when: dt.datetime) -> bool:
    """Whether a caBundle verifies a serving certificate for the Service's name at ``when``
    (cryptography's RFC 5280 path validation, the fake clock's time)."""
    cas = x509.load_pem_x509_certificates(base64.b64decode(ca_bundle))
    verifier = (
        PolicyBuilder().store(Store(cas)).time(when).build_server_verifier(DNSName(SERVER_NAME))
    )
    try:
        verifier.verify(x509.load_pem_x509_certificate(cert_pem), [])
    except VerificationError:
        return False
    return True


def bundle_cas(fake: FakeKubeAPI) -> set[bytes]:
    """The CAs (PEM) the webhooks' caBundles hold; every webhook's must be the same."""
    (bundle,) = ca_bundles(fake)
    return {
        cert.public_bytes(serialization.Encoding.PEM)
        for cert in x509.load_pem_x509_certificates(base64.b64decode(bundle))
    }


def seed_ca(fake: FakeKubeAPI, *, made_days_ago: int, validity_days: int) -> tuple[bytes, float]:
    """Put a CA (no pair) into the Secret, as the chart does: (its PEM, its end)."""
    made = dt.datetime.fromtimestamp(time.time() - made_days_ago * DAY, dt.UTC)
    ca_cert, ca_key = certs.new_ca(made, dt.timedelta(days=validity_days))
    secret = fake.get("Secret", SECRET, NAMESPACE) or {}
    secret["data"] = {
        "ca-cert.pem": base64.b64encode(ca_cert).decode(),
        "ca-key.pem": base64.b64encode(ca_key).decode(),
    }
    fake.seed(secret)
    return ca_cert, x509.load_pem_x509_certificate(ca_cert).not_valid_after_utc.timestamp()


class Replica:
    """One koord-manager: a keeper with its own clock and cert dir, whose ``on_ca`` (the real
    caBundle writer) calls ``check`` before and after it writes, and can be held before it
    writes, so a pass can be stopped between its Secret write, its caBundle write and its
    files."""

    def __init__(self, name: str, fake: FakeKubeAPI, folder: Path, clock: Clock) -> None:
        self.name, self.dir, self.clock = name, folder / name, clock
        self.writer = CABundleWriter(fake.kube_api(), CONFIGURATIONS)
        self.keeper = CertificateKeeper(
            fake.kube_api(),
            NAMESPACE,
            SECRET,
            webhook_names(SERVICE, NAMESPACE),
            self.dir,
            on_ca=self.on_ca,
            clock=clock,
        )
        self.check: Callable[[str], Awaitable[None]] | None = None
        self.hold: asyncio.Event | None = None
        self.holding = asyncio.Event()

    async def on_ca(self, trusted: bytes) -> None:
        if self.check is not None:
            await self.check(f"{self.name}: before its caBundle write")
        if self.hold is not None:
            self.holding.set()
            await self.hold.wait()
        await self.writer(trusted)
        if self.check is not None:
            await self.check(f"{self.name}: after its caBundle write, before its files")

    def serving(self) -> bytes:
        return (self.dir / "tls.crt").read_bytes()


def test_a_ca_change_keeps_every_replicas_pair_verifiable(tmp_path: Path) -> None:
    """Two replicas and a new CA, passes interleaved in the orders that lost admissions: at
    every step the caBundle of both configurations verifies the pair each replica serves,
    with cryptography at the fake time and with a real handshake against each replica's
    server while the pairs are valid at the real time."""
    fake = cluster()
    # The chart's CA, made 2000 days ago for 2333: it has 333 days left at the real now, so it
    # was due for replacement (a year before its end) 32 days ago.
    ca_cert, ca_end = seed_ca(fake, made_days_ago=2000, validity_days=2333)
    due = ca_end - 365 * DAY
    a = Replica("a", fake, tmp_path, Clock(due - 41 * DAY))
    b = Replica("b", fake, tmp_path, Clock(due - 41 * DAY))
    servers: dict[str, WebhookServer] = {}
    handshakes = True
    checked: list[str] = []

    async def check(step: str) -> None:
        when = dt.datetime.fromtimestamp(max(a.clock.now, b.clock.now), dt.UTC)
        for bundle in ca_bundles(fake):
            for replica in (a, b):
                served = replica.serving()
                assert trusts(bundle, served, when), f"{step}: the caBundle fails {replica.name}"
                if handshakes:
                    port = servers[replica.name].bound_port
                    assert await served_certificate(port, bundle) == served, step
        checked.append(step)

    async def scenario() -> None:
        nonlocal handshakes
        first = await a.keeper.first_sync()
        assert await b.keeper.first_sync() == first
        assert bundle_cas(fake) == {ca_cert}
        for replica in (a, b):
            servers[replica.name] = WebhookServer(
                "127.0.0.1", 0, replica.dir, StaticStateProvider(), NAMESPACE
            )
            await servers[replica.name].start()
        a.check = b.check = check
        try:
            await check("both serve the chart CA's pair")

            # B's pass (its clock 7 s short of the due time) reads the Secret and is held
            # before its caBundle write; A's (7 s past it) replaces the CA meanwhile.
            b.clock.now, a.clock.now = due - 7, due + 7
            b.hold = asyncio.Event()
            stale = asyncio.create_task(b.keeper.sync())
            await b.holding.wait()
            new = await a.keeper.sync()
            assert new.ca_cert != ca_cert and new.previous_cas == ca_cert
            assert secret_data(fake)["ca-cert-previous.pem"] == ca_cert
            assert a.serving() == new.cert and b.serving() == first.cert
            assert bundle_cas(fake) == {new.ca_cert, ca_cert}
            await check("A serves the new CA's pair, B the old one")
            # B goes on with what it read before A's write: it must not take A's CA away.
            b.hold.set()
            assert await stale == first
            b.hold = None
            assert bundle_cas(fake) == {new.ca_cert, ca_cert}
            await check("B's late caBundle write landed")

            # B's next pass, 53 s later: the new pair, the bundle as it was.
            b.clock.now = due + 46
            assert await b.keeper.sync() == new
            assert b.serving() == new.cert and b.keeper.renewals == 0
            assert bundle_cas(fake) == {new.ca_cert, ca_cert}
            await check("both serve the new CA's pair")
        finally:
            for server in servers.values():
                await server.stop()

        # From here the pairs are made past the real now: the fake time's checks only.
        handshakes = False
        # 97 days before the old CA ends the new pair is renewed; the old CA still trusted.
        a.clock.now = b.clock.now = ca_end - 97 * DAY
        renewed = await a.keeper.sync()
        assert renewed.ca_cert == new.ca_cert and renewed.cert != new.cert
        await check("A renewed the pair under the new CA")
        assert await b.keeper.sync() == renewed
        assert bundle_cas(fake) == {new.ca_cert, ca_cert}
        # 3 days after the old CA's end it goes from the Secret and the caBundles.
        a.clock.now = b.clock.now = ca_end + 3 * DAY
        issued = a.keeper.renewals
        dropped = await a.keeper.sync()
        assert dropped == dataclasses.replace(renewed, previous_cas=b"")
        assert a.keeper.renewals == issued  # nothing issued
        assert "ca-cert-previous.pem" not in secret_data(fake)
        assert bundle_cas(fake) == {new.ca_cert}
        (bundle,) = ca_bundles(fake)
        assert base64.b64decode(bundle) == new.ca_cert
        await check("the old CA dropped, B not passed yet")
        writes = len(fake.calls("update"))
        assert await b.keeper.sync() == dropped
        assert len(fake.calls("update")) == writes  # nothing left to write
        await check("both passed after the old CA's end")

    run(scenario())
    # every point of A's and B's passes was checked, the held one included
    assert checked.count("a: before its caBundle write") == 3
    assert checked.count("b: after its caBundle write, before its files") == 4


def test_a_failed_ca_bundle_write_holds_the_new_pair_back(tmp_path: Path) -> None:
    """A's pass writes the new CA into the Secret and then cannot write the caBundle: it keeps
    serving the old pair (which the caBundle still trusts), and whichever replica passes next
    sets the bundle before serving the new CA's pair."""
    fake = cluster()
    # 111 days left at the real now, 411 at the first passes 300 days earlier
    seed_ca(fake, made_days_ago=1111, validity_days=1222)
    clock = Clock(time.time() - 300 * DAY)
    a = Replica("a", fake, tmp_path, clock)
    b = Replica("b", fake, tmp_path, clock)

    async def scenario() -> None:
        old = await a.keeper.first_sync()
        await b.keeper.first_sync()
        clock.now = time.time()
        fake.fail("update", f"mutatingwebhookconfigurations/{DEFAULT_MUTATING}$", 403)
        with pytest.raises(Forbidden):
            await a.keeper.sync()
        new = certs.Bundle.from_secret_data(secret_data(fake))
        assert new is not None and new.ca_cert != old.ca_cert  # the Secret has the new CA
        assert a.serving() == b.serving() == old.cert  # neither serves it yet
        (bundle,) = ca_bundles(fake)
        assert base64.b64decode(bundle) == old.ca_cert
        # B's pass: bundle first (both CAs), then its files
        assert await b.keeper.sync() == new
        assert b.serving() == new.cert and a.serving() == old.cert
        (bundle,) = ca_bundles(fake)
        when = dt.datetime.fromtimestamp(clock.now, dt.UTC)
        assert trusts(bundle, a.serving(), when) and trusts(bundle, b.serving(), when)
        assert await a.keeper.sync() == new and a.serving() == new.cert

    run(scenario())
