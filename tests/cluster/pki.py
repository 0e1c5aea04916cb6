"""The cluster's own PKI, as kubeadm lays it out: one CA, the API server's serving certificate,
a client certificate per component identity, and the service-account signing key.

Keys are ECDSA P-256 (every Kubernetes component takes them); certificates last a day, which
outlives any cluster the tier or ``make cluster`` keeps.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=1)
CA_USAGE = x509.KeyUsage(
    digital_signature=True, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
    encipher_only=False, decipher_only=False,
)  # fmt: skip


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


class Authority:
    """A CA that writes what it issues as ``NAME.crt`` and ``NAME.key`` under ``folder``."""

    def __init__(self, folder: Path, common_name: str = "koordinator-py-cluster-ca") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
        self._key = _key()
        subject = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(CA_USAGE, critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.pair = self._write("ca", self._cert, self._key)

    @property
    def cert_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        name: str,
        common_name: str,
        organizations: Sequence[str] = (),
        server_names: Sequence[str] = (),
        client: bool = False,
    ) -> Pair:
        """A leaf certificate for serving ``server_names`` and/or client authentication."""
        key = _key()
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_names else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if server_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(_alt_names(server_names)), critical=False
            )
        return self._write(name, builder.sign(self._key, hashes.SHA256()), key)

    def _write(self, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
        pair = Pair(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.touch(mode=0o600)
        pair.key.write_bytes(_key_pem(key))
        return pair


def service_account_keys(folder: Path) -> Pair:
    """The key the API server signs service-account tokens with (``sa.key``) and its public
    half (``sa.pub``), which it and the controller-manager's token controller verify with."""
    key = _key()
    pair = Pair(folder / "sa.pub", folder / "sa.key")
    pair.key.touch(mode=0o600)
    pair.key.write_bytes(_key_pem(key))
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pair
