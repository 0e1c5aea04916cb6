"""Property-based tests: the frame and message parsers never fail in an unexpected way."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nri_plugin import mux, ttrpc
from nri_plugin.errors import ProtocolError

frames = st.lists(st.tuples(st.integers(1, 2), st.binary(max_size=9000)), max_size=8)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@given(frames, st.lists(st.integers(0, 1 << 20), max_size=10))
def test_frames_survive_any_read_boundaries(sent: list[tuple[int, bytes]], cuts: list[int]) -> None:
    wire = b"".join(mux.HEADER.pack(conn, len(p)) + p for conn, p in sent)
    decoder = mux.FrameDecoder()
    got = [f for chunk in _split(wire, cuts) for f in decoder.feed(chunk)]
    assert got == sent
    assert decoder.pending == 0


@given(
    st.lists(st.binary(max_size=10_000), max_size=6), st.lists(st.integers(0, 1 << 20), max_size=10)
)
def test_messages_survive_any_frame_cuts(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(
        ttrpc.encode_message(2 * i + 1, ttrpc.TYPE_REQUEST, p) for i, p in enumerate(payloads)
    )
    decoder = ttrpc.MessageDecoder()
    got = [m for chunk in _split(stream, cuts) for m in decoder.feed(chunk)]
    assert [(m.stream_id, m.data) for m in got] == [(2 * i + 1, p) for i, p in enumerate(payloads)]


@settings(max_examples=300)
@given(st.binary(max_size=4096), st.integers(8, 1 << 16))
def test_garbage_either_decodes_or_raises_protocol_error(data: bytes, limit: int) -> None:
    decoder = mux.FrameDecoder(max_payload=limit)
    try:
        for conn, payload in decoder.feed(data):
            assert len(payload) <= limit
            assert 0 <= conn < 1 << 32
    except ProtocolError:
        pass


@settings(max_examples=300)
@given(st.binary(max_size=4096), st.integers(0, 1 << 12))
def test_garbage_messages_never_raise(data: bytes, limit: int) -> None:
    decoder = ttrpc.MessageDecoder(max_message=limit)
    total = 0
    for msg in decoder.feed(data):
        assert len(msg.data) <= limit
        assert (msg.oversized == 0) or (msg.oversized > limit and msg.data == b"")
        total += ttrpc.HEADER.size + (msg.oversized or len(msg.data))
    assert total + decoder.pending >= len(data)
