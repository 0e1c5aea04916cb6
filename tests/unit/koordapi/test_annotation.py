"""Annotation parsers: good values and a clear AnnotationError naming the key for bad ones."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from koordapi import annotation, keys
from koordapi.annotation import (
    CPUSharedPool,
    DeviceAllocation,
    ExtendedResources,
    KubeletCPUManagerPolicy,
    NodeReservation,
    NumaNodeResource,
    PodCPUQOS,
    PodMemoryQOS,
    PodNetworkQOS,
    ResctrlConfig,
    ResourceStatus,
    SystemQOSResource,
)
from koordapi.errors import AnnotationError, ModelError

Parser = Callable[[str], Any]


def j(value: Any) -> str:
    return json.dumps(value)


@pytest.mark.parametrize(
    ("parser", "text", "expected"),
    [
        pytest.param(
            annotation.parse_resource_status,
            j({"cpuset": "2-4", "numaNodeResources": [{"node": 1, "resources": {"cpu": "2"}}]}),
            ResourceStatus("2-4", (NumaNodeResource(1, {"cpu": Decimal(2)}),)),
            id="resource-status",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"numaNodeResources": None}),
            ResourceStatus(),
            id="resource-status-empty",
        ),
        pytest.param(
            annotation.parse_extended_resource_spec,
            j(
                {
                    "containers": {
                        "c0": {
                            "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: "2Gi"},
                            "limits": {keys.BATCH_CPU: 1000},
                        },
                        "c1": {"requests": {keys.BATCH_CPU: "500m"}},
                    }
                }
            ),
            {
                "c0": ExtendedResources(
                    {keys.BATCH_CPU: Decimal(500), keys.BATCH_MEMORY: Decimal(2 << 30)},
                    {keys.BATCH_CPU: Decimal(1000)},
                    has_limits=True,
                ),
                "c1": ExtendedResources({keys.BATCH_CPU: Decimal("0.5")}, {}, has_limits=False),
            },
            id="extended-resource-spec",
        ),
        pytest.param(annotation.parse_extended_resource_spec, "{}", {}, id="extended-empty"),
        pytest.param(
            annotation.parse_pod_cpu_qos,
            j({"enable": True, "groupIdentity": -1}),
            PodCPUQOS(True, -1),
            id="cpu-qos",
        ),
        pytest.param(
            annotation.parse_pod_cpu_qos, "{}", PodCPUQOS(False, None), id="cpu-qos-empty"
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"policy": "auto", "minLimitPercent": 50, "wmarkMinAdj": -25, "priority": None}),
            PodMemoryQOS("auto", {"minLimitPercent": 50, "wmarkMinAdj": -25}),
            id="memory-qos",
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"policy": ""}),
            PodMemoryQOS("default", {}),
            id="memory-qos-empty-policy-is-default",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j(
                {
                    "llc": {
                        "schemata": {"range": [0, 30]},
                        "schemataPerCache": [{"cacheID": 1, "range": [20, 60]}],
                    },
                    "mb": {
                        "schemata": {"percent": 50},
                        "schemataPerCache": [{"cacheID": 0, "percent": 100}],
                    },
                }
            ),
            ResctrlConfig((0, 30), {1: (20, 60)}, 50, {0: 100}),
            id="resctrl",
        ),
        pytest.param(annotation.parse_resctrl, "{}", ResctrlConfig(), id="resctrl-empty"),
        pytest.param(
            annotation.parse_device_allocated,
            j(
                {
                    "gpu": [{"minor": 0, "resources": {keys.GPU_MEMORY_RATIO: "50"}}],
                    "rdma": [
                        {
                            "id": "0000:3b:00.0",
                            "extension": {"vfs": [{"busID": "0000:3b:00.2"}, {"busID": ""}]},
                        }
                    ],
                }
            ),
            {
                "gpu": (DeviceAllocation(0, {keys.GPU_MEMORY_RATIO: Decimal(50)}),),
                "rdma": (DeviceAllocation(None, {}, "0000:3b:00.0", ("0000:3b:00.2",)),),
            },
            id="device-allocated",
        ),
        pytest.param(annotation.parse_oom_score_adj, " -500\n", -500, id="oom-score-adj"),
        pytest.param(
            annotation.parse_oom_score_adj_spec,
            j({"c1": 100, "c2": -1000}),
            {"c1": 100, "c2": -1000},
            id="oom-score-adj-spec",
        ),
        pytest.param(
            annotation.parse_pod_network_qos,
            j({"ingressLimit": "10M", "egressLimit": ""}),
            PodNetworkQOS(10_000_000, None),
            id="network-qos",
        ),
        pytest.param(annotation.parse_cpu_normalization_ratio, "1.2", 1.2, id="ratio"),
        pytest.param(annotation.parse_cpu_normalization_ratio, "-1", -1.0, id="ratio-disabled"),
        pytest.param(
            annotation.parse_node_reservation,
            j({"resources": {"cpu": "2"}, "reservedCPUs": "0-1", "applyPolicy": "Default"}),
            NodeReservation({"cpu": Decimal(2)}, "0-1", "Default"),
            id="node-reservation",
        ),
        pytest.param(
            annotation.parse_system_qos_resource,
            j({"cpuset": "0-3"}),
            SystemQOSResource("0-3", True),
            id="system-qos-resource",
        ),
        pytest.param(
            annotation.parse_system_qos_resource,
            j({"cpuset": "0-3", "cpusetExclusive": False}),
            SystemQOSResource("0-3", False),
            id="system-qos-resource-shared",
        ),
        pytest.param(
            annotation.parse_cpu_shared_pools,
            j([{"socket": 0, "node": 0, "cpuset": "0-7"}, {"socket": 1, "node": 1, "cpuset": ""}]),
            (CPUSharedPool(0, 0, "0-7"), CPUSharedPool(1, 1, "")),
            id="cpu-shared-pools",
        ),
        pytest.param(
            annotation.parse_kubelet_cpu_manager_policy,
            j({"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0"}),
            KubeletCPUManagerPolicy("static", "0"),
            id="kubelet-policy",
        ),
        pytest.param(
            annotation.parse_kubelet_cpu_manager_policy,
            "{}",
            KubeletCPUManagerPolicy("none", ""),
            id="kubelet-policy-default-none",
        ),
    ],
)
def test_well_formed_annotations_parse_to_frozen_values(
    parser: Parser, text: str, expected: Any
) -> None:
    assert parser(text) == expected


BIG_CPUSET = "0-99999"


@pytest.mark.parametrize(
    ("parser", "text", "key", "reason"),
    [
        # -- JSON shape --
        pytest.param(
            annotation.parse_resource_status,
            "{cpuset:",
            keys.ANNOTATION_RESOURCE_STATUS,
            "not valid JSON",
            id="bad-json",
        ),
        pytest.param(
            annotation.parse_pod_cpu_qos,
            "[]",
            keys.ANNOTATION_CPU_QOS,
            "expected a JSON dict, got list",
            id="wrong-top-level-type",
        ),
        pytest.param(
            annotation.parse_cpu_shared_pools,
            "{}",
            keys.ANNOTATION_CPU_SHARED_POOLS,
            "expected a JSON list, got dict",
            id="pools-not-a-list",
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"policy": "auto", "pad": "x" * annotation.MAX_ANNOTATION_BYTES}),
            keys.ANNOTATION_MEMORY_QOS,
            "exceeds 262144",
            id="oversize",
        ),
        pytest.param(
            annotation.parse_resctrl,
            "[" * 100_000 + "]" * 100_000,
            keys.ANNOTATION_RESCTRL,
            "not valid JSON",
            id="deep-nesting",
        ),
        # -- resource-status --
        pytest.param(
            annotation.parse_resource_status,
            j({"cpuset": BIG_CPUSET}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "out of range 0..16383",
            id="cpuset-out-of-range",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"cpuset": "4-2"}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "out of range",
            id="cpuset-reversed",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"cpuset": 3}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "cpuset must be a string",
            id="cpuset-not-a-string",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"numaNodeResources": 5}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "numaNodeResources must be a list",
            id="numa-not-a-list",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"numaNodeResources": [{"node": 5000}]}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "numaNodeResources[0].node=5000 is outside [0, 4095]",
            id="numa-node-out-of-range",
        ),
        pytest.param(
            annotation.parse_resource_status,
            j({"numaNodeResources": [{"node": 0, "resources": {"cpu": "-2"}}]}),
            keys.ANNOTATION_RESOURCE_STATUS,
            "numaNodeResources[0].resources[cpu] is negative",
            id="numa-negative-quantity",
        ),
        # -- extended-resource-spec --
        pytest.param(
            annotation.parse_extended_resource_spec,
            j({"containers": ["c0"]}),
            keys.ANNOTATION_EXTENDED_RESOURCE_SPEC,
            "containers must be an object",
            id="containers-not-an-object",
        ),
        pytest.param(
            annotation.parse_extended_resource_spec,
            j({"containers": {"c0": {"requests": {keys.BATCH_CPU: "lots"}}}}),
            keys.ANNOTATION_EXTENDED_RESOURCE_SPEC,
            "containers[c0].requests[kubernetes.io/batch-cpu]: malformed quantity 'lots'",
            id="malformed-quantity",
        ),
        pytest.param(
            annotation.parse_extended_resource_spec,
            j({"containers": {"c0": {"limits": [1]}}}),
            keys.ANNOTATION_EXTENDED_RESOURCE_SPEC,
            "containers[c0].limits must be an object of quantities",
            id="limits-not-an-object",
        ),
        pytest.param(
            annotation.parse_extended_resource_spec,
            j({"containers": {"c0": {"limits": {keys.BATCH_CPU: True}}}}),
            keys.ANNOTATION_EXTENDED_RESOURCE_SPEC,
            "not a quantity: True",
            id="bool-quantity",
        ),
        # -- cpuQOS / memoryQOS --
        pytest.param(
            annotation.parse_pod_cpu_qos,
            j({"enable": "true"}),
            keys.ANNOTATION_CPU_QOS,
            "enable must be true or false",
            id="cpu-qos-enable-string",
        ),
        pytest.param(
            annotation.parse_pod_cpu_qos,
            j({"enable": True, "groupIdentity": 3}),
            keys.ANNOTATION_CPU_QOS,
            "groupIdentity=3 is outside [-1, 2]",
            id="cpu-qos-out-of-range",
        ),
        pytest.param(
            annotation.parse_pod_cpu_qos,
            j({"enable": True, "groupIdentity": 1.5}),
            keys.ANNOTATION_CPU_QOS,
            "groupIdentity must be an integer, got 1.5",
            id="cpu-qos-float",
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"policy": "always"}),
            keys.ANNOTATION_MEMORY_QOS,
            "policy must be default, none or auto",
            id="memory-qos-policy",
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"minLimitPercent": 101}),
            keys.ANNOTATION_MEMORY_QOS,
            "minLimitPercent=101 is outside [0, 100]",
            id="memory-qos-percent",
        ),
        pytest.param(
            annotation.parse_pod_memory_qos,
            j({"wmarkScalePermill": 0}),
            keys.ANNOTATION_MEMORY_QOS,
            "wmarkScalePermill=0 is outside [1, 1000]",
            id="memory-qos-permill",
        ),
        # -- resctrl --
        pytest.param(
            annotation.parse_resctrl,
            j({"llc": {"schemata": {"range": [50, 10]}}}),
            keys.ANNOTATION_RESCTRL,
            "llc.schemata.range: start 50% must be below end 10%",
            id="resctrl-reversed-range",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"llc": {"schemata": {"range": [0, 120]}}}),
            keys.ANNOTATION_RESCTRL,
            "llc.schemata.range[1]=120 is outside [0, 100]",
            id="resctrl-range-above-100",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"llc": {"schemata": {"range": [10]}}}),
            keys.ANNOTATION_RESCTRL,
            "llc.schemata.range must be [start%, end%]",
            id="resctrl-range-shape",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"mb": {"schemata": {"percent": 0}}}),
            keys.ANNOTATION_RESCTRL,
            "mb.schemata.percent=0 is outside [1, 100]",
            id="resctrl-mb-zero",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"mb": {"schemataPerCache": 1}}),
            keys.ANNOTATION_RESCTRL,
            "mb.schemataPerCache must be a list",
            id="resctrl-per-cache-not-a-list",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"llc": {"schemataPerCache": [{"cacheID": 2048, "range": [0, 50]}]}}),
            keys.ANNOTATION_RESCTRL,
            "llc.schemataPerCache[0].cacheID=2048 is outside [0, 1023]",
            id="resctrl-cache-id",
        ),
        pytest.param(
            annotation.parse_resctrl,
            j({"llc": "all"}),
            keys.ANNOTATION_RESCTRL,
            "llc and mb must be objects",
            id="resctrl-llc-not-an-object",
        ),
        # -- device-allocated --
        pytest.param(
            annotation.parse_device_allocated,
            j({"gpu": {"minor": 0}}),
            keys.ANNOTATION_DEVICE_ALLOCATED,
            "gpu must be a list",
            id="devices-not-a-list",
        ),
        pytest.param(
            annotation.parse_device_allocated,
            j({"gpu": [{"minor": -1}]}),
            keys.ANNOTATION_DEVICE_ALLOCATED,
            "gpu[0].minor=-1 is outside",
            id="negative-minor",
        ),
        pytest.param(
            annotation.parse_device_allocated,
            j({"rdma": [{"id": "x", "extension": {"vfs": 5}}]}),
            keys.ANNOTATION_DEVICE_ALLOCATED,
            "rdma[0].extension.vfs must be a list",
            id="vfs-not-a-list",
        ),
        # -- oom-score-adj --
        pytest.param(
            annotation.parse_oom_score_adj,
            "-1001",
            keys.ANNOTATION_OOM_SCORE_ADJ,
            "value=-1001 is outside [-1000, 1000]",
            id="oom-default-too-small",
        ),
        pytest.param(
            annotation.parse_oom_score_adj,
            "1e3",
            keys.ANNOTATION_OOM_SCORE_ADJ,
            "not an integer",
            id="oom-default-not-integer",
        ),
        pytest.param(
            annotation.parse_oom_score_adj,
            "9" * 5000,
            keys.ANNOTATION_OOM_SCORE_ADJ,
            "not an integer",
            id="oom-default-huge",
        ),
        pytest.param(
            annotation.parse_oom_score_adj_spec,
            j({"c1": 1001}),
            keys.ANNOTATION_OOM_SCORE_ADJ_SPEC,
            "[c1]=1001 is outside [-1000, 1000]",
            id="oom-spec-out-of-range",
        ),
        # -- networkQOS --
        pytest.param(
            annotation.parse_pod_network_qos,
            j({"egressLimit": "-10M"}),
            keys.ANNOTATION_NETWORK_QOS,
            "egressLimit[egressLimit] is negative",
            id="network-negative",
        ),
        pytest.param(
            annotation.parse_pod_network_qos,
            j({"ingressLimit": "10 megabits"}),
            keys.ANNOTATION_NETWORK_QOS,
            "malformed quantity",
            id="network-malformed",
        ),
        # -- node annotations --
        pytest.param(
            annotation.parse_cpu_normalization_ratio,
            "fast",
            keys.ANNOTATION_CPU_NORMALIZATION_RATIO,
            "not a number",
            id="ratio-not-a-number",
        ),
        pytest.param(
            annotation.parse_cpu_normalization_ratio,
            "0",
            keys.ANNOTATION_CPU_NORMALIZATION_RATIO,
            "must be -1 (disabled) or in (0, 100)",
            id="ratio-zero",
        ),
        pytest.param(
            annotation.parse_cpu_normalization_ratio,
            "nan",
            keys.ANNOTATION_CPU_NORMALIZATION_RATIO,
            "must be -1 (disabled) or in (0, 100)",
            id="ratio-nan",
        ),
        pytest.param(
            annotation.parse_cpu_normalization_ratio,
            "100",
            keys.ANNOTATION_CPU_NORMALIZATION_RATIO,
            "must be -1 (disabled) or in (0, 100)",
            id="ratio-100",
        ),
        pytest.param(
            annotation.parse_node_reservation,
            j({"reservedCPUs": BIG_CPUSET}),
            keys.ANNOTATION_NODE_RESERVATION,
            "out of range 0..16383",
            id="reserved-cpus-out-of-range",
        ),
        pytest.param(
            annotation.parse_system_qos_resource,
            j({"cpuset": "0-3", "cpusetExclusive": "yes"}),
            keys.ANNOTATION_SYSTEM_QOS_RESOURCE,
            "cpusetExclusive must be true or false",
            id="system-qos-exclusive-string",
        ),
        pytest.param(
            annotation.parse_system_qos_resource,
            j({"cpuset": "a-b"}),
            keys.ANNOTATION_SYSTEM_QOS_RESOURCE,
            "malformed cpu list 'a-b'",
            id="system-qos-malformed-cpuset",
        ),
        pytest.param(
            annotation.parse_cpu_shared_pools,
            j([{"socket": 0, "node": 0, "cpuset": BIG_CPUSET}]),
            keys.ANNOTATION_CPU_SHARED_POOLS,
            "out of range 0..16383",
            id="pool-cpuset-out-of-range",
        ),
        pytest.param(
            annotation.parse_cpu_shared_pools,
            j(["0-7"]),
            keys.ANNOTATION_CPU_SHARED_POOLS,
            "[0] must be an object",
            id="pool-not-an-object",
        ),
        pytest.param(
            annotation.parse_kubelet_cpu_manager_policy,
            j({"policy": "dynamic"}),
            keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
            "policy must be none or static, got 'dynamic'",
            id="kubelet-policy-unknown",
        ),
    ],
)
def test_malformed_annotation_raises_annotation_error_naming_the_key(
    parser: Parser, text: str, key: str, reason: str
) -> None:
    with pytest.raises(AnnotationError) as err:
        parser(text)
    assert err.value.key == key
    assert reason in err.value.reason
    assert str(err.value) == f"{key}: {err.value.reason}"


def test_be_share_pools_report_their_own_key() -> None:
    with pytest.raises(AnnotationError) as err:
        annotation.parse_cpu_shared_pools("{}", keys.ANNOTATION_BE_CPU_SHARED_POOLS)
    assert err.value.key == keys.ANNOTATION_BE_CPU_SHARED_POOLS


def test_annotation_error_is_a_model_error_and_a_value_error() -> None:
    with pytest.raises(ModelError):
        annotation.parse_oom_score_adj("x")
    with pytest.raises(ValueError, match=r"koordinator\.sh/oom-score-adj"):
        annotation.parse_oom_score_adj("x")


def test_parsed_values_are_frozen() -> None:
    status = annotation.parse_resource_status(j({"cpuset": "1"}))
    with pytest.raises(AttributeError):
        status.cpuset = "2"  # type: ignore[misc]
