"""ttrpc client and server over an in-memory pipe: stream ids, concurrency, statuses."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nri_plugin import status, ttrpc
from nri_plugin.api import ttrpc_pb2
from nri_plugin.errors import ConnectionClosed, DeadlineExceeded, ProtocolError, RpcError


async def pair(
    handlers: dict[str, ttrpc.Handler],
) -> tuple[ttrpc.Client, ttrpc.Server, list[bytes]]:
    """A client whose bytes go to a server whose bytes go back, with one loop hop each way."""
    loop = asyncio.get_running_loop()
    sent: list[bytes] = []
    client: ttrpc.Client

    def to_client(data: bytes) -> None:
        loop.call_soon(client.feed, data)

    server = ttrpc.Server({"svc": handlers}, to_client)

    def to_server(data: bytes) -> None:
        sent.append(data)
        loop.call_soon(server.feed, data)

    client = ttrpc.Client(to_server)
    return client, server, sent


def test_concurrent_calls_are_matched_by_stream_id_when_answered_out_of_order() -> None:
    async def slow(payload: bytes, remaining: float | None) -> bytes:
        await asyncio.sleep(0.05)
        return b"slow:" + payload

    async def fast(payload: bytes, remaining: float | None) -> bytes:
        return b"fast:" + payload

    async def scenario() -> None:
        client, server, sent = await pair({"Slow": slow, "Fast": fast})
        order: list[bytes] = []

        async def call(method: str, payload: bytes) -> bytes:
            reply = await client.call("svc", method, payload, timeout=2)
            order.append(reply)
            return reply

        replies = await asyncio.gather(call("Slow", b"1"), call("Fast", b"2"), call("Fast", b"3"))

        assert list(replies) == [b"slow:1", b"fast:2", b"fast:3"]
        assert order[-1] == b"slow:1"  # answered last, still matched to its call
        stream_ids = [ttrpc.MessageDecoder().feed(m)[0].stream_id for m in sent]
        assert stream_ids == [1, 3, 5]
        requests = [
            ttrpc_pb2.Request.FromString(ttrpc.MessageDecoder().feed(m)[0].data) for m in sent
        ]
        assert all(r.timeout_nano == 2_000_000_000 for r in requests)
        await server.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("stream_ids", "message"),
    [
        pytest.param([2], "StreamID must be odd for client initiated streams", id="even"),
        pytest.param([5, 3], "StreamID cannot be re-used and must increment", id="decreasing"),
        pytest.param([5, 5], "StreamID cannot be re-used and must increment", id="reused"),
    ],
)
def test_server_refuses_bad_stream_ids_like_go(stream_ids: list[int], message: str) -> None:
    async def handler(payload: bytes, remaining: float | None) -> bytes:
        return b"ok"

    async def scenario() -> None:
        replies: list[bytes] = []
        server = ttrpc.Server({"svc": {"M": handler}}, replies.append)
        request = ttrpc_pb2.Request(service="svc", method="M").SerializeToString()
        for sid in stream_ids:
            server.feed(ttrpc.encode_message(sid, ttrpc.TYPE_REQUEST, request))
        await asyncio.sleep(0.01)
        answers = []
        for raw in replies:
            msg = ttrpc.MessageDecoder().feed(raw)[0]
            response = ttrpc_pb2.Response.FromString(msg.data)
            answers.append((msg.stream_id, response.status.code, response.status.message))
        assert (stream_ids[-1], status.INVALID_ARGUMENT, message) in answers
        await server.close()

    asyncio.run(scenario())


def test_a_data_message_is_ignored_by_the_server() -> None:
    async def scenario() -> None:
        replies: list[bytes] = []
        server = ttrpc.Server({}, replies.append)
        server.feed(ttrpc.encode_message(1, ttrpc.TYPE_DATA, b"x"))
        await asyncio.sleep(0)
        assert replies == []

    asyncio.run(scenario())


def test_a_call_without_answer_times_out_and_closing_fails_waiting_calls() -> None:
    async def scenario() -> None:
        client = ttrpc.Client(lambda data: None)  # the peer never answers
        with pytest.raises(DeadlineExceeded):
            await client.call("svc", "M", b"", timeout=0.05)
        waiting = asyncio.create_task(client.call("svc", "M", b"", timeout=5))
        await asyncio.sleep(0)
        client.close(ConnectionResetError("peer gone"))
        with pytest.raises(ConnectionClosed, match="peer gone"):
            await waiting
        with pytest.raises(ConnectionClosed):
            await client.call("svc", "M", b"")

    asyncio.run(scenario())


def test_error_status_reaches_the_caller_and_payload_is_dropped() -> None:
    async def refuse(payload: bytes, remaining: float | None) -> bytes:
        raise RpcError(status.FAILED_PRECONDITION, "not now")

    async def scenario() -> None:
        client, server, _ = await pair({"Refuse": refuse})
        with pytest.raises(RpcError) as err:
            await client.call("svc", "Refuse", b"", timeout=2)
        assert (err.value.code, err.value.message) == (status.FAILED_PRECONDITION, "not now")
        await server.close()

    asyncio.run(scenario())


def test_a_flood_is_refused_after_decoding_a_few_hundred_of_its_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a 16 MiB frame of empty requests does, smaller: decoding all 1.68 million of them
    # before counting stalled the loop for seconds and left hundreds of MiB of RSS behind.
    decoded: list[ttrpc.Message] = []
    message = ttrpc.Message

    def counted(*args: Any, **kwargs: Any) -> ttrpc.Message:
        decoded.append(message(*args, **kwargs))
        return decoded[-1]

    flood = b"".join(
        ttrpc.encode_message(sid, ttrpc.TYPE_REQUEST, b"") for sid in range(1, 200_000, 2)
    )
    monkeypatch.setattr(ttrpc, "Message", counted)

    async def scenario() -> None:
        server = ttrpc.Server({}, lambda data: None)
        with pytest.raises(ProtocolError, match="requests at once"):
            server.feed(flood)
        await server.close()

    asyncio.run(scenario())
    assert len(decoded) == ttrpc.MAX_REQUESTS_IN_FLIGHT + 1


def test_the_decoder_keeps_messages_past_its_limit_for_the_next_call() -> None:
    data = b"".join(ttrpc.encode_message(sid, ttrpc.TYPE_REQUEST, b"x") for sid in (1, 3, 5))
    decoder = ttrpc.MessageDecoder()

    assert [m.stream_id for m in decoder.feed(data, limit=2)] == [1, 3]
    assert [m.stream_id for m in decoder.feed(b"")] == [5]
    assert decoder.pending == 0
