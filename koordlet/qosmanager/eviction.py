"""Evicting pods to give memory or CPU back: candidates, their order, and who does the work.

An eviction strategy builds one ``EvictTask`` per enabled feature (BEMemoryEvict, ...): how
much to release, the candidates in eviction order and what each one gives back. ``run_tasks``
walks the tasks in order, evicting candidates until each task's amount is released; a pod
evicted for one task counts for the next ones too, and a pod evicted earlier that is still
terminating counts as released without being evicted again.

The ``Evictor`` does the eviction with a backend from ``koordlet.eviction.backends``:
standalone koordlet stops the pod's containers through CRI (``StopContainers``; Koordinator's
default, ``--only-evict-by-api`` false); in a cluster the Eviction API asks the API server,
which honours PodDisruptionBudgets (``EvictByAPI``). Each eviction is an audit action with its
reason, a log line and a metric.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi import annotation, keys, qos
from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordlet.eviction.backends import EvictionBackend
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod

log = logging.getLogger(__name__)

REMEMBER_SECONDS = 120.0  # an evicted pod counts as terminating this long at most


@dataclass(frozen=True)
class Candidate:
    """A pod that may be evicted, with what eviction would give back."""

    known: KnownPod
    memory_used: int = 0  # bytes
    cpu_used_milli: int = 0
    cpu_request_milli: int = 0
    measured: bool = True  # whether its usage is known (the generic variants need it)

    @property
    def uid(self) -> str:
        return self.known.request.uid

    @property
    def name(self) -> str:
        return self.known.request.name


@dataclass
class EvictTask:
    feature: str  # "BEMemoryEvict", "CPUEvict", ...
    to_release: int
    candidates: Sequence[Candidate]
    amount: Callable[[Candidate], int]
    target: str  # what the amount measures: "memory-used", "cpu-used", "batch-cpu-request"
    reason: str  # why this task exists, with the numbers
    inputs: dict[str, float | str] = field(default_factory=dict)


class Evictor:
    """Evicts through a backend and remembers victims until they are gone."""

    def __init__(self, backend: EvictionBackend, metrics: KoordletMetrics | None = None) -> None:
        self.backend = backend
        self.metrics = metrics
        self._evicted: dict[str, float] = {}  # pod uid → when

    def is_terminating(self, candidate: Candidate, now: float) -> bool:
        """Evicted before, still has containers, and not longer ago than we wait."""
        when = self._evicted.get(candidate.uid)
        if when is None:
            return False
        if now - when > REMEMBER_SECONDS or not candidate.known.containers:
            self._evicted.pop(candidate.uid, None)  # another strategy's thread may be first
            return False
        return True

    def evict(self, ctx: Context, strategy: str, task: EvictTask, candidate: Candidate) -> bool:
        pod = candidate.known.request
        amount = task.amount(candidate)
        reason = f"{task.reason}; victim gives back {_show(task.target, amount)}"
        ok, detail = self.backend(candidate.known, reason)
        if not ok:
            log.warning("cannot evict pod %s for %s: %s", pod.key, task.feature, detail)
            ctx.status(strategy, f"eviction of {pod.key} failed: {detail}")
            return False
        self._evicted[pod.uid] = ctx.now
        if self.metrics is not None:
            self.metrics.record_eviction(pod.namespace, pod.name, task.feature, ctx.now)
        ctx.record(
            Action(
                ctx.now,
                strategy,
                "evict",
                pod.key,
                task.feature,
                f"{reason} ({detail})",
                pod_uid=pod.uid,
                inputs=dict(task.inputs),
            )
        )
        return True


class EvictStrategy:
    """What the eviction strategies share: their feature gates, the NodeSLO switch
    (``resourceUsedThresholdWithBE.enable``) and the rest after an eviction. Subclasses build
    the tasks, or say in a line why there are none."""

    name = ""
    features: tuple[str, ...] = ()

    def __init__(self, evictor: Evictor, *, interval: float, cool_down: float) -> None:
        self.evictor = evictor
        self.interval = interval
        self.cool_down = cool_down
        self.last_eviction = float("-inf")

    def enabled(self, gates: FeatureGates) -> bool:
        return any(gates.enabled(f) for f in self.features)

    def tasks(self, ctx: Context, config: Mapping[str, Any]) -> list[EvictTask] | str:
        raise NotImplementedError

    def run(self, ctx: Context) -> None:
        if ctx.now < self.last_eviction + self.cool_down:
            ctx.status(self.name, "cooling down after an eviction")
            return
        config = ctx.rules.slo.threshold
        if not config.get("enable"):
            ctx.status(self.name, "off: resourceUsedThresholdWithBE.enable is false")
            return
        tasks = self.tasks(ctx, config)
        if isinstance(tasks, str):
            ctx.status(self.name, tasks)
            return
        # Said first: a failed eviction's status must not be overwritten by it.
        ctx.status(self.name, "; ".join(t.reason for t in tasks))
        if run_tasks(ctx, self.evictor, self.name, tasks):
            self.last_eviction = ctx.now


def run_tasks(ctx: Context, evictor: Evictor, strategy: str, tasks: Sequence[EvictTask]) -> bool:
    """Evict for each task in order until it is satisfied; True if anyone was evicted now."""
    released: dict[str, int] = {}
    counted: set[str] = set()
    evicted_now = False

    def give_back(candidate: Candidate) -> None:
        # What a victim releases, per measure: the largest any task credits it with.
        per_target: dict[str, int] = {}
        for task in tasks:
            per_target[task.target] = max(per_target.get(task.target, 0), task.amount(candidate))
        for target, amount in per_target.items():
            released[target] = released.get(target, 0) + amount

    for task in tasks:
        for candidate in task.candidates:
            if released.get(task.target, 0) >= task.to_release:
                break
            if candidate.uid in counted:
                continue
            if evictor.is_terminating(candidate, ctx.now):
                counted.add(candidate.uid)  # still going away: do not evict anyone for it
                give_back(candidate)
            elif evictor.evict(ctx, strategy, task, candidate):
                counted.add(candidate.uid)
                evicted_now = True
                give_back(candidate)
        if released.get(task.target, 0) < task.to_release:
            log.warning(
                "%s: released %s of %s: not enough candidates",
                task.feature,
                _show(task.target, released.get(task.target, 0)),
                _show(task.target, task.to_release),
            )
    return evicted_now


# -- eligibility and order of the generic (non-BE) variants ------------------------------------


def _int_value(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def policy_allows(known: KnownPod, feature: str) -> bool:
    """Koordinator's IsEvictionPolicyAllowed: no eviction-policy annotation allows every
    feature; one lists the features allowed; one that cannot be read allows none."""
    policy = known.request.annotations.get(keys.ANNOTATION_EVICTION_POLICY)
    if policy is None:
        return True
    try:
        allowed = json.loads(policy)
    except ValueError:
        return False
    return isinstance(allowed, list) and feature in allowed


def eviction_allowed(known: KnownPod, feature: str, priority_threshold: int) -> bool:
    """Koordinator's opt-in for the generic variants: running, the eviction-enabled label, the
    priority (with its class default, ``PodRequest.priority``) not above the threshold, and the
    feature allowed by the pod's eviction policy."""
    pod = known.request
    if pod.labels.get(keys.LABEL_EVICTION_ENABLED) != "true" or not known.containers:
        return False
    return pod.priority <= priority_threshold and policy_allows(known, feature)


