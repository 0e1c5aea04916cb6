"""Hook results in koordlet's own terms, for whoever applies them: cgroup writes and the label
of a hook's failure.

Both the NRI path (a pod's values at RunPodSandbox, a container's updates) and the reconciler
(every pass) turn a hook patch into the same cgroup writes here; NRI's own messages are made in
``koordlet.nri.translate``. Pod values always go to the pod's cgroup: NRI cannot adjust a
sandbox.
"""

from __future__ import annotations

from koordapi.errors import AnnotationError
from koordlet.executor import CgroupWrite
from runtimehooks.patch import ContainerPatch, PodPatch
from runtimehooks.rules import KernelFeatures

POD_FILES = (
    ("cpu_bvt_warp_ns", "cpu.bvt_warp_ns"),
    ("cpu_idle", "cpu.idle"),
    ("cpu_shares", "cpu.shares"),
    ("cpu_cfs_quota_us", "cpu.cfs_quota_us"),
    ("memory_limit", "memory.limit_in_bytes"),
    ("memory_min", "memory.min"),
    ("memory_low", "memory.low"),
    ("net_cls_classid", "net_cls.classid"),
)
CONTAINER_FILES = (
    ("cpuset_cpus", "cpuset.cpus"),
    ("cpu_cfs_quota_us", "cpu.cfs_quota_us"),
    ("cpu_shares", "cpu.shares"),
    ("memory_limit", "memory.limit_in_bytes"),
    ("memory_min", "memory.min"),
    ("memory_low", "memory.low"),
    ("memory_high", "memory.high"),
)
MEMORY_QOS_FILES = {"memory.min", "memory.low", "memory.high"}


def memory_qos_writable(kernel: KernelFeatures) -> bool:
    return kernel.cgroup_version == 2 or kernel.memory_qos_v1


def pod_writes(cgroup: str, patch: PodPatch, kernel: KernelFeatures) -> list[CgroupWrite]:
    writes = []
    for attr, resource in POD_FILES:
        value = getattr(patch, attr)
        if value is None or (resource in MEMORY_QOS_FILES and not memory_qos_writable(kernel)):
            continue
        if resource == "cpu.shares" and patch.cpu_idle == 1:
            continue  # an idle cgroup has the minimum weight; the kernel refuses shares for it
        if resource == "net_cls.classid" and kernel.cgroup_version == 2:
            continue  # no net_cls on v2
        writes.append(CgroupWrite(cgroup, resource, value))
    return writes


def container_writes(
    cgroup: str, patch: ContainerPatch, kernel: KernelFeatures
) -> list[CgroupWrite]:
    writes = []
    for attr, resource in CONTAINER_FILES:
        value = getattr(patch, attr)
        if value is None or value == "":
            continue  # "" cpuset: leave it to CPU suppress, as Koordinator's reconciler does
        if resource in MEMORY_QOS_FILES and not memory_qos_writable(kernel):
            continue
        writes.append(CgroupWrite(cgroup, resource, value))
    return writes


def failure_cause(error: Exception) -> str:
    """A short, bounded label for a failure: the error class, and the annotation key if any."""
    if isinstance(error, AnnotationError):
        return f"{type(error).__name__}:{error.key}"
    return type(error).__name__
