"""Running a stage: hooks in name order, later values win, Ignore versus Fail policy."""

from __future__ import annotations

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from koordapi.features import FeatureGates
from koordapi.qos import KubeQoS
from runtimehooks import HOOKS
from runtimehooks.patch import ContainerPatch, Device, Mount, PodPatch, ResctrlGroup, merge
from runtimehooks.registry import (
    FailurePolicy,
    Hook,
    KubeQoSFn,
    ordered,
    run_container_stage,
    run_kube_qos_stage,
    run_pod_stage,
)
from runtimehooks.request import ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    GI,
    batch,
    container,
    extended_resource_spec,
    pod,
    resource_status,
)

ALL_GATES = FeatureGates({hook.gate: True for hook in HOOKS})
REQ_EQ_LIM = {"requests": batch("500", "2Gi"), "limits": batch("500", "2Gi")}


def pinned_be_pod(spec: dict[str, str]) -> PodRequest:
    """A BE pod with batch resources and a resource-status cpuset "2-4"."""
    return pod(
        "BE",
        cgroup_dir=BESTEFFORT_DIR,
        annotations={**spec, keys.ANNOTATION_RESOURCE_STATUS: resource_status("2-4")},
    )


def test_hooks_run_in_byte_order_of_their_names() -> None:
    names = [hook.name for hook in ordered(HOOKS, Rules(gates=ALL_GATES), Stage.RECONCILE_POD)]
    assert names == [
        "BatchResource",
        "CPUNormalization",
        "CPUSetAllocator",
        "GroupIdentity",
        "MemoryQOS",
        "Resctrl",
        "TCNetworkQoS",
    ]
    names = [h.name for h in ordered(HOOKS, Rules(gates=ALL_GATES), Stage.PRE_CREATE_CONTAINER)]
    assert names == [
        "BatchResource",
        "CPUNormalization",
        "CPUSetAllocator",
        "MemoryQOS",
        "OOMScoreAdj",
        "Resctrl",
        "gpu env inject",
        "rdma device inject",
    ]


@pytest.mark.parametrize(
    ("stage", "names"),
    [
        pytest.param(
            Stage.PRE_RUN_POD_SANDBOX,
            ["BatchResource", "CPUSetAllocator", "GroupIdentity"],
            id="pre-run-pod-sandbox",
        ),
        pytest.param(
            Stage.PRE_CREATE_CONTAINER,
            ["BatchResource", "CPUSetAllocator"],
            id="pre-create-container",
        ),
        pytest.param(Stage.PRE_REMOVE_POD_SANDBOX, [], id="pre-remove-pod-sandbox"),
        pytest.param(Stage.RECONCILE_CONTAINER, ["BatchResource", "CPUSetAllocator"], id="recon"),
    ],
)
def test_default_gates_enable_koordinators_beta_hooks_only(stage: Stage, names: list[str]) -> None:
    assert [hook.name for hook in ordered(HOOKS, Rules(), stage)] == names


def test_hook_names_are_unique_and_gates_known() -> None:
    assert len({hook.name for hook in HOOKS}) == len(HOOKS)
    for hook in HOOKS:
        assert hook.gate in features.DEFAULTS
        assert hook.pod is not None or hook.container is not None


def test_cpuset_allocator_overrides_batch_resource_quota_for_a_pinned_pod() -> None:
    owner = pinned_be_pod(extended_resource_spec({"c0": REQ_EQ_LIM}))
    outcome = run_pod_stage(HOOKS, Stage.PRE_RUN_POD_SANDBOX, owner, Rules(), FailurePolicy.IGNORE)
    assert outcome.patch == PodPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=2 * GI)
    assert outcome.failures == [] and not outcome.aborted
    assert set(outcome.timings) == {"BatchResource", "CPUSetAllocator", "GroupIdentity"}

    result = run_container_stage(
        HOOKS,
        Stage.PRE_CREATE_CONTAINER,
        container(owner, "c0"),
        Rules(),
        FailurePolicy.IGNORE,
    )
    assert result.patch == ContainerPatch(
        cpuset_cpus="2-4", cpu_cfs_quota_us=-1, cpu_shares=512, memory_limit=2 * GI
    )


