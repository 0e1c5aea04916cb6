"""A small CRI (runtime.v1) client over grpcio, driving containerd the way the kubelet does.

NRI events only fire for containers created through CRI, so every e2e test goes through here.
The generated stubs come from Debian's cri-api package (see ``crigen``); this module only adds
the calls the tests need, pod specs shaped like the kubelet's, and waiting through restarts.

Usage::

    cri = CriClient(layout.address)
    pod = PodSpec.new(qos="burstable", labels={"koordinator.sh/qosClass": "LS"})
    pod_id = cri.run_pod(pod)
    cid = cri.create_container(pod_id, pod, ContainerSpec("app", cpu_shares=512))
    cri.start_container(cid)
"""

from __future__ import annotations

import importlib
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from tests.e2e.harness import images, paths
from tests.e2e.harness.kubelet import KubeletLayout, layout_from_env
from tests.e2e.harness.timing import deadline, scaled


@dataclass
class PodSpec:
    """A pod as the kubelet would describe it to CRI (host network, its driver's cgroup parent)."""

    name: str
    uid: str
    qos: str = "burstable"
    namespace: str = "default"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    host_network: bool = True
    host_pid: bool = False
    # Set by the kubelet when any container of the pod is privileged.
    privileged: bool = False
    layout: KubeletLayout = field(default_factory=layout_from_env)

    @classmethod
    def new(cls, name: str | None = None, **kwargs: Any) -> PodSpec:
        uid = str(uuid.uuid4())
        return cls(name=name or f"e2e-{uid[:8]}", uid=uid, **kwargs)

    @property
    def cgroup_parent(self) -> str:
        """What CRI is told: a cgroupfs path or a systemd slice name."""
        return self.layout.pod_parent(self.qos, self.uid)

    @property
    def cgroup_dir(self) -> str:
        """The pod's cgroup under a hierarchy root."""
        return self.layout.pod_dir(self.qos, self.uid)


@dataclass(frozen=True)
class Mount:
    """A bind mount as the kubelet passes it; ``propagation`` is a volumeMount's
    mountPropagation (None, HostToContainer or Bidirectional)."""

    host_path: Path
    container_path: str
    readonly: bool = False
    propagation: str = "None"


# Kubernetes' mountPropagation names and CRI's MountPropagation values.
PROPAGATION = {
    "None": "PROPAGATION_PRIVATE",
    "HostToContainer": "PROPAGATION_HOST_TO_CONTAINER",
    "Bidirectional": "PROPAGATION_BIDIRECTIONAL",
}


@dataclass
class ContainerSpec:
    """A container and the resources the kubelet would pass (None: not set)."""

    name: str
    image: str = images.WORKLOAD.ref
    command: list[str] = field(default_factory=lambda: ["/bin/sleep", "infinity"])
    args: list[str] = field(default_factory=list)
    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    privileged: bool = False
    run_as_user: int | None = None
    run_as_group: int | None = None
    readonly_rootfs: bool = False
    # capabilities to drop ("ALL" or names without CAP_), as securityContext.capabilities.drop
    drop_capabilities: list[str] = field(default_factory=list)
    # the pod's fsGroup and supplementalGroups, which the kubelet gives every container
    supplemental_groups: list[int] = field(default_factory=list)
    no_new_privs: bool = False  # allowPrivilegeEscalation: false
    # seccompProfile RuntimeDefault (containerd's default profile); False: unconfined, as the
    # kubelet asks when the pod names no profile
    seccomp_runtime_default: bool = False
    # the kubelet's restart count: 0 for the first container of this name in the pod
    attempt: int = 0

    @property
    def log_name(self) -> str:
        """Its log file in the pod's log folder (one per attempt, as the kubelet keeps them)."""
        return f"{self.name}.log" if self.attempt == 0 else f"{self.name}_{self.attempt}.log"

    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None
    cpuset_cpus: str | None = None
    cpuset_mems: str | None = None


