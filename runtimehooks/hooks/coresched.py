"""CoreSched: Linux core scheduling cookies per pod group, with cgroup idle for batch.

Active when the NodeSLO cpuPolicy is ``coreSched``. Containers of a group share a core
scheduling cookie (prctl PR_SCHED_CORE), so tasks of different groups never run on the two
hyper-threads of one core at once; expeller classes (LS/LSR by default) get their own
"-expeller" group. The group is the ``koordinator.sh/core-sched-group-id`` label (default ""),
the pod uid with policy ``exclusive``; policy ``none`` or a disabled class means cookie 0.
Kube-QoS directories of a class with schedIdle=1 get cpu.idle=1.
"""

from __future__ import annotations

from koordapi import features, keys
from koordapi.nodeslo import CPU_POLICY_CORE_SCHED
from koordapi.qos import KubeQoS, QoSClass
from runtimehooks.patch import ContainerPatch, CoreSchedGroup, PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules

EXPELLER_SUFFIX = "-expeller"


def class_of(pod: PodRequest, rules: Rules) -> QoSClass | None:
    """The class whose cpuQOS applies; Guaranteed pods take LSR's when it is on, else LS's."""
    qos = pod.qos
    if qos is QoSClass.LSE:
        return QoSClass.LSR
    if qos is not QoSClass.NONE:
        return qos
    if pod.kube_qos is KubeQoS.GUARANTEED:
        return QoSClass.LSR if rules.slo.cpu_qos(QoSClass.LSR).enable else QoSClass.LS
    return QoSClass.LS if pod.kube_qos is KubeQoS.BURSTABLE else QoSClass.BE


def group(pod: PodRequest, rules: Rules) -> CoreSchedGroup | None:
    """The pod's core-sched group (disabled: cookie 0), None when the rule is off or SYSTEM."""
    if rules.slo.cpu_policy != CPU_POLICY_CORE_SCHED or pod.qos is QoSClass.SYSTEM:
        return None
    qos = class_of(pod, rules)
    cfg = rules.slo.cpu_qos(qos) if qos is not None else None
    policy = pod.labels.get(keys.LABEL_CORE_SCHED_POLICY, "")
    if cfg is None or not cfg.enable or policy == "none":
        return CoreSchedGroup(enabled=False)
    name = pod.uid if policy == "exclusive" else pod.labels.get(keys.LABEL_CORE_SCHED_GROUP_ID, "")
    return CoreSchedGroup(True, name + EXPELLER_SUFFIX if cfg.core_expeller else name)


def kube_qos_idle(rules: Rules) -> dict[KubeQoS, int] | None:
    """cpu.idle of the kube-QoS directories: 1 where that class runs as SCHED_IDLE."""
    if rules.slo.cpu_policy != CPU_POLICY_CORE_SCHED:
        return None
    lsr, ls, be = (rules.slo.cpu_qos(q) for q in (QoSClass.LSR, QoSClass.LS, QoSClass.BE))
    guaranteed = lsr if lsr.enable else ls
    return {
        KubeQoS.GUARANTEED: int(guaranteed.enable and guaranteed.sched_idle == 1),
        KubeQoS.BURSTABLE: int(ls.enable and ls.sched_idle == 1),
        KubeQoS.BESTEFFORT: int(be.enable and be.sched_idle == 1),
    }


def container(req: ContainerRequest, rules: Rules, stage: Stage) -> ContainerPatch | None:
    if not rules.kernel.core_sched:
        return None  # koordlet reports once that the kernel has no core scheduling
    found = group(req.pod, rules)
    return None if found is None else ContainerPatch(core_sched=found)


def kube_qos(kube: KubeQoS, rules: Rules, stage: Stage) -> PodPatch | None:
    """cpu.idle of a kube-QoS directory, where the kernel has it; never on the kubepods root
    (Guaranteed), where it would idle every pod."""
    idle = kube_qos_idle(rules)
    if idle is None or not rules.kernel.cpu_idle or kube is KubeQoS.GUARANTEED:
        return None
    return PodPatch(cpu_idle=idle[kube])


HOOK = Hook(
    name="CoreSched",
    gate=features.CORE_SCHED,
    stages=frozenset({Stage.RECONCILE_CONTAINER, Stage.RECONCILE_KUBE_QOS}),
    container=container,
    kube_qos=kube_qos,
)
