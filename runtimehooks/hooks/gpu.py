"""GPU env inject: tell the container which GPUs the scheduler gave it.

From ``scheduling.koordinator.sh/device-allocated``: NVIDIA_VISIBLE_DEVICES lists the GPU minors,
and the container gets those GPUs' device nodes, ``/dev/nvidia<minor>``, plus the control nodes
the node has (``nvidiactl``, ``nvidia-uvm``, ``nvidia-uvm-tools``), with the numbers koordlet read
from its dev root into the node state: the nodes the NVIDIA container toolkit would add, so that
a runtime without the NVIDIA hook gives the container its GPUs too (Koordinator sets the variable
only and leaves the nodes to that hook). An allocated minor the node does not have is an error;
a node where koordlet sees no NVIDIA device node at all (its /dev not visible to koordlet) gets
the variable only, as in Koordinator.

With HAMi-core isolation (label ``koordinator.sh/gpu-isolation-provider=HAMi-core``) and a partial
GPU (gpu-memory-ratio below 100), the memory and SM limits go into the environment and the
HAMi-core library is preloaded and bind-mounted with its lock directory.
"""

from __future__ import annotations

import math

from koordapi import annotation, features, keys
from koordapi.errors import AnnotationError
from runtimehooks.patch import ContainerPatch, Device, Mount
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, Stage
from runtimehooks.rules import Rules

VGPU_LOCK_DIR = "/tmp/vgpulock"


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    text = req.pod.annotations.get(keys.ANNOTATION_DEVICE_ALLOCATED)
    if text is None:
        return None
    gpus = annotation.parse_device_allocated(text).get("gpu", ())
    minors = [g.minor for g in gpus if g.minor is not None]
    if not minors:
        return None
    env = {keys.ENV_NVIDIA_VISIBLE_DEVICES: ",".join(str(m) for m in minors)}
    devices = _device_nodes(minors, rules)
    mounts: tuple[Mount, ...] = ()
    first = gpus[0].resources
    isolated = req.pod.labels.get(keys.LABEL_GPU_ISOLATION_PROVIDER) == keys.GPU_ISOLATION_HAMI_CORE
    if isolated and first.get(keys.GPU_MEMORY_RATIO, 100) < 100:
        if keys.GPU_MEMORY in first:
            env[keys.ENV_CUDA_DEVICE_MEMORY_LIMIT] = str(math.ceil(first[keys.GPU_MEMORY]))
        if keys.GPU_CORE in first:
            env[keys.ENV_CUDA_DEVICE_SM_LIMIT] = str(math.ceil(first[keys.GPU_CORE]))
        env[keys.ENV_LD_PRELOAD] = rules.hami_core_library
        mounts = (
            Mount(rules.hami_core_library, rules.hami_core_library),
            Mount(VGPU_LOCK_DIR, VGPU_LOCK_DIR),
        )
    return ContainerPatch(env=env, mounts=mounts, devices=devices)


def _device_nodes(minors: list[int], rules: Rules) -> tuple[Device, ...]:
    """/dev/nvidia<minor> of each allocated GPU, then the control nodes; () when koordlet sees
    no NVIDIA device node at all (the NVIDIA runtime's hook adds them, as in Koordinator)."""
    node = rules.node
    if not node.nvidia_gpus and not node.nvidia_control:
        return ()
    devices: list[Device] = []
    for minor in minors:
        found = node.nvidia_gpus.get(minor)
        if found is None:
            raise AnnotationError(
                keys.ANNOTATION_DEVICE_ALLOCATED,
                f"GPU minor {minor} is not on this node (no /dev/nvidia{minor})",
            )
        devices.append(found)
    return tuple(dict.fromkeys((*devices, *node.nvidia_control)))


HOOK = Hook(
    name="gpu env inject",
    gate=features.GPU_ENV_INJECT,
    stages=frozenset({Stage.PRE_CREATE_CONTAINER}),
    container=container,
)
