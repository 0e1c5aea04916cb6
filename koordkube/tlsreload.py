"""HTTPS serving certificates that follow their files: tls.crt and tls.key in a folder.

Kubernetes rotates a mounted Secret by swapping the files; the webhooks (koord-manager) and the
scheduler extender (koord-scheduler) keep serving and pick up the new pair at the next
handshake. With client authentication on (``koordkube.clientauth``), every context also asks
for a client certificate and verifies it against a CA bundle file, which is followed the same
way.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"


def server_context(
    cert_file: Path,
    key_file: Path,
    client_ca_file: Path | None = None,
    client_verify: ssl.VerifyMode = ssl.CERT_REQUIRED,
) -> ssl.SSLContext:
    """A serving context; with ``client_ca_file``, clients are verified against it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca_file is not None:
        context.load_verify_locations(cafile=client_ca_file)
        context.verify_mode = client_verify
    return context


class CertificateReloader:
    """The server's SSLContext, following ``tls.crt``/``tls.key`` as they are rotated.

    Each handshake stats both files (cheap) from the SNI callback, which OpenSSL calls on
    every ClientHello, with or without SNI. When (mtime, size, inode) changed, the chain is
    loaded into a fresh context and the connection is switched to it: swapping the context
    is what makes OpenSSL pick up the new certificate for this very handshake (reloading the
    listening context would only reach connections created later). A half-written pair
    (key not matching the certificate yet) keeps the previous chain and is retried on the
    next handshake.

    ``client_ca_file`` (client authentication): every context also verifies client
    certificates against that bundle with ``client_verify`` (``ssl.CERT_REQUIRED`` or
    ``ssl.CERT_OPTIONAL``), and a change of the bundle reloads like a change of the pair. The
    verify mode stays the listening context's (OpenSSL keeps a connection's mode when its
    context is switched), while the CA store used is the switched-to context's: so the mode
    is fixed at start and the bundle follows its file.
    """

    def __init__(
        self,
        cert_dir: str | os.PathLike[str],
        *,
        client_ca_file: str | os.PathLike[str] | None = None,
        client_verify: ssl.VerifyMode = ssl.CERT_REQUIRED,
    ) -> None:
        self.cert_file = Path(cert_dir) / CERT_FILE
        self.key_file = Path(cert_dir) / KEY_FILE
        self.client_ca_file = Path(client_ca_file) if client_ca_file is not None else None
        self.client_verify = client_verify
        self._signature = self._stat()
        self.context = self._build()  # the listening one
        self.context.sni_callback = self._on_client_hello
        self._current = self.context
        self.reloads = 0

    def _build(self) -> ssl.SSLContext:
        return server_context(
            self.cert_file, self.key_file, self.client_ca_file, self.client_verify
        )

    def _stat(self) -> tuple[int, ...]:
        files = [self.cert_file, self.key_file]
        if self.client_ca_file is not None:
            files.append(self.client_ca_file)
        signature: list[int] = []
        for stat in (f.stat() for f in files):
            signature += (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        return tuple(signature)

    def reload_if_changed(self) -> bool:
        """Load the chain again when the files changed; True when a new one is in use."""
        try:
            signature = self._stat()
            if signature == self._signature:
                return False
            self._current = self._build()
        except (OSError, ssl.SSLError) as err:
            what = f"{self.cert_file}" + (
                f" or {self.client_ca_file}" if self.client_ca_file else ""
            )
            log.warning("keep serving certificate, cannot load %s: %s", what, err)
            return False
        self._signature = signature
        self.reloads += 1
        also = f" and client CA {self.client_ca_file}" if self.client_ca_file else ""
        log.info("reloaded serving certificate from %s%s", self.cert_file.parent, also)
        return True

    def _on_client_hello(
        self,
        connection: ssl.SSLObject | ssl.SSLSocket,
        server_name: str | None,
        context: ssl.SSLContext,
    ) -> None:
        self.reload_if_changed()
        if self._current is not context:
            connection.context = self._current
