"""koordkube.certs: the renewal rule (Koordinator's: a CA reused while valid a year ahead, a
pair renewed once it would not verify six months ahead), checked with OpenSSL (Python's ssl
module) and with trustme's independently made CAs, never by re-deriving the code's numbers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import ssl
import tempfile
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from koordkube import certs

NAMES = [
    "koord-manager",
    "koord-manager.koordinator-system",
    "koord-manager.koordinator-system.svc",
]
T0 = dt.datetime.now(dt.UTC).replace(microsecond=0)  # OpenSSL checks against the real time
DAY = dt.timedelta(days=1)


def handshake_ok(bundle: certs.Bundle, server_name: str) -> bool:
    """Whether OpenSSL accepts the pair for ``server_name`` against the bundle's CA (in-memory
    handshake between two SSLObjects, no sockets)."""
    with tempfile.TemporaryDirectory() as folder:
        cert, key = Path(folder) / "c", Path(folder) / "k"
        cert.write_bytes(bundle.cert)
        key.write_bytes(bundle.key)
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cadata=bundle.ca_cert.decode())
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname=server_name)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (c, s):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        try:
            c.do_handshake()
            return True
        except ssl.SSLWantReadError:
            continue
        except ssl.SSLCertVerificationError:
            return False
    return False


def verifies_at(bundle: certs.Bundle, server_name: str, when: dt.datetime) -> bool:
    """cryptography's own path validation (RFC 5280, as a browser would) at time ``when``."""
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    verifier = (
        PolicyBuilder()
        .store(Store([ca]))
        .time(when)
        .build_server_verifier(x509.DNSName(server_name))
    )
    try:
        verifier.verify(x509.load_pem_x509_certificate(bundle.cert), [])
    except VerificationError:
        return False
    return True


def test_a_fresh_bundle_serves_every_name_and_no_other() -> None:
    bundle, why = certs.ensure(None, NAMES, T0)
    assert why == "no CA"
    for name in NAMES:
        assert handshake_ok(bundle, name)
    assert not handshake_ok(bundle, "koord-manager.other-namespace.svc")
    assert sorted(certs.certificate_names(bundle.cert)) == sorted(NAMES)


