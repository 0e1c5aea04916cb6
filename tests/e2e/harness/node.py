"""A test node: a private containerd, a CRI client, a cgroup reader, and full teardown.

The e2e fixtures, the demo and the benchmarks all drive containerd through this one object, so
what they create is tracked in one place and removed in one place.

Usage::

    node = Node.start()
    try:
        pod = PodSpec.new(qos="burstable")
        pod_id = node.run_pod(pod)
        cid = node.run_container(pod_id, ContainerSpec("app", cpu_quota=50000))
        print(node.container_values(pod_id, cid))
    finally:
        problems = node.teardown()     # [] when nothing was left behind
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

import grpc

from tests.e2e.harness.cgroups import CgroupJanitor, CgroupReader, CgroupValues
from tests.e2e.harness.containerd import Containerd, Settings
from tests.e2e.harness.cri import ContainerSpec, CriClient, PodSpec
from tests.e2e.harness.kubelet import Slices
from tests.e2e.harness.timing import deadline

log = logging.getLogger(__name__)


class Node:
    """See the module docstring."""

    def __init__(self, containerd: Containerd, reader: CgroupReader | None = None) -> None:
        self.containerd = containerd
        self.reader = reader or CgroupReader()
        self.layout = containerd.settings.layout
        self.janitor = CgroupJanitor(self.reader, self.layout.qos_dirs())
        # With the systemd driver the kubelet makes the QoS and pod slices; here the harness.
        self.slices = Slices() if self.layout.systemd else None
        self.cri = CriClient(containerd.layout.address)
        self.pods: dict[str, PodSpec] = {}
        self._problems: list[str] | None = None  # set once torn down

    @classmethod
    def start(cls, settings: Settings | None = None, parent: Path | None = None) -> Node:
        """Start a private containerd and wait until CRI is ready."""
        containerd = Containerd.create(settings, parent)
        try:
            containerd.start()
            node = cls(containerd)
            node.cri.wait_ready()
        except BaseException:
            containerd.cleanup()
            raise
        return node

    @property
    def log_dir(self) -> Path:
        return self.containerd.layout.pod_logs

    def restart_containerd(self) -> None:
        """Restart containerd on the same root and state and wait until CRI answers again."""
        self.containerd.restart()
        self.cri.wait_ready()

    # -- workloads ----------------------------------------------------------------------------

    def run_pod(self, pod: PodSpec) -> str:
        if pod.layout != self.layout:
            raise ValueError(f"{pod.name} is laid out for {pod.layout.driver}, not this node")
        self.janitor.track(pod.cgroup_dir)
        if self.slices is not None:
            self.slices.start_pod(pod.cgroup_parent)
        pod_id = self.cri.run_pod(pod, self.log_dir)
        self.pods[pod_id] = pod
        return pod_id

    def create_container(self, pod_id: str, spec: ContainerSpec) -> str:
        return self.cri.create_container(pod_id, self.pods[pod_id], spec, self.log_dir)

    def run_container(self, pod_id: str, spec: ContainerSpec) -> str:
        container_id = self.create_container(pod_id, spec)
        self.cri.start_container(container_id)
        return container_id

    def remove_pod(self, pod_id: str) -> None:
        self.cri.stop_pod(pod_id)
        self.cri.remove_pod(pod_id)

    def container_cgroup(self, pod_id: str, container_id: str) -> str:
        """The container's cgroup (cgroupfs: pod/<id>; systemd: pod/cri-containerd-<id>.scope)."""
        return self.layout.container_dir(self.pods[pod_id].cgroup_dir, container_id)

    def container_values(self, pod_id: str, container_id: str) -> CgroupValues:
        return self.reader.values(self.container_cgroup(pod_id, container_id))

    def pod_values(self, pod_id: str) -> CgroupValues:
        return self.reader.values(self.pods[pod_id].cgroup_dir)

    # -- teardown -----------------------------------------------------------------------------

    def teardown(self) -> list[str]:
        """Remove every sandbox, stop containerd, remove the cgroups this node created.

        Calling it again returns the first call's result and does nothing more.

        Returns what was left behind (empty on success): sandboxes containerd still lists,
        processes still in the pods' cgroups, cgroups that could not be removed, and anything
        the containerd cleanup could not release.
        """
        if self._problems is not None:
            return self._problems
        problems: list[str] = []
        try:
            self.cri.remove_all_pods()
            left = self.cri.list_pods()
            if left:
                problems.append(f"sandboxes left: {[p.id for p in left]}")
        except grpc.RpcError as err:
            problems.append(f"could not remove sandboxes through CRI: {err}")
        self.cri.close()
        problems += self.containerd.cleanup()
        for cgroup in self.janitor.pods:
            pids = self._wait_empty(cgroup)
            if pids:
                # Only processes in the cgroups this node created: ours to end.
                problems.append(f"processes left in {cgroup}: {sorted(pids)}")
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self._wait_empty(cgroup)
        if self.slices is not None:
            problems += self.slices.stop_all()
        problems += self.janitor.cleanup()
        problems += [f"cgroup left: {c}" for c in self.janitor.leftovers()]
        self._problems = problems
        return problems

    def _wait_empty(self, cgroup: str, timeout: float = 5.0) -> set[int]:
        """Pids still in ``cgroup`` after waiting up to ``timeout`` for exiting tasks."""
        end = deadline(timeout)
        pids = self.reader.procs(cgroup)
        while pids and time.monotonic() < end:
            time.sleep(0.05)
            pids = self.reader.procs(cgroup)
        return pids
