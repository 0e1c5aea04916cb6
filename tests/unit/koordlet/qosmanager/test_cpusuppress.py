"""CPU suppress: the formula, CPU choice, floors, step caps, policies,
recovery and stale-data refusal, on fake metrics and a fake cgroup v1 tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koordapi import keys
from koordapi.annotation import KubeletCPUManagerPolicy, parse_node_reservation
from koordapi.cpuset import parse_cpuset
from koordapi.features import FeatureGates
from koordlet.executor import Executor
from koordlet.metriccache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.cpusuppress import (
    CPUSuppress,
    SuppressInputs,
    choose_cpus,
    next_quota,
)
from koordlet.states.pods import KnownPod
from koordlet.states.topology import Processor
from runtimehooks.request import ContainerResources
from runtimehooks.rules import NodeState
from tests.unit.koordlet.qosmanager.fakes import (
    NOW,
    context,
    known_pod,
    rules,
    samples,
    topology,
    write,
)

BE_DIR = "kubepods/besteffort"
ON = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 70}}


def cgroup_tree(root: Path, pods: list[KnownPod], cpus: str = "0-7") -> Path:
    """cpuset and cpu hierarchies for the QoS dirs, each pod and its containers."""
    dirs = {"kubepods", "kubepods/burstable", BE_DIR}
    for known in pods:
        dirs.add(known.request.cgroup_dir)
        dirs.update(c.cgroup_dir for c in known.containers.values())
    for cg in dirs:
        write(root / "cpuset" / cg / "cpuset.cpus", cpus + "\n")
        write(root / "cpu" / cg / "cpu.cfs_quota_us", "-1\n")
    return root


def cpuset_of(root: Path, cgroup: str) -> frozenset[int]:
    return parse_cpuset((root / "cpuset" / cgroup / "cpuset.cpus").read_text())


def usage(
    cache: MetricCache, node: float, pods: list[tuple[KnownPod, float]], ts: float = NOW
) -> None:
    samples(cache, {"node_cpu_usage": node}, ts)
    for known, used in pods:
        samples(cache, {"pod_cpu_usage": used}, ts, pod_uid=known.request.uid)


def spec(**threshold: Any) -> dict[str, Any]:
    return {"resourceUsedThresholdWithBE": {**ON["resourceUsedThresholdWithBE"], **threshold}}


# -- the formula -------------------------------------------------------------------------------


def test_suppress_is_capacity_share_minus_ls_and_system_usage() -> None:
    inputs = SuppressInputs(
        capacity_milli=20_000, threshold_percent=70, node_used=12, pods_used=10, non_be_used=8
    )
    assert inputs.system_used == 2
    assert inputs.suppress_milli() == 4000
    assert inputs.explain() == (
        "suppress: capacity 20 x 70% - LS usage 8.00 - system 2.00 = 4.00 cores"
    )


def test_suppress_through_the_metric_cache_and_pod_classes(tmp_path: Path) -> None:
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    cache = MetricCache()
    usage(cache, 12, [(ls, 8), (be, 2)])
    ctx = context(pods=[ls, be], spec=spec(), cache=cache, topo=topology(20))
    strategy = CPUSuppress(Executor(cgroup_tree(tmp_path, [ls, be], "0-19")))
    inputs = strategy._inputs(ctx)
    assert inputs is not None
    assert (inputs.non_be_used, inputs.pods_used, inputs.suppress_milli()) == (8, 10, 4000)


def test_pods_koordlet_does_not_know_count_as_non_be(tmp_path: Path) -> None:
    be = known_pod("be", qos="BE", kube="BestEffort")
    cache = MetricCache()
    usage(cache, 6, [(be, 2)])
    samples(cache, {"pod_cpu_usage": 3}, NOW, pod_uid="stranger")
    ctx = context(pods=[be], spec=spec(), cache=cache)
    inputs = CPUSuppress(Executor(cgroup_tree(tmp_path, [be])))._inputs(ctx)
    assert inputs is not None and inputs.non_be_used == 3


def test_reserved_cpu_raises_the_system_share() -> None:
    inputs = SuppressInputs(8000, 100, node_used=2, pods_used=2, non_be_used=1, reserved_milli=1500)
    assert inputs.system_used == 1.5
    assert inputs.suppress_milli() == 8000 - 1000 - 1500


def test_min_percent_is_a_floor() -> None:
    busy = SuppressInputs(10_000, 65, node_used=9, pods_used=8, non_be_used=8, min_percent=20)
    assert busy.suppress_milli() == 2000
    assert "(floor 20% of capacity)" in busy.explain()


# -- choosing CPUs ----------------------------------------------------------------------------


def test_cpus_spread_over_numa_nodes_with_whole_cores_first() -> None:
    # node0/socket0: core 0 = cpu 0,4; core 1 = cpu 1,5. node1/socket1: core 2 = 2,6; 3 = 3,7.
    procs = [
        Processor(cpu, core, socket, socket)
        for cpu, core, socket in [
            (0, 0, 0), (1, 1, 0), (2, 2, 1), (3, 3, 1), (4, 0, 0), (5, 1, 0), (6, 2, 1), (7, 3, 1)
        ]
    ]  # fmt: skip
    assert choose_cpus(3, procs) == [0, 4, 2]
    assert choose_cpus(4, procs) == [0, 4, 2, 6]
    assert choose_cpus(5, procs) == [0, 4, 2, 6, 1]
    assert sorted(choose_cpus(8, procs)) == list(range(8))
    assert choose_cpus(9, procs) == []


def test_without_hyper_threads_single_cpus_alternate_between_buckets() -> None:
    procs = [Processor(cpu, cpu, cpu % 2, cpu % 2) for cpu in range(6)]
    assert choose_cpus(4, procs) == [0, 1, 2, 3]


# -- cpuset policy ----------------------------------------------------------------------------


def test_busy_ls_pod_shrinks_every_be_cgroup_and_records_why(tmp_path: Path) -> None:
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [ls, be])
    write(root / "cpuset" / be.request.cgroup_dir / "sandbox" / "cpuset.cpus", "0-7\n")
    cache = MetricCache()
    usage(cache, 5.0, [(ls, 4.5), (be, 0.2)])
    metrics = KoordletMetrics("node1")
    ctx = context(pods=[ls, be], spec=spec(), cache=cache)
    CPUSuppress(Executor(root), metrics=metrics).run(ctx)
    # 8 x 70% - 4.5 - 0.3 = 0.8 cores -> the floor of 2 CPUs
    container = next(iter(be.containers.values())).cgroup_dir
    for cg in (BE_DIR, be.request.cgroup_dir, container, f"{be.request.cgroup_dir}/sandbox"):
        assert cpuset_of(root, cg) == {0, 1}, cg
    assert cpuset_of(root, ls.request.cgroup_dir) == set(range(8))  # LS untouched
    (action,) = ctx.audit.recent()
    assert (action.kind, action.target, action.value, action.scope) == (
        "cpuset",
        BE_DIR,
        "0-1",
        "BE",
    )
    assert "LS usage 4.50 - system 0.30 = 0.80 cores -> 2 CPUs (at least 2)" in action.reason
    assert action.inputs["ls_used"] == 4.5
    registry = metrics.registry
    assert (
        registry.get_sample_value(
            "koordlet_be_suppress_cpu_cores", {"node": "node1", "type": "cpuset"}
        )
        == 2
    )
    # Nothing changes on the next pass: nothing written, nothing recorded again.
    CPUSuppress(Executor(root)).run(
        context(pods=[ls, be], spec=spec(), cache=cache, audit=ctx.audit)
    )
    assert len(ctx.audit.recent()) == 1


def test_a_be_pod_cgroup_koordlet_does_not_know_is_narrowed_too(tmp_path: Path) -> None:
    # A pod of another runtime, or one still being removed, under the BE directory: left at
    # its wider cpuset it would make the kernel refuse to narrow the parent (EBUSY).
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [ls, be])
    stranger = f"{BE_DIR}/pod-unknown"
    write(root / "cpuset" / stranger / "cpuset.cpus", "0-7\n")
    write(root / "cpuset" / stranger / "c1" / "cpuset.cpus", "0-7\n")
    cache = MetricCache()
    usage(cache, 5.0, [(ls, 4.5), (be, 0.2)])
    CPUSuppress(Executor(root)).run(context(pods=[ls, be], spec=spec(), cache=cache))
    for cg in (BE_DIR, be.request.cgroup_dir, stranger, f"{stranger}/c1"):
        assert cpuset_of(root, cg) == {0, 1}, cg


def test_an_unchanged_cpuset_pass_waits_for_the_force_update_window_unless_pods_change(
    tmp_path: Path,
) -> None:
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [ls, be])
    clock = [NOW]
    strategy = CPUSuppress(Executor(root, force_update_seconds=60, clock=lambda: clock[0]))
    cache = MetricCache()

    def run_at(now: float, pods: list[KnownPod]) -> None:
        clock[0] = now
        usage(cache, 5.0, [(ls, 4.5), (be, 0.2)], ts=now)
        strategy.run(context(pods=pods, spec=spec(), cache=cache, now=now))

    run_at(NOW, [ls, be])
    assert cpuset_of(root, be.request.cgroup_dir) == {0, 1}
    stranger = f"{BE_DIR}/pod-unknown"  # no runtime reported it
    write(root / "cpuset" / stranger / "cpuset.cpus", "0-7\n")

    run_at(NOW + 30, [ls, be])  # nothing this koordlet knows changed: the pass is not repeated
    assert cpuset_of(root, stranger) == set(range(8))

    grown = known_pod(
        "be",
        qos="BE",
        kube="BestEffort",
        containers={"main": ContainerResources(), "side": ContainerResources()},
    )
    new_container = grown.containers["be-c1"].cgroup_dir
    write(root / "cpuset" / new_container / "cpuset.cpus", "0-7\n")
    run_at(NOW + 31, [ls, grown])  # a new container: at once, and the whole pass with it
    assert cpuset_of(root, new_container) == {0, 1}
    assert cpuset_of(root, stranger) == {0, 1}

    write(root / "cpuset" / stranger / "cpuset.cpus", "0-7\n")  # widened behind our back
    run_at(NOW + 90, [ls, grown])
    assert cpuset_of(root, stranger) == set(range(8))  # within the window of the last pass
    run_at(NOW + 91.5, [ls, grown])
    assert cpuset_of(root, stranger) == {0, 1}  # the window is over


def test_min_cpus_can_be_lowered_for_small_nodes(tmp_path: Path) -> None:
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [ls, be], "0-1")
    cache = MetricCache()
    usage(cache, 2.0, [(ls, 1.9)])
    ctx = context(pods=[ls, be], spec=spec(cpuSuppressThresholdPercent=100), cache=cache,
                  topo=topology(2))  # fmt: skip
    CPUSuppress(Executor(root), min_cpus=1).run(ctx)
    assert len(cpuset_of(root, BE_DIR)) == 1
    assert len(cpuset_of(root, be.request.cgroup_dir)) == 1


def test_growth_is_capped_per_step_but_shrinking_is_not(tmp_path: Path) -> None:
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [be], "0-1")
    cache = MetricCache()
    strategy = CPUSuppress(Executor(root))
    usage(cache, 0.1, [(be, 0.1)])  # idle node: suppress = 14 cores of 20
    ctx = context(pods=[be], spec=spec(), cache=cache, topo=topology(20))
    strategy.run(ctx)
    assert len(cpuset_of(root, BE_DIR)) == 4  # 2 + ceil(20 x 10%)
    strategy.run(ctx)
    assert len(cpuset_of(root, BE_DIR)) == 6
    ls = known_pod("ls", qos="LS")
    usage(cache, 13.5, [(be, 0.1), (ls, 13.0)], ts=NOW + 1)
    strategy.run(context(pods=[be, ls], spec=spec(), cache=cache, topo=topology(20), now=NOW + 1))
    assert len(cpuset_of(root, BE_DIR)) == 2  # straight down to the floor


def test_lse_reserved_and_exclusive_system_cpus_are_never_given_to_be(tmp_path: Path) -> None:
    lse = known_pod(
        "lse",
        qos="LSE",
        kube="Guaranteed",
        annotations={keys.ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": "0-1"})},
    )
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [lse, be], "0-7")
    cache = MetricCache()
    usage(cache, 0.0, [])
    node = NodeState(reservation=parse_node_reservation(json.dumps({"reservedCPUs": "7"})))
    ctx = context(pods=[lse, be], rules_=rules(spec(), node=node), cache=cache)
    CPUSuppress(Executor(root)).run(ctx)
    assert cpuset_of(root, BE_DIR) & {0, 1, 7} == set()


def test_static_kubelet_policy_writes_containers_only(tmp_path: Path) -> None:
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [be])
    cache = MetricCache()
    usage(cache, 5.0, [(be, 0.1)])
    node = NodeState(kubelet_policy=KubeletCPUManagerPolicy("static"))
    ctx = context(pods=[be], rules_=rules(spec(), node=node), cache=cache)
    CPUSuppress(Executor(root)).run(ctx)
    container = next(iter(be.containers.values())).cgroup_dir
    assert cpuset_of(root, BE_DIR) == set(range(8))
    assert cpuset_of(root, be.request.cgroup_dir) == set(range(8))
    assert len(cpuset_of(root, container)) == 2


# -- refusal and recovery ---------------------------------------------------------------------


def test_stale_node_usage_means_no_action_and_says_so(tmp_path: Path) -> None:
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [be])
    cache = MetricCache()
    usage(cache, 7.9, [(be, 0.1)], ts=NOW - 10)  # busy, but 10 s old
    ctx = context(pods=[be], spec=spec(), cache=cache)
    CPUSuppress(Executor(root)).run(ctx)
    assert cpuset_of(root, BE_DIR) == set(range(8))
    assert ctx.audit.recent() == []
    assert (
        ctx.audit.statuses()["CPUSuppress"].text == "no action: node CPU usage is stale or missing"
    )


def test_disabled_threshold_recovers_cpuset_and_quota(tmp_path: Path) -> None:
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [be], "0-1")
    write(root / "cpu" / BE_DIR / "cpu.cfs_quota_us", "200000\n")
    ctx = context(pods=[be], spec={}, cache=MetricCache())  # threshold enable=false by default
    CPUSuppress(Executor(root)).run(ctx)
    assert cpuset_of(root, BE_DIR) == set(range(8))
    assert cpuset_of(root, be.request.cgroup_dir) == set(range(8))
    assert (root / "cpu" / BE_DIR / "cpu.cfs_quota_us").read_text() == "-1"
    kinds = {a.kind: a.reason for a in ctx.audit.recent()}
    assert kinds["cpuset"] == "recover: suppress disabled in the NodeSLO"
    assert kinds["cfs_quota"] == "recover"


# -- cfsQuota policy --------------------------------------------------------------------------


def test_next_quota_floor_bypass_and_step_cap() -> None:
    # 8 cores: the node's quota is 800000; 1% is 8000, 10% is 80000
    assert next_quota(500, current=-1, capacity_cores=8) == 50_000
    assert next_quota(0, current=-1, capacity_cores=8) == 2000
    assert next_quota(-3000, current=2000, capacity_cores=8) == 2000
    assert next_quota(520, current=50_000, capacity_cores=8) is None  # +2000 < 1%
    assert next_quota(5000, current=50_000, capacity_cores=8) == 130_000  # capped at +80000
    assert next_quota(5000, current=-1, capacity_cores=8) == 500_000  # first write: no cap


def test_cfs_quota_policy_writes_the_besteffort_quota_and_recovers_the_cpuset(
    tmp_path: Path,
) -> None:
    ls = known_pod("ls", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [ls, be], "0-3")
    cache = MetricCache()
    usage(cache, 4.0, [(ls, 3.0), (be, 0.5)])
    ctx = context(pods=[ls, be], spec=spec(cpuSuppressPolicy="cfsQuota"), cache=cache)
    CPUSuppress(Executor(root)).run(ctx)
    # 8 x 70% - 3.0 - 0.5 = 2.1 cores -> 210000 us
    assert (root / "cpu" / BE_DIR / "cpu.cfs_quota_us").read_text() == "210000"
    assert cpuset_of(root, BE_DIR) == set(range(8))
    quota = next(a for a in ctx.audit.recent() if a.kind == "cfs_quota")
    assert quota.reason.endswith("= 2.10 cores -> quota 210000us")


def test_the_gate_turns_the_strategy_off() -> None:
    off = FeatureGates.parse("BECPUSuppress=false")
    assert not CPUSuppress(Executor(Path("/nonexistent"))).enabled(off)
    assert CPUSuppress(Executor(Path("/nonexistent"))).enabled(FeatureGates.parse(""))
