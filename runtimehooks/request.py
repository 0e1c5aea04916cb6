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
from koordapi.qos import (
    KubeQoS,
    PriorityClass,
    QoSClass,
    default_qos_for_kube,
    kube_qos_from_cgroup_parent,
    priority_class_with_default,
    priority_value_with_default,
    qos_from_label,
)


class Stage(enum.StrEnum):
    """Koordinator's hook stages that have hooks, plus the reconciler's passes."""

    PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
    PRE_CREATE_CONTAINER = "PreCreateContainer"
    PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"
    PRE_REMOVE_POD_SANDBOX = "PreRemoveRunPodSandbox"
    RECONCILE_POD = "ReconcilePod"
    RECONCILE_CONTAINER = "ReconcileContainer"
    # the kube-QoS directories (kubepods, its burstable and besteffort children): Koordinator's
    # reconciler level KubeQOSLevel
    RECONCILE_KUBE_QOS = "ReconcileKubeQOS"


CONTAINER_STAGES = frozenset(
    {Stage.PRE_CREATE_CONTAINER, Stage.PRE_UPDATE_CONTAINER_RESOURCES, Stage.RECONCILE_CONTAINER}
)
# Hooks that set resources for pods and containers run at each of these.
RESOURCE_STAGES = frozenset({Stage.PRE_RUN_POD_SANDBOX, Stage.RECONCILE_POD}) | CONTAINER_STAGES


@dataclass(frozen=True)
class PodSpecFacts:
    """What only the pod's spec says; the runtime is not told it, so koordlet knows it only in
    cluster mode (the kubelet's pod list)."""

    priority: int | None = None  # spec.priority
    memory_request: int = 0  # the pod's effective memory request (Kubernetes' rule), bytes
    container_memory_requests: Mapping[str, int] = field(default_factory=dict)  # by name
    # the peak predictor's (koordlet.prediction): cpu request (milli-cores, Kubernetes' rule),
    # metadata.creationTimestamp (unix seconds) and whether the pod is deleted or finished
    cpu_request: int = 0
    created: float | None = None
    terminating: bool = False


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
    spec: PodSpecFacts | None = None  # None where the spec is not known (standalone)

    @cached_property
    def qos(self) -> QoSClass:
        return qos_from_label(self.labels.get(keys.LABEL_QOS_CLASS))

    @cached_property
    def kube_qos(self) -> KubeQoS:
        return kube_qos_from_cgroup_parent(self.cgroup_dir)

    @cached_property
    def qos_with_default(self) -> QoSClass:
        """The label's class, else the one the Kubernetes QoS class implies."""
        return self.qos if self.qos is not QoSClass.NONE else default_qos_for_kube(self.kube_qos)

    @cached_property
    def priority(self) -> int:
        """Koordinator's priority value with defaults (see priority_value_with_default)."""
        return priority_value_with_default(
            self.spec_priority, self.labels.get(keys.LABEL_PRIORITY_CLASS), self.qos_with_default
        )

    @cached_property
    def priority_class(self) -> PriorityClass:
        """Koordinator's priority class with defaults (see priority_class_with_default)."""
        return priority_class_with_default(
            self.labels.get(keys.LABEL_PRIORITY_CLASS), self.spec_priority, self.qos_with_default
        )

    @property
    def spec_priority(self) -> int | None:
        return None if self.spec is None else self.spec.priority

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
