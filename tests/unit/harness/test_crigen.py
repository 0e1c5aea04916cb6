from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import crigen

GOGO_PROTO = """\
syntax = "proto3";

package runtime.v1;
option go_package = "k8s.io/cri-api/pkg/apis/runtime/v1";

import "github.com/gogo/protobuf/gogoproto/gogo.proto";

option (gogoproto.marshaler_all) = true;
option (gogoproto.goproto_unrecognized_all) = false;

service RuntimeService {
    rpc Version(VersionRequest) returns (VersionResponse) {}
}

message VersionRequest { string version = 1; }
message VersionResponse {
    string version = 1;
    repeated string names = 2 [(gogoproto.nullable) = false];
}
"""


def test_strip_gogo_removes_import_and_options_only() -> None:
    out = crigen.strip_gogo(GOGO_PROTO)

    assert "gogo" not in out
    assert 'option go_package = "k8s.io/cri-api/pkg/apis/runtime/v1";' in out
    assert "repeated string names = 2;" in out
    assert "rpc Version(VersionRequest) returns (VersionResponse) {}" in out


def test_generate_compiles_a_gogo_proto_into_an_importable_package(tmp_path: Path) -> None:
    proto = tmp_path / "api.proto"
    proto.write_text(GOGO_PROTO)

    gen = crigen.generate(proto, tmp_path / "out")

    assert (gen / "cri_v1" / "api_pb2.py").exists()
    grpc_module = (gen / "cri_v1" / "api_pb2_grpc.py").read_text()
    assert "from cri_v1 import api_pb2" in grpc_module
    assert "RuntimeServiceStub" in grpc_module
