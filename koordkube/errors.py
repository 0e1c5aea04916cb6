"""What a failed call to the Kubernetes API raises: one small tree, so callers catch a type
instead of catching everything and asking whether it was a Kubernetes status.

    KubeError               any failed call: code, reason, message, verb, resource
    ├── NotFound            404: the object (or the kind, or its namespace) is not there
    ├── AlreadyExists       409 AlreadyExists: a create found the name taken
    ├── Conflict            409 otherwise: a stale resourceVersion or a failed precondition
    ├── Gone                410 (Expired): a watch from a version the server no longer keeps
    ├── Invalid             422: the object or patch failed validation
    ├── Unauthorized        401: no credentials or bad ones (an expired token)
    ├── Forbidden           403: authorization (RBAC) or admission refused the request
    ├── Throttled           429: too many requests, or a disruption budget refused an eviction
    ├── ServerError         5xx: the API server (or a proxy in front of it) failed
    └── TransportError      no HTTP answer: refused or reset connection, TLS, a timeout

``koordkube.client.KubeApi`` translates lightkube's ``ApiError`` and httpx2's errors into these
once, at the boundary, and raises them from the original (``__cause__`` keeps the response and
the server's Status). Any other status (400, 405, 415...) and a reply that cannot be read are a
plain ``KubeError``. AlreadyExists and Conflict are siblings, as in client-go: a create that
lost to another writer must not look like a stale update to a loop that re-reads and retries.
Unauthorized and Forbidden are siblings too: one means the credentials are wrong, the other
that right credentials lack a permission; the fixes differ. No I/O and no imports here.
"""

from __future__ import annotations


class KubeError(Exception):
    """A call to the API server failed; ``str()`` is the server's message.

    ``code`` is the HTTP status (None when no answer came), ``reason`` the Status reason in
    Kubernetes' CamelCase (``NotFound``, ``Expired``; empty when the answer had no Status),
    ``verb`` and ``resource`` name the request as the client's request metrics do (``patch``,
    ``nodes/status``), and ``retry_after`` is the server's hint in seconds, when it sent one
    (with 429 and some 5xx)::

        try:
            await api.delete(Pod, name, namespace=namespace)
        except NotFound:
            pass  # already gone
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        verb: str = "",
        resource: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.verb = verb
        self.resource = resource
        self.retry_after = retry_after


class NotFound(KubeError):
    """404: nothing by that name (deleted meanwhile, or never made)."""


class AlreadyExists(KubeError):
    """409 AlreadyExists: a create lost to another writer; read what is there instead."""


class Conflict(KubeError):
    """409: the write carried a resourceVersion (or UID precondition) that is no longer
    current; read again and redo the change."""


class Gone(KubeError):
    """410: the server no longer has the events since that resourceVersion; LIST again."""


class Invalid(KubeError):
    """422: the server refused the object or the patch as invalid; retrying will not help."""


class Unauthorized(KubeError):
    """401: the server does not know who is asking (no token, or an expired one)."""


class Forbidden(KubeError):
    """403: the caller is known but may not do this (RBAC, or an admission rule)."""


class Throttled(KubeError):
    """429: try later (``retry_after`` when the server said when). API priority and fairness
    answers so under load, and the Eviction API when a PodDisruptionBudget allows no
    disruption now."""


class ServerError(KubeError):
    """5xx: the server (etcd, an aggregated API, a proxy) failed; worth another try."""


class TransportError(KubeError):
    """No HTTP answer: the connection was refused or dropped, TLS failed, or it timed out."""


RETRYABLE: tuple[type[KubeError], ...] = (Throttled, ServerError, TransportError)
"""What a write loop tries again unchanged: the same request may well succeed later."""

_BY_CODE: dict[int, type[KubeError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Throttled,
}


def for_status(code: int | None, reason: str = "") -> type[KubeError]:
    """The class for an answer's HTTP status and Status reason (409 is two classes, and any
    5xx is a ``ServerError``); ``KubeError`` for the rest."""
    if code is None:
        return KubeError
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if 500 <= code < 600:
        return ServerError
    return _BY_CODE.get(code, KubeError)
