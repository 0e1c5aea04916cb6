"""The committed generated modules match the .proto files they came from."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from nri_plugin.api import nri_pb2, ttrpc_pb2
from tests.e2e.harness.paths import REPO_ROOT
from tests.unit.nri_plugin.protoc import compile_descriptors


@pytest.mark.parametrize(
    ("proto", "module"),
    [
        pytest.param("nri_plugin/api/nri.proto", nri_pb2, id="nri"),
        pytest.param("nri_plugin/api/ttrpc.proto", ttrpc_pb2, id="ttrpc"),
    ],
)
def test_generated_module_is_up_to_date(proto: str, module: object, tmp_path: Path) -> None:
    compiled = compile_descriptors(REPO_ROOT, proto, tmp=tmp_path)[proto]
    _drop_json_names(compiled.message_type)  # protoc adds them to descriptor sets only
    shipped = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)  # type: ignore[attr-defined]

    assert shipped == compiled, f"{proto} changed: run scripts/genproto.py"


def _drop_json_names(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _drop_json_names(message.nested_type)
