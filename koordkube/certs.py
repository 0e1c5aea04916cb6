"""Serving certificates a component issues for itself: a CA and a server pair signed by it.

The facts follow Koordinator's webhook certificate controller so that a Secret it wrote can be
taken over and the other way round: the Secret's keys (``ca-cert.pem``, ``ca-key.pem``,
``cert.pem``, ``key.pem``, and the pair again as ``tls.crt``/``tls.key``), a CA reused while it
stays valid a year ahead, and a serving certificate renewed once it would no longer verify six
months ahead (for the DNS names asked, against that CA). Our differences: keys are ECDSA P-256,
not RSA 2048 (as strong for TLS, and generated in microseconds), and the serving certificate
lives a year (Koordinator's ten), so a leaked key is useful for less time; both are renewed by
the same rule. And a CA that is replaced stays in the Secret (``ca-cert-previous.pem``) until
it ends: whoever verifies the pairs (the webhooks' caBundle) trusts both while replicas move
from a pair of the old CA to one of the new (``Bundle.trusted``).

Pure functions over PEM bytes and an explicit ``now``: the clock belongs to the caller.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
from collections.abc import Mapping, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Koordinator's Secret keys (pkg/webhook/util/writer).
CA_CERT = "ca-cert.pem"
CA_KEY = "ca-key.pem"
SERVER_CERT = "cert.pem"
SERVER_KEY = "key.pem"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
TLS_CA = "ca.crt"  # ours too: the kubernetes.io/tls convention (the chart's Secrets carry it)
# Ours: the CAs the current one replaced (PEM, one or more), each kept until it ends; a pair
# one of them signed may still be served by a replica that has not read the new one yet.
CA_PREVIOUS = "ca-cert-previous.pem"

CA_VALIDITY = dt.timedelta(days=3650)
CA_RENEW_BEFORE = dt.timedelta(days=365)  # a CA is reused only while valid a year ahead
SERVER_VALIDITY = dt.timedelta(days=365)
SERVER_RENEW_BEFORE = dt.timedelta(days=182)  # "valid six months from now", as Koordinator
CA_COMMON_NAME = "webhook-cert-ca"  # Koordinator's
# Clocks of other machines may lag: a certificate is valid from a little before it was made.
BACKDATE = dt.timedelta(hours=1)


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A CA and a serving pair, PEM encoded, and the CAs the CA replaced (PEM, none or more)
    that have not ended yet."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes
    previous_cas: bytes = b""

    def secret_data(self) -> dict[str, bytes]:
        data = {
            CA_CERT: self.ca_cert,
            CA_KEY: self.ca_key,
            SERVER_CERT: self.cert,
            SERVER_KEY: self.key,
            TLS_CERT: self.cert,
            TLS_KEY: self.key,
            TLS_CA: self.ca_cert,
        }
        if self.previous_cas:
            data[CA_PREVIOUS] = self.previous_cas
        return data

    def trusted(self) -> bytes:
        """What a client verifying the pairs must trust (the webhooks' caBundle): the CA, and
        the CAs it replaced, whose pairs a replica may still be serving."""
        if not self.previous_cas:
            return self.ca_cert
        return with_newline(self.ca_cert) + self.previous_cas

    @classmethod
    def from_secret_data(cls, data: Mapping[str, bytes]) -> Bundle | None:
        """The bundle a Secret holds; None without a CA and its key (``ca-cert.pem``, else
        ``ca.crt``, and ``ca-key.pem``). The pair is read from
        ``cert.pem``/``key.pem``, else ``tls.crt``/``tls.key``; empty when absent (a Secret
        holding only the CA asks for a pair to be issued)."""
        cert = data.get(SERVER_CERT) or data.get(TLS_CERT) or b""
        key = data.get(SERVER_KEY) or data.get(TLS_KEY) or b""
        ca_cert, ca_key = data.get(CA_CERT) or data.get(TLS_CA), data.get(CA_KEY)
        if not (ca_cert and ca_key):
            return None
        return cls(ca_cert, ca_key, cert, key, data.get(CA_PREVIOUS) or b"")


def with_newline(pem: bytes) -> bytes:
    """``pem`` ending in a newline, so that another PEM can follow it."""
    return pem if pem.endswith(b"\n") else pem + b"\n"


def is_own_ca(cert: x509.Certificate) -> bool:
    """Whether a CA certificate is named as ``new_ca`` names those it makes."""
    return cert.subject == _name(CA_COMMON_NAME)


def pem_certificates(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; none when any of them does not parse."""
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError:
        return []


def _unexpired(certificates: Sequence[x509.Certificate], now: dt.datetime) -> bytes:
    return b"".join(
        cert.public_bytes(serialization.Encoding.PEM)
        for cert in certificates
        if cert.not_valid_after_utc > now
    )


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def new_ca(now: dt.datetime, validity: dt.timedelta = CA_VALIDITY) -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = _new_key()
    name = _name(CA_COMMON_NAME)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _alt_names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


def issue(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    names: Sequence[str],
    now: dt.datetime,
    validity: dt.timedelta = SERVER_VALIDITY,
) -> tuple[bytes, bytes]:
    """A serving certificate for ``names`` (DNS names or IP addresses; the first is the common
    name) signed by the CA, never outliving it: (certificate PEM, key PEM)."""
    if not names:
        raise ValueError("a serving certificate needs at least one name")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise ValueError("the CA key must be ECDSA or RSA")  # Koordinator's CAs are RSA
    key = _new_key()
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_alt_names(names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_authority_key_id(ca_cert), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _authority_key_id(ca_cert: x509.Certificate) -> x509.AuthorityKeyIdentifier:
    """The CA's own key identifier: OpenSSL finds the issuer by it, and a CA made elsewhere
    (Helm's genCA, Go) may have derived it differently from the public key."""
    try:
        ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key())  # type: ignore[arg-type]
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)