def generic_order(candidates: list[Candidate], then: Callable[[Candidate], int]) -> list[Candidate]:
    """eviction-priority annotation, priority, priority label (default: the priority) ascending;
    then ``then`` descending."""

    def key(c: Candidate) -> tuple[int, int, int, int]:
        pod = c.known.request
        label = _int_value(pod.labels.get(keys.LABEL_PRIORITY))
        return (
            _int_value(pod.annotations.get(keys.ANNOTATION_EVICTION_PRIORITY)) or 0,
            pod.priority,
            pod.priority if label is None else label,
            -then(c),
        )

    return sorted(candidates, key=key)


# -- by allocatable: CPUAllocatableEvict, MemoryAllocatableEvict -------------------------------

# The resources by allocatable eviction measures, per priority class (Koordinator's
# ReverseResourceNameMap): a class's pods request them, the node publishes them.
CLASS_RESOURCES: Mapping[str, tuple[str, str]] = {
    qos.BATCH.name: (keys.BATCH_CPU, keys.BATCH_MEMORY),
    qos.MID.name: (keys.MID_CPU, keys.MID_MEMORY),
}
ALLOCATABLE_PRIORITY_MAX = qos.MID.high  # koord-prod pods are never evicted by allocatable


def class_request(known: KnownPod, resource: str) -> int:
    """The pod's request of an extended resource (summed over its containers, from the
    extended-resource-spec annotation); 0 when it has none or the annotation is bad."""
    text = known.request.annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if text is None:
        return 0
    try:
        spec = annotation.parse_extended_resource_spec(text)
    except ModelError:
        return 0
    total = 0
    for container in spec.values():
        value = container.requests.get(resource)
        total += max(0, math.ceil(value)) if value is not None else 0
    return total


