"""koordlet feature gates: Koordinator's names and defaults, --feature-gates parsing."""

from __future__ import annotations

import pytest

from koordapi import features
from koordapi.errors import ModelError
from koordapi.features import FeatureGateError, FeatureGates


@pytest.mark.parametrize(
    ("gate", "default"),
    [
        pytest.param(features.GROUP_IDENTITY, True, id="group-identity-beta"),
        pytest.param(features.CPUSET_ALLOCATOR, True, id="cpuset-allocator-beta"),
        pytest.param(features.BATCH_RESOURCE, True, id="batch-resource-beta"),
        pytest.param(features.GPU_ENV_INJECT, False, id="gpu-env-inject"),
        pytest.param(features.RDMA_DEVICE_INJECT, False, id="rdma-device-inject"),
        pytest.param(features.CPU_NORMALIZATION, False, id="cpu-normalization"),
        pytest.param(features.CORE_SCHED, False, id="core-sched"),
        pytest.param(features.TERWAY_QOS, False, id="terway-qos"),
        pytest.param(features.TC_NETWORK_QOS, False, id="tc-network-qos"),
        pytest.param(features.RESCTRL, False, id="resctrl"),
        pytest.param(features.OOM_SCORE_ADJ, False, id="oom-score-adj"),
        pytest.param(features.MEMORY_QOS, False, id="memory-qos"),
        pytest.param(features.BE_CPU_MANAGER, False, id="be-cpu-manager"),
        pytest.param("BECPUSuppress", True, id="be-cpu-suppress"),
        pytest.param("RdtResctrl", True, id="rdt-resctrl"),
        pytest.param("CPUBurst", True, id="cpu-burst"),
        pytest.param("CgroupReconcile", False, id="cgroup-reconcile"),
    ],
)
def test_defaults_match_koordinator(gate: str, default: bool) -> None:
    assert FeatureGates().enabled(gate) is default


def test_gate_names_are_koordinators_spelling() -> None:
    assert (features.GROUP_IDENTITY, features.CPUSET_ALLOCATOR, features.TC_NETWORK_QOS) == (
        "GroupIdentity",
        "CPUSetAllocator",
        "TCNetworkQoS",
    )


def test_parse_overrides_only_the_named_gates() -> None:
    gates = FeatureGates.parse("CPUNormalization=true, GroupIdentity=False ,,")
    assert gates.overrides == {"CPUNormalization": True, "GroupIdentity": False}
    assert gates.enabled("CPUNormalization") is True
    assert gates.enabled("GroupIdentity") is False
    assert gates.enabled("CPUSetAllocator") is True


@pytest.mark.parametrize("text", ["", "  ", ","])
def test_empty_flag_keeps_every_default(text: str) -> None:
    assert FeatureGates.parse(text).all() == FeatureGates().all()


def test_later_value_of_a_repeated_gate_wins() -> None:
    assert FeatureGates.parse("Resctrl=true,Resctrl=false").enabled("Resctrl") is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("GroupIdentity", "'GroupIdentity' is not NAME=true|false", id="no-value"),
        pytest.param("GroupIdentity=yes", "is not NAME=true|false", id="not-a-bool"),
        pytest.param("GroupIdentity=", "is not NAME=true|false", id="empty-value"),
        pytest.param("GroupIdentiy=true", "unknown feature gate 'GroupIdentiy'", id="typo"),
        pytest.param("groupidentity=true", "unknown feature gate", id="case-sensitive-name"),
    ],
)
def test_malformed_or_unknown_gates_are_errors(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        FeatureGates.parse(text)


def test_unknown_gate_error_lists_the_known_ones() -> None:
    with pytest.raises(FeatureGateError) as err:
        FeatureGates.parse("Nope=true")
    assert "known: Accelerators, AuditEvents, AuditEventsHTTPHandler, BECPUEvict" in str(err.value)
    assert isinstance(err.value, ModelError)


def test_asking_for_an_unknown_gate_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="unknown feature gate Nope"):
        FeatureGates().enabled("Nope")


def test_all_lists_every_gate_sorted_with_its_value() -> None:
    table = FeatureGates.parse("OOMScoreAdj=true").all()
    assert list(table) == sorted(features.DEFAULTS)
    assert table["OOMScoreAdj"] is True
    assert table["GroupIdentity"] is True
    assert table["Resctrl"] is False


