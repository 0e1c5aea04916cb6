"""CPUBurst: let throttled services borrow CPU time, and give it back when the node is busy.

Two knobs, both per container of a burstable pod (any class but LSE, LSR and BE; those have
pinned CPUs or are batch work), configured by the NodeSLO ``cpuBurstStrategy`` with the pod's
``koordinator.sh/cpuBurst`` annotation merged over it:

* cpuBurst (kernel CFS burst): ``cpu.cfs_burst_us`` = limit cores x cpuBurstPercent/100 x one
  CFS period, so a container may spend quota it saved in earlier periods, at most its quota:
  mainline kernels refuse a larger burst (EINVAL), so Koordinator's default of 1000 % would
  never be written there. The pod gets the sum of its containers. It is 0 when the policy
  leaves it out or the container has no limit.
* cfsQuotaBurst: the quota itself moves. A throttled container gets x1.2 per run, up to
  cfsQuotaBurstPercent of its limit; it shrinks x0.8 (never below its limit) when the shared
  pool is overloaded or its token bucket is empty, which stops a container from living above
  its limit for longer than cfsQuotaBurstPeriodSeconds allows. The pod quota moves by the same
  delta, loosened first and tightened last, so the pod never caps its own container.

The shared pool is what LS and unlabeled pods run on: all CPUs minus the requests of LSE/LSR
pods; its usage is node usage minus LSE/LSR/BE pod usage, averaged over min(5 runs, 10 s).
Without fresh data nothing scales up: the pool state is "unknown", a container whose throttle
ratio is stale stays where it is, and the status line says so.
"""

from __future__ import annotations

import enum
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from koordapi import keys
from koordapi.cgroup import CFS_PERIOD_US, milli_cpu_to_quota
from koordapi.features import FeatureGates
from koordapi.nodeslo import SCHEMA, deep_merge, validate
from koordapi.qos import QoSClass
from koordlet.executor.writer import CgroupWrite, Executor, Status
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context, pod_labels
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerRequest, PodRequest

NAME = "CPUBurst"
SCALE_UP, SCALE_DOWN = 1.2, 0.8
COOLING_RATIO = 0.9  # the pool is "cooling" from 90% of its threshold on
SPEND_FROM_PERCENT, SAVE_BELOW_PERCENT = 100, 60  # token bucket: usage as % of the limit
MAX_WINDOW = 10.0
PINNED = frozenset({QoSClass.LSE, QoSClass.LSR})
NOT_BURSTABLE = PINNED | {QoSClass.BE}
BURST, QUOTA = "cpu.cfs_burst_us", "cpu.cfs_quota_us"


class PoolState(enum.StrEnum):
    OVERLOAD = "overload"
    COOLING = "cooling"
    IDLE = "idle"
    UNKNOWN = "unknown"


class Op(enum.StrEnum):
    SCALE_UP = "scaleUp"
    SCALE_DOWN = "scaleDown"
    REMAIN = "remain"
    RESET = "reset"


@dataclass(frozen=True)
class BurstConfig:
    policy: str = "none"
    cpu_burst_percent: int = 1000
    quota_burst_percent: int = 300
    period_seconds: int = -1  # < 0: no token bucket, a container may stay burst forever

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> BurstConfig:
        return cls(
            str(raw.get("policy", "none")),
            int(raw.get("cpuBurstPercent", 1000)),
            int(raw.get("cfsQuotaBurstPercent", 300)),
            int(raw.get("cfsQuotaBurstPeriodSeconds", -1)),
        )

    @property
    def cpu_burst(self) -> bool:
        return self.policy in ("cpuBurstOnly", "auto")

    @property
    def quota_burst(self) -> bool:
        return self.policy in ("cfsQuotaBurstOnly", "auto")


def pod_config(node: Mapping[str, Any], pod: PodRequest) -> tuple[BurstConfig, str | None]:
    """The node config with the pod annotation merged over it; a bad annotation is ignored."""
    text = pod.annotations.get(keys.ANNOTATION_CPU_BURST)
    if text is None:
        return BurstConfig.of(node), None
    try:
        override = json.loads(text)
        if not isinstance(override, dict):
            raise ValueError(f"not a JSON object: {text!r}")
        merged = deep_merge(node, override)
        validate(merged, SCHEMA["cpuBurstStrategy"], keys.ANNOTATION_CPU_BURST)
        return BurstConfig.of(merged), None
    except ValueError as err:  # JSONDecodeError and NodeSLOError are ValueErrors
        return BurstConfig.of(node), f"pod {pod.key}: bad annotation ({err}), node config used"


