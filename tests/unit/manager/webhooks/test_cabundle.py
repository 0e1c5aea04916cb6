"""manager.webhooks.cabundle.ca_bundle: what a webhook's caBundle becomes when a replica hands
over the CAs it knows, given what the caBundle holds (another replica may have written a newer
CA of ours that this one has not read yet). The CAs are made at unrelated times; FOREIGN, the
newest, stands for one set by hand."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from koordkube import certs
from manager.webhooks import cabundle

T0 = dt.datetime(2031, 5, 17, 6, 43, tzinfo=dt.UTC)
OLD, _ = certs.new_ca(T0)
NEW, _ = certs.new_ca(T0 + dt.timedelta(days=3281))
NEWER, _ = certs.new_ca(T0 + dt.timedelta(days=3290))


def foreign_ca(made: dt.datetime) -> bytes:
    """A CA named otherwise than ours."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "someone-elses-ca")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(made)
        .not_valid_after(made + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


FOREIGN = foreign_ca(T0 + dt.timedelta(days=4099))  # after all of ours


def b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def cas(bundle: str) -> list[bytes]:
    return [
        cert.public_bytes(serialization.Encoding.PEM)
        for cert in x509.load_pem_x509_certificates(base64.b64decode(bundle))
    ]


@pytest.mark.parametrize(
    ("current", "trusted", "expected"),
    [
        pytest.param(None, OLD, [OLD], id="unset"),
        pytest.param(b64(OLD), OLD, [OLD], id="unchanged"),
        pytest.param(b64(OLD), NEW + OLD, [NEW, OLD], id="a-new-ca-added"),
        pytest.param(b64(NEW + OLD), NEW, [NEW], id="an-ended-ca-dropped"),
        pytest.param(b64(NEW + OLD), OLD, [OLD, NEW], id="a-newer-ca-of-ours-kept"),
        pytest.param(b64(NEWER + NEW + OLD), OLD, [OLD, NEWER, NEW], id="newer-ones-kept"),
        pytest.param(b64(NEWER + OLD), NEW + OLD, [NEW, OLD, NEWER], id="after-the-newest"),
        pytest.param(b64(FOREIGN + OLD), OLD, [OLD], id="a-foreign-ca-dropped"),
        pytest.param("bm90IGEgUEVN", NEW, [NEW], id="garbage-replaced"),
        pytest.param("%%%", NEW, [NEW], id="not-base64"),
    ],
)
def test_ca_bundle_keeps_only_newer_cas_of_ours(
    current: str | None, trusted: bytes, expected: list[bytes]
) -> None:
    assert cas(cabundle.ca_bundle(current, trusted)) == expected


def test_what_was_handed_over_is_written_as_it_is() -> None:
    """The chart's caBundle (Helm's genCA, without a final newline here) is left alone when
    the keeper hands over that CA, so a configuration the chart rendered is not written."""
    chart = OLD.rstrip(b"\n")
    assert cabundle.ca_bundle(b64(chart), chart) == b64(chart)
    configuration = {"webhooks": [{"clientConfig": {"caBundle": b64(chart)}}]}
    assert cabundle.with_ca_bundle(configuration, chart) is None
    assert cabundle.with_ca_bundle(configuration, NEW + chart) is configuration
    assert cas(configuration["webhooks"][0]["clientConfig"]["caBundle"]) == [NEW, OLD]
