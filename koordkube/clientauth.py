"""Who may call the webhooks and the extender: client certificates and bearer tokens (ours).

Off by default: the servers then answer any client that reaches them, as before. On, a caller
must present one of the credentials configured:

- a client certificate signed by a CA of ``ca_file`` (the kube-apiserver's, from its
  admission configuration's kubeconfig; kube-scheduler's, from the extender's ``tlsConfig``),
  whose subject CN or one of whose DNS SANs is in ``allowed_names`` when that is not empty;
- a bearer token (``Authorization: Bearer ...``) that is a line of ``token_file``.

The certificate is checked by OpenSSL during the handshake (``CertificateReloader`` builds
every context with the CA and the verify mode below): with certificates alone it is required
(``ssl.CERT_REQUIRED``: a client without one, or with one of another CA, never gets a
connection); with a token file as well it is optional (``ssl.CERT_OPTIONAL``: a certificate
presented is still verified, and each request is decided here). The names and the tokens are
checked per request by ``ClientAuthenticator.middleware``: 401 without valid credentials, 403
for a valid certificate of a name not allowed. ``/healthz`` is always open. Both files are
read again when they change, as the serving pair is.
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # aiohttp is imported when a server is built: --help stays fast
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

log = logging.getLogger(__name__)

# The paths every caller may reach: the kubelet's probes know no credentials.
OPEN_PATHS = frozenset({"/healthz"})
# One warning per this many seconds at most; the count of refusals in between is in it.
WARNING_INTERVAL = 60.0
UNAUTHENTICATED = "unauthenticated"  # 401: no credentials, or none valid
FORBIDDEN = "forbidden"  # 403: a valid certificate of a name not allowed


@dataclass(frozen=True)
class ClientAuth:
    """What a caller must present; all empty (the default): nothing, any client is served."""

    ca_file: Path | None = None  # PEM bundle: client certificates it signed are accepted
    allowed_names: frozenset[str] = field(default_factory=frozenset)  # CN or DNS SAN; empty: any
    token_file: Path | None = None  # bearer tokens accepted, one a line

    @classmethod
    def of(
        cls,
        ca_file: str | os.PathLike[str] | None = None,
        allowed_names: Iterable[str] = (),
        token_file: str | os.PathLike[str] | None = None,
    ) -> ClientAuth:
        return cls(
            ca_file=Path(ca_file) if ca_file else None,
            allowed_names=frozenset(n for n in allowed_names if n),
            token_file=Path(token_file) if token_file else None,
        )

    @property
    def enabled(self) -> bool:
        return self.ca_file is not None or self.token_file is not None

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        """The handshake's: required with certificates alone, optional beside tokens."""
        if self.ca_file is None:
            return ssl.CERT_NONE
        return ssl.CERT_OPTIONAL if self.token_file is not None else ssl.CERT_REQUIRED

    def problems(self) -> list[str]:
        """What makes this configuration unusable, for the command line to refuse it."""
        found = [
            f"{what} {path} is not a readable file"
            for what, path in (("client CA file", self.ca_file), ("token file", self.token_file))
            if path is not None and not (path.is_file() and os.access(path, os.R_OK))
        ]
        if self.allowed_names and self.ca_file is None:
            found.append("allowed client names need a client CA file")
        return found


def parse_names(text: str) -> frozenset[str]:
    """A comma-separated flag value: the allowed client names."""
    return frozenset(name.strip() for name in text.split(",") if name.strip())


def read_tokens(text: str) -> frozenset[bytes]:
    """The tokens of a token file: one a line, blank lines and ``#`` comments skipped."""
    lines = (line.strip() for line in text.splitlines())
    return frozenset(line.encode() for line in lines if line and not line.startswith("#"))


class TokenFile:
    """The accepted bearer tokens, read again when the file changes (mtime, size, inode).

    A file that cannot be read any more keeps the tokens last read (logged), so a Secret
    being swapped never locks every caller out.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._signature = self._stat()
        self.tokens = read_tokens(self.path.read_text())  # raises at start: a bad flag
        self.reloads = 0

    def _stat(self) -> tuple[int, int, int]:
        stat = self.path.stat()
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def reload_if_changed(self) -> bool:
        try:
            signature = self._stat()
            if signature == self._signature:
                return False
            tokens = read_tokens(self.path.read_text())
        except (OSError, UnicodeDecodeError) as err:
            log.warning("keep the bearer tokens, cannot read %s: %s", self.path, err)
            return False
        self._signature, self.tokens = signature, tokens
        self.reloads += 1
        log.info("reloaded %d bearer tokens from %s", len(tokens), self.path)
        return True

    def accepts(self, presented: str) -> bool:
        """Whether ``presented`` is one of the tokens, compared in constant time.

        Every token is compared (no early exit), so the time taken says nothing about which
        one, or how much of one, matched.
        """
        self.reload_if_changed()
        candidate = presented.encode()
        matched = False
        for token in self.tokens:
            matched |= hmac.compare_digest(candidate, token)
        return matched


def certificate_names(peercert: dict[str, Any] | None) -> frozenset[str]:
    """A verified peer certificate's subject CNs and DNS SANs (``SSLObject.getpeercert()``)."""
    if not peercert:
        return frozenset()
    names = {
        value for rdn in peercert.get("subject", ()) for key, value in rdn if key == "commonName"
    }
    names.update(value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS")
    return frozenset(names)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme is case-blind)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


