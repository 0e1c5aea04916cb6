"""QoS classes and priority classes, and how Koordinator derives them.

A pod's QoS class is its ``koordinator.sh/qosClass`` label (LSE, LSR, LS, BE, SYSTEM); any
other value or no label means NONE, and the Kubernetes QoS class (from the pod's cgroup
parent) then decides where Koordinator needs a class.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass


class QoSClass(enum.StrEnum):
    LSE = "LSE"  # latency-sensitive exclusive: pinned CPUs nobody else uses
    LSR = "LSR"  # latency-sensitive reserved: pinned CPUs
    LS = "LS"  # latency-sensitive: the shared pool
    BE = "BE"  # best effort: batch resources
    SYSTEM = "SYSTEM"
    NONE = ""


class KubeQoS(enum.StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


def qos_from_label(value: str | None) -> QoSClass:
    """The class a label value names; NONE for no label or a value Koordinator does not know."""
    if value is None:
        return QoSClass.NONE
    try:
        return QoSClass(value)
    except ValueError:
        return QoSClass.NONE


def is_known_qos_label(value: str) -> bool:
    return value in {q.value for q in QoSClass if q is not QoSClass.NONE}


def kube_qos_from_cgroup_parent(parent: str) -> KubeQoS:
    """Koordinator's rule: "besteffort" in the path → BestEffort, "burstable" → Burstable."""
    lowered = parent.lower()
    if "besteffort" in lowered:
        return KubeQoS.BESTEFFORT
    if "burstable" in lowered:
        return KubeQoS.BURSTABLE
    return KubeQoS.GUARANTEED


def default_qos_for_kube(kube: KubeQoS) -> QoSClass:
    """The class of a pod without the label: Guaranteed→LSR, Burstable→LS, BestEffort→BE."""
    return {
        KubeQoS.GUARANTEED: QoSClass.LSR,
        KubeQoS.BURSTABLE: QoSClass.LS,
        KubeQoS.BESTEFFORT: QoSClass.BE,
    }[kube]


@dataclass(frozen=True)
class PriorityClass:
    name: str
    low: int
    high: int
    default: int

    def contains(self, priority: int) -> bool:
        return self.low <= priority <= self.high


PROD = PriorityClass("koord-prod", 9000, 9999, 9500)
MID = PriorityClass("koord-mid", 7000, 7999, 7500)
BATCH = PriorityClass("koord-batch", 5000, 5999, 5500)
FREE = PriorityClass("koord-free", 3000, 3999, 3500)
NONE_PRIORITY = PriorityClass("", 0, -1, 0)
PRIORITY_CLASSES = (PROD, MID, BATCH, FREE)


_CLASS_BY_NAME = {pc.name: pc for pc in PRIORITY_CLASSES}


def priority_class_by_name(name: str | None) -> PriorityClass:
    """Koordinator's GetPodPriorityClassByName: the class ``name`` names; NONE for any other
    name (the empty one too)."""
    return _CLASS_BY_NAME.get(name, NONE_PRIORITY) if name else NONE_PRIORITY


@functools.lru_cache(maxsize=256)
def priority_class_by_value(priority: int | None) -> PriorityClass:
    """The class whose range holds ``priority`` (Koordinator's getPriorityClassByPriority);
    NONE outside every range or for no priority."""
    if priority is not None:
        for pc in PRIORITY_CLASSES:
            if pc.contains(priority):
                return pc
    return NONE_PRIORITY


def default_priority_class_for_qos(qos: QoSClass) -> PriorityClass:
    if qos in (QoSClass.SYSTEM, QoSClass.LSE, QoSClass.LSR, QoSClass.LS):
        return PROD
    if qos is QoSClass.BE:
        return BATCH
    return NONE_PRIORITY


def raw_priority_class(label: str | None, priority: int | None) -> PriorityClass:
    """Koordinator's GetPodPriorityClassRaw: the priority-class label when the pod has one,
    whatever ``spec.priority`` says (an unknown name is no class, with no fallback), else the
    class ``spec.priority`` falls in. ``label`` is None when the pod has no such label."""
    if label is not None:
        return _CLASS_BY_NAME.get(label, NONE_PRIORITY)
    return priority_class_by_value(priority)


def priority_class_with_default(
    label: str | None, priority: int | None, qos: QoSClass
) -> PriorityClass:
    """Koordinator's GetPodPriorityClassWithDefault: ``raw_priority_class``, else the class the
    pod's QoS class implies (LS kinds → koord-prod, BE → koord-batch). ``qos`` is the class with
    the Kubernetes default already applied."""
    found = raw_priority_class(label, priority)
    return found if found is not NONE_PRIORITY else default_priority_class_for_qos(qos)


def priority_value_with_default(priority: int | None, label: str | None, qos: QoSClass) -> int:
    """Koordinator's GetPodPriorityValueWithDefault, what eviction compares with its priority
    thresholds: a non-zero ``spec.priority``, else the default value of
    ``priority_class_with_default`` (9500 prod, 7500 mid, 5500 batch, 3500 free, 0 none). Where
    ``spec.priority`` is not known (standalone) this is the class's default."""
    if priority:
        return priority
    return priority_class_with_default(label, priority, qos).default