def limit_milli(ctr: ContainerRequest) -> int:
    """The CPU limit the runtime was given (quota over period), 0 when unlimited."""
    res = ctr.resources
    if not res.cpu_quota or res.cpu_quota <= 0:
        return 0
    return res.cpu_quota * 1000 // (res.cpu_period or CFS_PERIOD_US)


def request_cores(known: KnownPod) -> float:
    """A pod's CPU request, from cpu.shares (the kubelet sets shares = milli x 1024 / 1000)."""
    return sum(c.resources.cpu_shares or 0 for c in known.containers.values()) / 1024


@dataclass
class TokenBucket:
    """Seconds x percent above the limit a container may still burn; see the module docstring."""

    capacity: float
    tokens: float
    updated: float
    period: int

    def allow(self, now: float, usage_percent: float) -> bool:
        elapsed = max(0.0, now - self.updated)
        if usage_percent >= SPEND_FROM_PERCENT:
            self.tokens -= (usage_percent - 100) * elapsed
        elif usage_percent < SAVE_BELOW_PERCENT:
            self.tokens += (100 - usage_percent) * elapsed
        # the debt is bounded too, so a container that calms down regains burst in finite time
        self.tokens = max(-self.capacity, min(self.tokens, self.capacity))
        self.updated = now
        return self.tokens > 0


@dataclass(frozen=True)
class SharePool:
    state: PoolState
    usage: float = 0.0
    total: float = 0.0
    threshold: float = 50.0  # percent

    def __str__(self) -> str:
        if self.state is PoolState.UNKNOWN:
            return "share pool unknown (node CPU usage is stale)"
        bound = self.threshold * (1 if self.state is PoolState.OVERLOAD else COOLING_RATIO)
        sign = "<" if self.state is PoolState.IDLE else ">="
        return (
            f"share pool {self.state} (usage {self.usage:.1f} of {self.total:.1f} cores "
            f"{sign} {bound:.0f}%)"
        )


def share_pool(ctx: Context, threshold: float, window: float) -> SharePool:
    node = ctx.window("node_cpu_usage", window)
    if node is None:
        return SharePool(PoolState.UNKNOWN, threshold=threshold)
    total, usage = float(len(ctx.topology.cpus)), node.avg
    for known in ctx.pods:
        qos = known.request.qos
        if qos in PINNED:
            total -= request_cores(known)
        if qos in NOT_BURSTABLE:
            pod = ctx.window("pod_cpu_usage", window, pod_labels(known))
            usage -= pod.avg if pod is not None else 0.0
    # for no shared CPUs at all Koordinator counts the pool as full
    ratio = usage / total if total > 0 else 1.0
    if ratio >= threshold / 100:
        state = PoolState.OVERLOAD
    elif ratio >= threshold / 100 * COOLING_RATIO:
        state = PoolState.COOLING
    else:
        state = PoolState.IDLE
    return SharePool(state, usage, total, threshold)


def _record(ctx: Context, write: CgroupWrite, reason: str, uid: str, **inputs: float) -> None:
    kind = write.resource.removeprefix("cpu.")  # "cfs_burst_us", "cfs_quota_us"
    ctx.record(Action(ctx.now, NAME, kind, write.cgroup, str(write.value), reason, uid, "", inputs))