def test_ip_addresses_become_ip_sans() -> None:
    bundle, _ = certs.ensure(None, ["koord-scheduler", "10.96.7.13"], T0)
    cert = x509.load_pem_x509_certificate(bundle.cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.96.7.13"]
    assert san.get_values_for_type(x509.DNSName) == ["koord-scheduler"]


def test_a_good_bundle_is_kept_until_six_months_before_its_end() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    end = certs.not_after(bundle.cert)
    assert end == T0.replace(microsecond=0) + dt.timedelta(days=365)
    kept, why = certs.ensure(bundle, NAMES, end - dt.timedelta(days=183))
    assert kept is bundle and why is None
    renewed, why = certs.ensure(bundle, NAMES, end - dt.timedelta(days=181))
    assert why is not None and "expires" in why
    assert renewed.cert != bundle.cert and renewed.key != bundle.key
    assert renewed.ca_cert == bundle.ca_cert  # the CA has years left: reused
    assert verifies_at(renewed, NAMES[2], end + dt.timedelta(days=150))
    assert not verifies_at(bundle, NAMES[2], end + dt.timedelta(days=1))


def test_the_ca_is_renewed_when_it_has_less_than_a_year() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    ca_end = x509.load_pem_x509_certificate(bundle.ca_cert).not_valid_after_utc
    late = ca_end - dt.timedelta(days=300)
    renewed, why = certs.ensure(bundle, NAMES, late)
    assert why is not None and why.startswith("the CA expires")
    assert renewed.ca_cert != bundle.ca_cert
    assert verifies_at(renewed, NAMES[0], ca_end + dt.timedelta(days=30))  # past the old CA


def test_a_new_name_renews_the_pair() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    renewed, why = certs.ensure(bundle, [*NAMES, "webhook.example.org"], T0 + DAY)
    assert why == "the certificate is not for webhook.example.org"
    assert verifies_at(renewed, "webhook.example.org", T0 + 2 * DAY)
    assert not verifies_at(bundle, "webhook.example.org", T0 + 2 * DAY)


def test_a_pair_from_another_ca_or_a_foreign_key_is_replaced() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    other, _ = certs.ensure(None, NAMES, T0)
    mixed = certs.Bundle(bundle.ca_cert, bundle.ca_key, other.cert, other.key)
    fixed, why = certs.ensure(mixed, NAMES, T0)
    assert why == "the certificate is not signed by the CA"
    assert handshake_ok(fixed, NAMES[0])
    wrong_key = certs.Bundle(bundle.ca_cert, bundle.ca_key, bundle.cert, other.key)
    assert certs.server_problem(wrong_key, NAMES, T0) == "the key does not match the certificate"
    garbage = certs.Bundle(bundle.ca_cert, bundle.ca_key, b"-----BEGIN nothing", b"")
    problem = certs.server_problem(garbage, NAMES, T0)
    assert problem is not None and problem.startswith("the certificate does not parse")


@pytest.mark.parametrize("key_type", [trustme.KeyType.RSA, trustme.KeyType.ECDSA])
def test_a_ca_made_elsewhere_is_used_as_it_is(key_type: trustme.KeyType) -> None:
    """A Secret holding only a CA (Koordinator's are RSA; the chart's for the extender): a
    pair is issued from it and the CA is never replaced."""
    ca = trustme.CA(key_type=key_type)
    data = {
        certs.CA_CERT: ca.cert_pem.bytes(),
        certs.CA_KEY: ca.private_key_pem.bytes(),
    }
    given = certs.Bundle.from_secret_data(data)
    assert given is not None and given.cert == b""
    bundle, why = certs.ensure(given, NAMES, T0, fixed_ca=True)
    assert why is not None and "does not parse" in why
    assert bundle.ca_cert == ca.cert_pem.bytes()  # so the handshake trusts trustme's CA
    assert handshake_ok(bundle, NAMES[2])


def test_a_fixed_ca_is_kept_to_its_end_and_its_pairs_never_outlive_it() -> None:
    ca_cert, ca_key = certs.new_ca(T0, dt.timedelta(days=100))
    given = certs.Bundle(ca_cert, ca_key, b"", b"")
    bundle, _ = certs.ensure(given, NAMES, T0 + DAY, fixed_ca=True)
    ca_end = x509.load_pem_x509_certificate(ca_cert).not_valid_after_utc
    assert certs.not_after(bundle.cert) == ca_end
    # capped by the CA, it is as good as it gets: not issued again on every pass
    again, why = certs.ensure(bundle, NAMES, T0 + 2 * DAY, fixed_ca=True)
    assert again is bundle and why is None
    # without fixed_ca the short-lived CA is replaced at once
    _, why = certs.ensure(bundle, NAMES, T0 + 2 * DAY)
    assert why is not None and why.startswith("the CA expires")
    with pytest.raises(ValueError, match="cannot issue from the given CA"):
        certs.ensure(bundle, NAMES, ca_end + DAY, fixed_ca=True)


def test_secret_data_carries_koordinators_keys() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    data = bundle.secret_data()
    koordinators = {"ca-cert.pem", "ca-key.pem", "cert.pem", "key.pem", "tls.crt", "tls.key"}
    assert set(data) == {*koordinators, "ca.crt"}
    assert data["tls.crt"] == data["cert.pem"] == bundle.cert
    assert certs.Bundle.from_secret_data(data) == bundle
    # a Secret with only the kubernetes.io/tls keys (plus the CA) reads the same
    tls_only = {k: v for k, v in data.items() if k not in ("cert.pem", "key.pem")}
    assert certs.Bundle.from_secret_data(tls_only) == bundle
    assert certs.Bundle.from_secret_data({"tls.crt": bundle.cert}) is None


def test_a_ca_whose_key_identifier_is_not_the_sha1_of_its_key_still_verifies() -> None:
    """Helm's genCA (Go) derives a CA's subject key identifier its own way; OpenSSL finds the
    issuer by that identifier, so the pair must name the CA's, not recompute it."""
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: PLC0415

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "go-made-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(T0 - DAY)
        .not_valid_after(T0 + 3650 * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier(b"\x42" * 20), critical=False)
        .sign(key, hashes.SHA256())
    )
    given = certs.Bundle(
        ca.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,  # Go's "RSA PRIVATE KEY"
            serialization.NoEncryption(),
        ),
        b"",
        b"",
    )
    bundle, _ = certs.ensure(given, NAMES, T0, fixed_ca=True)
    cert = x509.load_pem_x509_certificate(bundle.cert)
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert aki.key_identifier == b"\x42" * 20
    assert handshake_ok(bundle, NAMES[0])


