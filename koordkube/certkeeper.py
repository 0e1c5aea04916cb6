"""A component that keeps its own serving certificate valid, as Koordinator's webhook
certificate controller does.

The truth is a Secret (so that every replica serves the same pair and a restart keeps it);
each replica:

1. reads the Secret (creates it when missing, where RBAC allows: the chart creates it empty),
2. issues a new pair when the one there is missing, expiring within six months, not for the
   names asked or not signed by its CA, and a new CA when that one expires within a year
   (``koordkube.certs``), writing the Secret back with its resourceVersion (a replica that
   lost the race reads the winner's pair on the next pass),
3. hands what a client must trust to ``on_ca`` (koord-manager: the caBundle of its webhook
   configurations), which writes only when something differs: a ``helm upgrade`` that resets
   a caBundle is undone on the next pass. That is the CA and, after a CA change, the CA it
   replaced until that one ends (``Bundle.trusted``): another replica may still serve a pair
   of the old CA until its next pass,
4. then writes ``tls.crt``/``tls.key`` into the folder the HTTPS server serves from
   (atomically, and only when they differ: ``koordkube.tlsreload`` picks the pair up at the
   next handshake). In this order a pair is served only once ``on_ca`` trusts its CA; a pass
   whose ``on_ca`` fails keeps serving the pair it has.

It passes again every ``interval`` seconds (Koordinator's resync: a minute). A failed pass is
logged and counted and tried again sooner; the server keeps serving the pair it has.

    keeper = CertificateKeeper(api, "koordinator-system", "koordinator-webhook-certs",
                               ["svc", "svc.ns", "svc.ns.svc"], Path("/certs"), on_ca=patch)
    await keeper.sync()            # before the server starts: the files are there
    task = asyncio.create_task(keeper.run())
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from koordkube import certs
from koordkube.client import KubeApi
from koordkube.errors import AlreadyExists, Conflict, NotFound

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 60.0  # Koordinator's webhook controller resyncs every minute
RETRY_INTERVAL = 5.0

# Gets a PEM bundle: the CA, then the CAs it replaced that have not ended (Bundle.trusted).
CAHandler = Callable[[bytes], Awaitable[None]]


def _decode(data: dict[str, str] | None) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (data or {}).items():
        try:
            out[key] = base64.b64decode(value, validate=True)
        except ValueError:
            log.warning("ignore Secret key %s: not base64", key)
    return out


def write_atomically(path: Path, content: bytes, mode: int = 0o600) -> bool:
    """Write ``content`` at ``path`` by renaming a finished file over it; False when the file
    already holds it (no write, so the server's reloader sees no change)."""
    try:
        if path.read_bytes() == content:
            return False
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


class CertificateKeeper:
    """See the module docstring. ``clock`` gives epoch seconds (tests move it by years)."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        secret_name: str,
        names: Sequence[str],
        cert_dir: str | os.PathLike[str],
        *,
        fixed_ca: bool = False,
        on_ca: CAHandler | None = None,
        clock: Callable[[], float] = time.time,
        interval: float = DEFAULT_INTERVAL,
        on_event: Callable[[str], None] | None = None,
    ) -> None:
        if not names:
            raise ValueError("a serving certificate needs at least one name")
        self.api, self.namespace, self.secret_name = api, namespace, secret_name
        self.names = list(names)
        self.cert_dir = Path(cert_dir)
        self.fixed_ca, self.on_ca = fixed_ca, on_ca
        self.clock, self.interval = clock, interval
        self.renewals = 0  # pairs this replica issued
        self.failures = 0  # passes that failed
        self.on_event = on_event  # "issued" or "failed": a counter's label
        self.bundle: certs.Bundle | None = None

    def _event(self, what: str) -> None:
        if self.on_event is not None:
            self.on_event(what)

    def not_after(self) -> float:
        """When the pair being served ends, in epoch seconds; 0 before the first pass."""
        return certs.not_after(self.bundle.cert).timestamp() if self.bundle else 0.0

    @property
    def secret_key(self) -> str:
        return f"{self.namespace}/{self.secret_name}"

    async def sync(self) -> certs.Bundle:
        """One pass; raises what the API or the folder raised (the caller retries)."""
        from lightkube.resources.core_v1 import Secret  # noqa: PLC0415

        now = dt.datetime.fromtimestamp(self.clock(), dt.UTC)
        try:
            secret: dict[str, Any] | None = await self.api.get(
                Secret, self.secret_name, namespace=self.namespace
            )
        except NotFound:
            secret = None
        data = _decode((secret or {}).get("data"))
        found = certs.Bundle.from_secret_data(data)
        bundle, why = certs.ensure(found, self.names, now, fixed_ca=self.fixed_ca)
        if bundle != found:  # issued, or a replaced CA that has ended dropped
            await self._store(secret, data, bundle)
        if why is not None:
            self.renewals += 1
            self._event("issued")
            until = certs.not_after(bundle.cert)
            log.info(
                "issued a serving certificate for %s into Secret %s, valid until %s: %s%s",
                ", ".join(self.names),
                self.secret_key,
                f"{until:%Y-%m-%d %H:%M}Z",
                why,
                "; the CA it replaces stays trusted until it ends"
                if found is not None and bundle.ca_cert != found.ca_cert and bundle.previous_cas
                else "",
            )
        elif bundle != found:
            log.info("dropped the replaced CA that has ended from Secret %s", self.secret_key)
        # The caBundle before the files: the API server must trust a pair before it is served.
        # It holds the replaced CAs too, so the pair this replica (or another one that has not
        # read the Secret yet) serves now stays trusted; a failure here keeps that pair.
        if self.on_ca is not None:
            await self.on_ca(bundle.trusted())
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        # The key first: a reader between the two renames sees a mismatched pair and keeps
        # the previous one (CertificateReloader), never a certificate without its key.
        wrote = write_atomically(self.cert_dir / certs.TLS_KEY, bundle.key)
        wrote = write_atomically(self.cert_dir / certs.TLS_CERT, bundle.cert, 0o644) or wrote
        if wrote:
            log.info("wrote the serving certificate from %s to %s", self.secret_key, self.cert_dir)
        self.bundle = bundle
        return bundle

    async def _store(
        self, secret: dict[str, Any] | None, data: dict[str, bytes], bundle: certs.Bundle
    ) -> None:
        from lightkube.resources.core_v1 import Secret  # noqa: PLC0415

        # Other keys stay; the replaced CAs are the bundle's (none once they have ended).
        kept = {key: value for key, value in data.items() if key != certs.CA_PREVIOUS}
        encoded = {
            key: base64.b64encode(value).decode()
            for key, value in {**kept, **bundle.secret_data()}.items()
        }
        if secret is None:
            body = {
                "metadata": {"name": self.secret_name, "namespace": self.namespace},
                "type": "Opaque",
                "data": encoded,
            }
            try:
                await self.api.create(Secret, body)
            except AlreadyExists as err:  # another replica was first: take its pair next
                raise RaceLost(f"Secret {self.secret_key} was created meanwhile") from err
            return
        # resourceVersion stays: another replica's write in between is a Conflict, not lost
        updated = {**secret, "data": encoded}
        try:
            await self.api.replace(Secret, updated)
        except Conflict as err:
            raise RaceLost(f"Secret {self.secret_key} changed meanwhile") from err

    async def run(self, first_delay: float = 0.0) -> None:
        """Pass every ``interval`` seconds until cancelled; a failed pass is retried sooner."""
        await asyncio.sleep(first_delay)
        while True:
            try:
                await self.sync()
                delay = self.interval
            except asyncio.CancelledError:
                raise
            except RaceLost as err:
                log.info("serving certificate: %s; reading it again", err)
                delay = 0.0
            except Exception as err:
                self.failures += 1
                self._event("failed")
                log.warning(
                    "cannot keep the serving certificate in Secret %s (the server keeps the "
                    "pair it has): %s",
                    self.secret_key,
                    err,
                )
                delay = min(RETRY_INTERVAL, self.interval)
            await asyncio.sleep(delay)

    async def first_sync(self, attempts: int = 12) -> certs.Bundle:
        """``sync`` until it succeeds (a lost race or a slow API server at start-up); the last
        error after ``attempts`` tries."""
        for attempt in range(attempts):
            try:
                return await self.sync()
            except RaceLost:
                continue
            except Exception as err:
                self.failures += 1
                self._event("failed")
                if attempt == attempts - 1:
                    raise
                log.warning("serving certificate not ready yet: %s", err)
                await asyncio.sleep(min(RETRY_INTERVAL, self.interval))
        raise RuntimeError(f"Secret {self.secret_key} kept changing under this replica")


class RaceLost(Exception):
    """Another replica wrote the Secret between this one's read and write."""


def webhook_names(service: str, namespace: str) -> list[str]:
    """The names an API server may check a webhook's (or extender's) Service by."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
