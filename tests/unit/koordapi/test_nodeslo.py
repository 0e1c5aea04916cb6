"""The NodeSLO spec: Koordinator's defaults, deep merge, "None" values, validation."""

from __future__ import annotations

from typing import Any, cast

import pytest

from koordapi.errors import NodeSLOError
from koordapi.nodeslo import (
    CPUQOS,
    NONE_MEMORY_QOS,
    NONE_NETWORK_QOS,
    MemoryQOS,
    NodeSLOSpec,
    ResctrlQOS,
    deep_merge,
    default_spec,
)
from koordapi.qos import QoSClass


def enable(feature: str, *classes: str, **fields: Any) -> NodeSLOSpec:
    """A spec that enables ``feature`` for ``classes`` with ``fields``."""
    return NodeSLOSpec.parse(
        {"resourceQOSStrategy": {c: {feature: {"enable": True, **fields}} for c in classes}}
    )


ALL_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass")


# -- defaults --------------------------------------------------------------------------------


def test_empty_spec_is_koordinators_built_in_defaults() -> None:
    spec = NodeSLOSpec.parse(None)
    assert spec.raw == default_spec()
    assert NodeSLOSpec.parse({}).raw == default_spec()
    assert NodeSLOSpec().raw == default_spec()
    assert spec.unknown_keys == ()
    assert (spec.cpu_policy, spec.net_qos_policy) == ("groupIdentity", "tc")
    assert spec.batch_cfs_quota_enabled()


def test_default_threshold_burst_and_system_strategy() -> None:
    spec = NodeSLOSpec.parse(None)
    assert spec.threshold == {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    assert spec.cpu_burst == {
        "policy": "none",
        "cpuBurstPercent": 1000,
        "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 50,
    }
    assert spec.system == {"totalNetworkBandwidth": "0"}


@pytest.mark.parametrize("qos", [QoSClass.LSR, QoSClass.LS, QoSClass.BE, QoSClass.SYSTEM])
def test_every_class_feature_is_disabled_by_default_and_reads_none_values(qos: QoSClass) -> None:
    spec = NodeSLOSpec.parse(None)
    assert spec.cpu_qos(qos) == CPUQOS(False, 0, 0, False)
    assert spec.memory_qos(qos) == MemoryQOS(False, NONE_MEMORY_QOS)
    assert spec.resctrl_qos(qos) == ResctrlQOS(False, 0, 100, 100)
    assert spec.network_qos(qos) == {"enable": False, **NONE_NETWORK_QOS}


def test_none_memory_values_are_all_off() -> None:
    assert NONE_MEMORY_QOS == {
        "minLimitPercent": 0,
        "lowLimitPercent": 0,
        "throttlingPercent": 0,
        "wmarkRatio": 0,
        "wmarkScalePermill": 50,
        "wmarkMinAdj": 0,
        "priorityEnable": 0,
        "priority": 0,
        "oomKillGroup": 0,
    }


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        pytest.param(QoSClass.LSR, CPUQOS(True, 2, 0, True), id="lsr"),
        pytest.param(QoSClass.LSE, CPUQOS(True, 2, 0, True), id="lse-reads-lsr"),
        pytest.param(QoSClass.LS, CPUQOS(True, 2, 0, True), id="ls"),
        pytest.param(QoSClass.BE, CPUQOS(True, -1, 0, False), id="be"),
        pytest.param(QoSClass.SYSTEM, CPUQOS(True, 0, 0, False), id="system"),
        pytest.param(QoSClass.NONE, CPUQOS(False, 0, 0, False), id="none-has-no-section"),
    ],
)
def test_enabled_cpu_qos_uses_koordinators_default_values(qos: QoSClass, expected: CPUQOS) -> None:
    assert enable("cpuQOS", *ALL_CLASSES).cpu_qos(qos) == expected


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        pytest.param(QoSClass.LSR, ResctrlQOS(True, 0, 100, 100), id="lsr"),
        pytest.param(QoSClass.LS, ResctrlQOS(True, 0, 100, 100), id="ls"),
        pytest.param(QoSClass.BE, ResctrlQOS(True, 0, 30, 100), id="be-gets-30-percent"),
        pytest.param(QoSClass.SYSTEM, ResctrlQOS(True, 0, 100, 100), id="system"),
    ],
)
def test_enabled_resctrl_qos_defaults(qos: QoSClass, expected: ResctrlQOS) -> None:
    assert enable("resctrlQOS", *ALL_CLASSES).resctrl_qos(qos) == expected


