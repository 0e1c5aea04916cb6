"""GPU env inject: tell the container which GPUs the scheduler gave it.

From ``scheduling.koordinator.sh/device-allocated``: NVIDIA_VISIBLE_DEVICES lists the GPU minors.
With HAMi-core isolation (label ``koordinator.sh/gpu-isolation-provider=HAMi-core``) and a
partial GPU (gpu-memory-ratio below 100), the memory and SM limits go into the environment and
the HAMi-core library is preloaded and bind-mounted with its lock directory.
"""

from __future__ import annotations

import math

from koordapi import annotation, features, keys
from runtimehooks.patch import ContainerPatch, Mount
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, Stage
from runtimehooks.rules import Rules

VGPU_LOCK_DIR = "/tmp/vgpulock"


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    text = req.pod.annotations.get(keys.ANNOTATION_DEVICE_ALLOCATED)
    if text is None:
        return None
    gpus = annotation.parse_device_allocated(text).get("gpu", ())
    minors = [str(g.minor) for g in gpus if g.minor is not None]
    if not minors:
        return None
    env = {keys.ENV_NVIDIA_VISIBLE_DEVICES: ",".join(minors)}
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
    return ContainerPatch(env=env, mounts=mounts)


HOOK = Hook(
    name="gpu env inject",
    gate=features.GPU_ENV_INJECT,
    stages=frozenset({Stage.PRE_CREATE_CONTAINER}),
    container=container,
)
