"""GroupIdentity: the pod's cpu.bvt_warp_ns (or cpu.idle on mainline kernels)."""

from __future__ import annotations

import json

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from koordapi.nodeslo import NodeSLOSpec
from koordapi.qos import KubeQoS
from runtimehooks.hooks import groupidentity
from runtimehooks.patch import PodPatch
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import KernelFeatures, Rules
from tests.unit.runtimehooks.builders import BESTEFFORT_DIR, BURSTABLE_DIR, GUARANTEED_DIR, pod

STAGE = Stage.PRE_RUN_POD_SANDBOX
BVT = KernelFeatures(bvt=True)
CPU_IDLE = KernelFeatures(cpu_idle=True)

# LSR, LS and BE enabled with group identity 2, 2, -1.
ENABLED = NodeSLOSpec.parse(
    {
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity"},
            "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
            "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
            "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
        }
    }
)
CORE_SCHED_POLICY = NodeSLOSpec.parse(
    {
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "coreSched"},
            "lsrClass": {"cpuQOS": {"enable": True}},
            "lsClass": {"cpuQOS": {"enable": True}},
            "beClass": {"cpuQOS": {"enable": True}},
        }
    }
)


def cpu_qos_annotation(**value: object) -> dict[str, str]:
    return {keys.ANNOTATION_CPU_QOS: json.dumps(value)}


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(pod("LS", cgroup_dir=GUARANTEED_DIR), 2, id="case-1-ls-pod"),
        pytest.param(
            pod(
                "LS",
                cgroup_dir=GUARANTEED_DIR,
                annotations=cpu_qos_annotation(enable=True, groupIdentity=-1),
            ),
            -1,
            id="case-2-annotation-override-succeeds",
        ),
        pytest.param(
            pod("LS", cgroup_dir=GUARANTEED_DIR, annotations=cpu_qos_annotation(enable=False)),
            0,
            id="case-3-annotation-disabled-gives-zero",
        ),
        pytest.param(
            pod("LS", cgroup_dir=GUARANTEED_DIR, annotations=cpu_qos_annotation(groupIdentity=1)),
            0,
            id="annotation-without-enable-gives-zero",
        ),
        pytest.param(
            pod("LS", annotations=cpu_qos_annotation(enable=True)),
            2,
            id="annotation-enabled-without-value-keeps-class-value",
        ),
        pytest.param(pod("BE", cgroup_dir=BESTEFFORT_DIR), -1, id="case-4-be-pod"),
        pytest.param(
            pod(
                "BE",
                cgroup_dir=BESTEFFORT_DIR,
                annotations=cpu_qos_annotation(enable=True, groupIdentity=2),
            ),
            -1,
            id="annotation-ignored-for-be-pod",
        ),
        pytest.param(pod("LSR", cgroup_dir=GUARANTEED_DIR), 2, id="lsr-pod"),
        pytest.param(pod("LSE", cgroup_dir=GUARANTEED_DIR), 2, id="lse-pod-uses-lsr-value"),
    ],
)
def test_pod_bvt_follows_class_and_ls_annotation(request_: PodRequest, expected: int) -> None:
    rules = Rules(slo=ENABLED, kernel=BVT)
    assert groupidentity.pod(request_, rules, STAGE) == PodPatch(cpu_bvt_warp_ns=expected)


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(Rules(slo=ENABLED, kernel=KernelFeatures()), id="system-unsupported"),
        pytest.param(Rules(kernel=BVT), id="nil-rule-default-nodeslo"),
        pytest.param(Rules(slo=CORE_SCHED_POLICY, kernel=BVT), id="case-6-core-sched-policy"),
    ],
)
def test_nothing_is_written_without_kernel_support_or_an_active_rule(rules: Rules) -> None:
    be_pod = pod("BE", cgroup_dir=BESTEFFORT_DIR)
    assert groupidentity.pod(be_pod, rules, STAGE) is None


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(pod("LSE"), 2, id="qos-lse"),
        pytest.param(pod("LSR"), 2, id="qos-lsr"),
        pytest.param(pod("LS"), 2, id="qos-ls"),
        pytest.param(pod("BE"), -1, id="qos-be"),
        pytest.param(pod(cgroup_dir=GUARANTEED_DIR), 2, id="kube-guaranteed-fallback"),
        pytest.param(pod(cgroup_dir=BURSTABLE_DIR), 2, id="kube-burstable-fallback"),
        pytest.param(pod(cgroup_dir=BESTEFFORT_DIR), -1, id="kube-besteffort-fallback"),
        pytest.param(pod("SYSTEM", cgroup_dir=BESTEFFORT_DIR), -1, id="system-uses-kube-fallback"),
        pytest.param(pod("unknown", cgroup_dir=GUARANTEED_DIR), 2, id="unknown-label-is-none"),
    ],
)
def test_pod_values_by_qos_and_kube_fallback(request_: PodRequest, expected: int) -> None:
    assert groupidentity.pod_value(request_, Rules(slo=ENABLED)) == expected


def test_kube_qos_directories_get_zero_ls_and_be_values() -> None:
    assert groupidentity.kube_qos_values(Rules(slo=ENABLED)) == {
        KubeQoS.GUARANTEED: 0,
        KubeQoS.BURSTABLE: 2,
        KubeQoS.BESTEFFORT: -1,
    }


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        pytest.param(
            {
                "lsrClass": {"cpuQOS": {"enable": False}},
                "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 1}},
            },
            1,
            id="lsr-disabled-takes-ls-value",
        ),
        pytest.param(
            {
                "lsrClass": {"cpuQOS": {"enable": False}},
                "lsClass": {"cpuQOS": {"enable": False}},
                "beClass": {"cpuQOS": {"enable": True}},
            },
            0,
            id="lsr-and-ls-disabled-gives-zero",
        ),
    ],
)
def test_guaranteed_pod_without_label_falls_back_to_ls_then_zero(
    strategy: dict[str, object], expected: int
) -> None:
    rules = Rules(slo=NodeSLOSpec.parse({"resourceQOSStrategy": strategy}))
    assert groupidentity.pod_value(pod(cgroup_dir=GUARANTEED_DIR), rules) == expected


