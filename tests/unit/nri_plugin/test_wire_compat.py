"""Our NRI and ttrpc definitions against upstream's, compiled from Debian's Go sources: NRI
0.6.1 (containerd 1.7.24's, from trixie) and 0.8.0 (containerd 2.1's, from sid).

Every field upstream defines must exist here with the same number, type, label and message
type; every field we add must be one the newer NRI versions added (listed below, by version);
every upstream service method must exist with the same request and response types.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from nri_plugin.api import nri_pb2, ttrpc_pb2
from tests.e2e.harness import paths
from tests.unit.nri_plugin.protoc import compile_descriptors

FDP = descriptor_pb2.FileDescriptorProto

# Fields added after NRI v0.6.1 (the Debian package), message -> field numbers.
LATER_FIELDS = {
    "RegisterPluginRequest": {3},  # v0.12 NRI_version
    "ConfigureRequest": {4, 5, 6},  # v0.7 timeouts, v0.12 NRI_version
    "SynchronizeRequest": {3},  # v0.7 more
    "SynchronizeResponse": {2},  # v0.7 more
    "PodSandbox": {10},  # v0.8 ips
    "Container": set(range(14, 23)),  # v0.10 .. v0.12.2
    "LinuxContainer": set(range(6, 13)),  # v0.10, v0.11
    "LinuxResources": {8},  # v0.7 pids
    "ContainerAdjustment": {8, 9},  # v0.7 CDI devices, v0.10 args
    "LinuxContainerAdjustment": set(range(4, 13)),  # v0.7 .. v0.12
}
LATER_ENUM_VALUES = {
    "Event": {"UPDATE_POD_SANDBOX", "POST_UPDATE_POD_SANDBOX", "VALIDATE_CONTAINER_ADJUSTMENT"}
}


def _require(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"upstream sources not extracted ({path}): {paths.SETUP_HINT}")


def _messages(fdp: FDP) -> dict[str, descriptor_pb2.DescriptorProto]:
    """Messages by dotted name within the file, nested ones (map entries) included."""
    found = {}

    def walk(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for message in messages:
            name = f"{prefix}{message.name}"
            found[name] = message
            walk(f"{name}.", list(message.nested_type))

    walk("", list(fdp.message_type))
    return found


def _local(type_name: str, package: str) -> str:
    return type_name.removeprefix(f".{package}.")


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(paths.UPSTREAM_NRI_PROTO, id="nri-0.6.1"),
        pytest.param(paths.UPSTREAM_NRI_08_PROTO, id="nri-0.8.0"),
    ],
)
def upstream_nri(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FDP:
    proto: Path = request.param
    _require(proto)
    return compile_descriptors(proto.parent, "api.proto", tmp=tmp_path_factory.mktemp("nri"))[
        "api.proto"
    ]


@pytest.fixture(scope="module")
def ours() -> FDP:
    return FDP.FromString(nri_pb2.DESCRIPTOR.serialized_pb)


def test_every_upstream_field_exists_with_the_same_number_type_and_label(
    upstream_nri: FDP, ours: FDP
) -> None:
    mine = _messages(ours)
    problems = []
    for name, message in _messages(upstream_nri).items():
        if name not in mine:
            problems.append(f"message {name} missing")
            continue
        fields = {f.number: f for f in mine[name].field}
        for field in message.field:
            have = fields.get(field.number)
            if have is None:
                problems.append(f"{name}.{field.name} (#{field.number}) missing")
                continue
            pkg = upstream_nri.package
            if (have.name, have.type, have.label, _local(have.type_name, pkg)) != (
                field.name,
                field.type,
                field.label,
                _local(field.type_name, pkg),
            ):
                problems.append(f"{name}.{field.name} (#{field.number}) differs: {have} vs {field}")
    assert problems == []


def test_every_field_we_add_is_a_known_later_nri_field(upstream_nri: FDP, ours: FDP) -> None:
    upstream = _messages(upstream_nri)
    extra = []
    for name, message in _messages(ours).items():
        if name not in upstream:
            continue  # a message of a later NRI version, compared in the test below
        known = {f.number for f in upstream[name].field} | LATER_FIELDS.get(name, set())
        extra += [f"{name}.{f.name} (#{f.number})" for f in message.field if f.number not in known]
    assert extra == []


def test_services_have_every_upstream_method_with_the_same_types(
    upstream_nri: FDP, ours: FDP
) -> None:
    mine = {s.name: {m.name: m for m in s.method} for s in ours.service}
    missing = []
    for service in upstream_nri.service:
        for method in service.method:
            have = mine.get(service.name, {}).get(method.name)
            if have is None or (have.input_type, have.output_type) != (
                method.input_type,
                method.output_type,
            ):
                missing.append(f"{service.name}.{method.name}")
    assert missing == []
    assert ours.package == upstream_nri.package == "nri.pkg.api.v1alpha1"


def test_enum_values_keep_upstream_numbers(upstream_nri: FDP, ours: FDP) -> None:
    mine = {e.name: {v.name: v.number for v in e.value} for e in ours.enum_type}
    for enum in upstream_nri.enum_type:
        for value in enum.value:
            if (enum.name, value.name) == ("Event", "LAST"):
                continue  # LAST moved from 12 to 15 when v0.10 added three events
            assert mine[enum.name][value.name] == value.number, f"{enum.name}.{value.name}"
    later = {v for v in mine["Event"] if mine["Event"][v] >= 12 and v != "LAST"}
    assert later == LATER_ENUM_VALUES["Event"]


def test_ttrpc_envelope_matches_upstream(tmp_path: Path) -> None:
    _require(paths.UPSTREAM_TTRPC_DIR / "request.proto")
    upstream = compile_descriptors(paths.UPSTREAM_TTRPC_DIR, "request.proto", tmp=tmp_path)[
        "request.proto"
    ]
    mine = {m.name: m for m in FDP.FromString(ttrpc_pb2.DESCRIPTOR.serialized_pb).message_type}
    for message in upstream.message_type:
        fields = {f.number: f for f in mine[message.name].field}
        for field in message.field:
            have = fields[field.number]
            assert (have.name, have.type, have.label) == (field.name, field.type, field.label)
    status_fields = {f.number: (f.name, f.type) for f in mine["Status"].field}
    assert status_fields[1] == ("code", descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    assert status_fields[2] == ("message", descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
