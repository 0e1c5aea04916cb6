"""Errors of the NRI protocol stack.

    NriError
    ├── ConnectionClosed      the socket is gone (EOF, reset, closed by us)
    ├── ProtocolError         the peer sent bytes that break the mux or ttrpc framing
    ├── RegistrationError     RegisterPlugin or Configure failed; the runtime will not call us
    └── RpcError              a ttrpc call answered with a non-OK status (code, message)
        └── DeadlineExceeded  a call we made did not get its answer in time

Socket and codec failures are translated into these at the boundary (``mux`` and ``ttrpc``);
the stub and plugins catch only these.
"""

from __future__ import annotations

from nri_plugin import status


class NriError(Exception):
    """Base class of every error raised by nri_plugin."""


class ConnectionClosed(NriError):
    """The connection to the runtime is closed."""


class ProtocolError(NriError):
    """The peer broke the framing: the connection cannot continue."""


class RegistrationError(NriError):
    """Registration with the runtime failed."""


class RpcError(NriError):
    """A ttrpc call failed with a status (gRPC code numbering)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{status.name(code)}: {message}")
        self.code = code
        self.message = message


class DeadlineExceeded(RpcError):
    """A call we made timed out locally."""

    def __init__(self, message: str) -> None:
        super().__init__(status.DEADLINE_EXCEEDED, message)
