"""The NRI socket multiplexer: several logical byte streams over one Unix stream socket.

Every frame is an 8-byte header, connection id then payload length (both big-endian uint32),
followed by the payload: a slice of that connection's byte stream, not a message. NRI uses two
connections: 1 carries the Plugin service (the runtime calls, we serve) and 2 the Runtime
service (we call). Nothing is sent to open or close a connection; closing means closing the
socket.

Frames we send to a Go runtime follow its reader's limits (see ``encode_frames``). Frames we
receive may be up to 16 MiB (NRI v0.6.1's limit); anything larger, or a frame for a connection
nobody registered, is a protocol error that ends the connection.

``FrameDecoder`` and ``encode_frames`` do no I/O (tests and fuzzers drive them directly);
``Mux`` runs them as an asyncio protocol on the socket.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable

from nri_plugin.errors import ConnectionClosed, ProtocolError

log = logging.getLogger(__name__)

HEADER = struct.Struct(">II")
PLUGIN_SERVICE_CONN = 1
RUNTIME_SERVICE_CONN = 2
MAX_FRAME_PAYLOAD = 1 << 24
# Go's ttrpc reads each connection through a 4096-byte bufio.Reader, and a Go mux Read fails a
# frame larger than the buffer it is given: a frame that starts a message must fit in 4096 bytes.
GO_SAFE_FRAME = 4096


class FrameDecoder:
    """Turns socket bytes into (connection id, payload) frames, whatever the read boundaries."""

    def __init__(self, max_payload: int = MAX_FRAME_PAYLOAD) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add ``data``; return the frames it completed. Raises ProtocolError on a bad header."""
        buf = self._buf
        buf += data
        frames = []
        start = 0
        while len(buf) - start >= HEADER.size:
            conn_id, length = HEADER.unpack_from(buf, start)
            if length > self.max_payload:
                raise ProtocolError(
                    f"frame of {length} bytes on connection {conn_id} exceeds {self.max_payload}"
                )
            end = start + HEADER.size + length
            if len(buf) < end:
                break
            frames.append((conn_id, bytes(buf[start + HEADER.size : end])))
            start = end
        if start:
            del buf[:start]
        return frames


def encode_frames(conn_id: int, message: bytes) -> bytes:
    """Frame one ttrpc message the way Go's own stack does (safe for a Go reader).

    A message of at most 4096 bytes goes in one frame. A longer one goes as a first frame of
    exactly 4096 bytes (the ttrpc header and the start of the payload), then one frame with the
    rest, which the Go reader copies straight into the payload buffer.
    """
    if len(message) <= GO_SAFE_FRAME:
        return HEADER.pack(conn_id, len(message)) + message
    head, rest = message[:GO_SAFE_FRAME], message[GO_SAFE_FRAME:]
    return b"".join((HEADER.pack(conn_id, len(head)), head, HEADER.pack(conn_id, len(rest)), rest))


Receiver = Callable[[bytes], None]


class Mux(asyncio.Protocol):
    """Logical connections over one socket, as an asyncio protocol.

    Usage::

        transport, connection = await loop.create_unix_connection(Mux, path)
        connection.register(PLUGIN_SERVICE_CONN, server.feed)  # bytes of connection 1 go there
        connection.send(RUNTIME_SERVICE_CONN, message)         # framed and written at once
        await connection.run()                                 # until EOF or a protocol error

    Received bytes are decoded and handed to the receivers straight from the event loop's
    read callback (no task switch in the request path). ``send`` writes all frames of a
    message in one call, so frames of two messages never interleave on the socket.
    """

    def __init__(self, max_payload: int = MAX_FRAME_PAYLOAD) -> None:
        self._decoder = FrameDecoder(max_payload)
        self._receivers: dict[int, Receiver] = {}
        self._transport: asyncio.Transport | None = None
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._error: Exception | None = None

    @property
    def closed(self) -> bool:
        return self._done.done() or self._transport is None or self._transport.is_closing()

    def register(self, conn_id: int, receiver: Receiver) -> None:
        """Deliver the byte stream of ``conn_id`` to ``receiver`` (called in the read path)."""
        self._receivers[conn_id] = receiver

    def send(self, conn_id: int, message: bytes) -> None:
        """Queue one whole message on ``conn_id``; raises ConnectionClosed once closed."""
        if self.closed or self._transport is None:
            raise ConnectionClosed("NRI connection is closed")
        self._transport.write(encode_frames(conn_id, message))

    def send_raw(self, data: bytes) -> None:
        """Write ``data`` unframed (tests use it to send malformed input)."""
        if self._transport is not None:
            self._transport.write(data)

    async def run(self) -> None:
        """Wait until the connection ends.

        Returns on a clean EOF; raises ProtocolError on bad framing and ConnectionClosed on a
        socket error or an EOF in the middle of a frame. Either way the socket is closed.
        """
        await asyncio.shield(self._done)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        self.close()

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        if self._error is not None:
            return
        try:
            for conn_id, payload in self._decoder.feed(data):
                receiver = self._receivers.get(conn_id)
                if receiver is None:
                    raise ProtocolError(f"frame for unknown connection {conn_id}")
                receiver(payload)
        except ProtocolError as err:
            # without its traceback, whose frames hold the received bytes (a flood's 16 MiB)
            self._fail(err.with_traceback(None))
        except Exception as err:  # a receiver bug: end this connection, not the process
            log.exception("NRI connection: receiver failed")
            self._fail(ProtocolError(f"receiver failed: {err!r}"))

    def eof_received(self) -> bool:
        if self._decoder.pending:
            self._fail(
                ConnectionClosed(
                    f"NRI peer closed the socket {self._decoder.pending} bytes into a frame"
                )
            )
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        # Nothing more arrives: drop the bytes still buffered and the receivers (which refer
        # back to this connection), so that a flood's 16 MiB is freed now, not whenever the
        # garbage collector next finds the cycle.
        self._decoder = FrameDecoder(self._decoder.max_payload)
        self._receivers.clear()
        if self._error is None and exc is not None:
            self._error = ConnectionClosed(f"NRI connection lost: {exc}")
        if not self._done.done():
            if self._error is not None:
                self._done.set_exception(self._error)
            else:
                self._done.set_result(None)
