"""Compile .proto files into descriptors at test time (never into protobuf's global pool)."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2
from grpc_tools import protoc


def compile_descriptors(
    include: Path, *files: str, tmp: Path
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """FileDescriptorProtos of ``files`` (paths relative to ``include``), by file name."""
    out = tmp / "set.pb"
    well_known = Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{include}", f"-I{well_known}", f"--descriptor_set_out={out}", *files]
    assert protoc.main(args) == 0, f"protoc failed on {files}"
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return {f.name: f for f in fds.file}