def ca_problem(
    bundle: Bundle | None, now: dt.datetime, ahead: dt.timedelta = CA_RENEW_BEFORE
) -> str | None:
    """Why the bundle's CA cannot sign until ``now + ahead``; None when it can be reused."""
    if bundle is None:
        return "no CA"
    try:
        cert = x509.load_pem_x509_certificate(bundle.ca_cert)
        key = serialization.load_pem_private_key(bundle.ca_key, password=None)
    except ValueError as err:
        return f"the CA does not parse: {err}"
    if key.public_key() != cert.public_key():
        return "the CA key does not match its certificate"
    if cert.not_valid_after_utc < now + ahead:
        return f"the CA expires {cert.not_valid_after_utc:%Y-%m-%d}"
    return None


def server_problem(bundle: Bundle, names: Sequence[str], now: dt.datetime) -> str | None:
    """Why the serving pair must be issued again; None while it stays good six months ahead
    for every name in ``names``, signed by the bundle's CA, its key matching."""
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert)
        key = serialization.load_pem_private_key(bundle.key, password=None)
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    except ValueError as err:
        return f"the certificate does not parse: {err}"
    if key.public_key() != cert.public_key():
        return "the key does not match the certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate is not signed by the CA"
    if cert.not_valid_before_utc > now:
        return f"the certificate is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M}"
    # A pair never outlives its CA: one issued up to the CA's end is as good as it gets.
    if cert.not_valid_after_utc < min(now + SERVER_RENEW_BEFORE, ca.not_valid_after_utc):
        return f"the certificate expires {cert.not_valid_after_utc:%Y-%m-%d}"
    missing = sorted(set(names) - set(certificate_names(bundle.cert)))
    if missing:
        return f"the certificate is not for {', '.join(missing)}"
    return None


def certificate_names(cert_pem: bytes) -> list[str]:
    """The DNS names and IP addresses a certificate is for."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [
        *alt.get_values_for_type(x509.DNSName),
        *(str(ip) for ip in alt.get_values_for_type(x509.IPAddress)),
    ]


def not_after(cert_pem: bytes) -> dt.datetime:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def ensure(
    bundle: Bundle | None,
    names: Sequence[str],
    now: dt.datetime,
    *,
    fixed_ca: bool = False,
) -> tuple[Bundle, str | None]:
    """``bundle`` when it is good, else a renewed one: (bundle, why it was renewed or None).

    The CA is kept while it is good for another year. With ``fixed_ca`` (whoever trusts it
    cannot follow a new one, as kube-scheduler's extender caData) it is kept until it expires,
    and ValueError says when it can no longer sign.

    A new CA carries the one it replaces (while that has not ended) in ``previous_cas``, with
    the earlier ones still valid; previous CAs that have ended at ``now`` are dropped, so the
    bundle returned may differ from the one given with why None (``previous_cas`` only).
    """
    previous = pem_certificates(bundle.previous_cas) if bundle is not None else []
    why_ca = ca_problem(bundle, now, dt.timedelta(0) if fixed_ca else CA_RENEW_BEFORE)
    if bundle is not None and why_ca is None:
        kept = _unexpired(previous, now)
        why = server_problem(bundle, names, now)
        if why is None:
            if kept == bundle.previous_cas:
                return bundle, None
            return dataclasses.replace(bundle, previous_cas=kept), None
        cert, key = issue(bundle.ca_cert, bundle.ca_key, names, now)
        return Bundle(bundle.ca_cert, bundle.ca_key, cert, key, kept), why
    if fixed_ca and bundle is not None:
        raise ValueError(f"cannot issue from the given CA: {why_ca}")
    # The CA replaced stays trusted while it lasts: replicas still serve pairs it signed.
    replaced = pem_certificates(bundle.ca_cert)[:1] if bundle is not None else []
    ca_cert, ca_key = new_ca(now)
    cert, key = issue(ca_cert, ca_key, names, now)
    return Bundle(ca_cert, ca_key, cert, key, _unexpired([*replaced, *previous], now)), why_ca