def test_batch_quota_survives_when_unsetting_cpu_quota_is_disabled() -> None:
    owner = pinned_be_pod(extended_resource_spec({"c0": REQ_EQ_LIM}))
    rules = Rules(disable_unset_cpu_quota=True)
    outcome = run_pod_stage(HOOKS, Stage.PRE_RUN_POD_SANDBOX, owner, rules, FailurePolicy.IGNORE)
    assert outcome.patch == PodPatch(cpu_shares=512, cpu_cfs_quota_us=50000, memory_limit=2 * GI)


MALFORMED = {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"}


def test_ignore_policy_records_the_failure_and_runs_later_hooks() -> None:
    owner = pinned_be_pod(MALFORMED)
    outcome = run_pod_stage(HOOKS, Stage.PRE_RUN_POD_SANDBOX, owner, Rules(), FailurePolicy.IGNORE)
    assert outcome.patch == PodPatch(cpu_cfs_quota_us=-1)
    assert not outcome.aborted
    assert [failure.hook for failure in outcome.failures] == ["BatchResource"]
    error = outcome.failures[0].error
    assert isinstance(error, AnnotationError)
    assert error.key == keys.ANNOTATION_EXTENDED_RESOURCE_SPEC
    assert str(outcome.failures[0]).startswith(
        "BatchResource: node.koordinator.sh/extended-resource-spec: not valid JSON"
    )


def test_fail_policy_stops_at_the_first_failure() -> None:
    owner = pinned_be_pod(MALFORMED)
    outcome = run_pod_stage(HOOKS, Stage.PRE_RUN_POD_SANDBOX, owner, Rules(), FailurePolicy.FAIL)
    assert outcome.patch == PodPatch()
    assert outcome.aborted
    assert [failure.hook for failure in outcome.failures] == ["BatchResource"]
    assert set(outcome.timings) == {"BatchResource"}


def test_fail_policy_in_a_container_stage_keeps_earlier_values() -> None:
    annotations = {
        keys.ANNOTATION_RESOURCE_STATUS: '{"cpuset": "x"}',  # CPUSetAllocator fails on it
        keys.ANNOTATION_OOM_SCORE_ADJ: "-500",  # OOMScoreAdj runs after it
    }
    req = container(pod("LSR", annotations=annotations))
    rules = Rules(gates=FeatureGates({features.OOM_SCORE_ADJ: True}))
    ignore = run_container_stage(
        HOOKS, Stage.PRE_CREATE_CONTAINER, req, rules, FailurePolicy.IGNORE
    )
    assert ignore.patch == ContainerPatch(oom_score_adj=-500)
    assert [f.hook for f in ignore.failures] == ["CPUSetAllocator"]
    fail = run_container_stage(HOOKS, Stage.PRE_CREATE_CONTAINER, req, rules, FailurePolicy.FAIL)
    assert fail.patch == ContainerPatch() and fail.aborted


def test_a_hook_without_a_function_for_the_level_is_skipped() -> None:
    calls: list[str] = []

    def record(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch:
        calls.append(req.name)
        return ContainerPatch(cpu_shares=3)

    hooks = [
        Hook("b-container-only", features.BATCH_RESOURCE, frozenset(Stage), container=record),
        Hook("a-gated-off", features.RESCTRL, frozenset(Stage), container=record),
    ]
    outcome = run_pod_stage(hooks, Stage.RECONCILE_POD, pod("LS"), Rules(), FailurePolicy.FAIL)
    assert outcome.patch == PodPatch() and calls == []
    result = run_container_stage(
        hooks, Stage.RECONCILE_CONTAINER, container(pod("LS")), Rules(), FailurePolicy.FAIL
    )
    assert result.patch == ContainerPatch(cpu_shares=3) and calls == ["main"]


def test_merge_replaces_scalars_updates_maps_and_extends_tuples() -> None:
    lib = Mount("/lib/a.so", "/lib/a.so")
    dev = Device("/dev/infiniband/rdma_cm", "c", 231, 255)
    base = ContainerPatch(cpu_shares=512, cpu_cfs_quota_us=50000, env={"A": "1"}, mounts=(lib,))
    later = ContainerPatch(cpu_cfs_quota_us=-1, cpuset_cpus="", env={"B": "2"}, devices=(dev,))
    assert merge(base, later) == ContainerPatch(
        cpuset_cpus="",
        cpu_shares=512,
        cpu_cfs_quota_us=-1,
        env={"A": "1", "B": "2"},
        mounts=(lib,),
        devices=(dev,),
    )
    assert merge(base, None) is base
    group = ResctrlGroup("koordlet-x", ("L3:0=f",))
    assert merge(PodPatch(cpu_shares=2), PodPatch(resctrl=group)) == PodPatch(
        cpu_shares=2, resctrl=group
    )


def test_empty_container_patch_reports_empty() -> None:
    assert ContainerPatch().is_empty()
    assert not ContainerPatch(cpuset_cpus="").is_empty()


# -- the kube-QoS stage --------------------------------------------------------------------


def warp(value: int, fail: KubeQoS | None = None) -> KubeQoSFn:
    def fn(kube: KubeQoS, rules: Rules, stage: Stage) -> PodPatch | None:
        if kube is fail:
            raise ValueError(f"no value for {kube.value}")
        return None if kube is KubeQoS.GUARANTEED else PodPatch(cpu_bvt_warp_ns=value)

    return fn


def test_the_kube_qos_stage_runs_its_hooks_in_name_order_and_ignores_a_failure() -> None:
    hooks = [
        Hook(
            "Zeta",
            features.GROUP_IDENTITY,
            frozenset({Stage.RECONCILE_KUBE_QOS}),
            kube_qos=warp(-1),
        ),
        Hook(
            "Alpha",
            features.CORE_SCHED,
            frozenset({Stage.RECONCILE_KUBE_QOS}),
            kube_qos=warp(2, fail=KubeQoS.BURSTABLE),
        ),
        # registered for pods only: not run at this stage
        Hook("Beta", features.BATCH_RESOURCE, frozenset({Stage.RECONCILE_POD}), kube_qos=warp(7)),
        Hook("Gamma", features.RESCTRL, frozenset({Stage.RECONCILE_KUBE_QOS}), kube_qos=warp(9)),
    ]
    on = (features.GROUP_IDENTITY, features.CORE_SCHED, features.BATCH_RESOURCE)
    rules = Rules(gates=FeatureGates({**dict.fromkeys(on, True), features.RESCTRL: False}))

    besteffort = run_kube_qos_stage(hooks, KubeQoS.BESTEFFORT, rules)
    burstable = run_kube_qos_stage(hooks, KubeQoS.BURSTABLE, rules)

    assert besteffort.patch.cpu_bvt_warp_ns == -1  # Alpha's 2, then Zeta's -1
    assert list(besteffort.timings) == ["Alpha", "Zeta"]
    assert [f.hook for f in burstable.failures] == ["Alpha"]
    assert burstable.patch.cpu_bvt_warp_ns == -1 and not burstable.aborted
    assert run_kube_qos_stage(hooks, KubeQoS.GUARANTEED, rules).patch == PodPatch()


def test_koordinators_kube_qos_hooks_are_group_identity_and_core_sched() -> None:
    kube_qos = ordered(HOOKS, Rules(gates=ALL_GATES), Stage.RECONCILE_KUBE_QOS)
    assert [h.name for h in kube_qos] == ["CoreSched", "GroupIdentity"]
