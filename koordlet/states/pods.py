"""The pods and containers koordlet knows, as the runtime reported them through NRI.

In standalone mode this is the only source of pods: Synchronize lists what exists when koordlet
connects, then pod and container events keep it current. Each container keeps the resources
the runtime was last asked to give it (create or update), so the reconciler recomputes from the
request, never from values koordlet itself wrote. In cluster mode the kubelet's pod list adds
what only the spec says (priority, memory requests; ``put_specs``), by pod uid.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from koordapi import keys
from koordapi.qos import KubeQoS
from nri_plugin import api
from runtimehooks.request import ContainerRequest, ContainerResources, PodRequest, PodSpecFacts

CGROUPFS, SYSTEMD = "cgroupfs", "systemd"
CGROUP_DRIVERS = (CGROUPFS, SYSTEMD)  # koordlet's --cgroup-driver, named as the kubelet's
# koordlet's --cgroup-kube-dir: the kubelet's top cgroup under its cgroupfs driver, relative to
# a hierarchy root (Koordinator's CgroupKubePath and its default). A kubelet started with
# cgroupRoot /koordk8s makes koordk8s/kubepods/. The systemd driver's kubepods.slice is fixed.
DEFAULT_KUBE_DIR = "kubepods/"
_SYSTEMD_KUBE_DIR = "kubepods.slice"
_SYSTEMD_SCOPE = re.compile(r"^([^:]+):([^:]+):([^:]+)\Z")


def cgroup_dir(path: str) -> str:
    """A cgroups path from NRI as a directory under a hierarchy root.

    cgroupfs paths are already directories ("/kubepods/burstable/pod<uid>/<id>"). The systemd
    driver's "slice:prefix:name" becomes "parent slices/slice/prefix-name.scope", and a bare
    "a-b-c.slice" its nested slice path ("a.slice/a-b.slice/a-b-c.slice").
    """
    path = path.strip()
    scope = _SYSTEMD_SCOPE.match(path)
    if scope:
        slice_name, prefix, name = scope.groups()
        return f"{_slice_path(slice_name)}/{prefix}-{name}.scope"
    if path.endswith(".slice") and "/" not in path:
        return _slice_path(path)
    return path.strip("/")


def _slice_path(slice_name: str) -> str:
    stem = slice_name.removesuffix(".slice")
    if stem in ("", "-"):
        return ""
    parts = stem.split("-")
    return "/".join("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts)))


def pod_request(pod: api.PodSandbox) -> PodRequest:
    quota = None
    if pod.HasField("linux") and pod.linux.HasField("pod_resources"):
        cpu = pod.linux.pod_resources.cpu
        if cpu.HasField("quota"):
            quota = cpu.quota.value
    return PodRequest(
        uid=pod.uid,
        name=pod.name,
        namespace=pod.namespace,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        cgroup_dir=cgroup_dir(pod.linux.cgroup_parent),
        runtime_handler=pod.runtime_handler,
        cpu_quota=quota,
    )


def container_resources(resources: api.LinuxResources) -> ContainerResources:
    cpu, memory = resources.cpu, resources.memory
    return ContainerResources(
        cpu_shares=cpu.shares.value if cpu.HasField("shares") else None,
        cpu_quota=cpu.quota.value if cpu.HasField("quota") else None,
        cpu_period=cpu.period.value if cpu.HasField("period") else None,
        memory_limit=memory.limit.value if memory.HasField("limit") else None,
        cpuset_cpus=cpu.cpus or None,
    )


def container_request(pod: PodRequest, container: api.Container) -> ContainerRequest:
    return ContainerRequest(
        pod=pod,
        name=container.name,
        id=container.id,
        cgroup_dir=cgroup_dir(container.linux.cgroups_path),
        resources=container_resources(container.linux.resources),
    )


@dataclass
class KnownPod:
    request: PodRequest
    containers: dict[str, ContainerRequest] = field(default_factory=dict)  # by container id


class PodStore:
    """Pods by sandbox id; see the module docstring.

    It also answers which cgroup driver the kubelet uses (``cgroup_driver``): the one configured
    (koordlet's ``--cgroup-driver``), else the one the pods' cgroup paths show (the runtime's own
    word), else the one whose kubepods directory exists under ``cgroup_root`` (the kubelet makes
    it at start, before any pod), else cgroupfs. The cgroupfs driver's kubepods directory is
    ``kube_dir`` (koordlet's ``--cgroup-kube-dir``), and ``kube_qos_dirs`` are below it.
    """

    def __init__(
        self,
        cgroup_driver: str = "",
        cgroup_root: Path | None = None,
        kube_dir: str = DEFAULT_KUBE_DIR,
    ) -> None:
        if cgroup_driver not in ("", *CGROUP_DRIVERS):
            raise ValueError(f"unknown cgroup driver {cgroup_driver!r}; one of {CGROUP_DRIVERS}")
        self.configured_driver = cgroup_driver
        self.cgroup_root = cgroup_root
        self.kube_dir = parse_kube_dir(kube_dir)
        self._qos_dirs = {driver: kube_qos_dirs(driver, self.kube_dir) for driver in CGROUP_DRIVERS}
        self._pods: dict[str, KnownPod] = {}
        self._specs: dict[str, PodSpecFacts] = {}  # by pod uid, from the kubelet's pod list
        self.generation = 0  # bumped on every change: cheap "did anything change?"
        self._snapshot: tuple[int, list[KnownPod]] = (-1, [])  # (generation, copies)
        self.pinned_generation = 0  # bumped when a pod with pinned CPUs comes or goes

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[KnownPod]:
        return iter(list(self._pods.values()))

    def put_pod(self, pod: api.PodSandbox) -> PodRequest:
        request = pod_request(pod)
        spec = self._specs.get(request.uid)
        if spec is not None:
            request = replace(request, spec=spec)
        known = self._pods.get(pod.id)
        before = (
            None
            if known is None
            else known.request.annotations.get(keys.ANNOTATION_RESOURCE_STATUS)
        )
        if request.annotations.get(keys.ANNOTATION_RESOURCE_STATUS) != before:
            self.pinned_generation += 1
        if known is None:
            self._pods[pod.id] = KnownPod(request)
        else:
            _set_request(known, request)
        self.generation += 1
        return request

    def snapshot(self) -> list[KnownPod]:
        """Copies of the known pods, safe to read from another thread (the collectors'), made
        once per change (every collector and strategy asks every second): readers share them
        and must not change them."""
        generation, copies = self._snapshot
        if generation != self.generation:
            generation = self.generation  # read first: a change during the copy bumps it again
            copies = [KnownPod(k.request, dict(k.containers)) for k in list(self._pods.values())]
            self._snapshot = (generation, copies)
        return list(copies)

    def pod(self, pod_id: str) -> KnownPod | None:
        return self._pods.get(pod_id)

    def remove_pod(self, pod_id: str) -> None:
        known = self._pods.pop(pod_id, None)
        if known is not None:
            self.generation += 1
            if keys.ANNOTATION_RESOURCE_STATUS in known.request.annotations:
                self.pinned_generation += 1

    def put_container(
        self,
        pod: api.PodSandbox,
        container: api.Container,
        resources: api.LinuxResources | None = None,
    ) -> ContainerRequest:
        """Record a container, with ``resources`` (an update's) instead of its own if given."""
        pod_req = self.put_pod(pod)  # the event's pod is the current one
        request = container_request(pod_req, container)
        if resources is not None:
            request = replace(request, resources=container_resources(resources))
        self._pods[pod.id].containers[container.id] = request
        self.generation += 1
        return request

    def remove_container(self, pod_id: str, container_id: str) -> None:
        known = self._pods.get(pod_id)
        if known is not None and known.containers.pop(container_id, None) is not None:
            self.generation += 1

    def cgroup_driver(self) -> str:
        """See the class docstring."""
        if self.configured_driver:
            return self.configured_driver
        for known in list(self._pods.values()):
            if known.request.cgroup_dir:
                return SYSTEMD if ".slice" in known.request.cgroup_dir else CGROUPFS
        root = self.cgroup_root
        found = driver_of_tree(root, self.kube_dir) if root is not None else None
        return found or CGROUPFS

    def kube_qos_dirs(self) -> dict[KubeQoS, str]:
        return self._qos_dirs[self.cgroup_driver()]

    def entries(self) -> list[tuple[str, KnownPod]]:
        """The known pods with their keys (sandbox ids, or another source's own keys)."""
        return list(self._pods.items())

    def put_known(self, pod_id: str, known: KnownPod) -> None:
        """Record a pod learned from elsewhere than NRI (the kubelet) under ``pod_id``."""
        before = self._pods.get(pod_id)
        had = before is not None and keys.ANNOTATION_RESOURCE_STATUS in before.request.annotations
        if had != (keys.ANNOTATION_RESOURCE_STATUS in known.request.annotations):
            self.pinned_generation += 1
        self._pods[pod_id] = known
        self.generation += 1

    def put_specs(self, specs: Mapping[str, PodSpecFacts]) -> int:
        """What the pods' specs say, by uid (the kubelet's list; NRI does not carry it): kept
        for pods NRI reports later and given to the known pods now. Returns how many changed."""
        self._specs = dict(specs)
        changed = 0
        for known in self._pods.values():
            spec = self._specs.get(known.request.uid)
            if spec is not None and known.request.spec != spec:
                _set_request(known, replace(known.request, spec=spec))
                changed += 1
        if changed:
            self.generation += 1
        return changed

    def put_container_request(self, pod_id: str, request: ContainerRequest) -> bool:
        """Add a container to a known pod; False when the pod is not known."""
        known = self._pods.get(pod_id)
        if known is None:
            return False
        known.containers[request.id] = request
        self.generation += 1
        return True

    def replace_all(self, pods: list[api.PodSandbox], containers: list[api.Container]) -> None:
        """Start over from a Synchronize: exactly these pods and their containers that have
        not stopped."""
        by_id = {p.id: p for p in pods}
        self._pods = {}
        self.pinned_generation += 1
        for pod in pods:
            self.put_pod(pod)
        for container in containers:
            owner = by_id.get(container.pod_sandbox_id)
            if owner is not None and container.state != api.CONTAINER_STOPPED:
                self.put_container(owner, container)
        self.generation += 1


def _set_request(known: KnownPod, request: PodRequest) -> None:
    known.request = request
    known.containers = {cid: replace(c, pod=request) for cid, c in known.containers.items()}


def parse_kube_dir(text: str) -> str:
    """--cgroup-kube-dir as a cgroup path relative to a hierarchy root, without the slashes
    at its ends ("/koordk8s/kubepods/" is "koordk8s/kubepods"); ValueError when it names no
    directory below the root ("", "/", a "." or ".." part)."""
    parts = [part for part in text.strip().split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise ValueError(
            f"not a cgroup directory below the hierarchy root: {text!r} "
            f"(e.g. {DEFAULT_KUBE_DIR!r}, or 'koordk8s/kubepods/' for cgroupRoot /koordk8s)"
        )
    return "/".join(parts)


def kube_qos_dirs(driver: str, kube_dir: str = DEFAULT_KUBE_DIR) -> dict[KubeQoS, str]:
    """The kubelet's QoS-level directories under ``driver`` ("systemd" or "cgroupfs"), the
    cgroupfs ones below ``kube_dir`` (--cgroup-kube-dir); the systemd ones are always under
    kubepods.slice, as in Koordinator."""
    if driver == SYSTEMD:
        top = _SYSTEMD_KUBE_DIR
        return {
            KubeQoS.GUARANTEED: top,
            KubeQoS.BURSTABLE: f"{top}/kubepods-burstable.slice",
            KubeQoS.BESTEFFORT: f"{top}/kubepods-besteffort.slice",
        }
    top = parse_kube_dir(kube_dir)
    return {
        KubeQoS.GUARANTEED: top,
        KubeQoS.BURSTABLE: f"{top}/burstable",
        KubeQoS.BESTEFFORT: f"{top}/besteffort",
    }


# The kubelet's QoS-level cgroups under each driver with the default --cgroup-kube-dir.
KUBE_QOS_DIRS_CGROUPFS: Mapping[KubeQoS, str] = MappingProxyType(kube_qos_dirs(CGROUPFS))
KUBE_QOS_DIRS_SYSTEMD: Mapping[KubeQoS, str] = MappingProxyType(kube_qos_dirs(SYSTEMD))


def drivers_in_tree(top: Path, kube_dir: str = DEFAULT_KUBE_DIR) -> set[str]:
    """The drivers whose kubepods directory exists under ``top`` (a hierarchy's root); the
    cgroupfs one is ``kube_dir`` (--cgroup-kube-dir)."""
    found = set()
    for driver in CGROUP_DRIVERS:
        if (top / kube_qos_dirs(driver, kube_dir)[KubeQoS.GUARANTEED]).is_dir():
            found.add(driver)
    return found


def driver_of_tree(cgroup_root: Path, kube_dir: str = DEFAULT_KUBE_DIR) -> str | None:
    """The driver whose kubepods directory exists (v2 root or the v1 cpu hierarchy), if one;
    systemd when both do, as Koordinator guesses."""
    for base in (cgroup_root, cgroup_root / "cpu"):
        found = drivers_in_tree(base, kube_dir)
        if found:
            return SYSTEMD if SYSTEMD in found else CGROUPFS
    return None
