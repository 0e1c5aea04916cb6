"""What the hooks are asked about: a pod or a container, protocol-neutral and frozen.

The NRI server, the reconciler and the tests build these from whatever they have (NRI
messages, known pods, plain data); hooks never see NRI types or files.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from koordapi import keys
from koordapi.qos import KubeQoS, QoSClass, kube_qos_from_cgroup_parent, qos_from_label


class Stage(enum.StrEnum):
    """Koordinator's hook stages that have hooks, plus the reconciler's passes."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"
    PRE_REMOVE_POD_SANDBOX = "PreRemoveRunPodSandbox"
    RECONCILE_POD = "ReconcilePod"
    RECONCILE_CONTAINER = "ReconcileContainer"


CONTAINER_STAGES = frozenset(
    {Stage.PRE_CREATE_CONTAINER, Stage.PRE_UPDATE_CONTAINER_RESOURCES, Stage.RECONCILE_CONTAINER}
)
# Hooks that set resources for pods and containers run at each of these.
RESOURCE_STAGES = frozenset({Stage.PRE_RUN_POD_SANDBOX, Stage.RECONCILE_POD}) | CONTAINER_STAGES


@dataclass(frozen=True)
class PodRequest:
    """A pod sandbox: identity, labels, annotations and its cgroup directory.

    ``cgroup_dir`` is the pod's cgroup relative to a hierarchy root (``kubepods/burstable/
    pod<uid>``); the kubelet passes it to the runtime as the sandbox's cgroup parent.
    """

    uid: str
    name: str = ""
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    cgroup_dir: str = ""
    runtime_handler: str = ""
    cpu_quota: int | None = None  # pod-level CFS quota, where the runtime reports one

    @cached_property
    def qos(self) -> QoSClass:
        return qos_from_label(self.labels.get(keys.LABEL_QOS_CLASS))

    @cached_property
    def kube_qos(self) -> KubeQoS:
        return kube_qos_from_cgroup_parent(self.cgroup_dir)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ContainerResources:
    """Linux resources the runtime was asked for (None: not given)."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None
    cpuset_cpus: str | None = None


@dataclass(frozen=True)
class ContainerRequest:
    pod: PodRequest
    name: str
    id: str = ""
    cgroup_dir: str = ""  # relative to a hierarchy root, like the pod's
    resources: ContainerResources = field(default_factory=ContainerResources)
    sandbox: bool = False  # the pod's pause container (reconciler only)

    @property
    def key(self) -> str:
        return f"{self.pod.namespace}/{self.pod.name}/{self.name}"
