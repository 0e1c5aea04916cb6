"""CPUSuppress: best-effort pods get only the CPU that the other pods and the system leave.

Every interval (``--cpu-suppress-interval-seconds``, 1 s) it computes, from the newest fresh
samples (Koordinator's formula)::

    system  = max(node usage - all pods' usage, 0), at least the node's reserved CPU
    suppress = capacity x cpuSuppressThresholdPercent% - non-BE pods' usage - system
    suppress = max(suppress, capacity x cpuSuppressMinPercent%)   when the floor is set

and applies it with the NodeSLO's ``cpuSuppressPolicy``:

* ``cpuset``: the BE cgroups (the besteffort QoS directory, each BE pod, their containers) get
  ceil(suppress) CPUs, at least two, growing by at most 10% of the CPUs per step (shrinking is
  never held back: the latency-sensitive pods need those CPUs now). The CPUs are chosen spread
  over NUMA nodes and sockets, both hyper-threads of a core first, away from reserved,
  exclusive system and LSE CPUs, and from LSR CPUs only in proportion to their share.
* ``cfsQuota``: the besteffort directory's cpu.cfs_quota_us = suppress x 100 ms, at least 2000
  µs; a change under 1% of the node is skipped, a rise is capped at 10% of the node per step.

With ``resourceUsedThresholdWithBE.enable`` false it recovers instead: the besteffort quota
goes back to -1 and the BE cpuset to every CPU but reserved, exclusive system and LSE ones.
Stale node usage means no action (said in the strategy's status), never a guess.

While a ``SuppressBoost`` (from SchedLatencyGuard, see schedlatency.py) is active, the formula
uses the lower of the NodeSLO's cpuSuppressThresholdPercent and the boost's, and the reason
says so ("x 30% (boosted: ...)").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from koordapi import keys
from koordapi.annotation import KubeletCPUManagerPolicy
from koordapi.cgroup import CFS_PERIOD_US, UNLIMITED
from koordapi.cpuset import format_cpuset, parse_cpuset
from koordapi.features import FeatureGates
from koordapi.nodeslo import SUPPRESS_CFS_QUOTA
from koordapi.qos import KubeQoS, QoSClass
from koordlet.executor import CgroupWrite, Executor, Status
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context, is_be
from koordlet.qosmanager.schedlatency import SuppressBoost
from koordlet.states.pods import KnownPod
from koordlet.states.snapshot import pinned_by_class
from koordlet.states.topology import Processor

NAME = "CPUSuppress"
MIN_CPUS = 2
MIN_QUOTA = 2000
MAX_INCREASE_RATIO = 0.1  # grow slowly: at most 10% of the node per step
QUOTA_BYPASS_RATIO = 0.01  # quota changes smaller than 1% of the node are not worth a write


@dataclass(frozen=True)
class SuppressInputs:
    """What the suppress formula reads, in cores (capacity and reserved in milli-cores)."""

    capacity_milli: int
    threshold_percent: int
    node_used: float
    pods_used: float  # every pod with a fresh sample
    non_be_used: float  # pods that are not BE (and pods koordlet does not know)
    reserved_milli: int = 0
    min_percent: int | None = None
    boost_reason: str = ""  # why threshold_percent is lowered below the NodeSLO's, if it is
    slo_threshold_percent: int | None = None  # the NodeSLO's, when a boost lowered it

    @property
    def system_used(self) -> float:
        return max(self.node_used - self.pods_used, 0.0, self.reserved_milli / 1000)

    def suppress_milli(self) -> int:
        milli = (
            self.capacity_milli * self.threshold_percent // 100
            - int(self.non_be_used * 1000)
            - int(self.system_used * 1000)
        )
        if self.min_percent is not None:
            milli = max(milli, self.capacity_milli * self.min_percent // 100)
        return milli

    def explain(self) -> str:
        boosted = f" (boosted: {self.boost_reason})" if self.boost_reason else ""
        text = (
            f"suppress: capacity {self.capacity_milli / 1000:g} x {self.threshold_percent}%"
            f"{boosted} - LS usage {self.non_be_used:.2f} - system {self.system_used:.2f}"
            f" = {round(self.suppress_milli() / 1000, 2) + 0.0:.2f} cores"  # no "-0.00"
        )
        if self.min_percent is not None:
            text += f" (floor {self.min_percent}% of capacity)"
        return text


def _cgroups_of(pods: Sequence[KnownPod]) -> frozenset[tuple[str, frozenset[str]]]:
    """Each pod's cgroup with its known containers' (what a cpuset pass writes to)."""
    return frozenset(
        (k.request.cgroup_dir, frozenset(c.cgroup_dir for c in k.containers.values())) for k in pods
    )


def choose_cpus(count: int, processors: Sequence[Processor]) -> list[int]:
    """``count`` CPUs spread over (NUMA node, socket) buckets, whole cores first.

    Buckets are visited round-robin, largest first (ties: lowest CPU). The first pass takes
    both hyper-threads of a free core from each bucket in turn while two or more CPUs are
    wanted; the second pass, continuing from the bucket where the first stopped, takes single
    CPUs. Returns [] when there are fewer processors than wanted.
    """
    if count <= 0 or len(processors) < count:
        return []
    by_bucket: dict[tuple[int, int], list[Processor]] = {}
    for p in processors:
        by_bucket.setdefault((p.node, p.socket), []).append(p)
    buckets = [sorted(b, key=lambda p: (p.core, p.cpu)) for b in by_bucket.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu))
    chosen: list[int] = []
    used: set[int] = set()

    def take_pair(bucket: list[Processor]) -> None:
        for a, b in itertools.pairwise(bucket):
            if a.cpu not in used and b.cpu not in used and a.core == b.core:
                chosen.extend((a.cpu, b.cpu))
                used.update((a.cpu, b.cpu))
                return

    def take_one(bucket: list[Processor]) -> None:
        for p in bucket:
            if p.cpu not in used:
                chosen.append(p.cpu)
                used.add(p.cpu)
                return

    index = 0
    for take, enough in ((take_pair, 1), (take_one, 0)):
        # Round-robin from ``start``; a whole round without a pick ends the pass. The second
        # pass goes on from the bucket where the first one stopped.
        start, picked_before = index, -1
        while count - len(chosen) > enough:
            if index == start:
                if picked_before == len(chosen):
                    break
                picked_before = len(chosen)
            take(buckets[index])
            index = (index + 1) % len(buckets)
    return chosen


def cpuset_count(
    suppress_milli: int, current: int, total: int, candidates: int, min_cpus: int = MIN_CPUS
) -> int:
    """How many CPUs the BE cpuset gets this step: ceil(suppress), at least ``min_cpus``,
    growing by at most 10% of the node's ``total`` CPUs over ``current``, and never more than
    the ``candidates`` BE may have (LSE and reserved CPUs excluded)."""
    count = max(math.ceil(suppress_milli / 1000), min_cpus)
    step = math.ceil(total * MAX_INCREASE_RATIO)
    return min(count, current + step, candidates)


def _excluded_cpus(ctx: Context) -> tuple[frozenset[int], frozenset[int], frozenset[int]]:
    """(reserved + exclusive system CPUs, LSE-pinned CPUs, LSR-pinned CPUs)."""
    node = ctx.rules.node
    reserved: frozenset[int] = frozenset()
    if node.reservation is not None:
        reserved = parse_cpuset(node.reservation.reserved_cpus)
    if node.system_qos is not None and node.system_qos.cpuset_exclusive:
        reserved |= parse_cpuset(node.system_qos.cpuset)
    pinned = pinned_by_class(ctx.pods)
    lse = pinned.get(QoSClass.LSE, frozenset())
    lsr = pinned.get(QoSClass.LSR, frozenset())
    return reserved, lse, lsr


def be_cpuset(ctx: Context) -> frozenset[int]:
    """Recovery: every CPU but reserved, exclusive system and LSE-pinned ones."""
    reserved, lse, _ = _excluded_cpus(ctx)
    return ctx.topology.cpus - reserved - lse


class CPUSuppress:
    """See the module docstring."""

    name = NAME

    def __init__(
        self,
        executor: Executor,
        *,
        interval: float = 1.0,
        min_cpus: int = MIN_CPUS,
        metrics: KoordletMetrics | None = None,
        boost: SuppressBoost | None = None,
    ) -> None:
        self.executor = executor
        self.boost = boost  # a lowered threshold while LS pods wait for CPU (SchedLatencyGuard)
        self.interval = interval
        self.min_cpus = max(1, min_cpus)
        self.metrics = metrics
        self.quota_recovered = False
        self._last_value: dict[str, str] = {}  # kind → value last recorded in the audit
        # What the last full cpuset pass wrote to which BE pods and containers, and when: while
        # neither changes, the pass is not repeated within the executor's force-update window
        # (listing every BE pod's cgroups and checking ~2 writes per pod every second was the
        # strategy's whole cost). A new container is a new key; one that no runtime reported is
        # found at the latest when the window ends, as a value changed behind our back is.
        self._cpuset_pass: tuple[object, float] | None = None

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled("BECPUSuppress")

    # -- the run ------------------------------------------------------------------------------

    def run(self, ctx: Context) -> None:
        threshold = ctx.rules.slo.threshold
        if ctx.rules.gates.enabled("BECPUManager"):
            # The BE share pool hook owns BE cpusets then; only undo our own quota.
            self._recover_quota(ctx)
            self._apply_cpuset(
                ctx, be_cpuset(ctx), "recover: BECPUManager owns BE cpusets", skip_pinned=True
            )
            ctx.status(NAME, "recovered: BECPUManager is on")
            return
        if not threshold.get("enable"):
            self._recover_quota(ctx)
            self._apply_cpuset(ctx, be_cpuset(ctx), "recover: suppress disabled in the NodeSLO")
            ctx.status(NAME, "recovered: resourceUsedThresholdWithBE.enable is false")
            return
        inputs = self._inputs(ctx)
        if inputs is None:
            return
        if self.metrics is not None:
            self.metrics.be_suppress_ls_used.labels(self.metrics.node).set(inputs.non_be_used)
        if threshold.get("cpuSuppressPolicy") == SUPPRESS_CFS_QUOTA:
            self._by_quota(ctx, inputs)
            self._apply_cpuset(ctx, be_cpuset(ctx), "recover: cfsQuota policy in use")
        else:
            self._by_cpuset(ctx, inputs)
            self._recover_quota(ctx)

    def _inputs(self, ctx: Context) -> SuppressInputs | None:
        node_used = ctx.last("node_cpu_usage")
        if node_used is None:
            ctx.status(NAME, "no action: node CPU usage is stale or missing")
            return None
        be_uids = {k.request.uid for k in ctx.pods if is_be(k)}
        pods_used = non_be_used = 0.0
        for _, labels in ctx.cache.series("pod_cpu_usage"):
            used = ctx.last("pod_cpu_usage", labels)
            if used is None:
                continue  # a pod that is gone, or not read this pass
            pods_used += used
            if labels.get("pod_uid") not in be_uids:
                non_be_used += used
        threshold = ctx.rules.slo.threshold
        min_percent = threshold.get("cpuSuppressMinPercent")
        percent = int(threshold.get("cpuSuppressThresholdPercent", 65))
        slo_percent: int | None = None
        boost_reason = ""
        boost = self.boost.current(ctx.now) if self.boost is not None else None
        if boost is not None and boost[0] < percent:
            slo_percent, percent = percent, boost[0]
            boost_reason = boost[1]
        return SuppressInputs(
            capacity_milli=ctx.node.cpu_milli,
            threshold_percent=percent,
            node_used=node_used,
            pods_used=pods_used,
            non_be_used=non_be_used,
            reserved_milli=ctx.node.reserved_cpu_milli,
            min_percent=None if min_percent is None else int(min_percent),
            boost_reason=boost_reason,
            slo_threshold_percent=slo_percent,
        )

    # -- cpuset policy ------------------------------------------------------------------------

    def target_cpus(self, ctx: Context, inputs: SuppressInputs, current: int) -> list[int]:
        """The BE CPUs for this step (floor, growth cap, LSR share, NUMA spread)."""
        reserved, lse, lsr = _excluded_cpus(ctx)
        processors = [p for p in ctx.topology.processor_list() if p.cpu not in reserved]
        lsr_procs = [p for p in processors if p.cpu in lsr]
        ls_procs = [p for p in processors if p.cpu not in lsr and p.cpu not in lse]
        candidates = len(lsr_procs) + len(ls_procs)
        total = len(ctx.topology.processor_list())
        count = cpuset_count(inputs.suppress_milli(), current, total, candidates, self.min_cpus)
        from_lsr = count * len(lsr_procs) // candidates if candidates else 0
        cpus = choose_cpus(from_lsr, lsr_procs) if from_lsr > 0 else []
        if count - from_lsr > 0:
            cpus += choose_cpus(count - from_lsr, ls_procs)
        return cpus

    def _by_cpuset(self, ctx: Context, inputs: SuppressInputs) -> None:
        be_dir = ctx.qos_dirs[KubeQoS.BESTEFFORT]
        current = self.executor.read(be_dir, "cpuset.cpus")
        if not isinstance(current, frozenset):
            ctx.status(NAME, f"no action: cannot read {be_dir} cpuset.cpus")
            return
        cpus = self.target_cpus(ctx, inputs, len(current))
        if not cpus:
            ctx.status(NAME, "no action: not enough CPUs for the BE cpuset")
            return
        reason = f"{inputs.explain()} -> {len(cpus)} CPUs"
        if len(cpus) == self.min_cpus and inputs.suppress_milli() / 1000 < self.min_cpus:
            reason += f" (at least {self.min_cpus})"
        self._apply_cpuset(ctx, frozenset(cpus), reason, inputs)
        if self.metrics is not None:
            self.metrics.be_suppress_cpu_cores.labels(self.metrics.node, "cpuset").set(len(cpus))
        ctx.status(NAME, f"suppressing by cpuset: {format_cpuset(frozenset(cpus))}")

    def _apply_cpuset(
        self,
        ctx: Context,
        cpus: frozenset[int],
        reason: str,
        inputs: SuppressInputs | None = None,
        *,
        skip_pinned: bool = False,
    ) -> None:
        """Write ``cpus`` to the BE cgroups: looser values top-down, exact ones bottom-up.

        ``skip_pinned`` leaves the containers of pods with a resource-status (a cpuset or NUMA
        nodes from the scheduler) to the cpuset hook.
        """
        if not cpus:
            return
        value = format_cpuset(cpus)
        be_dir = ctx.qos_dirs[KubeQoS.BESTEFFORT]
        be_pods = [k for k in ctx.pods if is_be(k) and k.request.cgroup_dir]
        pinned = {
            k.request.cgroup_dir.strip("/")
            for k in be_pods
            if skip_pinned and keys.ANNOTATION_RESOURCE_STATUS in k.request.annotations
        }
        policy = ctx.rules.node.kubelet_policy
        key = (value, be_dir, frozenset(pinned), policy, _cgroups_of(be_pods))
        window = self.executor.force_update_seconds
        last = self._cpuset_pass
        if last is not None and last[0] == key and ctx.now - last[1] < window:
            return
        # Every pod cgroup under the BE directory, known or not: one this koordlet has not
        # seen (a pod of another runtime, one still being removed) keeps its wider cpuset and
        # the kernel then refuses to narrow the parent (EBUSY).
        found = self.executor.subdirs(be_dir, "cpuset.cpus")
        pods = sorted({k.request.cgroup_dir.strip("/") for k in be_pods} | set(found))
        subdirs = self.executor.subdirs
        containers = [c for pod in pods if pod not in pinned for c in subdirs(pod, "cpuset.cpus")]
        static = policy == KubeletCPUManagerPolicy("static")
        if static:
            # The kubelet's static policy owns the upper levels: containers only.
            levels: list[list[str]] = [containers]
        else:
            levels = [[be_dir], pods, containers]
        writes = [[CgroupWrite(cg, "cpuset.cpus", value) for cg in level] for level in levels]
        results = self.executor.apply_leveled(writes, cacheable=True)
        done = all(r.status in (Status.APPLIED, Status.UNCHANGED) for r in results)
        self._cpuset_pass = (key, ctx.now) if done else None  # a failure: again next run
        if any(r.status is Status.APPLIED for r in results) and self._changed("cpuset", value):
            ctx.record(
                Action(
                    ctx.now,
                    NAME,
                    "cpuset",
                    be_dir,
                    value,
                    reason,
                    scope=QoSClass.BE.value,
                    inputs=_numbers(inputs),
                )
            )

    # -- cfsQuota policy ----------------------------------------------------------------------

    def _by_quota(self, ctx: Context, inputs: SuppressInputs) -> None:
        be_dir = ctx.qos_dirs[KubeQoS.BESTEFFORT]
        current = self.executor.read(be_dir, "cpu.cfs_quota_us")
        if not isinstance(current, int):
            ctx.status(NAME, f"no action: cannot read {be_dir} cpu.cfs_quota_us")
            return
        quota = next_quota(inputs.suppress_milli(), current, ctx.node.cpu_milli // 1000)
        if quota is None:
            ctx.status(NAME, f"suppressing by cfsQuota: {current} (change under 1%)")
            return
        self.quota_recovered = False
        result = self.executor.apply(
            [CgroupWrite(be_dir, "cpu.cfs_quota_us", quota)], cacheable=True
        )[0]
        if self.metrics is not None:
            cores = quota / CFS_PERIOD_US
            self.metrics.be_suppress_cpu_cores.labels(self.metrics.node, "cfsQuota").set(cores)
        if result.status is Status.APPLIED and self._changed("cfs_quota", str(quota)):
            reason = f"{inputs.explain()} -> quota {quota}us"
            ctx.record(
                Action(
                    ctx.now,
                    NAME,
                    "cfs_quota",
                    be_dir,
                    str(quota),
                    reason,
                    scope=QoSClass.BE.value,
                    inputs=_numbers(inputs),
                )
            )
        ctx.status(NAME, f"suppressing by cfsQuota: {quota}")

    def _recover_quota(self, ctx: Context) -> None:
        if self.quota_recovered:
            return
        be_dir = ctx.qos_dirs[KubeQoS.BESTEFFORT]
        result = self.executor.apply(
            [CgroupWrite(be_dir, "cpu.cfs_quota_us", UNLIMITED)], cacheable=True
        )[0]
        if result.status in (Status.APPLIED, Status.UNCHANGED):
            self.quota_recovered = True
        if result.status is Status.APPLIED and self._changed("cfs_quota", "-1"):
            ctx.record(Action(ctx.now, NAME, "cfs_quota", be_dir, "-1", "recover", scope="BE"))

    def _changed(self, kind: str, value: str) -> bool:
        before = self._last_value.get(kind)
        self._last_value[kind] = value
        return before != value


def next_quota(suppress_milli: int, current: int, capacity_cores: int) -> int | None:
    """The besteffort quota for this step, or None when the change is too small to write."""
    quota = max(suppress_milli * CFS_PERIOD_US // 1000, MIN_QUOTA)
    node_quota = capacity_cores * CFS_PERIOD_US
    if abs(quota - current) < node_quota * QUOTA_BYPASS_RATIO and quota != MIN_QUOTA:
        return None
    max_increase = int(node_quota * MAX_INCREASE_RATIO)
    if current != UNLIMITED and quota - current > max_increase:
        quota = current + max_increase
    return quota


def _numbers(inputs: SuppressInputs | None) -> dict[str, float | str]:
    if inputs is None:
        return {}
    numbers: dict[str, float | str] = {
        "capacity_cores": inputs.capacity_milli / 1000,
        "threshold_percent": inputs.threshold_percent,
        "node_used": round(inputs.node_used, 3),
        "ls_used": round(inputs.non_be_used, 3),
        "system_used": round(inputs.system_used, 3),
        "suppress_cores": inputs.suppress_milli() / 1000,
    }
    if inputs.slo_threshold_percent is not None:
        numbers["slo_threshold_percent"] = inputs.slo_threshold_percent
    return numbers
