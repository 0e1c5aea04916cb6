"""The pod and container cgroups the collectors read, with the labels of their samples."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from koordlet.states.pods import KnownPod

NO_CGROUP_DIR = "no-cgroup-dir"


@dataclass(frozen=True)
class Target:
    """One pod or container cgroup to read, with the labels its samples carry."""

    level: str  # "pod" | "container": the metric prefix
    key: tuple[str, ...]  # (pod uid,) or (pod uid, container id): the series' identity
    labels: Mapping[str, str] = field(hash=False)
    cgroup_dir: str  # relative to a hierarchy root


def targets(pods: Iterable[KnownPod]) -> tuple[list[Target], int]:
    """Pod and container cgroups of ``pods``, and how many had no cgroup directory.

    An empty directory would resolve to the hierarchy root, i.e. the whole node: such a
    pod or container is left out (and counted) rather than reported with the node's usage.
    """
    out: list[Target] = []
    without_dir = 0
    for pod in pods:
        uid = pod.request.uid
        pod_dir = pod.request.cgroup_dir.strip("/")
        if pod_dir:
            out.append(Target("pod", (uid,), {"pod_uid": uid}, pod_dir))
        else:
            without_dir += 1
        for container in pod.containers.values():
            if container.sandbox:
                continue
            container_dir = container.cgroup_dir.strip("/")
            if not container_dir:
                without_dir += 1
                continue
            labels = {"pod_uid": uid, "container_id": container.id}
            out.append(Target("container", (uid, container.id), labels, container_dir))
    return out, without_dir
