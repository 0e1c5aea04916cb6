"""CPUBurst on fake cgroup v1 trees: burst values, share-pool states, quota steps, token bucket."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.features import FeatureGates
from koordlet.executor import CgroupWrite, Executor, WriteResult
from koordlet.metriccache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.audit import AuditTrail
from koordlet.qosmanager.cpuburst import CPUBurst, PoolState, SharePool, TokenBucket, share_pool
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerResources
from tests.unit.koordlet.qosmanager.fakes import NOW, context, known_pod, samples

TWO_CORES = ContainerResources(cpu_shares=2048, cpu_quota=200_000, cpu_period=100_000)
HALF_CORE = ContainerResources(cpu_shares=512, cpu_quota=50_000, cpu_period=100_000)
NO_LIMIT = ContainerResources(cpu_shares=1024)


class FixedRandom(random.Random):
    """random() always gives ``value``: the token bucket's start is known."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


class Node:
    """A fake v1 cpu hierarchy, an executor that logs its writes, a metric cache, an audit."""

    def __init__(self, root: Path, *, burst_file: bool = True) -> None:
        self.root = root
        self.burst_file = burst_file
        (root / "cpu").mkdir(parents=True, exist_ok=True)
        self.writes: list[WriteResult] = []
        self.executor = Executor(root, on_result=self.writes.append)
        self.cache = MetricCache()
        self.audit = AuditTrail()

    def add(self, known: KnownPod, *, pod_quota: int = -1, quota: int | None = None) -> KnownPod:
        cgroups = {known.request.cgroup_dir: pod_quota}
        for ctr in known.containers.values():
            cgroups[ctr.cgroup_dir] = quota if quota is not None else ctr.resources.cpu_quota or -1
        for cg, value in cgroups.items():
            folder = self.root / "cpu" / cg
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "cpu.cfs_quota_us").write_text(f"{value}\n")
            if self.burst_file:
                (folder / "cpu.cfs_burst_us").write_text("0\n")
        return known

    def read(self, cgroup: str, name: str = "cpu.cfs_quota_us") -> int:
        return int((self.root / "cpu" / cgroup / name).read_text())

    def ctx(
        self, pods: list[KnownPod], policy: str = "auto", now: float = NOW, **cfg: Any
    ) -> Context:
        spec = {"cpuBurstStrategy": {"policy": policy, **cfg}}
        return context(pods=pods, spec=spec, cache=self.cache, audit=self.audit, now=now)

    def metrics(self, values: Mapping[str, float], ts: float = NOW, **labels: str) -> None:
        samples(self.cache, values, ts, **labels)

    def idle(self, ts: float = NOW) -> None:
        self.metrics({"node_cpu_usage": 0.5}, ts)

    def throttled(
        self, known: KnownPod, ratio: float, ts: float = NOW, usage: float | None = None
    ) -> None:
        for cid in known.containers:
            labels = {"pod_uid": known.request.uid, "container_id": cid}
            self.metrics({"container_cpu_throttled": ratio}, ts, **labels)
            if usage is not None:
                self.metrics({"container_cpu_usage": usage}, ts, **labels)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def ctr_dir(known: KnownPod, index: int = 0) -> str:
    return list(known.containers.values())[index].cgroup_dir


def status(ctx: Context) -> str:
    return ctx.audit.statuses()["CPUBurst"].text


# -- cpu.cfs_burst_us -------------------------------------------------------------------------


def test_burst_is_limit_times_percent_and_pod_gets_the_sum(node: Node) -> None:
    containers = {"a": TWO_CORES, "b": HALF_CORE, "c": NO_LIMIT}
    pod = node.add(known_pod("web", containers=containers), pod_quota=250_000)
    strategy = CPUBurst(node.executor)
    ctx = node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=60)
    strategy.run(ctx)
    assert [node.read(ctr_dir(pod, i), "cpu.cfs_burst_us") for i in range(3)] == [
        120_000,
        30_000,
        0,
    ]
    assert node.read(pod.request.cgroup_dir, "cpu.cfs_burst_us") == 150_000
    reasons = [a.reason for a in ctx.audit.recent() if a.kind == "cfs_burst_us"]
    assert "cpu burst: limit 2.00 cores x 60% = 120000us" in reasons
    assert strategy.scaled[(pod.request.uid, "web-c0")] == (120_000, 200_000)
    # a second run changes nothing and records nothing
    before = len(ctx.audit.recent())
    strategy.run(node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=60))
    assert len(ctx.audit.recent()) == before


