"""Hooks, and running one stage of them the way Koordinator does.

A hook is a name, the feature gate that switches it, its stages, and a pure function for pods,
containers and/or the kube-QoS directories returning a sparse patch. A stage runs the enabled
hooks in byte order of their names (so "BatchResource" runs before "CPUSetAllocator"); later
values replace earlier ones. Failure policy Ignore (the default) logs a failing hook and goes
on; Fail stops at the first failure and reports it, so the caller can fail the runtime request.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from koordapi.qos import KubeQoS
from runtimehooks.patch import EMPTY_CONTAINER, EMPTY_POD, ContainerPatch, PodPatch, merge
from runtimehooks.request import ContainerRequest, PodRequest, Stage
from runtimehooks.rules import Rules

PodFn = Callable[[PodRequest, Rules, Stage], PodPatch | None]
ContainerFn = Callable[[ContainerRequest, Rules, Stage], ContainerPatch | None]
# the values of one kube-QoS directory (its cgroup is the pod-level kind: a PodPatch)
KubeQoSFn = Callable[[KubeQoS, Rules, Stage], PodPatch | None]


class FailurePolicy(enum.StrEnum):
    IGNORE = "Ignore"
    FAIL = "Fail"


@dataclass(frozen=True)
class Hook:
    name: str  # Koordinator's hook name: it decides the order
    gate: str  # feature gate
    stages: frozenset[Stage]
    pod: PodFn | None = None
    container: ContainerFn | None = None
    kube_qos: KubeQoSFn | None = None


@dataclass(frozen=True)
class HookFailure:
    hook: str
    error: Exception

    def __str__(self) -> str:
        return f"{self.hook}: {self.error}"


P = TypeVar("P", PodPatch, ContainerPatch)


@dataclass
class Outcome(Generic[P]):
    """The merged patch of a stage, the failures met, and each hook's time (seconds)."""

    patch: P
    failures: list[HookFailure] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    aborted: bool = False  # policy Fail stopped the stage


def ordered(hooks: Sequence[Hook], rules: Rules, stage: Stage) -> tuple[Hook, ...]:
    """The hooks that run in ``stage``: gate on, stage registered, sorted by name (bytes)."""
    key = (tuple(hooks), stage, tuple(sorted(rules.gates.overrides.items())))
    found = _ORDERED.get(key)
    if found is None:
        selected = [h for h in hooks if stage in h.stages and rules.gates.enabled(h.gate)]
        found = _ORDERED[key] = tuple(sorted(selected, key=lambda h: h.name.encode()))
    return found


# (hooks, stage, gate overrides) → the ordered hooks; a handful of entries per process.
_ORDERED: dict[tuple[tuple[Hook, ...], Stage, tuple[tuple[str, bool], ...]], tuple[Hook, ...]] = {}


def run_pod_stage(
    hooks: Sequence[Hook], stage: Stage, req: PodRequest, rules: Rules, policy: FailurePolicy
) -> Outcome[PodPatch]:
    outcome: Outcome[PodPatch] = Outcome(EMPTY_POD)
    for hook in ordered(hooks, rules, stage):
        if hook.pod is not None and not _run(
            hook, hook.pod, req, rules=rules, stage=stage, policy=policy, outcome=outcome
        ):
            break
    return outcome


def run_container_stage(
    hooks: Sequence[Hook], stage: Stage, req: ContainerRequest, rules: Rules, policy: FailurePolicy
) -> Outcome[ContainerPatch]:
    outcome: Outcome[ContainerPatch] = Outcome(EMPTY_CONTAINER)
    for hook in ordered(hooks, rules, stage):
        if hook.container is not None and not _run(
            hook, hook.container, req, rules=rules, stage=stage, policy=policy, outcome=outcome
        ):
            break
    return outcome


def run_kube_qos_stage(hooks: Sequence[Hook], kube: KubeQoS, rules: Rules) -> Outcome[PodPatch]:
    """The reconciler's values for one kube-QoS directory (failures are ignored: a pass)."""
    stage = Stage.RECONCILE_KUBE_QOS
    outcome: Outcome[PodPatch] = Outcome(EMPTY_POD)
    for hook in ordered(hooks, rules, stage):
        if hook.kube_qos is not None:
            _run(
                hook,
                hook.kube_qos,
                kube,
                rules=rules,
                stage=stage,
                policy=FailurePolicy.IGNORE,
                outcome=outcome,
            )
    return outcome


def _run(
    hook: Hook,
    fn: Callable[..., P | None],
    req: object,
    *,
    rules: Rules,
    stage: Stage,
    policy: FailurePolicy,
    outcome: Outcome[P],
) -> bool:
    """Run one hook into ``outcome``; False when the stage must stop (policy Fail)."""
    start = time.perf_counter()
    try:
        outcome.patch = merge(outcome.patch, fn(req, rules, stage))
    except Exception as err:  # a hook's bad input or bug is contained here, whatever it is
        outcome.failures.append(HookFailure(hook.name, err))
        if policy is FailurePolicy.FAIL:
            outcome.aborted = True
            return False
    finally:
        outcome.timings[hook.name] = time.perf_counter() - start
    return True