@dataclass(frozen=True)
class Decision:
    status: int  # 0: served; 401 or 403: refused
    reason: str  # why, for the log and the reply (never a credential)

    @property
    def allowed(self) -> bool:
        return self.status == 0


SERVED = Decision(0, "")


class ClientAuthenticator:
    """The per-request check and its aiohttp middleware; ``refusals`` counts by kind."""

    def __init__(
        self,
        config: ClientAuth,
        *,
        component: str,
        open_paths: Collection[str] = OPEN_PATHS,
        clock: Callable[[], float] = time.monotonic,
        warning_interval: float = WARNING_INTERVAL,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.config, self.component = config, component
        self.open_paths = frozenset(open_paths)
        self.tokens = TokenFile(config.token_file) if config.token_file is not None else None
        self.refusals: dict[str, int] = {UNAUTHENTICATED: 0, FORBIDDEN: 0}
        # called with UNAUTHENTICATED or FORBIDDEN on each refusal (a metric's inc)
        self.on_refused = on_refused
        self._clock, self._interval = clock, warning_interval
        self._last_warning: float | None = None
        self._unlogged = 0
        self.middleware = self._middleware()  # for web.Application(middlewares=[...])

    def decide(self, peercert: dict[str, Any] | None, authorization: str | None) -> Decision:
        """A request's verdict from its verified certificate (if any) and Authorization header.

        Either credential is enough: a valid token, or a certificate (verified in the
        handshake) whose name is allowed.
        """
        token = bearer_token(authorization)
        if token is not None and self.tokens is not None and self.tokens.accepts(token):
            return SERVED
        if peercert and self.config.ca_file is not None:
            names = certificate_names(peercert)
            if not self.config.allowed_names or names & self.config.allowed_names:
                return SERVED
            return Decision(403, f"client certificate {sorted(names)} is not an allowed name")
        if token is not None:
            return Decision(401, "bearer token not accepted")
        return Decision(401, "no client certificate or bearer token")

    def _middleware(self) -> Middleware:
        from aiohttp import web  # noqa: PLC0415 - see the TYPE_CHECKING import

        @web.middleware
        async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.path in self.open_paths:
                return await handler(request)
            transport = request.transport
            peercert = transport.get_extra_info("peercert") if transport is not None else None
            decision = self.decide(peercert, request.headers.get("Authorization"))
            if decision.allowed:
                return await handler(request)
            self._refuse(request, decision)
            challenge = decision.status == 401 and self.tokens is not None
            headers = {"WWW-Authenticate": "Bearer"} if challenge else {}
            text = "Unauthorized" if decision.status == 401 else "Forbidden"
            return web.Response(
                status=decision.status, text=f"{text}: {decision.reason}\n", headers=headers
            )

        return authenticate

    def _refuse(self, request: web.Request, decision: Decision) -> None:
        kind = UNAUTHENTICATED if decision.status == 401 else FORBIDDEN
        self.refusals[kind] += 1
        if self.on_refused is not None:
            self.on_refused(kind)
        now = self._clock()
        if self._last_warning is not None and now - self._last_warning < self._interval:
            self._unlogged += 1  # said in the next warning: a flood costs one line a minute
            return
        also = f" ({self._unlogged} more refused since the last warning)" if self._unlogged else ""
        log.warning(
            "%s refused %s %s from %s: %d %s%s",
            self.component,
            request.method,
            request.path,
            request.remote,
            decision.status,
            decision.reason,
            also,
        )
        self._last_warning, self._unlogged = now, 0


def refusals_exposition(metric: str, authenticator: ClientAuthenticator | None) -> bytes:
    """The refusals by reason as a Prometheus counter (nothing while authentication is off)."""
    if authenticator is None:
        return b""
    lines = [f"# TYPE {metric} counter"]
    lines += [
        f'{metric}{{reason="{reason}"}} {count}'
        for reason, count in sorted(authenticator.refusals.items())
    ]
    return ("\n".join(lines) + "\n").encode()
