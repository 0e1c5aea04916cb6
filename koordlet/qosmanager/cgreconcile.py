"""CgroupReconcile: keep every pod's memory QoS cgroup files true to the NodeSLO.

The MemoryQOS hook sets memory.min/low/high when a container is created; this strategy
re-applies them every interval (in Koordinator memory QoS lives only here) and adds what the
hook does not write:

* per pod and container: memory.min, memory.low (and memory.high for containers) from the
  hook's formulas, plus the Anolis tunables wmark_ratio, wmark_scale_factor (wmarkScalePermill),
  wmark_min_adj, priority, use_priority_oom (priorityEnable) and oom.group (oomKillGroup);
* per QoS directory: burstable and besteffort get the sum of their pods' memory.min and
  memory.low, kubepods the sum over all three classes (it is their parent), and priority,
  use_priority_oom and oom.group from the class config of that kube QoS.

A class with memory QoS off (or a pod with policy "none") gets Koordinator's "None" values:
protections 0, memory.high "max", tunables at their kernel defaults, so turning the feature off
undoes it. Writes go qos -> pod -> container through the executor's leveled batch, so a parent
never protects less than its children during a change. A file this kernel lacks (the Anolis
tunables on mainline, memory.min on mainline v1) is named once in the status and not tried
again; a pod with a malformed annotation is skipped and named in the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordapi.nodeslo import NONE_MEMORY_QOS
from koordapi.qos import KubeQoS, default_qos_for_kube
from koordlet.executor import CgroupWrite, Executor, Status
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod
from runtimehooks.hooks import memoryqos
from runtimehooks.request import ContainerRequest
from runtimehooks.rules import Rules

NAME = "CgroupReconcile"
# Tunable files and the MemoryQOS field each takes its value from, as configured.
TUNABLES = (
    ("memory.wmark_ratio", "wmarkRatio"),
    ("memory.wmark_scale_factor", "wmarkScalePermill"),
    ("memory.wmark_min_adj", "wmarkMinAdj"),
    ("memory.priority", "priority"),
    ("memory.use_priority_oom", "priorityEnable"),
    ("memory.oom.group", "oomKillGroup"),
)
QOS_TUNABLES = TUNABLES[3:]  # QoS directories get no watermarks, as in Koordinator
QOS_ORDER = (KubeQoS.GUARANTEED, KubeQoS.BURSTABLE, KubeQoS.BESTEFFORT)  # kubepods first
QOS_LEVEL, POD_LEVEL, CONTAINER_LEVEL = 0, 1, 2
MAX_PROBLEMS = 3  # problems named in the status line; the rest are counted


def _shown(value: int) -> str:
    return "max" if value == memoryqos.MAX else str(value)


@dataclass(frozen=True)
class _Why:
    reason: str
    pod_uid: str = ""
    scope: str = ""


@dataclass
class _Plan:
    """One run's writes by level, each with the reason to record if it changes a value."""

    levels: tuple[list[CgroupWrite], ...] = field(default_factory=lambda: ([], [], []))
    why: dict[CgroupWrite, _Why] = field(default_factory=dict)

    def add(self, level: int, cgroup: str, resource: str, value: int, why: _Why) -> None:
        write = CgroupWrite(cgroup, resource, value)
        self.levels[level].append(write)
        self.why[write] = why

    def tunables(
        self,
        level: int,
        cgroup: str,
        cfg: Mapping[str, int],
        *,
        files: tuple[tuple[str, str], ...] = TUNABLES,
        label: str,
        uid: str = "",
        scope: str = "",
    ) -> None:
        for resource, name in files:
            value = cfg.get(name)
            if value is not None:
                why = _Why(f"{label}: {name} {value}", uid, scope)
                self.add(level, cgroup, resource, int(value), why)


