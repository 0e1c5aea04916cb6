"""What the formulas need from each pod: its key, Koordinator priority class, whether it is
LSE, and its effective request (milli-cores, bytes).

Only Running and Pending pods are read (a pod without a phase yet counts, to stay on the safe
side). A pod whose resources do not parse is left out with a note; its usage still counts
through NodeMetric as a "dangling" pod metric, by its reported priority. The API server
validates pod quantities, so that only happens with hand-made objects.

Pods are plain tuples, not named ones: a reconcile reads a hundred per node, and building a
NamedTuple costs more than reading the pod.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from koordapi import keys, qos
from koordapi.errors import ModelError
from koordapi.quantity import parse_quantity
from manager.noderesource.amounts import Pair, milli, units

PRIORITY_PROD = qos.PROD.name
PRIORITY_MID = qos.MID.name
PRIORITY_BATCH = qos.BATCH.name
PRIORITY_FREE = qos.FREE.name

PodView = tuple[str, str, bool, int, int]
"""(namespace/name, priority class name or "", is LSE, cpu request milli-cores, memory
request bytes): one Running or Pending pod. LSE pods' CPU counts at the request; batch and
free pods' requests are not read (0)."""

_ACTIVE_PHASES = ("Running", "Pending", None)
_CLASS_NAMES = frozenset(pc.name for pc in qos.PRIORITY_CLASSES)
_EMPTY: Mapping[str, Any] = {}


# Requests repeat across pods ("500m", "1Gi"), so their values are memoized in bounded tables
# (filled up to the bound, never evicted: the common values come first). Only text keys are
# stored; any other key misses and goes through the checking parser.
_MEMO_LIMIT = 4096
_CPU_MEMO: dict[str, int] = {}
_MEMORY_MEMO: dict[str, int] = {}


def _cpu_request(quantity: Any) -> int:
    value = milli(quantity)
    if type(quantity) is str and len(_CPU_MEMO) < _MEMO_LIMIT:
        _CPU_MEMO[quantity] = value
    return value


def _memory_request(quantity: Any) -> int:
    value = units(quantity)
    if type(quantity) is str and len(_MEMORY_MEMO) < _MEMO_LIMIT:
        _MEMORY_MEMO[quantity] = value
    return value


def pod_request(spec: Mapping[str, Any]) -> Pair:
    """Kubernetes' effective pod request (resourcehelper.PodRequests): the containers' sum plus
    restartable (sidecar) init containers, or the largest init container step if larger, or the
    pod-level ``resources.requests`` where set; plus ``overhead``. A request the API server
    would have defaulted from the limit is taken from the limit. Raises ModelError (TypeError
    or AttributeError for a wrong shape)."""
    # hot path: once per pod per reconcile, so the container loop is written out
    cpu = memory = 0
    cpu_memo, memory_memo = _CPU_MEMO.get, _MEMORY_MEMO.get
    for container in spec.get("containers") or ():
        resources = container.get("resources") or _EMPTY
        requests = resources.get("requests") or _EMPTY
        c = requests.get("cpu")
        m = requests.get("memory")
        if c is None or m is None:
            limits = resources.get("limits") or _EMPTY
            c = limits.get("cpu") if c is None else c
            m = limits.get("memory") if m is None else m
        if c is not None:
            value = cpu_memo(c)
            cpu += _cpu_request(c) if value is None else value
        if m is not None:
            value = memory_memo(m)
            memory += _memory_request(m) if value is None else value
    init_containers = spec.get("initContainers")
    if init_containers:
        cpu, memory = _with_init_containers(init_containers, cpu, memory)
    pod_level = (spec.get("resources") or _EMPTY).get("requests") or _EMPTY
    if "cpu" in pod_level:
        cpu = milli(pod_level["cpu"])
    if "memory" in pod_level:
        memory = units(pod_level["memory"])
    overhead = spec.get("overhead")
    if overhead:
        cpu += milli(overhead["cpu"]) if "cpu" in overhead else 0
        memory += units(overhead["memory"]) if "memory" in overhead else 0
    if cpu < 0 or memory < 0:
        raise ModelError("negative request")
    return cpu, memory


def _with_init_containers(init_containers: Iterable[Any], cpu: int, memory: int) -> Pair:
    sidecar_cpu = sidecar_memory = init_cpu = init_memory = 0
    for container in init_containers:
        c, m = pod_request({"containers": [container]})
        if container.get("restartPolicy") == "Always":  # a sidecar runs beside the app
            cpu, memory = cpu + c, memory + m
            sidecar_cpu, sidecar_memory = sidecar_cpu + c, sidecar_memory + m
            c, m = sidecar_cpu, sidecar_memory
        else:  # runs alone, next to the sidecars started before it
            c, m = c + sidecar_cpu, m + sidecar_memory
        init_cpu, init_memory = max(init_cpu, c), max(init_memory, m)
    return max(cpu, init_cpu), max(memory, init_memory)


