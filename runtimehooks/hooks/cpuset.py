"""CPUSetAllocator: which CPUs a container may use.

Pinned pods (LSE/LSR, with a cpuset in ``scheduling.koordinator.sh/resource-status``) get that
cpuset and, unless ``--disable-unset-cpu-quota``, no CFS quota at pod and container level (a
pinned pod must not be throttled on its own CPUs). LS pods get the LS share pool (all CPUs
minus pinned, reserved and system CPUs), per NUMA node when the scheduler allocated nodes; BE
containers get no cpuset here (CPU suppress owns the BE cpuset).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koordapi import annotation, features, keys
from koordapi.annotation import CPUSharedPool, ResourceStatus
from koordapi.cgroup import UNLIMITED
from koordapi.cpuset import format_cpuset, parse_cpuset
from koordapi.errors import AnnotationError
from koordapi.qos import KubeQoS, QoSClass
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import RESOURCE_STAGES, ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules


def resource_status(pod: PodRequest, rules: Rules) -> ResourceStatus | None:
    """The pod's resource-status; its cpuset must name CPUs this node has."""
    text = pod.annotations.get(keys.ANNOTATION_RESOURCE_STATUS)
    if text is None:
        return None
    status = annotation.parse_resource_status(text)
    if status.cpuset and rules.node.cpus:
        outside = parse_cpuset(status.cpuset) - rules.node.cpus
        if outside:
            raise AnnotationError(
                keys.ANNOTATION_RESOURCE_STATUS,
                f"cpuset {status.cpuset!r} names CPUs {format_cpuset(outside)} "
                "this node does not have",
            )
    return status


def _join(pools: Iterable[CPUSharedPool], nodes: set[int] | None = None) -> str:
    return ",".join(p.cpuset for p in pools if nodes is None or p.node in nodes)


def container_cpuset(req: ContainerRequest, rules: Rules) -> str | None:
    """Koordinator's decision order; None means "leave it alone", "" means no cpuset."""
    pod = req.pod
    status = resource_status(pod, rules)
    if status is not None and status.cpuset:
        return status.cpuset
    node = rules.node
    if not node.ls_pools:
        return None  # no share-pool rule yet
    if status is not None:
        numa = {
            n.node
            for n in status.numa_nodes
            if n.resources.get("cpu", 0) > 0 or n.resources.get(keys.BATCH_CPU, 0) > 0
        }
        if numa:
            if pod.qos is QoSClass.BE:
                if rules.gates.enabled(features.BE_CPU_MANAGER):
                    return _join(node.be_pools, numa)
            else:
                return _join(node.ls_pools, numa)
    if pod.qos is QoSClass.SYSTEM and node.system_qos is not None and node.system_qos.cpuset:
        return node.system_qos.cpuset
    if pod.qos is QoSClass.LS:
        return _join(node.ls_pools)
    if pod.kube_qos is KubeQoS.BESTEFFORT:
        return ""
    if node.kubelet_policy.policy == "static":
        return None
    return _join(node.ls_pools)


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    cpuset = container_cpuset(req, rules)
    status = resource_status(req.pod, rules)
    unset_quota = bool(status and status.cpuset) and not rules.disable_unset_cpu_quota
    if cpuset is None and not unset_quota:
        return None
    return ContainerPatch(cpuset_cpus=cpuset, cpu_cfs_quota_us=UNLIMITED if unset_quota else None)


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    status = resource_status(req, rules)
    if status is None or not status.cpuset or rules.disable_unset_cpu_quota:
        return None
    return PodPatch(cpu_cfs_quota_us=UNLIMITED)


def share_pools(
    numa_cpus: Mapping[int, frozenset[int]],
    socket_of_node: Mapping[int, int],
    ls_excluded: frozenset[int],
    be_excluded: frozenset[int],
) -> tuple[tuple[CPUSharedPool, ...], tuple[CPUSharedPool, ...]]:
    """The LS and BE share pools per NUMA node.

    ``ls_excluded``: CPUs pinned by LSE and LSR pods, reserved and system-QoS CPUs;
    ``be_excluded``: only LSE CPUs, reserved and system-QoS CPUs (BE may run on LSR CPUs).
    """

    def pools(excluded: frozenset[int]) -> tuple[CPUSharedPool, ...]:
        return tuple(
            CPUSharedPool(socket_of_node.get(node, 0), node, format_cpuset(cpus - excluded))
            for node, cpus in sorted(numa_cpus.items())
            if cpus - excluded
        )

    return pools(ls_excluded), pools(be_excluded)


HOOK = Hook(
    name="CPUSetAllocator",
    gate=features.CPUSET_ALLOCATOR,
    stages=RESOURCE_STAGES,
    pod=pod,
    container=container,
)
