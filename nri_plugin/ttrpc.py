"""ttrpc, containerd's lightweight RPC, as NRI uses it: unary calls only, over asyncio.

A message is a 10-byte header (data length and stream id as big-endian uint32, then type and
flags bytes) followed by the data: a serialized ``Request`` (type 1) or ``Response`` (type 2).
Clients number their streams 1, 3, 5, ...; a server answers on the request's stream id and may
answer out of order. Messages carry at most 4 MiB of data. We never send type 3 (Data): older Go
servers crash on it.

``MessageDecoder`` and ``encode_message`` do no I/O. ``Server`` and ``Client`` sit on one byte
stream each (a mux connection): they are fed received bytes and given a ``send`` function.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from nri_plugin import status
from nri_plugin.api import ttrpc_pb2
from nri_plugin.errors import ConnectionClosed, DeadlineExceeded, ProtocolError, RpcError

log = logging.getLogger(__name__)

HEADER = struct.Struct(">IIBB")
TYPE_REQUEST = 0x01
TYPE_RESPONSE = 0x02
TYPE_DATA = 0x03
MAX_MESSAGE = 4 << 20
# Requests a server takes at once on one connection: a runtime sends one call per event (NRI
# serializes them per plugin), so a few suffice; far more is a flood.
MAX_REQUESTS_IN_FLIGHT = 256


@dataclass(frozen=True, slots=True)
class Message:
    """One received message; ``oversized`` is the announced length of one that was skipped."""

    stream_id: int
    type: int
    flags: int
    data: bytes
    oversized: int = 0


def encode_message(stream_id: int, msg_type: int, data: bytes, flags: int = 0) -> bytes:
    """Header plus data; raises RpcError(RESOURCE_EXHAUSTED) above the 4 MiB limit."""
    if len(data) > MAX_MESSAGE:
        raise RpcError(
            status.RESOURCE_EXHAUSTED,
            f"message length {len(data)} exceeds maximum message size of {MAX_MESSAGE}",
        )
    return HEADER.pack(len(data), stream_id, msg_type, flags) + data


class MessageDecoder:
    """Turns a connection's byte stream into messages, whatever the frame boundaries.

    A message announcing more than ``max_message`` bytes is skipped, as Go's ttrpc does, and
    reported with ``oversized`` set so that the server can answer RESOURCE_EXHAUSTED.
    """

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self.max_message = max_message
        self._buf = bytearray()
        self._skip = 0

    @property
    def pending(self) -> int:
        return len(self._buf) + self._skip

    def feed(self, data: bytes, limit: int | None = None) -> list[Message]:
        """Add ``data``; return the messages it completed, at most ``limit`` of them (the bytes
        of the rest stay buffered for the next call)."""
        if self._skip:
            dropped = min(self._skip, len(data))
            self._skip -= dropped
            data = data[dropped:]
        buf = self._buf
        buf += data
        out: list[Message] = []
        start = 0
        while len(buf) - start >= HEADER.size and (limit is None or len(out) < limit):
            length, stream_id, msg_type, flags = HEADER.unpack_from(buf, start)
            if length > self.max_message:
                out.append(Message(stream_id, msg_type, flags, b"", oversized=length))
                available = len(buf) - start - HEADER.size
                self._skip = max(0, length - available)
                start = min(len(buf), start + HEADER.size + length)
                continue
            end = start + HEADER.size + length
            if len(buf) < end:
                break
            out.append(Message(stream_id, msg_type, flags, bytes(buf[start + HEADER.size : end])))
            start = end
        if start:
            del buf[:start]
        return out


def encode_response(stream_id: int, payload: bytes = b"", error: RpcError | None = None) -> bytes:
    """A Response message: the payload on success, only a status on error (as Go sends)."""
    response = ttrpc_pb2.Response()
    if error is not None:
        response.status.code = error.code
        response.status.message = error.message
    else:
        response.payload = payload
    return encode_message(stream_id, TYPE_RESPONSE, response.SerializeToString())


Send = Callable[[bytes], None]
OnServed = Callable[[str, float], None]
# A method handler: the request payload and the caller's remaining time (seconds, or None) in,
# the reply payload out. It raises RpcError to answer with a status.
Handler = Callable[[bytes, float | None], Awaitable[bytes]]


class Server:
    """Serves unary calls arriving on one byte stream; each call runs in its own task.

    ``services`` maps a full service name to its methods' handlers. Unknown services and
    methods are answered UNIMPLEMENTED (NRI v0.12 runtimes then fall back to StateChange);
    even or non-increasing stream ids and undecodable requests INVALID_ARGUMENT, as Go does.
    ``on_served(method, seconds)`` is told, after each reply is written, how long the call took
    from decoding its request to writing its reply.
    """

    def __init__(
        self,
        services: Mapping[str, Mapping[str, Handler]],
        send: Send,
        on_served: OnServed | None = None,
    ) -> None:
        self._services = services
        self._send = send
        self._on_served = on_served
        self._decoder = MessageDecoder()
        self._last_stream = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def feed(self, data: bytes) -> None:
        # One read's worth of requests is bounded, and so are the calls in flight: a peer that
        # floods (a 16 MiB frame of empty messages is 1.68 million requests) loses its
        # connection as soon as one request past the bound is decoded. Decoding the whole
        # flood first stalled every other answer for 4 s and left 225 MiB of RSS behind
        # (benchmarks/hostile_peers.py).
        room = max(0, MAX_REQUESTS_IN_FLIGHT - len(self._tasks))
        messages = self._decoder.feed(data, limit=room + 1)
        if len(messages) > room:
            raise ProtocolError(
                f"more than {MAX_REQUESTS_IN_FLIGHT} requests at once ({len(self._tasks)} were "
                "in flight): closing the connection"
            )
        for msg in messages:
            if msg.type == TYPE_REQUEST:
                self._on_request(msg)
            else:
                log.debug(
                    "ttrpc server: ignoring message type %d on stream %d", msg.type, msg.stream_id
                )

    def _reply_error(self, stream_id: int, code: int, message: str) -> None:
        log.warning("ttrpc server: stream %d: %s: %s", stream_id, status.name(code), message)
        self._send(encode_response(stream_id, error=RpcError(code, message)))

    def _on_request(self, msg: Message) -> None:
        started = time.perf_counter()
        if msg.stream_id % 2 == 0:
            self._reply_error(
                msg.stream_id,
                status.INVALID_ARGUMENT,
                "StreamID must be odd for client initiated streams",
            )
            return
        if msg.stream_id <= self._last_stream:
            self._reply_error(
                msg.stream_id,
                status.INVALID_ARGUMENT,
                "StreamID cannot be re-used and must increment",
            )
            return
        self._last_stream = msg.stream_id
        if msg.oversized:
            self._reply_error(
                msg.stream_id,
                status.RESOURCE_EXHAUSTED,
                f"message length {msg.oversized} exceed maximum message size of {MAX_MESSAGE}",
            )
            return
        request = ttrpc_pb2.Request()
        try:
            request.ParseFromString(msg.data)
        except DecodeError as err:
            self._reply_error(
                msg.stream_id, status.INVALID_ARGUMENT, f"unmarshal request error: {err}"
            )
            return
        methods = self._services.get(request.service)
        if methods is None:
            self._reply_error(msg.stream_id, status.UNIMPLEMENTED, f"service {request.service}")
            return
        handler = methods.get(request.method)
        if handler is None:
            self._reply_error(msg.stream_id, status.UNIMPLEMENTED, f"method {request.method}")
            return
        remaining = request.timeout_nano / 1e9 if request.timeout_nano > 0 else None
        task = asyncio.create_task(
            self._serve(
                msg.stream_id,
                handler,
                request.payload,
                remaining,
                method=request.method,
                started=started,
            )
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(
        self,
        stream_id: int,
        handler: Handler,
        payload: bytes,
        remaining: float | None,
        *,
        method: str,
        started: float,
    ) -> None:
        try:
            reply = await handler(payload, remaining)
        except RpcError as err:
            message = encode_response(stream_id, error=err)
        except DecodeError as err:
            message = encode_response(
                stream_id, error=RpcError(status.INTERNAL, f"error unmarshalling payload: {err}")
            )
        except Exception as err:  # a handler bug must not end the connection
            log.exception("ttrpc server: handler failed on stream %d", stream_id)
            message = encode_response(
                stream_id, error=RpcError(status.UNKNOWN, str(err) or repr(err))
            )
        else:
            try:
                message = encode_response(stream_id, reply)
            except RpcError as err:  # reply above 4 MiB
                message = encode_response(stream_id, error=err)
        with contextlib.suppress(ConnectionClosed):
            self._send(message)
        if self._on_served is not None:
            self._on_served(method, time.perf_counter() - started)

    async def close(self) -> None:
        """Cancel the calls still running and wait for them; drop the bytes still buffered."""
        self._decoder = MessageDecoder()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Client:
    """Makes unary calls on one byte stream; answers are matched to calls by stream id."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._decoder = MessageDecoder()
        self._next_stream = 1
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._closed: Exception | None = None

    def feed(self, data: bytes) -> None:
        for msg in self._decoder.feed(data):
            future = self._pending.pop(msg.stream_id, None)
            if msg.type != TYPE_RESPONSE or future is None or future.done():
                log.debug(
                    "ttrpc client: dropping message type %d for stream %d", msg.type, msg.stream_id
                )
                continue
            if msg.oversized:
                future.set_exception(
                    RpcError(
                        status.RESOURCE_EXHAUSTED, f"response of {msg.oversized} bytes is too large"
                    )
                )
                continue
            response = ttrpc_pb2.Response()
            try:
                response.ParseFromString(msg.data)
            except DecodeError as err:
                future.set_exception(ProtocolError(f"undecodable ttrpc response: {err}"))
                continue
            if response.HasField("status") and response.status.code != status.OK:
                future.set_exception(RpcError(response.status.code, response.status.message))
            else:
                future.set_result(response.payload)

    async def call(
        self, service: str, method: str, payload: bytes, timeout: float | None = None
    ) -> bytes:
        """Call ``service``/``method``; return the reply payload or raise RpcError."""
        if self._closed is not None:
            raise ConnectionClosed(f"ttrpc client is closed: {self._closed}")
        stream_id = self._next_stream
        self._next_stream += 2
        request = ttrpc_pb2.Request(service=service, method=method, payload=payload)
        if timeout is not None:
            request.timeout_nano = int(timeout * 1e9)
        message = encode_message(stream_id, TYPE_REQUEST, request.SerializeToString())
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[stream_id] = future
        try:
            self._send(message)
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise DeadlineExceeded(f"{service}/{method} got no answer within {timeout}s") from None
        finally:
            self._pending.pop(stream_id, None)

    def close(self, reason: Exception) -> None:
        """Fail every call still waiting with ConnectionClosed; drop the bytes still buffered."""
        self._closed = reason
        self._decoder = MessageDecoder()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed(f"connection closed: {reason}"))
