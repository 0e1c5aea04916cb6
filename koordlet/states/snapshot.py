"""Build the hooks' ``Rules`` snapshot from the node config, topology, kernel and known pods.

The share pools are computed here, as Koordinator's states informer does: all CPUs minus the
pinned CPUs of LSE and LSR pods (LS pool) or of LSE pods only (BE pool), minus reserved and
exclusive system-QoS CPUs, per NUMA node.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from koordapi import annotation, keys
from koordapi.annotation import KubeletCPUManagerPolicy
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordapi.qos import QoSClass
from koordlet.states.devnodes import NvidiaNodes
from koordlet.states.nodeconfig import NodeConfig
from koordlet.states.pods import KnownPod, PodStore
from koordlet.states.topology import Topology
from runtimehooks.hooks.cpuset import share_pools
from runtimehooks.patch import Device
from runtimehooks.rules import DEFAULT_HAMI_CORE_LIBRARY, KernelFeatures, NodeState, Rules

log = logging.getLogger(__name__)


def pinned_by_class(pods: Iterable[KnownPod]) -> dict[QoSClass, frozenset[int]]:
    """The CPUs the scheduler pinned (resource-status cpusets), by the pods' QoS class."""
    found: dict[QoSClass, set[int]] = {}
    for known in pods:
        text = known.request.annotations.get(keys.ANNOTATION_RESOURCE_STATUS)
        if not text:
            continue
        try:
            cpus = parse_cpuset(annotation.parse_resource_status(text).cpuset)
        except ModelError:
            continue  # the pod's own hooks report it
        found.setdefault(known.request.qos, set()).update(cpus)
    return {qos: frozenset(cpus) for qos, cpus in found.items()}


def pinned_cpus(pods: Iterable[KnownPod]) -> tuple[frozenset[int], frozenset[int]]:
    """(CPUs pinned by any pod, CPUs pinned by LSE pods only)."""
    by_class = pinned_by_class(pods)
    every: frozenset[int] = frozenset().union(*by_class.values())
    return every, by_class.get(QoSClass.LSE, frozenset())


def build_rules(
    config: NodeConfig,
    topology: Topology,
    kernel: KernelFeatures,
    pods: PodStore,
    gates: FeatureGates,
    *,
    disable_unset_cpu_quota: bool = False,
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY,
    nvidia: NvidiaNodes | None = None,
    rdma_verbs: Mapping[str, tuple[Device, ...]] | None = None,
    rdma_cm: Device | None = None,
) -> Rules:
    """The snapshot; ``nvidia``, ``rdma_verbs`` and ``rdma_cm`` are the device nodes koordlet
    found (GPU env inject and RDMA device inject add them to containers)."""
    nvidia = nvidia or NvidiaNodes()
    reservation = config.parsed(keys.ANNOTATION_NODE_RESERVATION)
    system_qos = config.parsed(keys.ANNOTATION_SYSTEM_QOS_RESOURCE)
    ratio = config.parsed(keys.ANNOTATION_CPU_NORMALIZATION_RATIO)
    policy = config.parsed(keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY) or KubeletCPUManagerPolicy()
    reserved = parse_cpuset(reservation.reserved_cpus) if reservation else frozenset()
    system = (
        parse_cpuset(system_qos.cpuset)
        if system_qos and system_qos.cpuset_exclusive
        else frozenset()
    )
    pinned, pinned_lse = pinned_cpus(pods)
    ls_pools, be_pools = share_pools(
        topology.numa,
        topology.socket_of_node,
        pinned | reserved | system,
        pinned_lse | reserved | system,
    )
    node = NodeState(
        cpus=topology.cpus,
        cpu_normalization_ratio=None if ratio is None or ratio < 0 else ratio,
        reservation=reservation,
        system_qos=system_qos,
        kubelet_policy=policy,
        ls_pools=ls_pools,
        be_pools=be_pools,
        allocatable_memory=topology.memory_bytes,
        rdma_verbs=rdma_verbs or {},
        rdma_cm=rdma_cm,
        nvidia_gpus=nvidia.gpus,
        nvidia_control=nvidia.control,
    )
    return Rules(
        slo=config.spec,
        gates=gates,
        node=node,
        kernel=kernel,
        disable_unset_cpu_quota=disable_unset_cpu_quota,
        hami_core_library=hami_core_library,
    )
