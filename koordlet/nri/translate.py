"""Hook results as NRI messages: a ContainerAdjustment at creation, a ContainerUpdate on update.

The same patches go to cgroup files through ``koordlet.hookresults`` (the reconciler, and pod
values, which NRI cannot adjust).
"""

from __future__ import annotations

from nri_plugin import api
from runtimehooks.patch import ContainerPatch
from runtimehooks.rules import KernelFeatures


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
