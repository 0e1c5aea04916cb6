"""CPUSetAllocator: container cpusets and CFS-quota unset for pinned pods."""

from __future__ import annotations

import pytest

from koordapi import features, keys
from koordapi.annotation import CPUSharedPool, KubeletCPUManagerPolicy, SystemQOSResource
from koordapi.errors import AnnotationError
from koordapi.features import FeatureGates
from runtimehooks.hooks import cpuset
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.request import ContainerRequest, Stage
from runtimehooks.rules import NodeState, Rules
from tests.unit.runtimehooks.builders import (
    BESTEFFORT_DIR,
    BURSTABLE_DIR,
    GUARANTEED_DIR,
    container,
    pod,
    resource_status,
)

STAGE = Stage.PRE_CREATE_CONTAINER
LS_POOLS = (CPUSharedPool(0, 0, "0-7"), CPUSharedPool(1, 1, "8-15"))
NUMA_LS_POOLS = (CPUSharedPool(0, 0, "1-7"), CPUSharedPool(1, 1, "9-15"))
NUMA_BE_POOLS = (CPUSharedPool(0, 0, "0-7"), CPUSharedPool(1, 1, "8-15"))
BE_CPU_MANAGER = FeatureGates({features.BE_CPU_MANAGER: True})


def node(
    policy: str = "none",
    ls_pools: tuple[CPUSharedPool, ...] = LS_POOLS,
    be_pools: tuple[CPUSharedPool, ...] = (),
    system_cpuset: str | None = None,
) -> NodeState:
    return NodeState(
        ls_pools=ls_pools,
        be_pools=be_pools,
        kubelet_policy=KubeletCPUManagerPolicy(policy),
        system_qos=None if system_cpuset is None else SystemQOSResource(system_cpuset),
    )


def status(cpuset_: str = "", numa: dict[int, dict[str, str]] | None = None) -> dict[str, str]:
    return {keys.ANNOTATION_RESOURCE_STATUS: resource_status(cpuset_, numa)}


@pytest.mark.parametrize(
    ("request_", "rules", "expected"),
    [
        pytest.param(
            container(pod("LS")), Rules(node=node()), "0-7,8-15", id="case-16-ls-share-pools"
        ),
        pytest.param(
            container(pod(cgroup_dir=BURSTABLE_DIR)),
            Rules(node=node("none")),
            "0-7,8-15",
            id="case-17-burstable-kubelet-none",
        ),
        pytest.param(
            container(pod(cgroup_dir=BURSTABLE_DIR)),
            Rules(node=node("static")),
            None,
            id="case-17-burstable-kubelet-static",
        ),
        pytest.param(
            container(pod(cgroup_dir=BESTEFFORT_DIR)),
            Rules(node=node()),
            "",
            id="case-18-besteffort-gets-empty",
        ),
        pytest.param(
            container(pod("LS", annotations=status(numa={1: {"cpu": "4"}}))),
            Rules(node=node(ls_pools=NUMA_LS_POOLS, be_pools=NUMA_BE_POOLS)),
            "9-15",
            id="case-19-numa-ls-share-pool",
        ),
        pytest.param(
            container(
                pod(
                    "BE",
                    cgroup_dir=BESTEFFORT_DIR,
                    annotations=status(numa={1: {keys.BATCH_CPU: "2000"}}),
                )
            ),
            Rules(node=node(ls_pools=NUMA_LS_POOLS, be_pools=NUMA_BE_POOLS), gates=BE_CPU_MANAGER),
            "8-15",
            id="case-20-numa-be-share-pool",
        ),
        pytest.param(
            container(
                pod(
                    "BE",
                    cgroup_dir=BESTEFFORT_DIR,
                    annotations=status(numa={1: {keys.BATCH_CPU: "2000"}}),
                )
            ),
            Rules(node=node(ls_pools=NUMA_LS_POOLS, be_pools=NUMA_BE_POOLS)),
            "",
            id="numa-be-without-be-cpu-manager-falls-through",
        ),
        pytest.param(
            container(pod("LS", annotations=status(numa={0: {"cpu": "0"}}))),
            Rules(node=node(ls_pools=NUMA_LS_POOLS)),
            "1-7,9-15",
            id="numa-with-zero-cpu-uses-all-pools",
        ),
        pytest.param(
            container(pod("SYSTEM")),
            Rules(node=node(system_cpuset="0-3")),
            "0-3",
            id="case-21-system-qos-resource",
        ),
        pytest.param(
            container(pod("SYSTEM")),
            Rules(node=node()),
            "0-7,8-15",
            id="system-without-system-cpuset-gets-share-pools",
        ),
        pytest.param(
            container(pod("LS")), Rules(node=node(ls_pools=())), None, id="no-rule-yet-no-change"
        ),
    ],
)
def test_container_cpuset_follows_koordinator_decision_order(
    request_: ContainerRequest, rules: Rules, expected: str | None
) -> None:
    assert cpuset.container_cpuset(request_, rules) == expected
    patch = cpuset.container(request_, rules, STAGE)
    assert patch == (None if expected is None else ContainerPatch(cpuset_cpus=expected))


