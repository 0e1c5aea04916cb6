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


class TargetMemo:
    """``targets`` remembered per pod between passes: a pod whose request and containers are
    the same objects as last time (the pod store's snapshot shares its copies until something
    changes) has the same targets, so they are not built again every second."""

    def __init__(self) -> None:
        # id(pod) → (pod, its request, its containers, its targets, without a directory)
        self._by_pod: dict[int, tuple[KnownPod, object, list[object], list[Target], int]] = {}

    def __call__(self, pods: Iterable[KnownPod]) -> tuple[list[Target], int]:
        kept: dict[int, tuple[KnownPod, object, list[object], list[Target], int]] = {}
        out: list[Target] = []
        without_dir = 0
        for pod in pods:
            containers: list[object] = list(pod.containers.values())
            hit = self._by_pod.get(id(pod))
            if (
                hit is None
                or hit[0] is not pod
                or hit[1] is not pod.request
                or len(hit[2]) != len(containers)
                or any(a is not b for a, b in zip(hit[2], containers, strict=True))
            ):
                found, missing = targets([pod])
                hit = (pod, pod.request, containers, found, missing)
            kept[id(pod)] = hit  # holding the pod: its id is not reused while remembered
            out.extend(hit[3])
            without_dir += hit[4]
        self._by_pod = kept
        return out, without_dir
