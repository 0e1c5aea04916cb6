"""What the hooks decide from: one frozen snapshot of node policy and node state.

koordlet rebuilds the snapshot when the NodeSLO file, the node inputs or the set of pinned pods
change; hooks only read it. Nothing here reads files: koordlet measures the kernel and the CPU
topology and passes them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordapi.annotation import (
    CPUSharedPool,
    KubeletCPUManagerPolicy,
    NodeReservation,
    SystemQOSResource,
)
from koordapi.features import FeatureGates
from koordapi.nodeslo import NodeSLOSpec
from runtimehooks.patch import Device

DEFAULT_HAMI_CORE_LIBRARY = "/usr/local/vgpu/libvgpu.so"


@dataclass(frozen=True)
class KernelFeatures:
    """Which kernel interfaces exist on this node."""

    cgroup_version: int = 1
    bvt: bool = False  # cpu.bvt_warp_ns (Anolis kernels): group identity
    cpu_idle: bool = False  # cpu.idle (Linux >= 5.15): SCHED_IDLE cgroups
    core_sched: bool = False  # prctl(PR_SCHED_CORE)
    resctrl: bool = False  # /sys/fs/resctrl mounted or mountable
    memory_qos_v1: bool = False  # memory.min/low/high on cgroup v1 (Anolis kernels)
    l3_cbm_mask: int = 0  # resctrl info/L3/cbm_mask
    l3_cache_ids: tuple[int, ...] = ()
    mba_vendor: str = "intel"  # "intel" | "amd"

    @property
    def group_identity_mechanism(self) -> str:
        """ "bvt" on Anolis kernels, "cpu.idle" on mainline >= 5.15, else "none"."""
        if self.bvt:
            return "bvt"
        if self.cpu_idle:
            return "cpu.idle"
        return "none"


@dataclass(frozen=True)
class NodeState:
    """Node-level inputs Koordinator reads from the Node object and the topology report."""

    cpus: frozenset[int] = frozenset()
    cpu_normalization_ratio: float | None = None
    reservation: NodeReservation | None = None
    system_qos: SystemQOSResource | None = None
    kubelet_policy: KubeletCPUManagerPolicy = field(default_factory=KubeletCPUManagerPolicy)
    ls_pools: tuple[CPUSharedPool, ...] = ()
    be_pools: tuple[CPUSharedPool, ...] = ()
    allocatable_memory: int = 0
    rdma_verbs: Mapping[str, tuple[Device, ...]] = field(default_factory=dict)  # PCI address →
    rdma_cm: Device | None = None
    nvidia_gpus: Mapping[int, Device] = field(default_factory=dict)  # minor → /dev/nvidia<minor>
    nvidia_control: tuple[Device, ...] = ()  # nvidiactl, nvidia-uvm, nvidia-uvm-tools present


@dataclass(frozen=True)
class Rules:
    slo: NodeSLOSpec = field(default_factory=NodeSLOSpec)
    gates: FeatureGates = field(default_factory=FeatureGates)
    node: NodeState = field(default_factory=NodeState)
    kernel: KernelFeatures = field(default_factory=KernelFeatures)
    disable_unset_cpu_quota: bool = False
    hami_core_library: str = DEFAULT_HAMI_CORE_LIBRARY