def trusted_verifies_at(bundle: certs.Bundle, pair: certs.Bundle, when: dt.datetime) -> bool:
    """Whether ``bundle.trusted()`` (the caBundle) verifies ``pair``'s certificate."""
    verifier = (
        PolicyBuilder()
        .store(Store(x509.load_pem_x509_certificates(bundle.trusted())))
        .time(when)
        .build_server_verifier(x509.DNSName(NAMES[2]))
    )
    try:
        verifier.verify(x509.load_pem_x509_certificate(pair.cert), [])
    except VerificationError:
        return False
    return True


def test_a_replaced_ca_stays_trusted_until_it_ends() -> None:
    first, _ = certs.ensure(None, NAMES, T0)
    ca_end = x509.load_pem_x509_certificate(first.ca_cert).not_valid_after_utc
    # the pair served when the CA is replaced, renewed from it 200 days before
    late = ca_end - dt.timedelta(days=271)
    bundle, _ = certs.ensure(first, NAMES, late - 200 * DAY)
    assert bundle.ca_cert == first.ca_cert and bundle.cert != first.cert
    assert bundle.previous_cas == b"" and bundle.trusted() == bundle.ca_cert
    renewed, why = certs.ensure(bundle, NAMES, late)
    assert why is not None and why.startswith("the CA expires")
    assert renewed.previous_cas == bundle.ca_cert
    # the caBundle verifies a replica still on the old pair and one on the new
    assert trusted_verifies_at(renewed, bundle, late + DAY)
    assert trusted_verifies_at(renewed, renewed, late + DAY)
    # carried by the Secret under a key of its own; ca.crt stays the one CA
    data = renewed.secret_data()
    assert data["ca-cert-previous.pem"] == bundle.ca_cert
    assert data["ca.crt"] == data["ca-cert.pem"] == renewed.ca_cert
    assert certs.Bundle.from_secret_data(data) == renewed
    # kept while it lasts; a pair renewed meanwhile keeps it too
    again, why = certs.ensure(renewed, NAMES, late + 17 * DAY)
    assert again is renewed and why is None
    pair_end = certs.not_after(renewed.cert)
    second, why = certs.ensure(renewed, NAMES, pair_end - dt.timedelta(days=179))
    assert why is not None and second.ca_cert == renewed.ca_cert
    assert second.previous_cas == bundle.ca_cert
    # gone once it has ended, without a pair issued: only previous_cas differs
    dropped, why = certs.ensure(second, NAMES, ca_end + 5 * DAY)
    assert why is None and dropped == dataclasses.replace(second, previous_cas=b"")
    assert dropped.trusted() == second.ca_cert
    assert "ca-cert-previous.pem" not in dropped.secret_data()


def test_a_third_ca_keeps_the_previous_ones_that_have_not_ended() -> None:
    """CAs that live shorter than the year before their end they are replaced: each new one
    carries every earlier CA still valid, and each goes at its own end."""
    ca1, key1 = certs.new_ca(T0, dt.timedelta(days=400))
    first, _ = certs.ensure(certs.Bundle(ca1, key1, b"", b""), NAMES, T0)
    at2 = T0 + 37 * DAY  # ca1 has 363 days left
    second, why = certs.ensure(first, NAMES, at2)
    assert why is not None and second.previous_cas == ca1
    ca2, key2 = certs.new_ca(at2, dt.timedelta(days=390))
    second = certs.Bundle(ca2, key2, b"", b"", ca1)  # as if ensure had made a short one
    at3 = at2 + 29 * DAY  # ca2 has 361 days left, ca1 334
    third, _ = certs.ensure(second, NAMES, at3)
    assert third.previous_cas == ca2 + ca1
    assert set(x509.load_pem_x509_certificates(third.trusted())) == {
        x509.load_pem_x509_certificate(pem) for pem in (third.ca_cert, ca2, ca1)
    }
    ca1_end = x509.load_pem_x509_certificate(ca1).not_valid_after_utc
    later, _ = certs.ensure(third, NAMES, ca1_end + DAY)
    assert later.previous_cas == ca2


def test_a_previous_ca_that_does_not_parse_is_dropped() -> None:
    bundle, _ = certs.ensure(None, NAMES, T0)
    garbled = dataclasses.replace(bundle, previous_cas=b"-----BEGIN CERTIFICATE-----\nx")
    cleaned, why = certs.ensure(garbled, NAMES, T0 + DAY)
    assert why is None and cleaned == bundle