def test_burst_above_the_quota_is_capped_at_it_as_the_kernel_requires(node: Node) -> None:
    # Koordinator's default 1000 % asks 10 x the quota, which a mainline kernel refuses (EINVAL).
    pod = node.add(known_pod("web", containers={"a": TWO_CORES, "b": HALF_CORE}), pod_quota=210_000)
    ctx = node.ctx([pod], "cpuBurstOnly")
    CPUBurst(node.executor).run(ctx)
    assert [node.read(ctr_dir(pod, i), "cpu.cfs_burst_us") for i in range(2)] == [200_000, 50_000]
    assert node.read(pod.request.cgroup_dir, "cpu.cfs_burst_us") == 210_000  # the pod's quota
    reasons = [a.reason for a in ctx.audit.recent() if a.kind == "cfs_burst_us"]
    assert "cpu burst: limit 0.50 cores x 1000% = 500000us, capped at the quota 50000us" in reasons
    assert (
        "cpu burst: sum of 2 containers = 250000us, capped at the pod's quota: 210000us" in reasons
    )


def test_a_pod_without_a_quota_gets_no_burst_as_the_kernel_requires(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": HALF_CORE}))  # pod quota -1
    (node.root / "cpu" / pod.request.cgroup_dir / "cpu.cfs_burst_us").write_text("9000\n")
    CPUBurst(node.executor).run(node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=20))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 10_000
    assert node.read(pod.request.cgroup_dir, "cpu.cfs_burst_us") == 0


def test_scaled_values_are_exported_and_dropped_with_the_container(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}))
    metrics = KoordletMetrics("node1")
    strategy = CPUBurst(node.executor, metrics=metrics)
    strategy.run(node.ctx([pod], "cpuBurstOnly"))
    # Koordinator's label names
    labels = {
        "node": "node1",
        "pod_namespace": "default",
        "pod_name": "web",
        "container_id": "web-c0",
        "container_name": "a",
    }
    get = metrics.registry.get_sample_value
    assert get("koordlet_container_scaled_cfs_burst_us", labels) == 200_000  # at the quota
    assert get("koordlet_container_scaled_cfs_quota_us", labels) == 200_000
    strategy.run(node.ctx([], "cpuBurstOnly"))
    assert get("koordlet_container_scaled_cfs_burst_us", labels) is None


def test_policy_without_cpu_burst_sets_zero(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}))
    (node.root / "cpu" / ctr_dir(pod) / "cpu.cfs_burst_us").write_text("700000\n")
    CPUBurst(node.executor).run(node.ctx([pod], "cfsQuotaBurstOnly"))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 0


def test_pod_annotation_overrides_node_config(node: Node) -> None:
    note = {keys.ANNOTATION_CPU_BURST: json.dumps({"policy": "auto", "cpuBurstPercent": 70})}
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}, annotations=note))
    CPUBurst(node.executor).run(node.ctx([pod], "none"))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 140_000


@pytest.mark.parametrize(
    "text", ["{not json", "[1]", '{"cpuBurstPercent": "lots"}', '{"policy": "always"}']
)
def test_bad_annotation_falls_back_to_node_config(node: Node, text: str) -> None:
    pod = node.add(
        known_pod("web", containers={"a": TWO_CORES}, annotations={keys.ANNOTATION_CPU_BURST: text})
    )
    ctx = node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=45)
    CPUBurst(node.executor).run(ctx)
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 90_000  # the node's 45 %
    assert "default/web: bad annotation" in status(ctx)


def test_pinned_and_batch_pods_are_left_alone(node: Node) -> None:
    pods = [
        node.add(known_pod(name, qos=qos, containers={"a": TWO_CORES}), quota=300_000)
        for name, qos in (("lsr", "LSR"), ("lse", "LSE"), ("be", "BE"))
    ]
    CPUBurst(node.executor).run(node.ctx(pods, "auto"))
    assert node.writes == []


def test_missing_burst_file_is_reported_and_quota_still_scales(tmp_path: Path) -> None:
    node = Node(tmp_path, burst_file=False)
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=200_000)
    node.idle()
    node.throttled(pod, 0.5)
    ctx = node.ctx([pod], "auto")
    CPUBurst(node.executor).run(ctx)
    assert "cpu.cfs_burst_us not supported by this kernel" in status(ctx)
    assert node.read(ctr_dir(pod)) == 240_000


