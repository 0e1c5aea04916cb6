"""BatchResource: BE pods' shares, CFS quota and memory limit from batch resources."""

from __future__ import annotations

from typing import Any

import pytest

from koordapi import features, keys
from koordapi.errors import AnnotationError
from koordapi.nodeslo import NodeSLOSpec
from runtimehooks.hooks import batchresource
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import NodeState, Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    GI,
    batch,
    container,
    extended_resource_spec,
    pod,
)

POD_STAGE = Stage.PRE_RUN_POD_SANDBOX
CONTAINER_STAGE = Stage.PRE_CREATE_CONTAINER
QUOTA_ON = Rules(node=NodeState(cpu_normalization_ratio=-1))
QUOTA_OFF = Rules(
    slo=NodeSLOSpec.parse(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    )
)
RATIO_1_2 = Rules(node=NodeState(cpu_normalization_ratio=1.2))

REQ_EQ_LIM = {"requests": batch("500", "2Gi"), "limits": batch("500", "2Gi")}


def be_pod(containers: dict[str, dict[str, Any]]) -> PodRequest:
    return pod("BE", cgroup_dir=BESTEFFORT_DIR, annotations=extended_resource_spec(containers))


@pytest.mark.parametrize(
    ("containers", "rules", "expected"),
    [
        pytest.param(
            {"c0": REQ_EQ_LIM},
            QUOTA_ON,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=50000, memory_limit=2 * GI),
            id="case-7-requests-equal-limits",
        ),
        pytest.param(
            {"c0": REQ_EQ_LIM, "c1": {"limits": batch("1000", "2Gi")}},
            QUOTA_ON,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=150000, memory_limit=4 * GI),
            id="case-8-second-container-limits-only",
        ),
        pytest.param(
            {"c0": {"requests": batch("500", "2Gi")}},
            QUOTA_ON,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=-1),
            id="case-9-no-limit",
        ),
        pytest.param(
            {"c0": REQ_EQ_LIM, "c1": {"requests": batch("500", "2Gi")}},
            QUOTA_ON,
            PodPatch(cpu_shares=1024, cpu_cfs_quota_us=-1, memory_limit=-1),
            id="case-10-partially-limited",
        ),
        pytest.param(
            {"c0": REQ_EQ_LIM},
            QUOTA_OFF,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=2 * GI),
            id="case-11-cfs-quota-unset-by-nodeslo",
        ),
        pytest.param(
            {"c0": REQ_EQ_LIM},
            RATIO_1_2,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=41667, memory_limit=2 * GI),
            id="case-12-scaled-with-ratio",
        ),
        pytest.param(
            {"c0": {"requests": batch("500", "2Gi")}},
            RATIO_1_2,
            PodPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=-1),
            id="ratio-leaves-unlimited-quota-alone",
        ),
        pytest.param(
            {"c0": {"limits": batch("1000", "1Gi")}},
            QUOTA_ON,
            PodPatch(cpu_shares=2, cpu_cfs_quota_us=100000, memory_limit=GI),
            id="no-requests-gives-minimum-shares",
        ),
        pytest.param(
            {"c0": {"requests": batch("0"), "limits": batch("5", "1Gi")}},
            QUOTA_ON,
            PodPatch(cpu_shares=2, cpu_cfs_quota_us=1000, memory_limit=GI),
            id="tiny-limit-is-raised-to-minimum-quota",
        ),
    ],
)
def test_pod_values_sum_the_batch_resources_of_its_containers(
    containers: dict[str, dict[str, Any]], rules: Rules, expected: PodPatch
) -> None:
    assert batchresource.pod(be_pod(containers), rules, POD_STAGE) == expected


@pytest.mark.parametrize(
    ("name", "rules", "expected"),
    [
        pytest.param(
            "c1",
            QUOTA_ON,
            ContainerPatch(cpu_shares=2, cpu_cfs_quota_us=100000, memory_limit=2 * GI),
            id="case-13-limits-only",
        ),
        pytest.param(
            "c0",
            QUOTA_ON,
            ContainerPatch(cpu_shares=512, cpu_cfs_quota_us=50000, memory_limit=2 * GI),
            id="requests-equal-limits",
        ),
        pytest.param(
            "c2",
            QUOTA_ON,
            ContainerPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=-1),
            id="requests-only",
        ),
        pytest.param(
            "c0",
            QUOTA_OFF,
            ContainerPatch(cpu_shares=512, cpu_cfs_quota_us=-1, memory_limit=2 * GI),
            id="cfs-quota-unset-by-nodeslo",
        ),
        pytest.param(
            "c1",
            RATIO_1_2,
            ContainerPatch(cpu_shares=2, cpu_cfs_quota_us=83334, memory_limit=2 * GI),
            id="scaled-with-ratio",
        ),
        pytest.param("absent", QUOTA_ON, None, id="container-not-in-spec"),
    ],
)
def test_container_values_come_from_its_own_batch_resources(
    name: str, rules: Rules, expected: ContainerPatch | None
) -> None:
    owner = be_pod(
        {
            "c0": REQ_EQ_LIM,
            "c1": {"limits": batch("1000", "2Gi")},
            "c2": {"requests": batch("500", "2Gi")},
        }
    )
    assert batchresource.container(container(owner, name), rules, CONTAINER_STAGE) == expected


