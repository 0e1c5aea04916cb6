"""NodeSLO fields accepted but not used: each is named with why; unset or default ones never."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import unsupported
from koordapi.nodeslo import NodeSLOSpec, default_spec
from koordapi.unsupported import UnsupportedField, unsupported_fields, unsupported_in

RQS = "spec.resourceQOSStrategy"

# Koordinator's blkio reconcile test NodeSLO (blkio_reconcile_test.go, newNodeSLO), as JSON.
KOORDINATOR_BLKIO = {
    "lsrClass": {
        "blkioQOS": {
            "enable": True,
            "blocks": [{"name": "/dev/vdc", "type": "device", "ioCfg": {"ioWeightPercent": 100}}],
        }
    },
    "beClass": {
        "blkioQOS": {
            "enable": True,
            "blocks": [
                {
                    "name": "yoda-pool0",
                    "type": "volumegroup",
                    "ioCfg": {"ioWeightPercent": 40, "readIOPS": 1024, "readBPS": 1048576},
                }
            ],
        }
    },
    "cgroupRoot": {
        "blkioQOS": {
            "enable": True,
            "blocks": [
                {
                    "name": "/dev/vdb",
                    "type": "device",
                    "ioCfg": {"readLatency": 1000, "modelReadBPS": 3324911720},
                }
            ],
        }
    },
}

# Koordinator's network QoS proposal (docs/proposals/koordlet/20231208-support-netqos.md).
KOORDINATOR_NETQOS = {
    "lsrClass": {
        "networkQOS": {
            "enable": True,
            "ingressRequest": 40,
            "ingressLimit": 100,
            "egressRequest": 40,
            "egressLimit": 100,
        }
    },
    "lsClass": {
        "networkQOS": {
            "enable": True,
            "ingressRequest": 40,
            "ingressLimit": 100,
            "egressRequest": 40,
            "egressLimit": 100,
        }
    },
    "beClass": {
        "networkQOS": {
            "enable": True,
            "ingressRequest": 30,
            "ingressLimit": 100,
            "egressRequest": 30,
            "egressLimit": 100,
        }
    },
}


def paths(spec: dict[str, Any]) -> list[str]:
    return [f.path for f in unsupported_fields(NodeSLOSpec.parse(spec).raw)]


def qos(strategy: dict[str, Any]) -> dict[str, Any]:
    return {"resourceQOSStrategy": strategy}


def test_the_defaults_and_an_empty_spec_say_nothing() -> None:
    assert unsupported_fields(default_spec()) == []
    assert unsupported_fields({}) == [] and unsupported_fields(None) == []
    assert paths({}) == []


def test_koordinators_blkio_nodeslo_names_every_set_field_with_why() -> None:
    found = unsupported_fields(NodeSLOSpec.parse(qos(KOORDINATOR_BLKIO)).raw)

    assert [f.path for f in found] == [
        f"{RQS}.lsrClass.blkioQOS.enable",
        f"{RQS}.lsrClass.blkioQOS.blocks",
        f"{RQS}.beClass.blkioQOS.enable",
        f"{RQS}.beClass.blkioQOS.blocks",
        f"{RQS}.cgroupRoot.blkioQOS.enable",
        f"{RQS}.cgroupRoot.blkioQOS.blocks",
    ]
    assert {f.why for f in found} == {unsupported.BLKIO}
    assert str(found[0]) == f"{RQS}.lsrClass.blkioQOS.enable: {unsupported.BLKIO}"


def test_koordinators_network_qos_example_names_ingress_and_the_lsr_class_only() -> None:
    found = unsupported_fields(NodeSLOSpec.parse(qos(KOORDINATOR_NETQOS)).raw)

    assert [(f.path, f.why) for f in found] == [
        # LSR pods share the LS class in tc: none of lsrClass.networkQOS is read
        (f"{RQS}.lsrClass.networkQOS.enable", unsupported.NETWORK_CLASS),
        (f"{RQS}.lsrClass.networkQOS.ingressRequest", unsupported.NETWORK_CLASS),
        (f"{RQS}.lsrClass.networkQOS.egressRequest", unsupported.NETWORK_CLASS),
        # LS and BE: egress is shaped (not named), ingress is not
        (f"{RQS}.lsClass.networkQOS.ingressRequest", unsupported.INGRESS),
        (f"{RQS}.beClass.networkQOS.ingressRequest", unsupported.INGRESS),
    ]


@pytest.mark.parametrize(
    ("spec", "path", "why"),
    [
        pytest.param(
            qos({"policies": {"netQOSPolicy": "terway-qos"}}),
            f"{RQS}.policies.netQOSPolicy",
            unsupported.TERWAY,
            id="terway-qos",
        ),
        pytest.param(
            qos({"systemClass": {"cpuQOS": {"enable": True}}}),
            f"{RQS}.systemClass.cpuQOS.enable",
            unsupported.SYSTEM_CPU,
            id="system-cpu-enable",
        ),
        pytest.param(
            qos({"systemClass": {"cpuQOS": {"groupIdentity": -1}}}),
            f"{RQS}.systemClass.cpuQOS.groupIdentity",
            unsupported.SYSTEM_CPU,
            id="system-group-identity",
        ),
        pytest.param(
            qos({"systemClass": {"resctrlQOS": {"catRangeEndPercent": 37}}}),
            f"{RQS}.systemClass.resctrlQOS.catRangeEndPercent",
            unsupported.SYSTEM_RESCTRL,
            id="system-resctrl",
        ),
        pytest.param(
            qos({"systemClass": {"networkQOS": {"egressLimit": "17M"}}}),
            f"{RQS}.systemClass.networkQOS.egressLimit",
            unsupported.NETWORK_CLASS,
            id="system-network",
        ),
        pytest.param(
            qos({"cgroupRoot": {"memoryQOS": {"wmarkRatio": 95}}}),
            f"{RQS}.cgroupRoot.memoryQOS.wmarkRatio",
            unsupported.CGROUP_ROOT,
            id="cgroup-root-memory",
        ),
        pytest.param(
            qos({"cgroupRoot": {"cpuQOS": {"coreExpeller": True}}}),
            f"{RQS}.cgroupRoot.cpuQOS.coreExpeller",
            unsupported.CGROUP_ROOT,
            id="cgroup-root-cpu",
        ),
        pytest.param(
            qos({"beClass": {"memoryQOS": {"pageCacheLimitSize": 3 << 20}}}),
            f"{RQS}.beClass.memoryQOS.pageCacheLimitSize",
            unsupported.PAGE_CACHE,
            id="page-cache-size",
        ),
        pytest.param(
            qos({"systemClass": {"memoryQOS": {"pageCacheLimitEnable": 1}}}),
            f"{RQS}.systemClass.memoryQOS.pageCacheLimitEnable",
            unsupported.PAGE_CACHE,
            id="page-cache-enable",
        ),
        pytest.param(
            {"hostApplications": [{"name": "nginx", "qos": "LS"}]},
            "spec.hostApplications",
            unsupported.HOST_APPLICATIONS,
            id="host-applications",
        ),
        pytest.param(
            {"extensions": {"schedLatency": {"enable": True}, "thirdParty": {"x": 7}}},
            "spec.extensions.thirdParty",
            unsupported.EXTENSION,
            id="an-extension-nobody-reads",
        ),
    ],
)
def test_each_unused_field_is_named_with_its_reason(
    spec: dict[str, Any], path: str, why: str
) -> None:
    assert unsupported_fields(NodeSLOSpec.parse(spec).raw) == [UnsupportedField(path, why)]


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(
            qos({"beClass": {"blkioQOS": {"enable": False, "blocks": []}}}), id="blkio-off"
        ),
        pytest.param(
            qos({"systemClass": {"cpuQOS": {"enable": False, "groupIdentity": 0}}}),
            id="system-cpu-at-none-values",
        ),
        pytest.param(
            qos({"systemClass": {"resctrlQOS": {"catRangeEndPercent": 100, "mbaPercent": 100}}}),
            id="system-resctrl-at-defaults",
        ),
        pytest.param(
            qos({"lsrClass": {"networkQOS": {"ingressLimit": 100, "egressLimit": 0}}}),
            id="lsr-network-at-default-or-none",
        ),
        pytest.param(
            qos({"beClass": {"memoryQOS": {"pageCacheLimitEnable": 0, "pageCacheLimitSize": 0}}}),
            id="page-cache-off",
        ),
        pytest.param({"hostApplications": []}, id="no-host-applications"),
        pytest.param({"extensions": {"schedLatency": {"enable": True}}}, id="read-extension"),
        pytest.param({"extensions": {"thirdParty": None}}, id="null-extension"),
        pytest.param(qos({"policies": {"netQOSPolicy": "tc"}}), id="tc"),
    ],
)
def test_fields_at_their_default_or_off_value_say_nothing(spec: dict[str, Any]) -> None:
    assert paths(spec) == []


def test_fields_koordlet_uses_are_never_named() -> None:
    spec = qos(
        {
            "policies": {"cpuPolicy": "coreSched"},
            "lsrClass": {"cpuQOS": {"enable": True, "schedIdle": 1, "coreExpeller": True}},
            "beClass": {
                "networkQOS": {"enable": True, "egressRequest": 13, "egressLimit": "87M"},
                "memoryQOS": {"enable": True, "wmarkRatio": 93, "oomKillGroup": 1},
                "resctrlQOS": {"enable": True, "catRangeEndPercent": 37, "mbaPercent": 63},
            },
            "systemClass": {"memoryQOS": {"enable": True, "minLimitPercent": 17}},
        }
    )
    spec["resourceUsedThresholdWithBE"] = {"enable": True, "cpuSuppressMinPercent": 23}
    spec["systemStrategy"] = {"pageCacheLimitEnabled": 1, "totalNetworkBandwidth": "911M"}
    assert paths(spec) == []


def test_only_the_leaves_off_their_none_value_are_named() -> None:
    strategy = {"systemClass": {"cpuQOS": {"coreExpeller": False, "schedIdle": 1}}}
    found = unsupported_in("resourceQOSStrategy", strategy, "x")
    assert [f.path for f in found] == ["x.systemClass.cpuQOS.schedIdle"]


def test_a_strategy_alone_is_checked_under_any_prefix() -> None:
    found = unsupported_in(
        "resourceQOSStrategy", {"beClass": {"blkioQOS": {"enable": True}}}, "nodeStrategies[2]"
    )
    assert found == [
        UnsupportedField("nodeStrategies[2].beClass.blkioQOS.enable", unsupported.BLKIO)
    ]
    assert unsupported_in("cpuBurstStrategy", {"policy": "auto"}, "clusterStrategy") == []
    assert unsupported_in("resourceQOSStrategy", None, "clusterStrategy") == []