def own_request(known: KnownPod, kind: int) -> int:
    """The pod's request of its own class's resource (0: CPU, 1: memory); 0 for pods of other
    classes (Koordinator reads their plain requests, which allocatable eviction never
    releases; see the differences table)."""
    resources = CLASS_RESOURCES.get(known.request.priority_class.name)
    return 0 if resources is None else class_request(known, resources[kind])


def allocatable_tasks(
    ctx: Context,
    feature: str,
    config: Mapping[str, Any],
    candidates: Sequence[Candidate],
    *,
    kind: int,
    prefix: str,
) -> list[EvictTask] | str:
    """Koordinator's release by allocatable threshold: per extended resource, the requests of
    the pods at or under ``allocatableEvictPriorityThreshold`` against the node's allocatable;
    above ``<prefix>AllocatableEvictThresholdPercent`` release down to ``...LowerPercent``
    (float64 as upstream); no or zero allocatable releases everything requested. ``kind`` is
    0 for CPU, 1 for memory; ``candidates`` the pods that may go, in any order."""
    threshold = config.get(f"{prefix}AllocatableEvictThresholdPercent")
    lower = config.get(f"{prefix}AllocatableEvictLowerPercent")
    limit = config.get("allocatableEvictPriorityThreshold")
    if threshold is None or lower is None or limit is None:
        return (
            f"{prefix}AllocatableEvictThresholdPercent, {prefix}AllocatableEvictLowerPercent"
            " and allocatableEvictPriorityThreshold must be set"
        )
    if threshold < 0 or lower >= threshold:
        return f"lower percent {lower} must be under the threshold percent {threshold} (>= 0)"
    if limit > ALLOCATABLE_PRIORITY_MAX:
        return f"allocatableEvictPriorityThreshold {limit} is above {ALLOCATABLE_PRIORITY_MAX}"
    requested: dict[str, int] = {}
    for known in ctx.pods:
        if known.containers and known.request.priority <= limit:
            resources = CLASS_RESOURCES.get(known.request.priority_class.name)
            if resources is not None:
                resource = resources[kind]
                requested[resource] = requested.get(resource, 0) + class_request(known, resource)
    allowed = [c for c in candidates if eviction_allowed(c.known, feature, int(limit))]
    ordered = generic_order(allowed, lambda c: own_request(c.known, kind))
    tasks, notes = [], []
    for resource, amount in sorted(requested.items()):
        allocatable = ctx.node.allocatable.get(resource) or 0
        if amount <= 0:
            continue
        if allocatable <= 0:
            release = amount
            why = f"{resource} requested {amount}, none allocatable: release all"
        else:
            ratio = amount / allocatable
            if not ratio > threshold / 100:
                notes.append(f"{resource} requested {ratio:.0%} of allocatable <= {threshold}%")
                continue
            if kind == 0:  # upstream's two formulas, each in its own float64 order
                release = int(amount - lower / 100 * allocatable)
            else:
                release = int((ratio - lower / 100) * allocatable)
            why = (
                f"{resource} requested {amount} of allocatable {allocatable} > {threshold}%:"
                f" release down to {lower}% = {release}"
            )
        if release <= 0:
            continue
        target = f"{resource.rsplit('/', 1)[-1]}-request"
        tasks.append(
            EvictTask(feature, release, ordered, _class_amount(resource, kind), target,
                      f"{feature}: {why}", {"requested": amount, "allocatable": allocatable,
                                            "release": release})
        )  # fmt: skip
    return tasks or "; ".join(notes) or "nothing requested by evictable priorities"


def _class_amount(resource: str, kind: int) -> Callable[[Candidate], int]:
    def amount(c: Candidate) -> int:
        resources = CLASS_RESOURCES.get(c.known.request.priority_class.name)
        return class_request(c.known, resource) if resources and resources[kind] == resource else 0

    return amount


def _show(target: str, amount: int) -> str:
    if "memory" in target:
        return f"{amount / (1 << 20):.0f} MiB"
    return f"{amount / 1000:.2f} cores"