class CgroupReconcile:
    """See the module docstring."""

    name = NAME

    def __init__(self, executor: Executor, *, interval: float = 1.0) -> None:
        self.executor = executor
        self.interval = interval
        self.unsupported: set[str] = set()  # files this kernel lacks: not tried again

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(NAME)

    def run(self, ctx: Context) -> None:
        # Containers without a memory limit are throttled against the node's allocatable
        # memory (the Node status), which the QoS manager's context carries.
        node = replace(ctx.rules.node, allocatable_memory=ctx.node.allocatable_memory)
        rules = replace(ctx.rules, node=node)
        plan = _Plan()
        problems: list[str] = []
        mins = dict.fromkeys(KubeQoS, 0)
        lows = dict.fromkeys(KubeQoS, 0)
        for known in ctx.pods:
            pod = known.request
            if not pod.cgroup_dir:
                continue  # never write at a hierarchy root
            try:
                pod_min, pod_low = self._pod(plan, known, rules)
            except ModelError as err:  # a malformed annotation: this pod only
                problems.append(f"skipped {pod.key}: {err}")
                continue
            mins[pod.kube_qos] += pod_min
            lows[pod.kube_qos] += pod_low
        self._qos_dirs(plan, ctx, mins, lows)
        self._apply(ctx, plan, problems)
        ctx.status(NAME, self._summary(len(ctx.pods), problems))

    def _pod(self, plan: _Plan, known: KnownPod, rules: Rules) -> tuple[int, int]:
        """Plan one pod's and its containers' writes; returns the pod's (min, low)."""
        pod = known.request
        found = memoryqos.config(pod, rules)
        cfg = NONE_MEMORY_QOS if found is None else found
        qos = pod.qos_with_default
        label = f"memory QoS ({qos.value}{'' if found is not None else ', off: None values'})"
        patch = memoryqos.pod_values(pod, cfg)
        assert patch.memory_min is not None and patch.memory_low is not None
        request = memoryqos.memory_request(pod, None)
        for resource, value, reason in _protections(
            label, request, cfg, patch.memory_min, patch.memory_low
        ):
            plan.add(POD_LEVEL, pod.cgroup_dir, resource, value, _Why(reason, pod.uid))
        plan.tunables(POD_LEVEL, pod.cgroup_dir, cfg, label=label, uid=pod.uid)
        for ctr in known.containers.values():
            if ctr.cgroup_dir:
                self._container(plan, ctr, rules, cfg, label)
        return patch.memory_min, patch.memory_low

    @staticmethod
    def _container(
        plan: _Plan, ctr: ContainerRequest, rules: Rules, cfg: Mapping[str, int], pod_label: str
    ) -> None:
        patch = memoryqos.container_values(ctr, rules, cfg)
        memory_min, memory_low, high = patch.memory_min, patch.memory_low, patch.memory_high
        assert memory_min is not None and memory_low is not None and high is not None
        request = memoryqos.memory_request(ctr.pod, ctr.name)
        label = f"{pod_label} container {ctr.name}"
        planned = _protections(label, request, cfg, memory_min, memory_low)
        throttling = cfg.get("throttlingPercent", 0)
        if throttling == 0:
            reason = f"{label}: throttlingPercent 0: not throttled = max"
        else:
            limit = memoryqos.memory_limit(ctr, rules)
            reason = (
                f"{label}: request {request} + (limit {limit} - request) x throttlingPercent "
                f"{throttling}%, page-aligned, at least memory.min = {_shown(high)}"
            )
        planned.append(("memory.high", high, reason))
        for resource, value, text in planned:
            plan.add(CONTAINER_LEVEL, ctr.cgroup_dir, resource, value, _Why(text, ctr.pod.uid))
        plan.tunables(CONTAINER_LEVEL, ctr.cgroup_dir, cfg, label=label, uid=ctr.pod.uid)

    @staticmethod
    def _qos_dirs(
        plan: _Plan, ctx: Context, mins: dict[KubeQoS, int], lows: dict[KubeQoS, int]
    ) -> None:
        dirs = ctx.qos_dirs
        sums = {
            "memory.min": memoryqos.kube_qos_sums(mins),
            "memory.low": memoryqos.kube_qos_sums(lows),
        }
        for kube in QOS_ORDER:
            qos = default_qos_for_kube(kube)
            scope = "" if kube is KubeQoS.GUARANTEED else qos.value  # kubepods: every pod
            whose = "all pods" if kube is KubeQoS.GUARANTEED else f"{kube.value} pods"
            for resource, by_kube in sums.items():
                why = _Why(f"memory QoS: sum of {resource} of {whose} = {by_kube[kube]}", "", scope)
                plan.add(QOS_LEVEL, dirs[kube], resource, by_kube[kube], why)
            cfg = ctx.rules.slo.memory_qos(qos).values
            label = f"memory QoS ({kube.value} dir, {qos.value} class)"
            plan.tunables(QOS_LEVEL, dirs[kube], cfg, files=QOS_TUNABLES, label=label, scope=scope)

    def _apply(self, ctx: Context, plan: _Plan, problems: list[str]) -> None:
        levels = [[w for w in lv if w.resource not in self.unsupported] for lv in plan.levels]
        for result in self.executor.apply_leveled(levels, cacheable=True):
            write = result.write
            if result.status is Status.APPLIED:
                why = plan.why[write]
                value = _shown(int(write.value))
                action = Action(
                    ctx.now,
                    NAME,
                    write.resource,
                    write.cgroup,
                    value,
                    why.reason,
                    pod_uid=why.pod_uid,
                    scope=why.scope,
                )
                ctx.record(action)
            elif result.status is Status.UNSUPPORTED:
                self.unsupported.add(write.resource)
            elif result.status in (Status.INVALID, Status.FAILED):
                problems.append(f"{write}: {result.status}: {result.detail}")

    def _summary(self, pods: int, problems: list[str]) -> str:
        parts = [f"reconciled {pods} pods"]
        if self.unsupported:
            parts.append(f"not on this kernel: {', '.join(sorted(self.unsupported))}")
        parts += problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            parts.append(f"{len(problems) - MAX_PROBLEMS} more problems")
        return "; ".join(parts)


def _protections(
    label: str, request: int, cfg: Mapping[str, int], memory_min: int, memory_low: int
) -> list[tuple[str, int, str]]:
    """memory.min and memory.low as the hook computed them, with reasons naming its inputs."""
    min_pct, low_pct = cfg.get("minLimitPercent", 0), cfg.get("lowLimitPercent", 0)
    return [
        (
            "memory.min",
            memory_min,
            f"{label}: request {request} x minLimitPercent {min_pct}% = {memory_min}",
        ),
        (
            "memory.low",
            memory_low,
            f"{label}: request {request} x lowLimitPercent {low_pct}% (a set low is at least "
            f"memory.min) = {memory_low}",
        ),
    ]
