"""Byte-exact framing: the worked examples of the NRI/ttrpc reference, byte for byte."""

from __future__ import annotations

import pytest

from nri_plugin import api, mux, status, ttrpc
from nri_plugin.api import ttrpc_pb2
from nri_plugin.errors import ProtocolError, RpcError

REGISTER_KOORDLET = bytes.fromhex(
    "00000002 00000048 0000003e 00000001 01 00"
    "0a1c" + b"nri.pkg.api.v1alpha1.Runtime".hex() + "120e" + b"RegisterPlugin".hex() + "1a0e"
    "0a08" + b"koordlet".hex() + "1202" + b"00".hex()
)


def test_register_plugin_request_is_the_references_80_bytes() -> None:
    payload = api.RegisterPluginRequest(plugin_name="koordlet", plugin_idx="00").SerializeToString()
    request = ttrpc_pb2.Request(
        service="nri.pkg.api.v1alpha1.Runtime", method="RegisterPlugin", payload=payload
    )
    message = ttrpc.encode_message(1, ttrpc.TYPE_REQUEST, request.SerializeToString())

    wire = mux.encode_frames(mux.RUNTIME_SERVICE_CONN, message)

    assert len(payload) == 14
    assert len(wire) == 80
    assert wire == REGISTER_KOORDLET


def test_go_stub_register_variant_with_a_two_second_deadline() -> None:
    request = ttrpc_pb2.Request(
        service="nri.pkg.api.v1alpha1.Runtime",
        method="RegisterPlugin",
        payload=api.RegisterPluginRequest(
            plugin_name="koordlet", plugin_idx="00"
        ).SerializeToString(),
        timeout_nano=2_000_000_000,
    )
    data = request.SerializeToString()
    assert len(data) == 0x44
    assert data.endswith(bytes.fromhex("2080a8d6b907"))
    assert len(mux.encode_frames(2, ttrpc.encode_message(1, ttrpc.TYPE_REQUEST, data))) == 86


def test_empty_success_response_is_18_bytes() -> None:
    wire = mux.encode_frames(2, ttrpc.encode_response(1, b""))
    assert wire == bytes.fromhex("00000002 0000000a 00000000 00000001 02 00")


def test_configure_response_subscribing_to_all_v061_events() -> None:
    payload = api.ConfigureResponse(events=0x7FF).SerializeToString()
    assert payload == bytes.fromhex("10ff0f")
    wire = mux.encode_frames(1, ttrpc.encode_response(1, payload))
    assert wire == bytes.fromhex("00000001 0000000f 00000005 00000001 02 00 1203 10ff0f")


def test_unimplemented_method_reply_matches_the_reference() -> None:
    error = RpcError(status.UNIMPLEMENTED, "method UpdatePodSandbox")
    wire = mux.encode_frames(1, ttrpc.encode_response(5, error=error))
    expected = bytes.fromhex(
        "00000001 00000027 0000001d 00000005 02 00 0a1b 080c 1217"
        + b"method UpdatePodSandbox".hex()
    )
    assert wire == expected


def test_decoders_take_the_register_request_apart_again() -> None:
    frames = mux.FrameDecoder().feed(REGISTER_KOORDLET)
    assert [(conn, len(p)) for conn, p in frames] == [(2, 72)]
    (msg,) = ttrpc.MessageDecoder().feed(frames[0][1])
    assert (msg.stream_id, msg.type, msg.flags) == (1, ttrpc.TYPE_REQUEST, 0)
    request = ttrpc_pb2.Request.FromString(msg.data)
    inner = api.RegisterPluginRequest.FromString(request.payload)
    assert (request.method, inner.plugin_name, inner.plugin_idx) == (
        "RegisterPlugin",
        "koordlet",
        "00",
    )


@pytest.mark.parametrize("size", [10, 4096, 4097, 100_000, ttrpc.MAX_MESSAGE + 10])
def test_large_messages_are_cut_the_go_way(size: int) -> None:
    message = bytes(range(256)) * (size // 256) + bytes(size % 256)
    wire = mux.encode_frames(1, message)

    frames = mux.FrameDecoder().feed(wire)

    assert b"".join(p for _, p in frames) == message
    if size <= mux.GO_SAFE_FRAME:
        assert [len(p) for _, p in frames] == [size]
    else:
        assert [len(p) for _, p in frames] == [mux.GO_SAFE_FRAME, size - mux.GO_SAFE_FRAME]


def test_frame_decoder_refuses_frames_above_16_mib() -> None:
    header = mux.HEADER.pack(1, mux.MAX_FRAME_PAYLOAD + 1)
    with pytest.raises(ProtocolError, match="exceeds 16777216"):
        mux.FrameDecoder().feed(header)


def test_frame_decoder_reassembles_byte_by_byte() -> None:
    decoder = mux.FrameDecoder()
    out = []
    for i in range(len(REGISTER_KOORDLET)):
        out += decoder.feed(REGISTER_KOORDLET[i : i + 1])
    assert out == mux.FrameDecoder().feed(REGISTER_KOORDLET)
    assert decoder.pending == 0


def test_sending_more_than_4_mib_is_refused_locally() -> None:
    with pytest.raises(RpcError) as err:
        ttrpc.encode_message(1, ttrpc.TYPE_REQUEST, bytes(ttrpc.MAX_MESSAGE + 1))
    assert err.value.code == status.RESOURCE_EXHAUSTED


def test_an_oversized_incoming_message_is_skipped_and_reported() -> None:
    big = ttrpc.HEADER.pack(ttrpc.MAX_MESSAGE + 5, 7, ttrpc.TYPE_REQUEST, 0) + bytes(
        ttrpc.MAX_MESSAGE + 5
    )
    after = ttrpc.encode_message(9, ttrpc.TYPE_REQUEST, b"next")
    decoder = ttrpc.MessageDecoder()

    out = decoder.feed(big[:1000]) + decoder.feed(big[1000:] + after)

    assert [(m.stream_id, m.oversized, m.data) for m in out] == [
        (7, ttrpc.MAX_MESSAGE + 5, b""),
        (9, 0, b"next"),
    ]
    assert decoder.pending == 0
