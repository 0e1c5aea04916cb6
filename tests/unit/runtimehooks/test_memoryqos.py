"""MemoryQOS: memory.min/low/high of pods and containers."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from koordapi.nodeslo import NodeSLOSpec
from koordapi.qos import KubeQoS
from runtimehooks.hooks import memoryqos
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.request import PodRequest, PodSpecFacts, Stage
from runtimehooks.rules import NodeState, Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    GI,
    GUARANTEED_DIR,
    batch,
    container,
    extended_resource_spec,
    pod,
)

POD_STAGE = Stage.PRE_RUN_POD_SANDBOX
CONTAINER_STAGE = Stage.PRE_CREATE_CONTAINER
NODE_1GI = Rules(node=NodeState(allocatable_memory=GI))
AUTO_BE_QOS = {
    "policy": "auto",
    "minLimitPercent": 50,
    "lowLimitPercent": 0,
    "throttlingPercent": 40,
    "wmarkRatio": 95,
    "wmarkScalePermill": 20,
    "wmarkMinAdj": 50,
}


def memory_qos(value: dict[str, Any]) -> dict[str, str]:
    return {keys.ANNOTATION_MEMORY_QOS: json.dumps(value)}


def be_pod_with_auto_policy() -> PodRequest:
    """BE pod: container "test" without batch resources, "main" with batch-memory 1Gi."""
    annotations = memory_qos(AUTO_BE_QOS)
    annotations.update(
        extended_resource_spec(
            {"main": {"requests": batch(memory="1Gi"), "limits": batch(memory="1Gi")}}
        )
    )
    return pod("BE", cgroup_dir=BESTEFFORT_DIR, annotations=annotations)


def test_be_pod_min_is_half_the_batch_request_and_low_stays_zero() -> None:
    assert memoryqos.pod(be_pod_with_auto_policy(), NODE_1GI, POD_STAGE) == PodPatch(
        memory_min=536870912, memory_low=0
    )


def test_auto_policy_uses_be_defaults_under_the_pod_fields() -> None:
    assert memoryqos.config(be_pod_with_auto_policy(), NODE_1GI) == {
        "minLimitPercent": 50,
        "lowLimitPercent": 0,
        "throttlingPercent": 40,
        "wmarkRatio": 95,
        "wmarkScalePermill": 20,
        "wmarkMinAdj": 50,
        "priorityEnable": 0,
        "priority": 0,
        "oomKillGroup": 0,
    }


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "test",
            ContainerPatch(memory_min=0, memory_low=0, memory_high=429494272),
            id="case-26-container-without-batch-resources",
        ),
        pytest.param(
            "main",
            ContainerPatch(memory_min=536870912, memory_low=0, memory_high=1073741824),
            id="case-26-container-with-batch-memory",
        ),
    ],
)
def test_be_container_values_with_and_without_batch_memory(
    name: str, expected: ContainerPatch
) -> None:
    req = container(be_pod_with_auto_policy(), name)
    assert memoryqos.container(req, NODE_1GI, CONTAINER_STAGE) == expected


def test_qos_dirs_sum_their_pods_and_kubepods_sums_all() -> None:
    sums = memoryqos.kube_qos_sums({KubeQoS.BURSTABLE: 0, KubeQoS.BESTEFFORT: 536870912})
    assert sums == {
        KubeQoS.BURSTABLE: 0,
        KubeQoS.BESTEFFORT: 536870912,
        KubeQoS.GUARANTEED: 536870912,
    }


def test_set_low_below_min_is_raised_to_min() -> None:
    owner = pod(
        "BE",
        cgroup_dir=BESTEFFORT_DIR,
        annotations={
            **memory_qos({"policy": "auto", "minLimitPercent": 50, "lowLimitPercent": 10}),
            **extended_resource_spec({"main": {"requests": batch(memory="1Gi")}}),
        },
    )
    assert memoryqos.pod(owner, NODE_1GI, POD_STAGE) == PodPatch(
        memory_min=536870912, memory_low=536870912
    )
    patch = memoryqos.container(container(owner), NODE_1GI, CONTAINER_STAGE)
    assert patch == ContainerPatch(memory_min=536870912, memory_low=536870912, memory_high=-1)


def test_be_container_high_uses_its_batch_memory_limit() -> None:
    owner = pod(
        "BE",
        cgroup_dir=BESTEFFORT_DIR,
        annotations={
            **memory_qos({"policy": "auto", "throttlingPercent": 40}),
            **extended_resource_spec({"main": {"limits": batch(memory="512Mi")}}),
        },
    )
    patch = memoryqos.container(container(owner), NODE_1GI, CONTAINER_STAGE)
    # floor(512Mi * 40% / 4096) * 4096, not 40% of the node's 1Gi
    assert patch == ContainerPatch(memory_min=0, memory_low=0, memory_high=214745088)


def test_non_be_container_high_uses_the_runtime_memory_limit() -> None:
    owner = pod("LS", annotations=memory_qos({"policy": "auto", "throttlingPercent": 40}))
    patch = memoryqos.container(container(owner, memory_limit=512 << 20), NODE_1GI, CONTAINER_STAGE)
    assert patch == ContainerPatch(memory_min=0, memory_low=0, memory_high=214745088)


def test_node_enabled_class_applies_without_annotation() -> None:
    slo = NodeSLOSpec.parse(
        {
            "resourceQOSStrategy": {
                "lsClass": {"memoryQOS": {"enable": True, "throttlingPercent": 80}}
            }
        }
    )
    rules = Rules(slo=slo, node=NodeState(allocatable_memory=GI))
    patch = memoryqos.container(container(pod("LS")), rules, CONTAINER_STAGE)
    assert patch == ContainerPatch(memory_min=0, memory_low=0, memory_high=858992640)
    config = memoryqos.config(pod("LS"), rules)
    assert config is not None
    assert (config["wmarkRatio"], config["wmarkMinAdj"]) == (95, -25)


@pytest.mark.parametrize(
    ("owner", "slo"),
    [
        pytest.param(pod("LS"), NodeSLOSpec(), id="node-disabled-no-annotation"),
        pytest.param(
            pod("LS", annotations=memory_qos({"policy": "default"})),
            NodeSLOSpec(),
            id="default-policy-node-disabled",
        ),
        pytest.param(
            pod("LS", annotations=memory_qos({"policy": "none"})),
            NodeSLOSpec.parse(
                {"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"enable": True}}}}
            ),
            id="pod-policy-none-over-enabled-node",
        ),
    ],
)
def test_memory_qos_off_for_the_pod_writes_nothing(owner: PodRequest, slo: NodeSLOSpec) -> None:
    rules = Rules(slo=slo, node=NodeState(allocatable_memory=GI))
    assert memoryqos.config(owner, rules) is None
    assert memoryqos.pod(owner, rules, POD_STAGE) is None
    assert memoryqos.container(container(owner), rules, CONTAINER_STAGE) is None


def test_pod_without_label_uses_its_kube_qos_class_config() -> None:
    slo = NodeSLOSpec.parse(
        {"resourceQOSStrategy": {"lsrClass": {"memoryQOS": {"enable": True, "wmarkRatio": 90}}}}
    )
    config = memoryqos.config(pod(cgroup_dir=GUARANTEED_DIR), Rules(slo=slo))
    assert config is not None and config["wmarkRatio"] == 90
    lse = memoryqos.config(pod("LSE", cgroup_dir=GUARANTEED_DIR), Rules(slo=slo))
    assert lse is not None and lse["wmarkRatio"] == 90


def test_malformed_memory_qos_annotation_raises() -> None:
    owner = pod("LS", annotations=memory_qos({"policy": "auto", "wmarkMinAdj": 51}))
    with pytest.raises(AnnotationError, match=r"wmarkMinAdj=51 is outside \[-25, 50\]"):
        memoryqos.pod(owner, NODE_1GI, POD_STAGE)


def test_hook_is_gated_off_by_default() -> None:
    hook = memoryqos.HOOK
    assert (hook.name, hook.gate) == ("MemoryQOS", features.MEMORY_QOS)
    assert features.DEFAULTS[features.MEMORY_QOS] is False


LS_FIELDS = {
    "policy": "auto",
    "minLimitPercent": 37,
    "lowLimitPercent": 61,
    "throttlingPercent": 77,
}


def test_ls_pods_are_protected_by_their_spec_request_where_it_is_known() -> None:
    # cluster mode: the kubelet's list says main requests 300Mi and the pod 5Gi (an init step)
    spec = PodSpecFacts(memory_request=5 << 30, container_memory_requests={"main": 300 << 20})
    owner = replace(pod("LS", annotations=memory_qos(LS_FIELDS)), spec=spec)

    created = memoryqos.container(
        container(owner, memory_limit=700 << 20), NODE_1GI, CONTAINER_STAGE
    )

    # min 37%, low 61% of 300Mi; high = 300Mi + (700Mi - 300Mi) x 77%, page-aligned
    assert created == ContainerPatch(
        memory_min=116391936, memory_low=191889408, memory_high=637534208
    )
    assert memoryqos.pod(owner, NODE_1GI, POD_STAGE) == PodPatch(
        memory_min=1986422374, memory_low=3274912563
    )
    # a container the spec does not list has no request
    other = memoryqos.container(container(owner, "other"), NODE_1GI, CONTAINER_STAGE)
    assert other is not None and other.memory_min == 0


def test_without_the_spec_ls_pods_keep_the_standalone_fallback_of_zero() -> None:
    owner = pod("LS", annotations=memory_qos(LS_FIELDS))
    assert memoryqos.pod(owner, NODE_1GI, POD_STAGE) == PodPatch(memory_min=0, memory_low=0)


def test_be_pods_use_batch_memory_even_when_the_spec_is_known() -> None:
    spec = PodSpecFacts(memory_request=9 << 30, container_memory_requests={"main": 9 << 30})
    owner = replace(be_pod_with_auto_policy(), spec=spec)
    assert memoryqos.pod(owner, NODE_1GI, POD_STAGE) == PodPatch(memory_min=536870912, memory_low=0)
