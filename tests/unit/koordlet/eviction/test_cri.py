"""CRIRuntime.stop_container against a real gRPC server on a unix socket.

The request bytes the server receives are decoded with a StopContainerRequest class built from
a descriptor (CRI's field numbers and types), so the hand encoding is checked by protobuf itself.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from koordlet.eviction.cri import CRIError, CRIRuntime, stop_container_request
from koordlet.metrics import KoordletMetrics


def stop_request_class() -> Any:
    proto = descriptor_pb2.FileDescriptorProto(
        name="koordpy_test_cri.proto", package="runtime.v1", syntax="proto3"
    )
    msg = proto.message_type.add(name="StopContainerRequest")
    msg.field.add(
        name="container_id",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    msg.field.add(
        name="timeout",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("runtime.v1.StopContainerRequest")
    )


StopContainerRequest = stop_request_class()


@dataclass
class Runtime:
    """A fake runtime: records raw StopContainer requests; ``answer`` may abort."""

    socket: Path
    requests: list[bytes] = field(default_factory=list)
    answer: Callable[[grpc.ServicerContext], None] | None = None

    def stop(self, request: bytes, ctx: grpc.ServicerContext) -> bytes:
        self.requests.append(request)
        if self.answer is not None:
            self.answer(ctx)
        return b""  # StopContainerResponse has no fields


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """tmp_path can be longer than a unix socket path may be (108 bytes)."""
    folder = Path(tempfile.mkdtemp(dir="/tmp", prefix="cri"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def runtime(short_dir: Path) -> Iterator[Runtime]:
    fake = Runtime(short_dir / "cri.sock")
    server = grpc.server(futures.ThreadPoolExecutor(2))
    handler = grpc.method_handlers_generic_handler(
        "runtime.v1.RuntimeService",
        {
            "StopContainer": grpc.unary_unary_rpc_method_handler(
                fake.stop,
                request_deserializer=lambda b: b,
                response_serializer=lambda b: b,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    assert server.add_insecure_port(f"unix://{fake.socket}") != 0
    server.start()
    yield fake
    server.stop(None)


@pytest.mark.parametrize("timeout", [0, 30, 300])  # 300: a two-byte varint
def test_stop_container_request_round_trips(runtime: Runtime, timeout: int) -> None:
    client = CRIRuntime(runtime.socket, deadline=5.0)
    try:
        client.stop_container("4f2a9c0d11ee", timeout=timeout)
    finally:
        client.close()

    (raw,) = runtime.requests
    decoded = StopContainerRequest.FromString(raw)
    assert decoded.container_id == "4f2a9c0d11ee"
    assert decoded.timeout == timeout


def test_the_encoding_matches_protobufs_own() -> None:
    for cid, timeout in (("abc", 0), ("x" * 200, 7), ("d" * 64, -1)):
        expected = StopContainerRequest(container_id=cid, timeout=timeout).SerializeToString()
        assert stop_container_request(cid, timeout) == expected


def test_one_channel_serves_several_calls(runtime: Runtime) -> None:
    client = CRIRuntime(runtime.socket, deadline=5.0)
    try:
        client.stop_container("aaa")
        client.stop_container("bbb", timeout=2)
    finally:
        client.close()

    decoded = [StopContainerRequest.FromString(r) for r in runtime.requests]
    assert [(d.container_id, d.timeout) for d in decoded] == [("aaa", 0), ("bbb", 2)]


def test_a_runtime_error_becomes_a_cri_error_naming_the_code(runtime: Runtime) -> None:
    def not_found(ctx: grpc.ServicerContext) -> None:
        ctx.abort(grpc.StatusCode.NOT_FOUND, "container 4f2a not found")

    runtime.answer = not_found
    client = CRIRuntime(runtime.socket, deadline=5.0)
    try:
        with pytest.raises(CRIError) as err:
            client.stop_container("4f2a9c0d11ee55", timeout=0)
    finally:
        client.close()

    assert "NOT_FOUND" in str(err.value)
    assert "container 4f2a not found" in str(err.value)
    assert "4f2a9c0d11ee" in str(err.value)


def test_a_missing_socket_is_a_cri_error(short_dir: Path) -> None:
    client = CRIRuntime(short_dir / "none.sock", deadline=1.0)

    with pytest.raises(CRIError, match="does not exist"):
        client.stop_container("abc")


def test_a_socket_nobody_listens_on_is_a_cri_error(short_dir: Path) -> None:
    stale = short_dir / "stale.sock"
    stale.touch()  # a leftover file: exists, but no server
    client = CRIRuntime(stale, deadline=1.0)
    try:
        with pytest.raises(CRIError, match="UNAVAILABLE"):
            client.stop_container("abc")
    finally:
        client.close()


def test_an_empty_container_id_is_refused_before_any_call(runtime: Runtime) -> None:
    client = CRIRuntime(runtime.socket, deadline=1.0)

    with pytest.raises(CRIError, match="no container id"):
        client.stop_container("")
    assert runtime.requests == []


# -- koordlet_cri_request_duration_seconds --------------------------------------------------


class Ticks:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 100.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def cri_sample(metrics: KoordletMetrics, suffix: str, code: str, **extra: str) -> float | None:
    labels = {"node": "n1", "method": "StopContainer", "code": code, **extra}
    return metrics.registry.get_sample_value(
        f"koordlet_cri_request_duration_seconds{suffix}", labels
    )


def test_a_successful_stop_is_counted_under_ok_with_its_duration(runtime: Runtime) -> None:
    metrics = KoordletMetrics("n1")
    client = CRIRuntime(runtime.socket, deadline=5.0, observe=metrics.observe_cri, clock=Ticks(0.5))
    try:
        client.stop_container("aaa")
        client.stop_container("bbb")
    finally:
        client.close()

    assert cri_sample(metrics, "_count", "OK") == 2
    assert cri_sample(metrics, "_sum", "OK") == 1.0  # two calls of 0.5 s each
    assert cri_sample(metrics, "_bucket", "OK", le="0.256") == 0
    assert cri_sample(metrics, "_bucket", "OK", le="1.024") == 2
    assert cri_sample(metrics, "_count", "NOT_FOUND") is None


def test_a_failed_stop_is_counted_under_its_grpc_code(runtime: Runtime) -> None:
    def not_found(ctx: grpc.ServicerContext) -> None:
        ctx.abort(grpc.StatusCode.NOT_FOUND, "container 4f2a not found")

    runtime.answer = not_found
    metrics = KoordletMetrics("n1")
    client = CRIRuntime(runtime.socket, deadline=5.0, observe=metrics.observe_cri)
    try:
        with pytest.raises(CRIError):
            client.stop_container("4f2a9c0d11ee55")
    finally:
        client.close()

    assert cri_sample(metrics, "_count", "NOT_FOUND") == 1
    assert cri_sample(metrics, "_count", "OK") is None


def test_an_unreachable_runtime_is_counted_as_unavailable(short_dir: Path) -> None:
    metrics = KoordletMetrics("n1")
    stale = short_dir / "stale.sock"
    stale.touch()  # exists, nobody listens: gRPC itself answers UNAVAILABLE
    client = CRIRuntime(stale, deadline=1.0, observe=metrics.observe_cri)
    try:
        with pytest.raises(CRIError):
            client.stop_container("abc")
    finally:
        client.close()
    missing = CRIRuntime(short_dir / "none.sock", observe=metrics.observe_cri)
    with pytest.raises(CRIError, match="does not exist"):
        missing.stop_container("abc")

    assert cri_sample(metrics, "_count", "UNAVAILABLE") == 2