def test_disabled_class_uses_the_none_value_zero() -> None:
    slo = NodeSLOSpec.parse({"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}}})
    rules = Rules(slo=slo, kernel=BVT)
    assert groupidentity.pod(pod("BE", cgroup_dir=BESTEFFORT_DIR), rules, STAGE) == PodPatch(
        cpu_bvt_warp_ns=0
    )
    assert groupidentity.kube_qos_values(rules) == {
        KubeQoS.GUARANTEED: 0,
        KubeQoS.BURSTABLE: 2,
        KubeQoS.BESTEFFORT: 0,
    }


def test_core_sched_policy_turns_the_rule_off() -> None:
    rules = Rules(slo=CORE_SCHED_POLICY, kernel=BVT)
    for qos in ("LSR", "LS", "BE"):
        assert groupidentity.pod_value(pod(qos), rules) is None
    assert groupidentity.kube_qos_values(rules) is None


def test_every_class_disabled_writes_nothing() -> None:
    rules = Rules(kernel=BVT)
    assert groupidentity.pod_value(pod("LS"), rules) is None
    assert groupidentity.kube_qos_values(rules) is None


def test_system_class_cpu_qos_alone_does_not_turn_the_rule_on() -> None:
    # Koordinator's parseRule: enable = lsrEnabled || lsEnabled || beEnabled; systemClass is
    # not read (koordlet names it as set but unused)
    system = {"systemClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}}}
    rules = Rules(slo=NodeSLOSpec.parse({"resourceQOSStrategy": system}), kernel=BVT)
    for qos in ("SYSTEM", "LS", "BE"):
        assert groupidentity.pod(pod(qos, cgroup_dir=BESTEFFORT_DIR), rules, STAGE) is None
    assert groupidentity.kube_qos_values(rules) is None


@pytest.mark.parametrize(
    ("request_", "slo", "expected"),
    [
        pytest.param(pod("BE", cgroup_dir=BESTEFFORT_DIR), ENABLED, PodPatch(cpu_idle=1), id="be"),
        pytest.param(pod("LS"), ENABLED, PodPatch(cpu_idle=0), id="ls"),
        pytest.param(
            pod("LSR", cgroup_dir=GUARANTEED_DIR), ENABLED, PodPatch(cpu_idle=0), id="lsr"
        ),
        pytest.param(pod(cgroup_dir=BESTEFFORT_DIR), ENABLED, PodPatch(cpu_idle=1), id="kube-be"),
        pytest.param(pod("BE"), NodeSLOSpec(), None, id="all-classes-disabled"),
    ],
)
def test_mainline_kernel_uses_cpu_idle_for_negative_identity(
    request_: PodRequest, slo: NodeSLOSpec, expected: PodPatch | None
) -> None:
    rules = Rules(slo=slo, kernel=CPU_IDLE)
    assert groupidentity.pod(request_, rules, STAGE) == expected


@pytest.mark.parametrize(
    ("kernel", "mechanism"),
    [
        pytest.param(KernelFeatures(bvt=True, cpu_idle=True), "bvt", id="bvt-wins"),
        pytest.param(KernelFeatures(cpu_idle=True), "cpu.idle", id="mainline"),
        pytest.param(KernelFeatures(), "none", id="neither"),
    ],
)
def test_group_identity_mechanism_prefers_bvt(kernel: KernelFeatures, mechanism: str) -> None:
    assert kernel.group_identity_mechanism == mechanism


def test_bvt_kernel_with_cpu_idle_still_writes_bvt() -> None:
    rules = Rules(slo=ENABLED, kernel=KernelFeatures(bvt=True, cpu_idle=True))
    assert groupidentity.pod(pod("BE"), rules, STAGE) == PodPatch(cpu_bvt_warp_ns=-1)


def test_malformed_cpu_qos_annotation_on_ls_pod_raises() -> None:
    bad = pod("LS", annotations=cpu_qos_annotation(enable=True, groupIdentity=3))
    with pytest.raises(AnnotationError, match=r"koordinator\.sh/cpuQOS: groupIdentity=3"):
        groupidentity.pod(bad, Rules(slo=ENABLED, kernel=BVT), STAGE)


def test_hook_registers_pod_stages_under_its_koordinator_name() -> None:
    hook = groupidentity.HOOK
    assert (hook.name, hook.gate) == ("GroupIdentity", features.GROUP_IDENTITY)
    assert hook.stages == {Stage.PRE_RUN_POD_SANDBOX, Stage.RECONCILE_POD, Stage.RECONCILE_KUBE_QOS}
    assert hook.container is None


def test_kube_qos_stage_gives_bvt_to_every_dir_and_cpu_idle_below_the_root() -> None:
    stage = Stage.RECONCILE_KUBE_QOS
    bvt, idle = Rules(slo=ENABLED, kernel=BVT), Rules(slo=ENABLED, kernel=CPU_IDLE)
    assert [groupidentity.kube_qos(k, bvt, stage) for k in KubeQoS] == [
        PodPatch(cpu_bvt_warp_ns=v) for v in (0, 2, -1)
    ]
    # on cpu.idle, Guaranteed is the kubepods root: idling it would idle every pod
    assert [groupidentity.kube_qos(k, idle, stage) for k in KubeQoS] == [
        None,
        PodPatch(cpu_idle=0),
        PodPatch(cpu_idle=1),
    ]
