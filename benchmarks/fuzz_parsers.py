"""Coverage-guided fuzzing (atheris) of everything that parses bytes from the NRI socket.

Each input is cut at a point the fuzzer chooses and fed, in two reads, to the mux frame decoder
and the ttrpc message decoder; every frame and message it yields is decoded further as a ttrpc
envelope and as the NRI requests a plugin receives. The only exceptions allowed are the ones the
stub turns into a closed connection (ProtocolError) or an error status (DecodeError); anything
else is a crash that atheris reports with the input. Prints the number of inputs tried.

    .venv/bin/pip install atheris   # or: pip install -e '.[fuzz]'
    PYTHONPATH=. .venv/bin/python benchmarks/fuzz_parsers.py -atheris_runs=200000
"""

from __future__ import annotations

import atexit
import sys
import time

try:
    import atheris
except ImportError:
    print("fuzz_parsers: atheris is not installed: .venv/bin/pip install atheris", file=sys.stderr)
    sys.exit(2)

with atheris.instrument_imports():
    from google.protobuf.message import DecodeError

    from nri_plugin import api, mux, ttrpc
    from nri_plugin.api import ttrpc_pb2
    from nri_plugin.errors import ProtocolError

REQUEST_TYPES = [
    api.ConfigureRequest,
    api.SynchronizeRequest,
    api.CreateContainerRequest,
    api.UpdateContainerRequest,
    api.StateChangeEvent,
    api.UpdateContainersResponse,
]
inputs = [0]  # a list, so the callback can count without a global statement
started = time.monotonic()


def decode_payload(data: bytes) -> None:
    for msg in ttrpc.MessageDecoder(max_message=1 << 16).feed(data):
        envelope = ttrpc_pb2.Request() if msg.type == ttrpc.TYPE_REQUEST else ttrpc_pb2.Response()
        try:
            envelope.ParseFromString(msg.data)
            payload = envelope.payload
            for request_type in REQUEST_TYPES:
                request_type().ParseFromString(payload)
        except DecodeError:
            pass


def test_one_input(data: bytes) -> None:
    inputs[0] += 1
    if not data:
        return
    cut = data[0] % len(data)
    body = data[1:]
    decoder = mux.FrameDecoder(max_payload=1 << 16)
    try:
        frames = decoder.feed(body[:cut]) + decoder.feed(body[cut:])
    except ProtocolError:
        frames = []
    for _conn, payload in frames:
        decode_payload(payload)
    decode_payload(body)  # the same bytes as a bare connection stream


@atexit.register
def report() -> None:
    elapsed = time.monotonic() - started
    print(f"fuzz_parsers: {inputs[0]} inputs tried in {elapsed:.1f}s")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