def kube_qos(spec: Mapping[str, Any]) -> qos.KubeQoS:
    """The Kubernetes QoS class from requests and limits (for pods without status.qosClass)."""
    any_set = False
    guaranteed = True
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = container.get("resources") or _EMPTY
        requests = resources.get("requests") or _EMPTY
        limits = resources.get("limits") or _EMPTY
        for name in ("cpu", "memory"):
            limit = limits.get(name)
            request = requests.get(name, limit)
            if (request is not None and parse_quantity(request) != 0) or (
                limit is not None and parse_quantity(limit) != 0
            ):
                any_set = True
            if limit is None or request is None or parse_quantity(request) != parse_quantity(limit):
                guaranteed = False
    if not any_set:
        return qos.KubeQoS.BESTEFFORT
    return qos.KubeQoS.GUARANTEED if guaranteed else qos.KubeQoS.BURSTABLE


@functools.lru_cache(maxsize=256)
def _class_of_value(priority: int) -> str:
    return qos.priority_class_of(priority).name


def pod_priority(pod: Mapping[str, Any]) -> str:
    """Koordinator's priority class of a pod (GetPodPriorityClassWithDefault): the
    priority-class label when present (an unknown value counts as none), else
    ``spec.priority``'s range, else the default for its QoS class (label, else Kubernetes QoS:
    Guaranteed → LSR, Burstable → LS, both prod; BestEffort → BE → batch)."""
    labels = (pod.get("metadata") or _EMPTY).get("labels") or _EMPTY
    spec = pod.get("spec") or _EMPTY
    label = labels.get(keys.LABEL_PRIORITY_CLASS)
    if label is not None:
        found = label if label in _CLASS_NAMES else ""
    else:
        priority = spec.get("priority")
        found = _class_of_value(priority) if type(priority) is int else ""
    if found:
        return found
    qos_class = qos.qos_from_label(labels.get(keys.LABEL_QOS_CLASS))
    if qos_class is qos.QoSClass.NONE:
        status_qos = (pod.get("status") or _EMPTY).get("qosClass")
        try:
            kube = qos.KubeQoS(status_qos) if status_qos else kube_qos(spec)
        except ValueError:
            kube = kube_qos(spec)
        qos_class = qos.default_qos_for_kube(kube)
    return qos.default_priority_class_for_qos(qos_class).name


class PodMemo:
    """Pod facts already read, by (uid, resourceVersion): the API server gives a changed pod a
    new resourceVersion, so an entry never goes stale. The caller owns it (one per controller)
    and passes it to every reconcile; pods without both fields are never memoized. Bounded:
    emptied when full, which drops the entries of deleted pods too."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self.limit = limit
        self.views: dict[tuple[str, str], PodView] = {}

    def put(self, key: tuple[str, str], view: PodView) -> None:
        if len(self.views) >= self.limit:
            self.views.clear()
        self.views[key] = view


_LOW_PRIORITIES = (PRIORITY_BATCH, PRIORITY_FREE)


def read_pod(pod: Mapping[str, Any]) -> PodView:
    """One pod's facts; raises ModelError, TypeError, AttributeError or KeyError. Batch and
    free pods get a zero request: no formula reads it (they run on what the others leave)."""
    metadata = pod.get("metadata") or _EMPTY
    key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
    priority = pod_priority(pod)
    if priority in _LOW_PRIORITIES:
        return key, priority, False, 0, 0
    cpu, memory = pod_request(pod.get("spec") or _EMPTY)
    lse = (metadata.get("labels") or _EMPTY).get(keys.LABEL_QOS_CLASS) == "LSE"
    return key, priority, lse, cpu, memory


def read_pods(
    pods: Iterable[Mapping[str, Any]], notes: list[str], memo: PodMemo | None = None
) -> list[PodView]:
    """The Running and Pending pods; unreadable ones are left out, with a note each."""
    views = []
    remembered = memo.views.get if memo is not None else None
    for pod in pods:
        if (pod.get("status") or _EMPTY).get("phase") not in _ACTIVE_PHASES:
            continue
        memo_key = None
        if remembered is not None:
            metadata = pod.get("metadata") or _EMPTY
            uid, version = metadata.get("uid"), metadata.get("resourceVersion")
            if uid and version:
                memo_key = (uid, version)
                view = remembered(memo_key)
                if view is not None:
                    views.append(view)
                    continue
        try:
            view = read_pod(pod)
        except (ModelError, TypeError, AttributeError, KeyError) as err:
            metadata = pod.get("metadata") or _EMPTY
            key = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
            notes.append(f"skipped pod {key}: unreadable resources ({err}); its metric counts")
            continue
        if memo is not None and memo_key is not None:
            memo.put(memo_key, view)
        views.append(view)
    return views
