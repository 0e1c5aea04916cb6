"""Small builders for hook requests, shared by the runtime-hook tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from koordapi import keys
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest

POD_UID = "6a3b1c2d-0000-4e5f-8a9b-0123456789ab"
GUARANTEED_DIR = f"kubepods/pod{POD_UID}"
BURSTABLE_DIR = f"kubepods/burstable/pod{POD_UID}"
BESTEFFORT_DIR = f"kubepods/besteffort/pod{POD_UID}"

GI = 1 << 30


def pod(
    qos: str | None = None,
    *,
    cgroup_dir: str = BURSTABLE_DIR,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    cpu_quota: int | None = None,
    uid: str = POD_UID,
) -> PodRequest:
    """A pod with the ``koordinator.sh/qosClass`` label ``qos`` (none when None)."""
    all_labels = dict(labels or {})
    if qos is not None:
        all_labels[keys.LABEL_QOS_CLASS] = qos
    return PodRequest(
        uid=uid,
        name="test-pod",
        namespace="default",
        labels=all_labels,
        annotations=dict(annotations or {}),
        cgroup_dir=cgroup_dir,
        cpu_quota=cpu_quota,
    )


def container(
    owner: PodRequest,
    name: str = "main",
    *,
    cpu_quota: int | None = None,
    memory_limit: int | None = None,
    sandbox: bool = False,
) -> ContainerRequest:
    return ContainerRequest(
        pod=owner,
        name=name,
        id=f"containerd://{name}",
        cgroup_dir=f"{owner.cgroup_dir}/{name}",
        resources=ContainerResources(cpu_quota=cpu_quota, memory_limit=memory_limit),
        sandbox=sandbox,
    )


def extended_resource_spec(containers: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The ``node.koordinator.sh/extended-resource-spec`` annotation for ``containers``."""
    return {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": containers})}


def batch(cpu: str | None = None, memory: str | None = None) -> dict[str, str]:
    """A requests/limits object of batch-cpu (milli-cores) and batch-memory."""
    out = {}
    if cpu is not None:
        out[keys.BATCH_CPU] = cpu
    if memory is not None:
        out[keys.BATCH_MEMORY] = memory
    return out


def resource_status(cpuset: str = "", numa: Mapping[int, Mapping[str, str]] | None = None) -> str:
    """The ``scheduling.koordinator.sh/resource-status`` annotation value."""
    data: dict[str, Any] = {}
    if cpuset:
        data["cpuset"] = cpuset
    if numa:
        data["numaNodeResources"] = [
            {"node": node, "resources": dict(res)} for node, res in numa.items()
        ]
    return json.dumps(data)
