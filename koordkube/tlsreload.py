"""HTTPS serving certificates that follow their files: tls.crt and tls.key in a folder.

Kubernetes rotates a mounted Secret by swapping the files; the webhooks (koord-manager) and the
scheduler extender (koord-scheduler) keep serving and pick up the new pair at the next
handshake.
"""

from __future__ import annotations

import logging
import os
import ssl
from pathlib import Path

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
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
    """

    def __init__(self, cert_dir: str | os.PathLike[str]) -> None:
        self.cert_file = Path(cert_dir) / CERT_FILE
        self.key_file = Path(cert_dir) / KEY_FILE
        self._signature = self._stat()
        self.context = server_context(self.cert_file, self.key_file)  # the listening one
        self.context.sni_callback = self._on_client_hello
        self._current = self.context
        self.reloads = 0

    def _stat(self) -> tuple[int, ...]:
        cert, key = self.cert_file.stat(), self.key_file.stat()
        return (
            cert.st_mtime_ns,
            cert.st_size,
            cert.st_ino,
            key.st_mtime_ns,
            key.st_size,
            key.st_ino,
        )

    def reload_if_changed(self) -> bool:
        """Load the chain again when the files changed; True when a new one is in use."""
        try:
            signature = self._stat()
            if signature == self._signature:
                return False
            self._current = server_context(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            log.warning("keep serving certificate, cannot load %s: %s", self.cert_file, err)
            return False
        self._signature = signature
        self.reloads += 1
        log.info("reloaded serving certificate from %s", self.cert_file.parent)
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