def test_missing_cgroups_do_not_crash(node: Node) -> None:
    pod = known_pod("ghost", containers={"a": TWO_CORES})  # no files at all
    node.idle()
    node.throttled(pod, 0.5)
    strategy = CPUBurst(node.executor)
    ctx = node.ctx([pod], "auto")
    strategy.run(ctx)
    assert ctx.audit.recent() == []
    assert strategy.scaled[(pod.request.uid, "ghost-c0")] == (0, -1)


# -- share pool -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shared_usage", "state"),
    [
        (1.2, PoolState.IDLE),
        (2.69, PoolState.IDLE),
        (2.71, PoolState.COOLING),
        (3.0, PoolState.OVERLOAD),
    ],
)
def test_share_pool_state_from_usage_of_the_shared_cpus(
    shared_usage: float, state: PoolState
) -> None:
    # 8 CPUs; an LSR pod requests 2 of them (shares 2048) and a BE pod uses 1 core
    lsr = known_pod("lsr", qos="LSR", containers={"a": TWO_CORES})
    be = known_pod("be", qos="BE", kube="BestEffort")
    cache = MetricCache()
    samples(cache, {"node_cpu_usage": 1.0 + 0.5 + shared_usage})
    samples(cache, {"pod_cpu_usage": 1.0}, pod_uid=be.request.uid)
    samples(cache, {"pod_cpu_usage": 0.5}, pod_uid=lsr.request.uid)
    pool = share_pool(context(pods=[lsr, be], cache=cache), 50, 5.0)
    assert pool.state is state
    assert pool.total == pytest.approx(6.0)
    assert pool.usage == pytest.approx(shared_usage)


def test_share_pool_describes_itself() -> None:
    assert str(SharePool(PoolState.IDLE, 1.2, 6.0, 50)) == (
        "share pool idle (usage 1.2 of 6.0 cores < 45%)"
    )
    assert str(SharePool(PoolState.OVERLOAD, 3.0, 6.0, 50)).endswith(">= 50%)")


def test_share_pool_unknown_without_recent_node_usage() -> None:
    cache = MetricCache()
    assert share_pool(context(cache=cache), 50, 5.0).state is PoolState.UNKNOWN
    samples(cache, {"node_cpu_usage": 1.0}, ts=NOW - 6)  # outside the 5 s window
    assert share_pool(context(cache=cache), 50, 5.0).state is PoolState.UNKNOWN


# -- cfs quota burst --------------------------------------------------------------------------


def test_throttled_container_scales_up_pod_first_then_container(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=250_000)
    node.idle()
    node.throttled(pod, 0.35)
    ctx = node.ctx([pod], "cfsQuotaBurstOnly")
    CPUBurst(node.executor).run(ctx)
    assert node.read(ctr_dir(pod)) == 240_000
    assert node.read(pod.request.cgroup_dir) == 290_000  # the same +40000 delta
    quota_writes = [r.write.cgroup for r in node.writes if r.write.resource == "cpu.cfs_quota_us"]
    assert quota_writes == [pod.request.cgroup_dir, ctr_dir(pod)]
    (action,) = [a for a in ctx.audit.recent() if a.target == ctr_dir(pod)]
    assert action.kind == "cfs_quota_us"
    assert action.value == "240000"
    assert action.reason.startswith("quota burst scaleUp: throttled 0.35 > 0, share pool idle")
    assert action.pod_uid == pod.request.uid


def test_scale_up_stops_at_the_ceiling(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), quota=550_000)
    node.idle()
    node.throttled(pod, 0.5)
    strategy = CPUBurst(node.executor)
    strategy.run(node.ctx([pod], "auto"))
    assert node.read(ctr_dir(pod)) == 600_000  # 300% of the 2-core limit, not 660000
    assert node.read(pod.request.cgroup_dir) == -1  # an unlimited pod stays unlimited
    strategy.run(node.ctx([pod], "auto", cfsQuotaBurstPercent=400))
    assert node.read(ctr_dir(pod)) == 720_000


@pytest.mark.parametrize(("start", "end"), [(500_000, 400_000), (220_000, 200_000)])
def test_overload_scales_down_container_first_never_below_the_limit(
    node: Node, start: int, end: int
) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=start, quota=start)
    node.metrics({"node_cpu_usage": 7.0})  # 7 of 8 shared cores: overload
    node.throttled(pod, 0.5)
    ctx = node.ctx([pod], "auto")
    CPUBurst(node.executor).run(ctx)
    assert node.read(ctr_dir(pod)) == end
    assert node.read(pod.request.cgroup_dir) == end
    quota_writes = [r.write.cgroup for r in node.writes if r.write.resource == "cpu.cfs_quota_us"]
    assert quota_writes == [ctr_dir(pod), pod.request.cgroup_dir]
    assert "turns scaleUp into scaleDown" in ctx.audit.recent()[-1].reason


