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
import datetime as dt
import ssl
import time
from pathlib import Path
from typing import Any

import pytest

from koordkube import certs
from koordkube.certkeeper import CertificateKeeper, RaceLost, webhook_names
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
            (bundle,) = ca_bundles(fake)
            assert base64.b64decode(bundle) == new.ca_cert
            assert await served_certificate(server.bound_port, bundle) == new.cert
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