class CPUBurst:
    """The strategy; see the module docstring. ``scaled`` feeds the scaled-value metrics."""

    name = NAME

    def __init__(
        self,
        executor: Executor,
        *,
        interval: float = 1.0,
        rng: random.Random | None = None,
        metrics: KoordletMetrics | None = None,
    ) -> None:
        self.executor = executor
        self.interval = interval
        self.metrics = metrics
        self.rng = rng or random.Random()  # noqa: S311 - spreads bucket starts, not a secret
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        self.scaled: dict[tuple[str, str], tuple[int, int]] = {}
        # Containers whose quota this strategy moved: only those are reset, so a quota set by
        # a hook (CPU normalization) is never "reset" to the unnormalized limit.
        self.moved: set[tuple[str, str]] = set()
        # key → (metric labels, the values last set): a gauge is set when its value changes
        # (looking up 400 labelled children every second was a third of this strategy's cost)
        self._exported: dict[
            tuple[str, str], tuple[tuple[str, str, str, str], tuple[int, int]]
        ] = {}
        # pod uid → (the pod, its config, the bursts in effect, the executor's cache entry of
        # each burst written): see ``_cpu_burst``
        self._bursts: dict[
            str,
            tuple[KnownPod, BurstConfig, dict[str, int], list[tuple[str, tuple[object, float]]]],
        ] = {}

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(NAME) and self.interval > 0

    def _export(self, ctx: Context, scaled: dict[tuple[str, str], tuple[int, int]]) -> None:
        """koordlet_container_scaled_cfs_{burst,quota}_us; series of gone containers removed."""
        if self.metrics is None:
            return
        # Koordinator's labels: pod_namespace, pod_name, container_id, container_name
        names = {
            (k.request.uid, cid): (k.request.namespace, k.request.name, cid, c.name)
            for k in ctx.pods
            for cid, c in k.containers.items()
        }
        node = self.metrics.node
        for key in self.scaled.keys() - scaled.keys():
            if key in self._exported:
                labels, _ = self._exported.pop(key)
                for gauge in (self.metrics.scaled_cfs_burst, self.metrics.scaled_cfs_quota):
                    gauge.remove(node, *labels)
        for key, values in scaled.items():
            labels = names.get(key, ("", "", key[1], ""))
            if self._exported.get(key) == (labels, values):
                continue
            self._exported[key] = (labels, values)
            burst, quota = values
            self.metrics.scaled_cfs_burst.labels(node, *labels).set(burst)
            self.metrics.scaled_cfs_quota.labels(node, *labels).set(quota)

    def run(self, ctx: Context) -> None:
        node_cfg = ctx.rules.slo.cpu_burst
        threshold = float(node_cfg.get("sharePoolThresholdPercent", 50))
        window = min(5 * self.interval, MAX_WINDOW)
        found: list[SharePool] = []

        def pool() -> SharePool:
            """Computed once, and only when a pod uses quota burst (it queries every pod)."""
            if not found:
                found.append(share_pool(ctx, threshold, window))
            return found[0]

        notes: dict[str, None] = {}  # ordered and without repeats
        scaled: dict[tuple[str, str], tuple[int, int]] = {}
        for known in ctx.pods:
            if known.request.qos in NOT_BURSTABLE or not known.request.cgroup_dir:
                continue
            cfg, problem = pod_config(node_cfg, known.request)
            if problem:
                notes[problem] = None
            bursts = self._cpu_burst(ctx, known, cfg, notes)
            for cid, ctr in known.containers.items():
                if ctr.sandbox or not ctr.cgroup_dir:
                    continue
                quota = self._quota_burst(ctx, ctr, cfg, pool, notes)
                scaled[(known.request.uid, cid)] = (bursts.get(cid, 0), quota)
        self._export(ctx, scaled)
        self.scaled = scaled
        uids = {k.request.uid for k in ctx.pods}
        for uid in self._bursts.keys() - uids:
            del self._bursts[uid]
        live = {(k.request.uid, cid) for k in ctx.pods for cid in k.containers}
        for key, bucket in list(self.buckets.items()):
            if key not in live or ctx.now - bucket.updated > 2 * bucket.period:
                del self.buckets[key]
        # the state only, not the numbers: the status is logged whenever its text changes
        head = f"share pool {found[0].state}" if found else "no pod uses quota burst"
        if found and found[0].state is PoolState.UNKNOWN:
            head = f"{found[0]}: no quota scale up"
        ctx.status(NAME, "; ".join([head, *notes]))

    def _cpu_burst(
        self, ctx: Context, known: KnownPod, cfg: BurstConfig, notes: dict[str, None]
    ) -> dict[str, int]:
        """Writes cpu.cfs_burst_us of the containers, then of the pod; the values in effect.

        Every second for every pod, and almost always the same values: when the pod (the
        same object: the pod store replaces it when anything of it changes) and its config
        are those of a run whose writes all took, and the executor still holds each of those
        writes' entries unchanged (within its force-update window, nothing wrote or saw the
        file since), every write would be answered "unchanged" from that cache without
        touching the file: the run's values are given again without asking. A pod whose burst
        was capped by a read of its quota is always done in full."""
        pod = known.request
        hit = self._bursts.get(pod.uid)
        if (
            hit is not None
            and hit[0] is known
            and hit[1] == cfg
            and all(self.executor.fresh(cg, BURST) is entry for cg, entry in hit[3])
        ):
            return hit[2]
        writes: list[tuple[CgroupWrite, str, str]] = []  # (write, container id, reason)
        total = 0
        for cid, ctr in known.containers.items():
            if ctr.sandbox or not ctr.cgroup_dir:
                continue
            limit = limit_milli(ctr)
            if not cfg.cpu_burst:
                value, why = 0, f"cpu burst off (policy {cfg.policy}): 0us"
            elif limit <= 0:
                value, why = 0, "cpu burst: no CPU limit: 0us"
            else:
                value = int(limit / 1000 * cfg.cpu_burst_percent / 100 * CFS_PERIOD_US)
                why = (
                    f"cpu burst: limit {limit / 1000:.2f} cores x {cfg.cpu_burst_percent}% "
                    f"= {value}us"
                )
                quota = ctr.resources.cpu_quota or 0
                if value > quota:  # the kernel refuses a burst above the quota (EINVAL)
                    why += f", capped at the quota {quota}us"
                    value = quota
            total += value
            writes.append((CgroupWrite(ctr.cgroup_dir, BURST, value), cid, why))
        pod_why = f"cpu burst: sum of {len(writes)} containers = {total}us"
        # The same kernel rule: no burst without a quota, none above it. A pod with no burst
        # to give needs no read of its quota (this runs for every pod every second).
        read_quota = total > 0
        pod_quota = self.executor.read(pod.cgroup_dir, QUOTA) if read_quota else None
        if isinstance(pod_quota, int) and (pod_quota < 0 or total > pod_quota):
            total = max(pod_quota, 0)
            pod_why += f", capped at the pod's quota: {total}us"
        writes.append((CgroupWrite(pod.cgroup_dir, BURST, total), "", pod_why))
        in_effect: dict[str, int] = {}
        took = True
        for write, cid, why in writes:
            (result,) = self.executor.apply([write], cacheable=True)
            if result.status is Status.UNSUPPORTED:
                notes["cpu.cfs_burst_us not supported by this kernel"] = None
                return {}  # the same kernel for every cgroup: stop asking
            if result.status in (Status.APPLIED, Status.UNCHANGED) and cid:
                in_effect[cid] = int(write.value)
            took = took and result.status in (Status.APPLIED, Status.UNCHANGED)
            if result.status is Status.APPLIED:
                _record(ctx, write, why, pod.uid, percent=cfg.cpu_burst_percent)
        self._bursts.pop(pod.uid, None)
        if took and not read_quota:
            entries = []
            for write, _, _ in writes:
                entry = self.executor.fresh(write.cgroup, BURST)
                if entry is None:  # no force-update window: every run asks
                    return in_effect
                entries.append((write.cgroup, entry))
            self._bursts[pod.uid] = (known, cfg, in_effect, entries)
        return in_effect

    def _allowed(self, ctx: Context, key: tuple[str, str], cfg: BurstConfig, limit: int) -> bool:
        """The container's token bucket, when the config limits how long a burst may last."""
        if cfg.period_seconds < 0:
            return True
        capacity = float(cfg.period_seconds * (cfg.quota_burst_percent - 100))
        bucket = self.buckets.get(key)
        if bucket is None or bucket.capacity != capacity:  # new, or the config changed
            start = self.rng.random() * 0.5 * capacity
            bucket = self.buckets[key] = TokenBucket(capacity, start, ctx.now, cfg.period_seconds)
        uid, cid = key
        usage = ctx.last("container_cpu_usage", {"pod_uid": uid, "container_id": cid})
        # unknown usage counts as exactly the limit: it neither spends nor saves tokens
        percent = 100.0 if usage is None else usage * 1000 / limit * 100
        return bucket.allow(ctx.now, percent)

    def _quota_burst(
        self,
        ctx: Context,
        ctr: ContainerRequest,
        cfg: BurstConfig,
        pool: Callable[[], SharePool],
        notes: dict[str, None],
    ) -> int:
        """Scales the container's (and pod's) cfs quota one step; the container quota after."""
        pod = ctr.pod
        limit = limit_milli(ctr)
        untouched = not cfg.quota_burst and (pod.uid, ctr.id) not in self.moved
        # Only exported then (the default policy, every container every second): what was
        # written or seen within the force-update window serves.
        read = self.executor.read_trusted if untouched else self.executor.read
        current = read(ctr.cgroup_dir, QUOTA)
        if not isinstance(current, int):
            return -1  # no such cgroup or file: nothing to scale
        if limit <= 0 or current <= 0 or untouched:
            # no limit asked for, or unlimited on purpose (a pinned cpuset): not ours to tighten
            return current
        base = milli_cpu_to_quota(limit)
        ceil = base * cfg.quota_burst_percent // 100 if cfg.quota_burst_percent > 100 else base
        allowed = self._allowed(ctx, (pod.uid, ctr.id), cfg, limit)
        labels = {"pod_uid": pod.uid, "container_id": ctr.id}
        throttled = ctx.last("container_cpu_throttled", labels)
        if not cfg.quota_burst:  # and moved: put back
            op, why = Op.RESET, f"policy {cfg.policy} has no quota burst"
        elif not allowed:
            op, why = Op.SCALE_DOWN, f"token bucket empty ({cfg.period_seconds}s burst spent)"
        elif throttled is None:
            op, why = Op.REMAIN, "throttled ratio is stale"
            notes["throttled ratio stale: no quota scale up"] = None
        elif throttled > 0:
            op, why = Op.SCALE_UP, f"throttled {throttled:.2f} > 0"
        else:
            op, why = Op.REMAIN, f"throttled {throttled:.2f}"
        wanted = op
        state = pool().state
        if state is PoolState.OVERLOAD and op in (Op.SCALE_UP, Op.REMAIN):
            op = Op.SCALE_DOWN
        elif state in (PoolState.COOLING, PoolState.UNKNOWN) and op is Op.SCALE_UP:
            op = Op.REMAIN
        if op is not wanted:
            why = f"{why}, {pool()} turns {wanted} into {op}"
        elif op is Op.SCALE_UP:
            why = f"{why}, {pool()}"
        step = {Op.SCALE_UP: SCALE_UP, Op.SCALE_DOWN: SCALE_DOWN}.get(op)
        target = int(current * step) if step else (base if op is Op.RESET else current)
        target = max(base, min(target, ceil))
        if op is Op.RESET:
            self.moved.discard((pod.uid, ctr.id))
        elif target != current:
            self.moved.add((pod.uid, ctr.id))
        if target == current:
            return current
        return self._apply_quota(ctx, ctr, current, target, f"quota burst {op}: {why}")

    def _apply_quota(
        self,
        ctx: Context,
        ctr: ContainerRequest,
        current: int,
        target: int,
        why: str,
    ) -> int:
        """Moves container and pod quota by the same delta, the looser side first."""
        pod, delta = ctr.pod, target - current
        pod_quota = self.executor.read(pod.cgroup_dir, QUOTA)
        if not isinstance(pod_quota, int):
            return current  # no pod cgroup (yet, or any more): leave both alone
        writes = [(CgroupWrite(ctr.cgroup_dir, QUOTA, target), why)]
        if pod_quota > 0:  # an unlimited pod needs nothing
            follow = f"{why} (pod follows container {ctr.name} by {delta:+d}us)"
            writes.append((CgroupWrite(pod.cgroup_dir, QUOTA, pod_quota + delta), follow))
        if delta > 0:
            writes.reverse()
        now_in_effect = current
        for write, reason in writes:
            (result,) = self.executor.apply([write], cacheable=True)
            if result.status not in (Status.APPLIED, Status.UNCHANGED):
                break  # never tighten the pod below a container that kept its old quota
            if write.cgroup == ctr.cgroup_dir:
                now_in_effect = target
            if result.status is Status.APPLIED:
                _record(ctx, write, reason, pod.uid, current=current, target=target)
        return now_in_effect
