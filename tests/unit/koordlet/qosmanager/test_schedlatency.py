"""SchedLatencyGuard: a sustained run-queue p99 breach of an LS pod boosts BE suppression for a
while (recorded once), spikes, BE pods, stale data and bad config do not; CPUSuppress uses the
boosted threshold end to end on a fake cgroup tree."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from koordapi.features import FeatureGates
from koordlet.executor import Executor
from koordlet.metriccache import MetricCache
from koordlet.qosmanager.cpusuppress import CPUSuppress
from koordlet.qosmanager.framework import Context
from koordlet.qosmanager.schedlatency import (
    SchedLatencyGuard,
    SuppressBoost,
    parse_config,
)
from koordlet.states.pods import KnownPod
from tests.unit.koordlet.qosmanager.fakes import NOW, context, known_pod, rules, samples, topology
from tests.unit.koordlet.qosmanager.test_cpusuppress import BE_DIR, cgroup_tree, cpuset_of, usage

NAME = "SchedLatencyGuard"
SUPPRESS = {"enable": True, "cpuSuppressThresholdPercent": 65}


def spec(**sched: Any) -> dict[str, Any]:
    return {
        "resourceUsedThresholdWithBE": SUPPRESS,
        "extensions": {"schedLatency": {"enable": True, **sched}},
    }


def latency(cache: MetricCache, known: KnownPod, values: list[float], end: float = NOW) -> None:
    """p99 samples every 10 s, the last one at ``end``."""
    for i, value in enumerate(reversed(values)):
        samples(cache, {"pod_runq_latency_p99": value}, end - 10 * i, pod_uid=known.request.uid)


def status(ctx: Context) -> str:
    return ctx.audit.statuses()[NAME].text


def run(guard: SchedLatencyGuard, **kwargs: Any) -> Context:
    ctx = context(**kwargs)
    guard.run(ctx)
    return ctx


# -- the breach --------------------------------------------------------------------------------


def test_a_breach_over_the_window_boosts_and_records_once() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [5600, 7000, 6100])  # NOW-20, NOW-10, NOW: all above 5 ms
    boost = SuppressBoost()
    guard = SchedLatencyGuard(boost)
    ctx = run(guard, pods=[web], spec=spec(), cache=cache)
    (action,) = ctx.audit.recent()
    assert (action.strategy, action.kind, action.target, action.value, action.scope) == (
        NAME,
        "boost",
        BE_DIR,
        "30",
        "BE",
    )
    assert action.reason == (
        "LS pod default/web run-queue p99 6.1 ms > 5.0 ms for 30 s (3 samples, lowest 5.6 ms):"
        " BE CPU suppress threshold 65% -> 30% for 60 s"
    )
    assert action.inputs["lowest_p99_us"] == 5600
    assert action.inputs["pod_uid"] == web.request.uid
    current = boost.current(NOW)
    assert current is not None and current[0] == 30
    assert current[1].startswith("LS pod default/web run-queue p99 6.1 ms > 5.0 ms")
    assert status(ctx).startswith("boosting: LS pod default/web")
    # Every later run while the breach lasts extends the boost without a new record.
    for step in range(1, 6):
        run(guard, pods=[web], spec=spec(), cache=cache, now=NOW + step, audit=ctx.audit)
    assert len(ctx.audit.recent()) == 1
    assert boost.current(NOW + 5 + 59) is not None
    assert boost.current(NOW + 5 + 60) is None


def test_custom_thresholds_lse_pods_and_the_worst_pod_named() -> None:
    lse = known_pod("db", qos="LSE", kube="Guaranteed")
    ls = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, lse, [2500, 2600])
    latency(cache, ls, [2100, 2200])
    boost = SuppressBoost()
    config = spec(p99ThresholdMicroseconds=2000, windowSeconds=20, holdSeconds=5,
                  cpuSuppressThresholdPercent=40)  # fmt: skip
    ctx = run(SchedLatencyGuard(boost), pods=[ls, lse], spec=config, cache=cache)
    (action,) = ctx.audit.recent()
    assert action.value == "40"
    assert action.reason.startswith("LSE pod default/db run-queue p99 2.6 ms > 2.0 ms for 20 s")
    assert "(and 1 more pods): BE CPU suppress threshold 65% -> 40% for 5 s" in action.reason
    assert boost.current(NOW + 4.9) is not None
    assert boost.current(NOW + 5) is None


def test_a_pod_without_the_label_counts_by_its_kubernetes_qos() -> None:
    burstable = known_pod("plain")  # Burstable, no label: LS
    cache = MetricCache()
    latency(cache, burstable, [9000, 9000, 9000])
    boost = SuppressBoost()
    run(SchedLatencyGuard(boost), pods=[burstable], spec=spec(), cache=cache)
    assert boost.current(NOW) is not None


def test_a_single_spike_does_not_cover_the_window() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [50_000])  # one bad 10 s window of a 30 s window
    boost = SuppressBoost()
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=spec(), cache=cache)
    assert boost.current(NOW) is None
    assert ctx.audit.recent() == []
    assert status(ctx).startswith("watching 1 of 1 LSE/LSR/LS pods: no run-queue p99 above 5.0 ms")


@pytest.mark.parametrize("dip", [0, 1, 2])
def test_one_sample_at_or_under_the_threshold_is_no_breach(dip: int) -> None:
    web = known_pod("web", qos="LS")
    values = [8000.0, 9000.0, 7000.0, 8000.0]
    values[dip] = 5000  # equal to the threshold: not above
    cache = MetricCache()
    latency(cache, web, values)
    boost = SuppressBoost()
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=spec(), cache=cache)
    assert boost.current(NOW) is None
    assert ctx.audit.recent() == []


def test_samples_older_than_the_window_do_not_count() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [1000, 1000, 9000, 9000, 9000])  # the low ones are 40 and 30 s old
    boost = SuppressBoost()
    run(SchedLatencyGuard(boost), pods=[web], spec=spec(windowSeconds=25), cache=cache)
    assert boost.current(NOW) is not None


def test_be_pods_never_trigger() -> None:
    be = known_pod("batch", qos="BE", kube="BestEffort")
    besteffort = known_pod("plain-be", kube="BestEffort")  # BestEffort without a label
    labelled = known_pod("odd", qos="LS", kube="BestEffort")  # Kubernetes BestEffort wins
    cache = MetricCache()
    for known in (be, besteffort, labelled):
        latency(cache, known, [90_000, 90_000, 90_000])
    boost = SuppressBoost()
    ctx = run(SchedLatencyGuard(boost), pods=[be, besteffort, labelled], spec=spec(),
              cache=cache)  # fmt: skip
    assert boost.current(NOW) is None
    assert ctx.audit.recent() == []
    assert status(ctx) == "no action: no LSE/LSR/LS pods"


def test_the_boost_ends_after_the_hold_and_a_new_breach_records_again() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [6000, 6000, 6000])
    boost = SuppressBoost()
    guard = SchedLatencyGuard(boost)
    ctx = run(guard, pods=[web], spec=spec(), cache=cache)
    assert len(ctx.audit.recent()) == 1
    # The pod recovers: the next windows are fast.
    latency(cache, web, [1000, 1000, 1000], end=NOW + 30)
    later = run(guard, pods=[web], spec=spec(), cache=cache, now=NOW + 30, audit=ctx.audit)
    assert boost.current(NOW + 30) is not None  # still holding (60 s after the breach)
    assert "still holding" in status(later)
    assert boost.current(NOW + 60) is None
    # It breaches again after the boost lapsed: a new record.
    latency(cache, web, [7000, 7000, 7000], end=NOW + 100)
    run(guard, pods=[web], spec=spec(), cache=cache, now=NOW + 100, audit=ctx.audit)
    assert boost.current(NOW + 100) is not None
    assert len(ctx.audit.recent()) == 2


# -- refusals ----------------------------------------------------------------------------------


def test_stale_latency_means_no_boost_and_says_so() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000, 9000], end=NOW - 25)  # newest 25 s old (> 2 x 10 s)
    boost = SuppressBoost()
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=spec(), cache=cache)
    assert boost.current(NOW) is None
    assert ctx.audit.recent() == []
    assert status(ctx) == (
        "no action: run-queue latency of all 1 LSE/LSR/LS pods is stale or missing"
        " (no sample in the last 20 s)"
    )


def test_missing_latency_points_at_the_collector() -> None:
    boost = SuppressBoost()
    ctx = run(SchedLatencyGuard(boost), pods=[known_pod("web", qos="LS")], spec=spec())
    assert boost.current(NOW) is None
    assert "no pod_runq_latency_p99 samples at all" in status(ctx)


def test_the_collector_interval_sets_freshness_and_coverage() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000], end=NOW - 25)
    boost = SuppressBoost()
    run(SchedLatencyGuard(boost, sample_interval=15.0), pods=[web], spec=spec(), cache=cache)
    assert boost.current(NOW) is not None  # 25 s old is fresh with a 15 s collector


@pytest.mark.parametrize(
    ("sched", "field"),
    [
        ({"enable": "yes"}, "spec.extensions.schedLatency.enable must be true or false"),
        ({"windowSeconds": "30"}, "spec.extensions.schedLatency.windowSeconds must be an integer"),
        ({"holdSeconds": 0}, "spec.extensions.schedLatency.holdSeconds 0 is outside [1, 86400]"),
        ({"p99ThresholdMicroseconds": True}, "p99ThresholdMicroseconds must be an integer"),
        ({"cpuSuppressThresholdPercent": 101}, "cpuSuppressThresholdPercent 101 is outside"),
        ({"p99ThresholdUs": 10}, "spec.extensions.schedLatency.p99ThresholdUs is not a known"),
    ],
)
def test_bad_config_says_which_field_and_boosts_nothing(sched: dict[str, Any], field: str) -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000, 9000])
    boost = SuppressBoost()
    boost.activate(NOW + 30, 30, "an earlier breach")
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=spec(**sched), cache=cache)
    assert boost.current(NOW) is None  # a bad config also ends a running boost
    assert ctx.audit.recent() == []
    assert status(ctx).startswith("no action: bad config: ")
    assert field in status(ctx)


def test_config_sections_of_the_wrong_shape() -> None:
    raw = rules({"extensions": {"schedLatency": [1]}}).slo.raw
    assert parse_config(raw) == "spec.extensions.schedLatency must be an object, got list"
    assert "spec.extensions must be an object" in str(parse_config({"extensions": "x"}))
    defaults = parse_config(rules({}).slo.raw)
    assert not isinstance(defaults, str)
    assert (defaults.enable, defaults.p99_threshold_us, defaults.window_seconds) == (
        False,
        5000,
        30,
    )
    assert (defaults.hold_seconds, defaults.cpu_suppress_threshold_percent) == (60, 30)


def test_disabled_or_absent_config_does_nothing() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000, 9000])
    boost = SuppressBoost()
    for config in ({"resourceUsedThresholdWithBE": SUPPRESS}, spec(enable=False)):
        ctx = run(SchedLatencyGuard(boost), pods=[web], spec=config, cache=cache)
        assert boost.current(NOW) is None
        assert status(ctx) == "off: spec.extensions.schedLatency.enable is not true"


def test_no_boost_when_cpu_suppress_is_not_in_effect() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000, 9000])
    boost = SuppressBoost()
    off = spec()
    off["resourceUsedThresholdWithBE"] = {"enable": False}
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=off, cache=cache)
    assert boost.current(NOW) is None
    assert "resourceUsedThresholdWithBE.enable is false" in status(ctx)
    ctx = run(SchedLatencyGuard(boost), pods=[web], cache=cache,
              rules_=rules(spec(), gates="BECPUManager=true"))  # fmt: skip
    assert boost.current(NOW) is None
    assert "BECPUManager owns BE cpusets" in status(ctx)


def test_no_boost_when_the_nodeslo_threshold_is_already_lower() -> None:
    web = known_pod("web", qos="LS")
    cache = MetricCache()
    latency(cache, web, [9000, 9000, 9000])
    boost = SuppressBoost()
    low = spec()
    low["resourceUsedThresholdWithBE"] = {"enable": True, "cpuSuppressThresholdPercent": 25}
    ctx = run(SchedLatencyGuard(boost), pods=[web], spec=low, cache=cache)
    assert boost.current(NOW) is None
    assert ctx.audit.recent() == []
    assert "cpuSuppressThresholdPercent 25% is already at or below 30%" in status(ctx)


def test_the_gate_is_off_by_default() -> None:
    guard = SchedLatencyGuard(SuppressBoost())
    assert guard.name == NAME
    assert not guard.enabled(FeatureGates.parse(""))
    assert guard.enabled(FeatureGates.parse("BESuppressBySchedLatency=true"))


def test_the_boost_is_safe_across_threads() -> None:
    boost = SuppressBoost()

    def writer(offset: int) -> None:
        for i in range(200):
            boost.activate(NOW + offset + i, 30, f"writer {offset}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    current = boost.current(NOW)
    assert current is not None and current[1].startswith("writer ")
    boost.clear()
    assert boost.current(NOW) is None


# -- end to end with CPUSuppress ---------------------------------------------------------------


def test_the_boost_shrinks_the_be_cpuset_further_until_it_lapses(tmp_path: Path) -> None:
    web = known_pod("web", qos="LS")
    be = known_pod("be", qos="BE", kube="BestEffort")
    root = cgroup_tree(tmp_path, [web, be], "0-19")
    cache = MetricCache()
    boost = SuppressBoost()
    suppress = CPUSuppress(Executor(root), boost=boost)
    guard = SchedLatencyGuard(boost)

    def step(now: float, audit: Any = None) -> Context:
        usage(cache, 3.5, [(web, 3.0), (be, 0.2)], ts=now)
        ctx = context(pods=[web, be], spec=spec(), cache=cache, topo=topology(20), now=now,
                      audit=audit)  # fmt: skip
        guard.run(ctx)
        suppress.run(ctx)
        return ctx

    # No latency yet: 20 x 65% - LS 3.0 - system 0.3 = 9.7 cores -> 10 CPUs.
    ctx = step(NOW - 30)
    assert len(cpuset_of(root, BE_DIR)) == 10
    assert "boosted" not in ctx.audit.recent()[-1].reason
    # The LS pod waits: 20 x 30% - 3.0 - 0.3 = 2.7 cores -> 3 CPUs, the reason says why.
    latency(cache, web, [6000, 6500, 7000])
    step(NOW, ctx.audit)
    assert len(cpuset_of(root, BE_DIR)) == 3
    assert len(cpuset_of(root, be.request.cgroup_dir)) == 3
    boost_action, cpuset_action = ctx.audit.recent()[-2:]
    assert (boost_action.kind, boost_action.value) == ("boost", "30")
    assert cpuset_action.kind == "cpuset"
    assert cpuset_action.reason.startswith(
        "suppress: capacity 20 x 30% (boosted: LS pod default/web run-queue p99 7.0 ms > 5.0 ms"
        " for 30 s (3 samples, lowest 6.0 ms)) - LS usage 3.00 - system 0.30 = 2.70 cores"
        " -> 3 CPUs"
    )
    assert cpuset_action.inputs["threshold_percent"] == 30
    assert cpuset_action.inputs["slo_threshold_percent"] == 65
    # The latency stops (no more samples): the boost holds 60 s, then suppress grows back
    # at most 10% of the CPUs per step.
    step(NOW + 59, ctx.audit)
    assert len(cpuset_of(root, BE_DIR)) == 3
    step(NOW + 60, ctx.audit)
    assert len(cpuset_of(root, BE_DIR)) == 5
    assert "boosted" not in ctx.audit.recent()[-1].reason
    assert [a.kind for a in ctx.audit.recent()].count("boost") == 1


def test_cpu_suppress_ignores_a_boost_above_the_nodeslo_threshold(tmp_path: Path) -> None:
    web = known_pod("web", qos="LS")
    root = cgroup_tree(tmp_path, [web], "0-19")
    cache = MetricCache()
    usage(cache, 3.5, [(web, 3.0)])
    boost = SuppressBoost()
    boost.activate(NOW + 60, 80, "a boost that would loosen")
    ctx = context(pods=[web], spec=spec(), cache=cache, topo=topology(20))
    inputs = CPUSuppress(Executor(root), boost=boost)._inputs(ctx)
    assert inputs is not None
    assert inputs.threshold_percent == 65
    assert "boosted" not in inputs.explain()
