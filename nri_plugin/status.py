"""gRPC status codes as ttrpc carries them in ``Response.status.code``."""

from __future__ import annotations

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16

_NAMES = {v: k for k, v in globals().items() if k.isupper() and isinstance(v, int)}


def name(code: int) -> str:
    """The code's name, e.g. ``UNIMPLEMENTED``, or ``CODE(99)`` for an unknown one."""
    return _NAMES.get(code, f"CODE({code})")
