"""Real TLS for the client authentication tests: trustme CAs, a serving pair in a folder, a
client CA bundle file swapped in the way a Secret volume updates, and client contexts that
present (or not) a client certificate."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import trustme


def write_atomically(path: Path, data: bytes) -> None:
    """A file replaced by rename, as the kubelet swaps a mounted Secret's files."""
    staging = path.with_name(f".{path.name}.new")
    staging.write_bytes(data)
    staging.replace(path)


def install_serving_pair(cert_dir: Path, ca: trustme.CA, *names: str) -> None:
    cert = ca.issue_cert(*names)
    write_atomically(cert_dir / "tls.crt", b"".join(b.bytes() for b in cert.cert_chain_pems))
    write_atomically(cert_dir / "tls.key", cert.private_key_pem.bytes())


def write_ca_bundle(path: Path, *cas: trustme.CA) -> Path:
    write_atomically(path, b"".join(ca.cert_pem.bytes() for ca in cas))
    return path


def client_cert(ca: trustme.CA, name: str) -> trustme.LeafCert:
    """A client certificate with ``name`` as its subject CN (and a DNS SAN of its own)."""
    return ca.issue_cert("client.invalid", common_name=name)


def client_context(server_ca: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    """A client verifying the server with ``server_ca``, presenting ``cert`` if given."""
    context = ssl.create_default_context()
    server_ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return context


async def request(
    method: str,
    url: str,
    context: ssl.SSLContext,
    *,
    server_name: str,
    token: str | None = None,
    body: bytes | None = None,
) -> tuple[int, str]:
    """One request on a connection of its own (a fresh handshake: nothing pooled or resumed)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    connector = aiohttp.TCPConnector(force_close=True)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.request(
            method, url, data=body, headers=headers, ssl=context, server_hostname=server_name
        ) as response,
    ):
        return response.status, await response.text()