def load_stubs() -> tuple[ModuleType, ModuleType]:
    """Import the generated ``cri_v1.api_pb2`` and ``cri_v1.api_pb2_grpc`` modules."""
    gen = paths.require(paths.CRI_STUBS_DIR / "gen" / "cri_v1" / "api_pb2.py", "CRI stubs")
    root = str(gen.parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module("cri_v1.api_pb2"), importlib.import_module("cri_v1.api_pb2_grpc")


def linux_resources(pb: ModuleType, spec: ContainerSpec) -> Any:
    """``LinuxContainerResources`` with only the fields ``spec`` sets."""
    values = {
        "cpu_shares": spec.cpu_shares,
        "cpu_quota": spec.cpu_quota,
        "cpu_period": spec.cpu_period,
        "memory_limit_in_bytes": spec.memory_limit,
        "cpuset_cpus": spec.cpuset_cpus,
        "cpuset_mems": spec.cpuset_mems,
    }
    return pb.LinuxContainerResources(**{k: v for k, v in values.items() if v is not None})


class CriClient:
    """Blocking CRI calls on one channel; gRPC reconnects by itself after a restart."""

    def __init__(self, address: Path, timeout: float = 30.0) -> None:
        self.pb, grpc_mod = load_stubs()
        self.address = address
        self.timeout = scaled(timeout)
        self.channel = grpc.insecure_channel(f"unix://{address}")
        self.runtime = grpc_mod.RuntimeServiceStub(self.channel)
        self.images = grpc_mod.ImageServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def _call(self, method: Any, request: Any) -> Any:
        # wait_for_ready: a call made while containerd restarts waits for it instead of failing.
        return method(request, timeout=self.timeout, wait_for_ready=True)

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Block until CRI answers Version and reports itself ready; return the runtime version."""
        end = deadline(timeout)
        last: Exception | None = None
        while time.monotonic() < end:
            try:
                version = self.runtime.Version(
                    self.pb.VersionRequest(), timeout=scaled(2.0), wait_for_ready=True
                )
                status = self.runtime.Status(self.pb.StatusRequest(), timeout=scaled(2.0))
                if all(c.status for c in status.status.conditions if c.type == "RuntimeReady"):
                    return str(version.runtime_version)
            except grpc.RpcError as err:
                last = err
            time.sleep(0.1)
        raise TimeoutError(f"CRI at {self.address} not ready within {scaled(timeout):g}s: {last}")

    # -- pods ---------------------------------------------------------------------------------

    def namespace_options(self, pod: PodSpec) -> Any:
        pb = self.pb
        return pb.NamespaceOption(
            network=pb.NamespaceMode.NODE if pod.host_network else pb.NamespaceMode.POD,
            pid=pb.NamespaceMode.NODE if pod.host_pid else pb.NamespaceMode.CONTAINER,
        )

    def sandbox_config(self, pod: PodSpec, log_dir: Path | None = None) -> Any:
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(
                name=pod.name, uid=pod.uid, namespace=pod.namespace, attempt=0
            ),
            hostname="" if pod.host_network else pod.name,  # host network: no UTS ns
            log_directory=str(log_dir / pod.uid) if log_dir else "",
            labels=pod.labels,
            annotations=pod.annotations,
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=pod.cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=self.namespace_options(pod), privileged=pod.privileged
                ),
            ),
        )

    def run_pod(self, pod: PodSpec, log_dir: Path | None = None) -> str:
        request = self.pb.RunPodSandboxRequest(config=self.sandbox_config(pod, log_dir))
        return str(self._call(self.runtime.RunPodSandbox, request).pod_sandbox_id)

    def stop_pod(self, pod_id: str) -> None:
        self._call(
            self.runtime.StopPodSandbox, self.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id)
        )

    def remove_pod(self, pod_id: str) -> None:
        self._call(
            self.runtime.RemovePodSandbox, self.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id)
        )

    def pod_ip(self, pod_id: str) -> str:
        """The sandbox's address on the pod network ("" on the host network)."""
        request = self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id)
        return str(self._call(self.runtime.PodSandboxStatus, request).status.network.ip)

    def list_pods(self) -> list[Any]:
        return list(self._call(self.runtime.ListPodSandbox, self.pb.ListPodSandboxRequest()).items)

    # -- containers ---------------------------------------------------------------------------

    def create_container(
        self, pod_id: str, pod: PodSpec, spec: ContainerSpec, log_dir: Path | None = None
    ) -> str:
        pb = self.pb
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=spec.name, attempt=spec.attempt),
            image=pb.ImageSpec(image=spec.image),
            command=spec.command,
            args=spec.args,
            envs=[pb.KeyValue(key=k, value=v) for k, v in spec.envs.items()],
            mounts=[
                pb.Mount(
                    host_path=str(m.host_path),
                    container_path=m.container_path,
                    readonly=m.readonly,
                    propagation=pb.MountPropagation.Value(PROPAGATION[m.propagation]),
                )
                for m in spec.mounts
            ],
            labels=spec.labels,
            annotations=spec.annotations,
            log_path=spec.log_name,
            linux=pb.LinuxContainerConfig(
                resources=linux_resources(pb, spec),
                security_context=self.container_security(pod, spec),
            ),
        )
        request = pb.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=config, sandbox_config=self.sandbox_config(pod, log_dir)
        )
        return str(self._call(self.runtime.CreateContainer, request).container_id)

    def container_security(self, pod: PodSpec, spec: ContainerSpec) -> Any:
        """The container's LinuxContainerSecurityContext, the pod's namespaces repeated in it as
        the kubelet does."""
        pb = self.pb
        context = pb.LinuxContainerSecurityContext(
            namespace_options=self.namespace_options(pod),
            privileged=spec.privileged,
            readonly_rootfs=spec.readonly_rootfs,
            capabilities=pb.Capability(drop_capabilities=spec.drop_capabilities),
            supplemental_groups=spec.supplemental_groups,
            no_new_privs=spec.no_new_privs,
        )
        if spec.seccomp_runtime_default:
            context.seccomp.CopyFrom(
                pb.SecurityProfile(profile_type=pb.SecurityProfile.ProfileType.RuntimeDefault)
            )
        if spec.run_as_user is not None:
            context.run_as_user.value = spec.run_as_user
        if spec.run_as_group is not None:
            context.run_as_group.value = spec.run_as_group
        return context

    def start_container(self, container_id: str) -> None:
        self._call(
            self.runtime.StartContainer, self.pb.StartContainerRequest(container_id=container_id)
        )

    def update_resources(self, container_id: str, spec: ContainerSpec) -> None:
        request = self.pb.UpdateContainerResourcesRequest(
            container_id=container_id, linux=linux_resources(self.pb, spec)
        )
        self._call(self.runtime.UpdateContainerResources, request)

    def stop_container(self, container_id: str, timeout_s: int = 0) -> None:
        request = self.pb.StopContainerRequest(container_id=container_id, timeout=timeout_s)
        self._call(self.runtime.StopContainer, request)

    def remove_container(self, container_id: str) -> None:
        self._call(
            self.runtime.RemoveContainer, self.pb.RemoveContainerRequest(container_id=container_id)
        )

    def list_containers(self, pod_id: str | None = None) -> list[Any]:
        request = self.pb.ListContainersRequest()
        if pod_id is not None:
            request.filter.pod_sandbox_id = pod_id
        return list(self._call(self.runtime.ListContainers, request).containers)

    def container_status(self, container_id: str) -> Any:
        request = self.pb.ContainerStatusRequest(container_id=container_id, verbose=True)
        return self._call(self.runtime.ContainerStatus, request)

    def container_pid(self, container_id: str) -> int:
        """The container's init pid, from the verbose status info containerd returns."""
        info = self.container_status(container_id).info.get("info", "{}")
        return int(json.loads(info).get("pid", 0))

    def remove_all_pods(self) -> None:
        """Stop and remove every sandbox this containerd knows (with their containers)."""
        for pod in self.list_pods():
            self.stop_pod(pod.id)
            self.remove_pod(pod.id)
