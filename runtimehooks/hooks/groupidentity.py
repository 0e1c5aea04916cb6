"""GroupIdentity: CPU priority of a pod relative to others, from its QoS class.

Koordinator writes ``cpu.bvt_warp_ns`` (Anolis kernels). On mainline kernels, where that file
does not exist, we use ``cpu.idle`` (SCHED_IDLE cgroups, Linux >= 5.15): a negative
group-identity value (BE by default) becomes cpu.idle=1, so batch work yields to services;
everything else gets 0. Nothing is written while LSR, LS and BE all have cpuQOS disabled
(systemClass.cpuQOS is not read, as in Koordinator: SYSTEM pods go by their Kubernetes QoS).
"""

from __future__ import annotations

from koordapi import annotation, features, keys
from koordapi.nodeslo import CPU_POLICY_GROUP_IDENTITY
from koordapi.qos import KubeQoS, QoSClass
from runtimehooks.patch import PodPatch
from runtimehooks.registry import Hook
from runtimehooks.request import PodRequest, Stage
from runtimehooks.rules import Rules


def pod_value(pod: PodRequest, rules: Rules) -> int | None:
    """The pod's group-identity value (Koordinator's lookup), or None when the rule is off."""
    slo = rules.slo
    if slo.cpu_policy != CPU_POLICY_GROUP_IDENTITY:
        return None
    cfg = {q: slo.cpu_qos(q) for q in (QoSClass.LSR, QoSClass.LS, QoSClass.BE)}
    if not any(c.enable for c in cfg.values()):  # systemClass is not read (as Koordinator)
        return None
    qos = pod.qos
    if qos in (QoSClass.LSE, QoSClass.LSR):
        value = cfg[QoSClass.LSR].group_identity
    elif qos is QoSClass.LS:
        value = cfg[QoSClass.LS].group_identity
    elif qos is QoSClass.BE:
        value = cfg[QoSClass.BE].group_identity
    else:  # SYSTEM or no label: by the Kubernetes QoS class
        kube = pod.kube_qos
        if kube is KubeQoS.GUARANTEED:
            if cfg[QoSClass.LSR].enable:
                value = cfg[QoSClass.LSR].group_identity
            elif cfg[QoSClass.LS].enable:
                value = cfg[QoSClass.LS].group_identity
            else:
                value = 0
        elif kube is KubeQoS.BURSTABLE:
            value = cfg[QoSClass.LS].group_identity
        else:
            value = cfg[QoSClass.BE].group_identity
    if qos is QoSClass.LS and keys.ANNOTATION_CPU_QOS in pod.annotations:
        override = annotation.parse_pod_cpu_qos(pod.annotations[keys.ANNOTATION_CPU_QOS])
        if not override.enable:
            value = 0
        elif override.group_identity is not None:
            value = override.group_identity
    return value


def kube_qos_values(rules: Rules) -> dict[KubeQoS, int] | None:
    """Values of the kube-QoS directories: Guaranteed (kubepods) 0, burstable LS, besteffort BE."""
    slo = rules.slo
    if slo.cpu_policy != CPU_POLICY_GROUP_IDENTITY:
        return None
    if not any(slo.cpu_qos(q).enable for q in (QoSClass.LSR, QoSClass.LS, QoSClass.BE)):
        return None
    return {
        KubeQoS.GUARANTEED: 0,
        KubeQoS.BURSTABLE: slo.cpu_qos(QoSClass.LS).group_identity,
        KubeQoS.BESTEFFORT: slo.cpu_qos(QoSClass.BE).group_identity,
    }


def to_patch(value: int, rules: Rules) -> PodPatch | None:
    """The value in the kernel's terms: bvt where it exists, else cpu.idle (negative → idle)."""
    mechanism = rules.kernel.group_identity_mechanism
    if mechanism == "bvt":
        return PodPatch(cpu_bvt_warp_ns=value)
    if mechanism == "cpu.idle":
        return PodPatch(cpu_idle=1 if value < 0 else 0)
    return None


def pod(req: PodRequest, rules: Rules, stage: Stage) -> PodPatch | None:
    value = pod_value(req, rules)
    return None if value is None else to_patch(value, rules)


def kube_qos(kube: KubeQoS, rules: Rules, stage: Stage) -> PodPatch | None:
    """A kube-QoS directory's value; cpu.idle never on the kubepods root (Guaranteed), where it
    would idle every pod."""
    values = kube_qos_values(rules)
    patch = None if values is None else to_patch(values[kube], rules)
    if patch is not None and patch.cpu_idle is not None and kube is KubeQoS.GUARANTEED:
        return None
    return patch


HOOK = Hook(
    name="GroupIdentity",
    gate=features.GROUP_IDENTITY,
    stages=frozenset({Stage.PRE_RUN_POD_SANDBOX, Stage.RECONCILE_POD, Stage.RECONCILE_KUBE_QOS}),
    pod=pod,
    kube_qos=kube_qos,
)
