"""The NRI wire protocol in Python: socket multiplexer, ttrpc, the NRI API and a plugin stub.

containerd talks to NRI plugins over ttrpc on a multiplexed Unix socket; this package speaks
that protocol and knows nothing about QoS. A plugin is a plain object with handler methods
named after NRI's events (``create_container``, ``update_container``, ...); ``Stub`` connects
it to the runtime. Modules: ``api`` (the NRI messages), ``mux`` (frames), ``ttrpc`` (messages
and calls), ``events`` (event table and masks), ``stub`` (the plugin side), ``errors``.
"""

from nri_plugin import api
from nri_plugin.errors import (
    ConnectionClosed,
    DeadlineExceeded,
    NriError,
    ProtocolError,
    RegistrationError,
    RpcError,
)
from nri_plugin.stub import DEFAULT_SOCKET_PATH, Stub

__all__ = [
    "DEFAULT_SOCKET_PATH",
    "ConnectionClosed",
    "DeadlineExceeded",
    "NriError",
    "ProtocolError",
    "RegistrationError",
    "RpcError",
    "Stub",
    "api",
]