@pytest.mark.parametrize(
    ("qos", "wmark"),
    [
        pytest.param(QoSClass.LSR, (95, 20, -25), id="lsr"),
        pytest.param(QoSClass.LS, (95, 20, -25), id="ls"),
        pytest.param(QoSClass.BE, (95, 20, 50), id="be-min-adj-50"),
        pytest.param(QoSClass.SYSTEM, (0, 50, 0), id="system"),
    ],
)
def test_enabled_memory_qos_defaults(qos: QoSClass, wmark: tuple[int, int, int]) -> None:
    memory = enable("memoryQOS", *ALL_CLASSES).memory_qos(qos)
    assert memory.enable
    assert (memory.get("wmarkRatio"), memory.get("wmarkScalePermill")) == wmark[:2]
    assert memory.get("wmarkMinAdj") == wmark[2]
    assert memory.get("minLimitPercent") == memory.get("throttlingPercent") == 0
    assert "enable" not in memory.values


def test_enabled_network_qos_keeps_configured_values() -> None:
    spec = enable("networkQOS", "lsClass", egressRequest=30, egressLimit="500M")
    assert spec.network_qos(QoSClass.LS) == {
        "enable": True,
        "ingressRequest": 0,
        "ingressLimit": 100,
        "egressRequest": 30,
        "egressLimit": "500M",
    }
    assert spec.network_qos(QoSClass.BE)["enable"] is False


def test_disabled_class_hides_its_configured_numbers() -> None:
    spec = NodeSLOSpec.parse(
        {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": False, "groupIdentity": -1}}}}
    )
    assert spec.cpu_qos(QoSClass.BE) == CPUQOS(False, 0, 0, False)
    assert spec.raw["resourceQOSStrategy"]["beClass"]["cpuQOS"]["groupIdentity"] == -1


# -- merge -----------------------------------------------------------------------------------


def test_partial_spec_merges_over_defaults_keeping_siblings() -> None:
    spec = NodeSLOSpec.parse(
        {
            "resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True, "groupIdentity": 0}}},
            "resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50},
        }
    )
    assert spec.cpu_qos(QoSClass.BE) == CPUQOS(True, 0, 0, False)
    assert (
        spec.raw["resourceQOSStrategy"]["beClass"]["memoryQOS"]
        == (default_spec()["resourceQOSStrategy"]["beClass"]["memoryQOS"])
    )
    assert (
        spec.raw["resourceQOSStrategy"]["lsClass"]
        == (default_spec()["resourceQOSStrategy"]["lsClass"])
    )
    assert spec.threshold["cpuSuppressThresholdPercent"] == 50
    assert spec.threshold["cpuSuppressPolicy"] == "cpuset"
    assert spec.threshold["memoryEvictThresholdPercent"] == 70


def test_deep_merge_merges_objects_replaces_values_and_skips_nulls() -> None:
    base = {"a": {"x": 1, "y": {"z": 2}}, "b": [1, 2], "c": "keep"}
    merged = deep_merge(base, {"a": {"y": {"w": 3}}, "b": [9], "c": None, "d": {"new": 1}})
    assert merged == {"a": {"x": 1, "y": {"z": 2, "w": 3}}, "b": [9], "c": "keep", "d": {"new": 1}}
    assert base == {"a": {"x": 1, "y": {"z": 2}}, "b": [1, 2], "c": "keep"}


def test_merged_spec_does_not_share_state_with_the_input() -> None:
    given: dict[str, Any] = {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}}}
    spec = NodeSLOSpec.parse(given)
    given["resourceQOSStrategy"]["lsClass"]["cpuQOS"]["enable"] = False
    assert spec.cpu_qos(QoSClass.LS).enable is True


@pytest.mark.parametrize(
    "given",
    [
        pytest.param({"resourceQOSStrategy": None}, id="null-strategy"),
        pytest.param({"resourceQOSStrategy": {"lsClass": None}}, id="null-class"),
        pytest.param({"resourceQOSStrategy": {"lsClass": {"cpuQOS": None}}}, id="null-feature"),
        pytest.param(
            {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"groupIdentity": None}}}},
            id="null-field",
        ),
    ],
)
def test_null_keeps_the_default_like_an_unset_go_pointer(given: dict[str, Any]) -> None:
    assert NodeSLOSpec.parse(given).raw == default_spec()


@pytest.mark.parametrize(
    ("policies", "cpu", "net"),
    [
        pytest.param({"cpuPolicy": ""}, "groupIdentity", "tc", id="empty-means-default"),
        pytest.param({"cpuPolicy": "coreSched"}, "coreSched", "tc", id="core-sched"),
        pytest.param({"netQOSPolicy": "terway-qos"}, "groupIdentity", "terway-qos", id="terway"),
    ],
)
def test_policies(policies: dict[str, str], cpu: str, net: str) -> None:
    spec = NodeSLOSpec.parse({"resourceQOSStrategy": {"policies": policies}})
    assert (spec.cpu_policy, spec.net_qos_policy) == (cpu, net)