@pytest.mark.parametrize(
    "qos",
    [
        pytest.param("LSR", id="lsr"),
        pytest.param("LS", id="ls-label-with-cpuset"),
        pytest.param(None, id="no-label"),
    ],
)
def test_pinned_pod_gets_its_cpuset_and_unlimited_quota(qos: str | None) -> None:
    pinned = pod(qos, cgroup_dir=GUARANTEED_DIR, annotations=status("2-4"))
    rules = Rules(node=node())
    assert cpuset.container(container(pinned), rules, STAGE) == ContainerPatch(
        cpuset_cpus="2-4", cpu_cfs_quota_us=-1
    )
    assert cpuset.pod(pinned, rules, Stage.PRE_RUN_POD_SANDBOX) == PodPatch(cpu_cfs_quota_us=-1)


def test_disable_unset_cpu_quota_leaves_the_quota_alone() -> None:
    pinned = pod("LSR", cgroup_dir=GUARANTEED_DIR, annotations=status("2-4"))
    rules = Rules(node=node(), disable_unset_cpu_quota=True)
    assert cpuset.container(container(pinned), rules, STAGE) == ContainerPatch(cpuset_cpus="2-4")
    assert cpuset.pod(pinned, rules, Stage.PRE_RUN_POD_SANDBOX) is None


def test_pinned_cpuset_is_used_before_any_share_pool_rule_exists() -> None:
    pinned = pod("LSR", annotations=status("2-4"))
    rules = Rules(node=node(ls_pools=()))
    assert cpuset.container(container(pinned), rules, STAGE) == ContainerPatch(
        cpuset_cpus="2-4", cpu_cfs_quota_us=-1
    )


def test_pod_without_cpuset_keeps_its_pod_quota() -> None:
    assert cpuset.pod(pod("LS"), Rules(node=node()), Stage.PRE_RUN_POD_SANDBOX) is None
    numa_only = pod("LS", annotations=status(numa={0: {"cpu": "2"}}))
    assert cpuset.pod(numa_only, Rules(node=node()), Stage.PRE_RUN_POD_SANDBOX) is None


def test_cpuset_naming_cpus_the_node_lacks_is_an_annotation_error() -> None:
    pinned = pod("LSR", annotations=status("2-40"))
    rules = Rules(node=NodeState(cpus=frozenset(range(16)), ls_pools=LS_POOLS))
    with pytest.raises(AnnotationError, match="names CPUs 16-40 this node does not have"):
        cpuset.container(container(pinned), rules, STAGE)


def test_malformed_resource_status_is_an_annotation_error() -> None:
    bad = pod("LSR", annotations={keys.ANNOTATION_RESOURCE_STATUS: '{"cpuset": "4-2"}'})
    with pytest.raises(AnnotationError) as err:
        cpuset.pod(bad, Rules(), Stage.PRE_RUN_POD_SANDBOX)
    assert err.value.key == keys.ANNOTATION_RESOURCE_STATUS


def test_share_pools_exclude_pinned_reserved_and_system_cpus_per_numa_node() -> None:
    numa = {0: frozenset(range(8)), 1: frozenset(range(8, 16)), 2: frozenset({16, 17})}
    ls_excluded = frozenset({2, 3, 4, 9, 16, 17})  # LSR 2-4, LSE 9, node 2 reserved
    be_excluded = frozenset({9, 16, 17})  # BE may run on LSR CPUs
    ls, be = cpuset.share_pools(numa, {0: 0, 1: 1, 2: 1}, ls_excluded, be_excluded)
    assert ls == (CPUSharedPool(0, 0, "0-1,5-7"), CPUSharedPool(1, 1, "8,10-15"))
    assert be == (CPUSharedPool(0, 0, "0-7"), CPUSharedPool(1, 1, "8,10-15"))


def test_hook_registers_pod_and_container_stages() -> None:
    hook = cpuset.HOOK
    assert (hook.name, hook.gate) == ("CPUSetAllocator", features.CPUSET_ALLOCATOR)
    assert Stage.PRE_RUN_POD_SANDBOX in hook.stages
    assert Stage.PRE_UPDATE_CONTAINER_RESOURCES in hook.stages
    assert Stage.PRE_REMOVE_POD_SANDBOX not in hook.stages
