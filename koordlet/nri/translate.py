"""Hook results in the terms of their consumers: NRI messages and cgroup writes.

Container values go back to the runtime (an NRI ContainerAdjustment at creation, a
ContainerUpdate on update) and, in the reconciler, straight to the container's cgroup. Pod
values always go to the pod's cgroup: NRI cannot adjust a sandbox.
"""

from __future__ import annotations

from koordlet.executor import CgroupWrite
from nri_plugin import api
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


def _resources(patch: ContainerPatch, kernel: KernelFeatures, target: api.LinuxResources) -> bool:
    """Fill ``target`` from the patch; True if anything was set."""
    touched = False
    cpu, memory = target.cpu, target.memory
    if patch.cpuset_cpus:
        cpu.cpus = patch.cpuset_cpus
        touched = True
    if patch.cpu_cfs_quota_us is not None:
        cpu.quota.value = patch.cpu_cfs_quota_us
        touched = True
    if patch.cpu_shares is not None:
        cpu.shares.value = patch.cpu_shares
        touched = True
    if patch.memory_limit is not None:
        memory.limit.value = patch.memory_limit
        touched = True
    if patch.rdt_class is not None:
        target.rdt_class.value = patch.rdt_class
        touched = True
    if kernel.cgroup_version == 2:
        for name, value in (
            ("memory.min", patch.memory_min),
            ("memory.low", patch.memory_low),
            ("memory.high", patch.memory_high),
        ):
            if value is not None:
                target.unified[name] = "max" if value == -1 else str(value)
                touched = True
    return touched


def to_adjustment(patch: ContainerPatch, kernel: KernelFeatures) -> api.ContainerAdjustment | None:
    adjust = api.ContainerAdjustment()
    touched = _resources(patch, kernel, adjust.linux.resources)
    for key, value in patch.env.items():
        adjust.env.add(key=key, value=value)
        touched = True
    for mount in patch.mounts:
        adjust.mounts.add(
            destination=mount.destination,
            source=mount.source,
            type=mount.type,
            options=list(mount.options),
        )
        touched = True
    for device in patch.devices:
        dev = adjust.linux.devices.add(
            path=device.path, type=device.type, major=device.major, minor=device.minor
        )
        dev.file_mode.value = device.file_mode
        touched = True
    if patch.oom_score_adj is not None:
        adjust.linux.oom_score_adj.value = patch.oom_score_adj  # NRI v0.7+; koordlet also writes it
        touched = True
    return adjust if touched else None


def to_update(
    container_id: str, patch: ContainerPatch, kernel: KernelFeatures
) -> api.ContainerUpdate | None:
    update = api.ContainerUpdate(container_id=container_id)
    return update if _resources(patch, kernel, update.linux.resources) else None