def test_policy_without_quota_burst_resets_only_what_it_scaled(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=200_000, quota=200_000)
    node.idle()
    node.throttled(pod, 0.5)
    strategy = CPUBurst(node.executor)
    strategy.run(node.ctx([pod], "auto"))
    assert node.read(ctr_dir(pod)) == 240_000  # scaled up while the policy allowed it
    ctx = node.ctx([pod], "cpuBurstOnly")
    strategy.run(ctx)
    assert node.read(ctr_dir(pod)) == 200_000
    assert node.read(pod.request.cgroup_dir) == 200_000
    assert (
        "quota burst reset: policy cpuBurstOnly has no quota burst" in ctx.audit.recent()[-1].reason
    )


def test_policy_without_quota_burst_leaves_a_quota_it_did_not_set(node: Node) -> None:
    # e.g. CPU normalization's quota: not the limit, and not this strategy's to undo
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=166_667, quota=166_667)
    node.idle()
    node.throttled(pod, 0.5)
    CPUBurst(node.executor).run(node.ctx([pod], "cpuBurstOnly"))
    assert node.read(ctr_dir(pod)) == 166_667


@pytest.mark.parametrize(("usage", "state"), [(8 * 0.47, "cooling"), (None, "unknown")])
def test_cooling_or_unknown_pool_holds_a_throttled_container(
    node: Node, usage: float | None, state: str
) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), quota=300_000)
    if usage is not None:
        node.metrics({"node_cpu_usage": usage})  # 47% of 8 shared cores: cooling
    node.throttled(pod, 0.5)
    ctx = node.ctx([pod], "auto")
    CPUBurst(node.executor).run(ctx)
    assert node.read(ctr_dir(pod)) == 300_000
    assert status(ctx).startswith(f"share pool {state}")


def test_stale_throttle_ratio_means_no_scale_up(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}))
    node.idle()
    node.throttled(pod, 0.9, ts=NOW - 5)  # older than two collect intervals
    ctx = node.ctx([pod], "auto")
    CPUBurst(node.executor).run(ctx)
    assert node.read(ctr_dir(pod)) == 200_000
    assert "throttled ratio stale: no quota scale up" in status(ctx)


# -- token bucket -----------------------------------------------------------------------------


def test_token_bucket_spends_above_the_limit_saves_below_60_percent() -> None:
    bucket = TokenBucket(capacity=1000, tokens=300, updated=0, period=5)
    assert bucket.allow(10, 120)  # -20 x 10 s
    assert bucket.tokens == 100
    assert bucket.allow(20, 80)  # between 60% and 100%: unchanged
    assert bucket.tokens == 100
    assert not bucket.allow(30, 150)  # -500: denied, floor at -capacity
    assert bucket.tokens == -400
    assert not bucket.allow(100, 300)
    assert bucket.tokens == -1000
    assert bucket.allow(200, 0)  # +100 x 100 s, capped at capacity
    assert bucket.tokens == 1000


def test_empty_bucket_turns_a_throttled_container_down(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), quota=300_000)
    strategy = CPUBurst(node.executor, rng=FixedRandom(0.99))
    key = (pod.request.uid, "web-c0")
    cfg = {"cfsQuotaBurstPeriodSeconds": 10}  # capacity 10 x (300 - 100) = 2000, start 990
    for step, expected in ((0, 360_000), (10, 432_000), (20, 345_600)):
        node.idle(NOW + step)
        node.throttled(pod, 0.5, ts=NOW + step, usage=3.0)  # 150% of the limit: -50 per second
        strategy.run(node.ctx([pod], "auto", now=NOW + step, **cfg))
        assert node.read(ctr_dir(pod)) == expected, step
    assert strategy.buckets[key].tokens == pytest.approx(-10)
    # the container is gone: its bucket is forgotten
    strategy.run(node.ctx([], "auto", now=NOW + 21, **cfg))
    assert strategy.buckets == {}


def test_bucket_starting_empty_denies_at_once(node: Node) -> None:
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), quota=300_000)
    node.idle()
    node.throttled(pod, 0.5, usage=2.0)
    ctx = node.ctx([pod], "auto", cfsQuotaBurstPeriodSeconds=10)
    CPUBurst(node.executor, rng=FixedRandom(0.0)).run(ctx)
    assert node.read(ctr_dir(pod)) == 240_000
    assert "token bucket empty" in ctx.audit.recent()[-1].reason