def test_be_pod_with_empty_spec_changes_nothing() -> None:
    owner = pod(
        "BE", cgroup_dir=BESTEFFORT_DIR, annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{}"}
    )
    assert batchresource.pod(owner, QUOTA_ON, POD_STAGE) is None
    assert batchresource.container(container(owner, "c0"), QUOTA_ON, CONTAINER_STAGE) is None


@pytest.mark.parametrize(
    "owner",
    [
        pytest.param(
            pod("LS", annotations=extended_resource_spec({"c0": REQ_EQ_LIM})), id="ls-pod"
        ),
        pytest.param(
            pod(cgroup_dir=BESTEFFORT_DIR, annotations=extended_resource_spec({"c0": REQ_EQ_LIM})),
            id="kube-besteffort-without-be-label",
        ),
        pytest.param(pod("BE", cgroup_dir=BESTEFFORT_DIR), id="be-pod-without-annotation"),
    ],
)
def test_only_be_labelled_pods_with_the_annotation_are_changed(owner: PodRequest) -> None:
    assert batchresource.pod(owner, QUOTA_ON, POD_STAGE) is None
    assert batchresource.container(container(owner, "c0"), QUOTA_ON, CONTAINER_STAGE) is None


def test_malformed_extended_resource_spec_is_an_annotation_error() -> None:
    owner = pod(
        "BE",
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: '{"containers": {"c0": 1}}'},
    )
    with pytest.raises(AnnotationError, match=r"containers\[c0\] must be an object"):
        batchresource.pod(owner, QUOTA_ON, POD_STAGE)


def test_hook_registers_pod_and_container_stages() -> None:
    hook = batchresource.HOOK
    assert (hook.name, hook.gate) == ("BatchResource", features.BATCH_RESOURCE)
    assert {Stage.PRE_RUN_POD_SANDBOX, Stage.PRE_CREATE_CONTAINER} <= hook.stages
    assert Stage.PRE_REMOVE_POD_SANDBOX not in hook.stages


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        pytest.param(batch("500", "1e400"), "past int64", id="memory-1e400"),
        pytest.param(batch("500", "8Ei"), "9223372036854775808 bytes is past int64", id="8Ei"),
        pytest.param(batch("1e20", "2Gi"), "more than the kernel's 17592186044415", id="cpu-1e20"),
        pytest.param(batch("175921860445", "2Gi"), "17592186044500 µs", id="quota-just-over"),
        pytest.param(batch("500", "1"), "1 bytes is below 6 MiB", id="memory-1-byte"),
        pytest.param(batch("500", "6291455"), "below 6 MiB", id="memory-just-under"),
    ],
)
def test_values_the_kernel_cannot_take_fail_the_hook_with_the_reason(
    limits: dict[str, str], message: str
) -> None:
    owner = be_pod({"c0": {"requests": batch("500", "2Gi"), "limits": limits}})
    with pytest.raises(AnnotationError, match=message):
        batchresource.pod(owner, QUOTA_ON, POD_STAGE)
    with pytest.raises(AnnotationError, match=message):
        batchresource.container(container(owner, "c0"), QUOTA_ON, CONTAINER_STAGE)


def test_the_largest_values_the_kernel_takes_pass() -> None:
    limits = batch("175921860444", str((1 << 63) - 1))
    owner = be_pod({"c0": {"requests": batch("500", "2Gi"), "limits": limits}})
    patch = batchresource.container(container(owner, "c0"), QUOTA_ON, CONTAINER_STAGE)
    assert patch is not None
    assert (patch.cpu_cfs_quota_us, patch.memory_limit) == (17_592_186_044_400, (1 << 63) - 1)
    small = be_pod({"c0": {"limits": batch("500", "6Mi")}})
    assert batchresource.pod(small, QUOTA_ON, POD_STAGE) == PodPatch(
        cpu_shares=2, cpu_cfs_quota_us=50000, memory_limit=6 << 20
    )