@pytest.mark.parametrize(
    ("threshold", "enabled"),
    [
        pytest.param({"enable": True, "cpuSuppressPolicy": "cfsQuota"}, False, id="on-cfs-quota"),
        pytest.param({"enable": True, "cpuSuppressPolicy": "cpuset"}, True, id="on-cpuset"),
        pytest.param({"enable": False, "cpuSuppressPolicy": "cfsQuota"}, True, id="off-cfs"),
        pytest.param({"enable": True, "cpuSuppressPolicy": ""}, True, id="on-empty-policy"),
        pytest.param({}, True, id="defaults"),
    ],
)
def test_batch_cfs_quota_is_dropped_only_for_enabled_cfs_quota_suppress(
    threshold: dict[str, Any], enabled: bool
) -> None:
    spec = NodeSLOSpec.parse({"resourceUsedThresholdWithBE": threshold})
    assert spec.batch_cfs_quota_enabled() is enabled


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "path", "reason"),
    [
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"groupIdentity": 3}}}},
            "spec.resourceQOSStrategy.beClass.cpuQOS.groupIdentity",
            "3 is outside [-1, 2]",
            id="group-identity-out-of-range",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"groupIdentity": True}}}},
            "spec.resourceQOSStrategy.beClass.cpuQOS.groupIdentity",
            "must be an integer, got True",
            id="group-identity-bool",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": "yes"}}}},
            "spec.resourceQOSStrategy.lsClass.cpuQOS.enable",
            "must be true or false",
            id="enable-string",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"policies": {"cpuPolicy": "bvt"}}},
            "spec.resourceQOSStrategy.policies.cpuPolicy",
            "must be one of 'groupIdentity', 'coreSched', ''",
            id="unknown-cpu-policy",
        ),
        pytest.param(
            {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 101}},
            "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
            "101 is outside [0, 100]",
            id="percent-above-100",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"lsrClass": {"memoryQOS": {"wmarkMinAdj": -26}}}},
            "spec.resourceQOSStrategy.lsrClass.memoryQOS.wmarkMinAdj",
            "-26 is outside [-25, 50]",
            id="wmark-min-adj",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"networkQOS": {"egressLimit": 101}}}},
            "spec.resourceQOSStrategy.beClass.networkQOS.egressLimit",
            "101 is outside [0, 100]",
            id="network-percent",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"networkQOS": {"egressLimit": "fast"}}}},
            "spec.resourceQOSStrategy.beClass.networkQOS.egressLimit",
            "malformed quantity 'fast'",
            id="network-quantity",
        ),
        pytest.param(
            {"systemStrategy": {"totalNetworkBandwidth": "-1G"}},
            "spec.systemStrategy.totalNetworkBandwidth",
            "must not be negative",
            id="negative-bandwidth",
        ),
        pytest.param(
            {"resourceQOSStrategy": []},
            "spec.resourceQOSStrategy",
            "must be an object, got list",
            id="section-not-an-object",
        ),
        pytest.param(
            {"resourceQOSStrategy": {"beClass": {"cpuQOS": 1}}},
            "spec.resourceQOSStrategy.beClass.cpuQOS",
            "must be an object, got int",
            id="feature-not-an-object",
        ),
    ],
)
def test_malformed_field_is_reported_with_its_path(
    given: dict[str, Any], path: str, reason: str
) -> None:
    with pytest.raises(NodeSLOError) as err:
        NodeSLOSpec.parse(given)
    assert err.value.path == path
    assert reason in err.value.reason
    assert str(err.value).startswith(f"{path}: ")


def test_spec_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(NodeSLOError, match=r"^spec: must be an object, got list"):
        NodeSLOSpec.parse(cast(Any, ["resourceQOSStrategy"]))


def test_unknown_keys_are_reported_and_ignored() -> None:
    spec = NodeSLOSpec.parse(
        {
            "colocationStrategy": {"enable": True},
            "resourceQOSStrategy": {
                "lsClass": {"cpuQOS": {"enable": True, "bogus": 1}},
                "lseClass": {},
            },
        }
    )
    assert spec.unknown_keys == (
        "spec.colocationStrategy",
        "spec.resourceQOSStrategy.lsClass.cpuQOS.bogus",
        "spec.resourceQOSStrategy.lseClass",
    )
    assert spec.cpu_qos(QoSClass.LS) == CPUQOS(True, 2, 0, True)


def test_free_form_sections_accept_anything() -> None:
    spec = NodeSLOSpec.parse(
        {
            "extensions": {"anything": [1, 2]},
            "hostApplications": [{"name": "nginx"}],
            "resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [{}]}}},
        }
    )
    assert spec.unknown_keys == ()
    assert spec.raw["hostApplications"] == [{"name": "nginx"}]