def test_feature_gate() -> None:
    strategy = CPUBurst(Executor(Path("/nonexistent")))
    assert strategy.enabled(FeatureGates.parse(""))
    assert not strategy.enabled(FeatureGates.parse("CPUBurst=false"))
    assert not CPUBurst(Executor(Path("/nonexistent")), interval=0).enabled(FeatureGates.parse(""))


# -- a pod whose burst is in place is not asked again ------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cached_node(tmp_path: Path) -> tuple[Node, Clock]:
    """``Node`` whose executor trusts what it wrote or saw for 60 s (koordlet's default)."""
    node, clock = Node(tmp_path), Clock()
    node.executor = Executor(
        tmp_path, on_result=node.writes.append, force_update_seconds=60, clock=clock
    )
    return node, clock


def burst_writes(node: Node) -> list[WriteResult]:
    return [r for r in node.writes if r.write.resource == "cpu.cfs_burst_us"]


def test_an_unchanged_pod_is_not_asked_again_and_its_values_hold(tmp_path: Path) -> None:
    node, _ = cached_node(tmp_path)
    pod = node.add(known_pod("web", containers={"a": HALF_CORE, "b": NO_LIMIT}))
    strategy = CPUBurst(node.executor)
    strategy.run(node.ctx([pod], "none"))  # Koordinator's default policy: no burst
    assert len(burst_writes(node)) == 3  # two containers and the pod
    scaled = dict(strategy.scaled)
    strategy.run(node.ctx([pod], "none"))
    assert len(burst_writes(node)) == 3  # nothing asked
    assert (
        strategy.scaled
        == scaled
        == {
            (pod.request.uid, "web-c0"): (0, 50_000),
            (pod.request.uid, "web-c1"): (0, -1),
        }
    )


def test_a_changed_config_or_pod_is_written_after_an_unchanged_run(tmp_path: Path) -> None:
    node, _ = cached_node(tmp_path)
    pod = node.add(known_pod("web", containers={"a": HALF_CORE}))
    strategy = CPUBurst(node.executor)
    for _ in range(2):
        strategy.run(node.ctx([pod], "none"))
    strategy.run(node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=20))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 10_000
    # the pod store gives a new object when the pod changes: a new limit is seen at once
    unlimited = node.add(known_pod("db", containers={"a": NO_LIMIT}))
    for _ in range(2):
        strategy.run(node.ctx([unlimited], "cpuBurstOnly", cpuBurstPercent=20))
    limited = node.add(known_pod("db", containers={"a": HALF_CORE}))
    strategy.run(node.ctx([limited], "cpuBurstOnly", cpuBurstPercent=20))
    assert node.read(ctr_dir(limited), "cpu.cfs_burst_us") == 10_000


def test_a_value_written_by_another_is_put_back_and_the_window_still_rereads(
    tmp_path: Path,
) -> None:
    node, clock = cached_node(tmp_path)
    pod = node.add(known_pod("web", containers={"a": HALF_CORE}))
    strategy = CPUBurst(node.executor)
    strategy.run(node.ctx([pod], "none"))
    # another writer through the executor: its entry is no longer the one CPUBurst saw
    node.executor.apply([CgroupWrite(ctr_dir(pod), "cpu.cfs_burst_us", 7)])
    strategy.run(node.ctx([pod], "none"))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 0
    # behind koordlet's back: trusted for the force-update window, then read and put back
    (node.root / "cpu" / ctr_dir(pod) / "cpu.cfs_burst_us").write_text("9\n")
    clock.now += 30
    strategy.run(node.ctx([pod], "none"))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 9
    clock.now += 31
    strategy.run(node.ctx([pod], "none"))
    assert node.read(ctr_dir(pod), "cpu.cfs_burst_us") == 0


def test_a_pod_capped_by_its_quota_is_always_done_in_full(tmp_path: Path) -> None:
    node, _ = cached_node(tmp_path)
    pod = node.add(known_pod("web", containers={"a": TWO_CORES}), pod_quota=150_000)
    strategy = CPUBurst(node.executor)
    strategy.run(node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=60))
    assert node.read(pod.request.cgroup_dir, "cpu.cfs_burst_us") == 120_000
    (node.root / "cpu" / pod.request.cgroup_dir / "cpu.cfs_quota_us").write_text("100000\n")
    strategy.run(node.ctx([pod], "cpuBurstOnly", cpuBurstPercent=60))
    assert node.read(pod.request.cgroup_dir, "cpu.cfs_burst_us") == 100_000
