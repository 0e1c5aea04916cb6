"""CoreSched: core-scheduling groups per pod and cpu.idle of kube-QoS dirs."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import features, keys
from koordapi.nodeslo import NodeSLOSpec
from koordapi.qos import KubeQoS, QoSClass
from runtimehooks.hooks import coresched
from runtimehooks.patch import ContainerPatch, CoreSchedGroup, PodPatch
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import KernelFeatures, Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    BURSTABLE_DIR,
    GUARANTEED_DIR,
    POD_UID,
    container,
    pod,
)

STAGE = Stage.RECONCILE_CONTAINER
KERNEL = KernelFeatures(core_sched=True)


def core_sched_slo(**classes: dict[str, Any]) -> NodeSLOSpec:
    strategy: dict[str, Any] = {"policies": {"cpuPolicy": "coreSched"}}
    strategy.update({name: {"cpuQOS": cfg} for name, cfg in classes.items()})
    return NodeSLOSpec.parse({"resourceQOSStrategy": strategy})


# LSR disabled; LS enabled (expeller, idle 0); BE enabled (idle 1).
CASE_28 = core_sched_slo(
    lsrClass={"enable": False},
    lsClass={"enable": True, "coreExpeller": True, "schedIdle": 0},
    beClass={"enable": True, "schedIdle": 1},
)


def group_labels(group: str | None = None, policy: str | None = None) -> dict[str, str]:
    labels = {}
    if group is not None:
        labels[keys.LABEL_CORE_SCHED_GROUP_ID] = group
    if policy is not None:
        labels[keys.LABEL_CORE_SCHED_POLICY] = policy
    return labels


def test_class_parameters_follow_the_nodeslo() -> None:
    ls, be = CASE_28.cpu_qos(QoSClass.LS), CASE_28.cpu_qos(QoSClass.BE)
    assert (ls.enable, ls.core_expeller, ls.sched_idle) == (True, True, 0)
    assert (be.enable, be.core_expeller, be.sched_idle) == (True, False, 1)
    assert CASE_28.cpu_qos(QoSClass.LSR).enable is False


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        pytest.param(pod("LS", labels=group_labels("g1")), "g1-expeller", id="ls-expeller-group"),
        pytest.param(pod("LS"), "-expeller", id="ls-default-group-expeller"),
        pytest.param(
            pod("BE", cgroup_dir=BESTEFFORT_DIR, labels=group_labels("g1")),
            "g1",
            id="be-group-not-expeller",
        ),
        pytest.param(
            pod("LS", labels=group_labels("g1", "exclusive")),
            f"{POD_UID}-expeller",
            id="exclusive-group-is-pod-uid",
        ),
        pytest.param(pod("LS", labels=group_labels("g1", "none")), "", id="policy-none-cookie-0"),
        pytest.param(
            pod(cgroup_dir=GUARANTEED_DIR, labels=group_labels("g1")),
            "g1-expeller",
            id="guaranteed-follows-ls-when-lsr-disabled",
        ),
        pytest.param(
            pod(cgroup_dir=BURSTABLE_DIR, labels=group_labels("g1")),
            "g1-expeller",
            id="burstable-follows-ls",
        ),
        pytest.param(
            pod(cgroup_dir=BESTEFFORT_DIR, labels=group_labels("g2")),
            "g2",
            id="besteffort-follows-be",
        ),
        pytest.param(pod("LSR", labels=group_labels("g1")), "", id="lsr-disabled-cookie-0"),
        pytest.param(pod("LSE", labels=group_labels("g1")), "", id="lse-uses-lsr-disabled"),
        pytest.param(pod("SYSTEM"), None, id="system-excluded"),
    ],
)
def test_pod_group_by_class_and_labels(owner: PodRequest, expected: str | None) -> None:
    want = None if expected is None else CoreSchedGroup(expected != "", expected)
    assert coresched.group(owner, Rules(slo=CASE_28)) == want
    patch = coresched.container(container(owner), Rules(slo=CASE_28, kernel=KERNEL), STAGE)
    assert patch == (None if want is None else ContainerPatch(core_sched=want))


def test_besteffort_dir_is_cpu_idle() -> None:
    assert coresched.kube_qos_idle(Rules(slo=CASE_28)) == {
        KubeQoS.GUARANTEED: 0,
        KubeQoS.BURSTABLE: 0,
        KubeQoS.BESTEFFORT: 1,
    }


def test_guaranteed_dir_takes_lsr_parameters_when_lsr_is_enabled() -> None:
    slo = core_sched_slo(
        lsrClass={"enable": True, "schedIdle": 1},
        lsClass={"enable": True, "schedIdle": 0},
    )
    assert coresched.kube_qos_idle(Rules(slo=slo)) == {
        KubeQoS.GUARANTEED: 1,
        KubeQoS.BURSTABLE: 0,
        KubeQoS.BESTEFFORT: 0,
    }
    guaranteed = pod(cgroup_dir=GUARANTEED_DIR, labels=group_labels("g1"))
    assert coresched.class_of(guaranteed, Rules(slo=slo)) is QoSClass.LSR


def test_disabled_class_with_sched_idle_leaves_its_dir_not_idle() -> None:
    slo = core_sched_slo(beClass={"enable": False, "schedIdle": 1})
    assert coresched.kube_qos_idle(Rules(slo=slo)) == {
        KubeQoS.GUARANTEED: 0,
        KubeQoS.BURSTABLE: 0,
        KubeQoS.BESTEFFORT: 0,
    }


def test_group_identity_policy_turns_core_sched_off() -> None:
    slo = NodeSLOSpec.parse({"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}}})
    rules = Rules(slo=slo, kernel=KERNEL)
    assert coresched.group(pod("LS"), rules) is None
    assert coresched.kube_qos_idle(rules) is None
    assert coresched.container(container(pod("LS")), rules, STAGE) is None


def test_kernel_without_core_scheduling_gets_no_patch() -> None:
    rules = Rules(slo=CASE_28, kernel=KernelFeatures())
    assert coresched.container(container(pod("LS")), rules, STAGE) is None


def test_hook_runs_in_the_container_and_kube_qos_reconcilers() -> None:
    hook = coresched.HOOK
    assert (hook.name, hook.gate) == ("CoreSched", features.CORE_SCHED)
    assert hook.stages == {Stage.RECONCILE_CONTAINER, Stage.RECONCILE_KUBE_QOS}


def test_kube_qos_stage_idles_the_besteffort_dir_never_the_kubepods_root() -> None:
    idle_kernel = Rules(slo=CASE_28, kernel=KernelFeatures(cpu_idle=True))
    stage = Stage.RECONCILE_KUBE_QOS
    assert coresched.kube_qos(KubeQoS.BESTEFFORT, idle_kernel, stage) == PodPatch(cpu_idle=1)
    assert coresched.kube_qos(KubeQoS.BURSTABLE, idle_kernel, stage) == PodPatch(cpu_idle=0)
    assert coresched.kube_qos(KubeQoS.GUARANTEED, idle_kernel, stage) is None
    # a kernel without cpu.idle has nothing to set
    assert coresched.kube_qos(KubeQoS.BESTEFFORT, Rules(slo=CASE_28), stage) is None


def test_be_pods_without_a_group_label_share_the_default_group() -> None:
    owner = pod("BE", cgroup_dir=BESTEFFORT_DIR)
    assert coresched.group(owner, Rules(slo=CASE_28)) == CoreSchedGroup(True, "")
