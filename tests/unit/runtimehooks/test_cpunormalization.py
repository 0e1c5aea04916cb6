"""CPUNormalization: LS pods' CFS quota divided by the node's ratio."""

from __future__ import annotations

import pytest

from koordapi import features, keys
from runtimehooks.hooks import cpunormalization
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import NodeState, Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    GUARANTEED_DIR,
    container,
    pod,
    resource_status,
)

POD_STAGE = Stage.PRE_RUN_POD_SANDBOX
CONTAINER_STAGE = Stage.PRE_CREATE_CONTAINER


def status(cpuset: str = "", numa: dict[int, dict[str, str]] | None = None) -> dict[str, str]:
    return {keys.ANNOTATION_RESOURCE_STATUS: resource_status(cpuset, numa)}


def rules(ratio: float | None) -> Rules:
    return Rules(node=NodeState(cpu_normalization_ratio=ratio))


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        pytest.param(1.2, 83334, id="case-15-ratio-1.2-scales-down"),
        pytest.param(1.0, 100000, id="case-15-ratio-1.0-unchanged"),
        pytest.param(0.0, 100000, id="case-15-invalid-ratio-0-unchanged"),
        pytest.param(0.8, 100000, id="ratio-below-1-unchanged"),
        pytest.param(2.0, 50000, id="ratio-2-halves"),
    ],
)
def test_ls_quota_is_divided_by_a_ratio_above_one(ratio: float, expected: int) -> None:
    ls = pod("LS", cpu_quota=100000)
    assert cpunormalization.pod(ls, rules(ratio), POD_STAGE) == PodPatch(cpu_cfs_quota_us=expected)
    ctr = container(ls, cpu_quota=100000)
    assert cpunormalization.container(ctr, rules(ratio), CONTAINER_STAGE) == ContainerPatch(
        cpu_cfs_quota_us=expected
    )


def test_be_pod_is_untouched() -> None:
    be = pod("BE", cgroup_dir=BESTEFFORT_DIR, cpu_quota=100000)
    assert cpunormalization.pod(be, rules(1.2), POD_STAGE) is None
    ctr = container(be, cpu_quota=100000)
    assert cpunormalization.container(ctr, rules(1.2), CONTAINER_STAGE) is None


@pytest.mark.parametrize(
    ("owner", "applies"),
    [
        pytest.param(pod("LS"), True, id="ls"),
        pytest.param(pod(), True, id="no-label"),
        pytest.param(pod(annotations=status(numa={0: {"cpu": "2"}})), True, id="no-label-numa"),
        pytest.param(pod(annotations=status("2-4")), False, id="no-label-with-cpuset"),
        pytest.param(pod("LSR", cgroup_dir=GUARANTEED_DIR), False, id="lsr"),
        pytest.param(pod("LSE", cgroup_dir=GUARANTEED_DIR), False, id="lse"),
        pytest.param(pod("SYSTEM"), False, id="system"),
        pytest.param(pod("BE"), False, id="be"),
    ],
)
def test_only_cpu_share_pods_are_normalized(owner: PodRequest, applies: bool) -> None:
    assert cpunormalization.applies(owner) is applies


@pytest.mark.parametrize(
    ("ratio", "quota"),
    [
        pytest.param(None, 100000, id="no-annotation"),
        pytest.param(-1.0, 100000, id="ratio-minus-one-disabled"),
        pytest.param(1.2, None, id="quota-unknown"),
    ],
)
def test_nothing_is_written_when_the_rule_is_off_or_quota_unknown(
    ratio: float | None, quota: int | None
) -> None:
    assert cpunormalization.pod(pod("LS", cpu_quota=quota), rules(ratio), POD_STAGE) is None
    ctr = container(pod("LS"), cpu_quota=quota)
    assert cpunormalization.container(ctr, rules(ratio), CONTAINER_STAGE) is None


def test_unlimited_quota_is_written_back_unchanged() -> None:
    ctr = container(pod("LS"), cpu_quota=-1)
    assert cpunormalization.container(ctr, rules(1.2), CONTAINER_STAGE) == ContainerPatch(
        cpu_cfs_quota_us=-1
    )


def test_hook_is_gated_off_by_default_and_registers_both_levels() -> None:
    hook = cpunormalization.HOOK
    assert (hook.name, hook.gate) == ("CPUNormalization", features.CPU_NORMALIZATION)
    assert features.DEFAULTS[features.CPU_NORMALIZATION] is False
    assert {Stage.PRE_RUN_POD_SANDBOX, Stage.PRE_UPDATE_CONTAINER_RESOURCES} <= hook.stages