# Koordinator v1.8.0's koordlet gates with their defaults and stages, written out here from
# its sources: pkg/features/koordlet_features.go (defaultKoordletFeatureGates) and
# pkg/koordlet/runtimehooks/config.go (defaultRuntimeHooksFG).
ALPHA, BETA = "alpha", "beta"
KOORDINATOR_V18_GATES: dict[str, tuple[bool, str]] = {
    "AuditEvents": (False, ALPHA),
    "AuditEventsHTTPHandler": (False, ALPHA),
    "BECPUSuppress": (True, BETA),
    "BECPUManager": (False, ALPHA),
    "BECPUEvict": (False, ALPHA),
    "CPUEvict": (False, ALPHA),
    "CPUAllocatableEvict": (False, ALPHA),
    "BEMemoryEvict": (False, ALPHA),
    "MemoryEvict": (False, ALPHA),
    "MemoryAllocatableEvict": (False, ALPHA),
    "CPUBurst": (True, BETA),
    "SystemConfig": (False, ALPHA),
    "RdtResctrl": (True, BETA),
    "ResctrlCollector": (False, ALPHA),
    "CgroupReconcile": (False, ALPHA),
    "NodeTopologyReport": (True, BETA),
    "Accelerators": (False, ALPHA),
    "RDMADevices": (False, ALPHA),
    "CPICollector": (False, ALPHA),
    "Libpfm4": (False, ALPHA),
    "PSICollector": (False, ALPHA),
    "BlkIOReconcile": (False, ALPHA),
    "ColdPageCollector": (False, ALPHA),
    "HugePageReport": (False, ALPHA),
    "PodResourcesProxy": (False, ALPHA),
    "HamiCoreVGPUMonitor": (False, ALPHA),
    # the runtime hooks'
    "GroupIdentity": (True, BETA),
    "CPUSetAllocator": (True, BETA),
    "GPUEnvInject": (False, ALPHA),
    "RDMADeviceInject": (False, ALPHA),
    "BatchResource": (True, BETA),
    "CPUNormalization": (False, ALPHA),
    "CoreSched": (False, ALPHA),
    "TerwayQoS": (False, ALPHA),
    "TCNetworkQoS": (False, ALPHA),
    "Resctrl": (False, ALPHA),
}
# Ours, which Koordinator does not have: each named here on purpose.
OURS = {"MemoryQOS", "OOMScoreAdj", "SchedLatencyCollector", "BESuppressBySchedLatency"}


def test_the_gate_table_is_koordinators_and_ours() -> None:
    assert set(features.DEFAULTS) == set(KOORDINATOR_V18_GATES) | OURS
    assert not OURS & set(KOORDINATOR_V18_GATES)


@pytest.mark.parametrize(("gate", "spec"), sorted(KOORDINATOR_V18_GATES.items()))
def test_each_koordinator_gate_has_its_default_and_stage(gate: str, spec: tuple[bool, str]) -> None:
    default, stage = spec
    assert FeatureGates().enabled(gate) is default
    # the stage, as AllAlpha/AllBeta see it: the opposite of the default for its stage only
    flip = "false" if default else "true"
    assert FeatureGates.parse(f"AllBeta={flip}").enabled(gate) is (
        (not default) if stage == BETA else default
    )
    assert FeatureGates.parse(f"AllAlpha={flip}").enabled(gate) is (
        (not default) if stage == ALPHA else default
    )


def test_every_koordinator_gate_is_accepted_and_the_unimplemented_are_reported() -> None:
    gates = FeatureGates.parse(",".join(f"{g}=true" for g in KOORDINATOR_V18_GATES))
    assert all(gates.enabled(g) for g in KOORDINATOR_V18_GATES)
    assert set(gates.unimplemented()) == set(features.NOT_IMPLEMENTED)
    assert set(features.NOT_IMPLEMENTED) <= set(KOORDINATOR_V18_GATES)


def test_all_alpha_and_all_beta_set_their_stage_unless_a_gate_is_named() -> None:
    gates = FeatureGates.parse("AllAlpha=true,CPICollector=false")
    assert gates.enabled("PSICollector") and gates.enabled(features.CORE_SCHED)
    assert not gates.enabled("CPICollector")  # named: its own value wins, whatever the order
    assert gates.enabled("CPUBurst")  # beta: its default
    off = FeatureGates.parse("GroupIdentity=true,AllBeta=false")
    assert not off.enabled("CPUBurst") and not off.enabled("BECPUSuppress")
    assert off.enabled(features.GROUP_IDENTITY)
    assert not off.enabled("PSICollector")  # alpha: its default
