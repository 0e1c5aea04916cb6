"""CPUEvict: BE satisfaction over a window, node CPU usage, victims, config checks, cool-down."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from koordapi import keys
from koordlet.metriccache import MetricCache, Sample
from koordlet.qosmanager.cpuevict import (
    NAME,
    CPUEvict,
    batch_allocatable_milli,
    enough_samples,
    satisfaction_release,
    usage_high_enough,
)
from koordlet.qosmanager.eviction import Evictor
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod
from runtimehooks.request import PodSpecFacts
from tests.unit.koordlet.qosmanager.fakes import NOW, Backend, context, known_pod, rules, samples

WINDOW = 30
BE_CONFIG: dict[str, Any] = {
    "enable": True,
    "cpuEvictBESatisfactionLowerPercent": 40,
    "cpuEvictBESatisfactionUpperPercent": 50,
    "cpuEvictTimeWindowSeconds": WINDOW,
}
BE_GATE = "BECPUEvict=true"
NODE_GATE = "CPUEvict=true"
NODE_CONFIG: dict[str, Any] = {
    "enable": True,
    "cpuEvictThresholdPercent": 80,
    "evictEnabledPriorityThreshold": 7999,
    "cpuEvictTimeWindowSeconds": WINDOW,
}
OPTED_IN = {keys.LABEL_EVICTION_ENABLED: "true"}


def be_pod(name: str, request_milli: int, labels: Mapping[str, str] | None = None) -> KnownPod:
    batch = {"main": {"requests": {keys.BATCH_CPU: str(request_milli)}}}
    return known_pod(name, qos="BE", kube="BestEffort", batch=batch, labels=labels)


def be_series(
    cache: MetricCache,
    usage: Sequence[float],
    request: Sequence[float],
    limit: Sequence[float],
    now: float = NOW,
) -> None:
    """node_be{cpu} samples one a second, the last at ``now``."""
    for allocation, values in (("usage", usage), ("request", request), ("real-limit", limit)):
        labels = {"be_resource": "cpu", "be_allocation": allocation}
        n = len(values)
        cache.append(Sample("node_be", labels, now - (n - 1) + i, v) for i, v in enumerate(values))


def steady(value: float, n: int = WINDOW) -> list[float]:
    return [value] * n


def make_ctx(
    pods: list[KnownPod],
    cpu: Mapping[str, float],
    *,
    config: Mapping[str, Any],
    gates: str,
    cache: MetricCache | None = None,
    now: float = NOW,
    allocatable: Mapping[str, int] | None = None,
) -> Context:
    cache = cache or MetricCache()
    for known in pods:
        if known.request.name in cpu:
            samples(
                cache, {"pod_cpu_usage": cpu[known.request.name]}, now, pod_uid=known.request.uid
            )
    return context(
        pods=pods,
        cache=cache,
        rules_=rules({"resourceUsedThresholdWithBE": dict(config)}, gates),
        now=now,
        allocatable=allocatable,
    )


def status(ctx: Context) -> str:
    return ctx.audit.statuses()[NAME].text


# -- the formulas -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "limit", "lower", "upper", "expected"),
    [
        pytest.param(10000, 3000, 40, 50, 2000, id="0.3-under-0.4:10000x(0.5-0.3)"),
        pytest.param(8000, 2000, 60, 90, 5200, id="0.25-under-0.6:8000x(0.9-0.25)"),
        pytest.param(10000, 2500, 40, 50, 2500, id="0.25:10000x0.25"),
        pytest.param(10000, 4100, 40, 50, 0, id="satisfied-enough"),
        pytest.param(10000, 3000, 40, 30, 0, id="upper-below-satisfaction"),
        pytest.param(0, 3000, 40, 50, 0, id="no-request"),
    ],
)
def test_satisfaction_release(
    request_: float, limit: float, lower: int, upper: int, expected: int
) -> None:
    assert satisfaction_release(request_, limit, lower, upper) == expected


def test_usage_high_enough() -> None:
    # no limit known (no batch-cpu allocatable): never high enough
    assert not usage_high_enough(5000, -1, None)
    assert not usage_high_enough(5000, 0, 10)
    # a limit under one core always counts as saturated
    assert usage_high_enough(0, 999, None)
    assert usage_high_enough(0, 1, 90)
    # default threshold 90%
    assert not usage_high_enough(899, 1000, None)
    assert usage_high_enough(900, 1000, None)
    assert not usage_high_enough(3599, 4000, None)
    # a configured threshold replaces it
    assert usage_high_enough(500, 1000, 50)
    assert not usage_high_enough(499, 1000, 50)


# -- BECPUEvict -------------------------------------------------------------------------------


def starved_cache(now: float = NOW) -> MetricCache:
    """BE asks 10 cores, gets 3 and uses 2.9 of them: satisfaction 0.3, release 2000m."""
    cache = MetricCache()
    be_series(cache, steady(2900), steady(10000), steady(3000), now)
    return cache


def test_be_cpu_evict_end_to_end_victims_by_usage_over_request() -> None:
    pods = [be_pod("lazy", 1000), be_pod("mid", 2000), be_pod("hot", 1000), be_pod("x", 4000)]
    cpu = {"lazy": 0.2, "mid": 1.0, "hot": 0.9, "x": 0.4}  # ratios .2 .5 .9 .1
    backend = Backend()
    ctx = make_ctx(pods, cpu, config=BE_CONFIG, gates=BE_GATE, cache=starved_cache())

    CPUEvict(Evictor(backend)).run(ctx)

    # release 2000m: hot gives back 1000m, mid 2000m -> 3000m, enough
    assert backend.victims == ["hot", "mid"]
    assert "release request x (50% - satisfaction) = 2000m" in status(ctx)
    action = ctx.audit.recent()[0]
    assert action.value == "BECPUEvict"
    assert "1.00 cores" in action.reason  # what hot gives back
    assert action.inputs["real-limit"] == 3000.0
    assert action.inputs["current-request"] == 10000.0


def test_be_cpu_victims_by_priority_first_then_usage_over_request() -> None:
    # cluster mode: spec.priority known; the lower priority goes first whatever its ratio
    def prioritized(name: str, request: int, priority: int) -> KnownPod:
        known = be_pod(name, request)
        known.request = replace(known.request, spec=PodSpecFacts(priority=priority))
        return known

    pods = [prioritized("hot", 1000, 5900), prioritized("cold", 1000, 5100),
            prioritized("warm", 1000, 5900)]  # fmt: skip
    cpu = {"hot": 0.9, "cold": 0.1, "warm": 0.5}
    backend = Backend()
    ctx = make_ctx(pods, cpu, config=BE_CONFIG, gates=BE_GATE, cache=starved_cache())

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["cold", "hot"]  # 1000m + 1000m >= 2000m


def test_a_be_pod_whose_eviction_policy_leaves_out_becpuevict_is_not_a_victim() -> None:
    shy = be_pod("shy", 4000)
    annotations = {**shy.request.annotations, keys.ANNOTATION_EVICTION_POLICY: '["CPUEvict"]'}
    shy.request = replace(shy.request, annotations=annotations)
    pods = [shy, be_pod("ok", 1000)]
    backend = Backend()
    ctx = make_ctx(pods, {"shy": 3.9, "ok": 0.1}, config=BE_CONFIG, gates=BE_GATE,
                   cache=starved_cache())  # fmt: skip

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["ok"]


def test_be_cpu_evict_needs_samples_covering_a_third_of_the_window() -> None:
    backend = Backend()
    cache = MetricCache()
    be_series(cache, steady(2900, 9), steady(10000, 9), steady(3000, 9))  # 9 s < 30 s / 3
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert status(ctx) == "BECPUEvict: not enough BE CPU samples in the last 30s"

    enough = MetricCache()
    be_series(enough, steady(2900, 10), steady(10000, 10), steady(3000, 10))
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=enough)
    CPUEvict(Evictor(backend)).run(ctx)
    assert backend.victims == ["a"]


def test_samples_older_than_the_window_do_not_count() -> None:
    backend = Backend()
    cache = MetricCache()
    be_series(cache, steady(2900), steady(10000), steady(3000), now=NOW - WINDOW - 1)
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "not enough BE CPU samples" in status(ctx)


def test_release_is_the_smaller_of_the_window_and_current_figures() -> None:
    # limit 2000m for 29 s then 3500m now: avg 2050m -> 2950m to release, current -> 1500m
    limit = [*steady(2000, 29), 3500.0]
    usage = [*steady(1900, 29), 3200.0]  # high enough for both (>= 90%)
    pods = [be_pod(f"p{i}", 1000) for i in range(4)]
    cpu = {f"p{i}": 0.9 - i / 10 for i in range(4)}

    cache = MetricCache()
    be_series(cache, usage, steady(10000), limit)
    backend = Backend()
    ctx = make_ctx(pods, cpu, config=BE_CONFIG, gates=BE_GATE, cache=cache)
    CPUEvict(Evictor(backend)).run(ctx)
    assert "= 1500m" in status(ctx)
    assert backend.victims == ["p0", "p1"]  # 2000m >= 1500m

    # the other way round: current 2000m (3000m to release), avg 2100m -> 2900m
    cache = MetricCache()
    be_series(
        cache, [*steady(3200, 29), 1900.0], steady(10000), [*steady(2200, 15), *steady(2000, 15)]
    )
    backend = Backend()
    ctx = make_ctx(pods, cpu, config=BE_CONFIG, gates=BE_GATE, cache=cache)
    CPUEvict(Evictor(backend)).run(ctx)
    assert "= 2900m" in status(ctx)  # 10000 x (0.5 - 0.21)
    assert backend.victims == ["p0", "p1", "p2"]


def test_current_figures_that_look_fine_cancel_the_eviction() -> None:
    limit = [*steady(2000, 29), 8000.0]  # just now BE got 8 cores: satisfaction 0.8
    usage = [*steady(1900, 29), 7500.0]
    cache = MetricCache()
    be_series(cache, usage, steady(10000), limit)
    backend = Backend()
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "satisfaction is above the lower bound" in status(ctx)


def test_be_usage_under_the_threshold_means_no_eviction() -> None:
    cache = MetricCache()
    be_series(cache, steady(2000), steady(10000), steady(3000))  # 67% of the limit
    backend = Backend()
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "under the threshold" in status(ctx)

    # with the usage threshold lowered to 60% the same figures do evict
    config = {**BE_CONFIG, "cpuEvictBEUsageThresholdPercent": 60}
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=config, gates=BE_GATE, cache=cache)
    CPUEvict(Evictor(backend)).run(ctx)
    assert backend.victims == ["a"]


def test_evict_by_allocatable_uses_the_nodes_batch_cpu() -> None:
    cache = MetricCache()
    # the real limit (8 cores) looks fine: satisfaction 0.8
    be_series(cache, steady(2400), steady(10000), steady(8000))
    pods = [be_pod("a", 1000), be_pod("b", 2000)]
    cpu = {"a": 0.9, "b": 0.5}

    backend = Backend()
    ctx = make_ctx(pods, cpu, config=BE_CONFIG, gates=BE_GATE, cache=cache)
    CPUEvict(Evictor(backend)).run(ctx)
    assert backend.calls == []

    # but only 2.5 batch cores are allocatable: satisfaction 0.25, release 2500m
    config = {**BE_CONFIG, "cpuEvictPolicy": "evictByAllocatable"}
    ctx = make_ctx(
        pods,
        cpu,
        config=config,
        gates=BE_GATE,
        cache=cache,
        allocatable={keys.BATCH_CPU: 2500},
    )
    CPUEvict(Evictor(backend)).run(ctx)
    assert "= 2500m" in status(ctx)
    assert backend.victims == ["a", "b"]


def test_evict_by_allocatable_without_batch_cpu_evicts_nothing() -> None:
    # Koordinator's getBEMilliAllocatable: no batch-cpu on the node is -1, and a limit <= 0
    # never counts as BE usage high enough, whatever the usage.
    cache = MetricCache()
    be_series(cache, steady(9700), steady(10000), steady(800))
    config = {**BE_CONFIG, "cpuEvictPolicy": "evictByAllocatable"}
    backend = Backend()
    ctx = make_ctx([be_pod("a", 1000)], {"a": 0.97}, config=config, gates=BE_GATE, cache=cache,
                   allocatable={"cpu": 8000})  # fmt: skip

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "no kubernetes.io/batch-cpu allocatable" in status(ctx)


def test_evict_by_allocatable_with_zero_batch_cpu_counts_it_as_one_milli_core() -> None:
    cache = MetricCache()
    be_series(cache, steady(0), steady(10000), steady(8000))
    config = {**BE_CONFIG, "cpuEvictPolicy": "evictByAllocatable"}
    ctx = make_ctx([be_pod("a", 1000)], {"a": 0.1}, config=config, gates=BE_GATE, cache=cache,
                   allocatable={keys.BATCH_CPU: 0})  # fmt: skip

    CPUEvict(Evictor(Backend())).run(ctx)

    # limit 1m (< 1000m: usage always high enough): 10000 x (0.5 - 0.0001) = 4999m
    assert "= 4999m" in status(ctx)


@pytest.mark.parametrize(
    ("allocatable", "expected"),
    [
        pytest.param({}, -1.0, id="absent"),
        pytest.param({keys.BATCH_CPU: 0}, 1.0, id="zero"),
        pytest.param({keys.BATCH_CPU: 37251}, 37251.0, id="published"),
        pytest.param({"cpu": 64000}, -1.0, id="only-cpu"),
    ],
)
def test_batch_allocatable_as_koordinator_reads_it(
    allocatable: dict[str, int], expected: float
) -> None:
    assert batch_allocatable_milli(allocatable) == expected


@pytest.mark.parametrize(
    ("count", "window", "interval", "enough"),
    [
        pytest.param(3, 10, 1.0, True, id="3x1s-covers-10s:10//3=3"),
        pytest.param(2, 10, 1.0, False, id="2x1s-short-of-10s"),
        pytest.param(3, 11, 1.0, True, id="11//3=3"),
        pytest.param(3, 12, 1.0, False, id="12//3=4"),
        pytest.param(2, 13, 2.0, True, id="2x2s-covers-13s:13//3=4"),
        pytest.param(1, 7, 1.5, False, id="1.5s-counts-as-1s:1<7//3"),
        pytest.param(2, 7, 1.5, True, id="2x1s-covers-7s"),
        pytest.param(0, 2, 1.0, True, id="under-3s-needs-nothing"),
    ],
)
def test_sample_count_in_koordinators_whole_seconds(
    count: int, window: int, interval: float, enough: bool
) -> None:
    assert enough_samples(count, window, interval) is enough


def test_a_window_of_ten_seconds_is_satisfied_by_three_samples() -> None:
    backend = Backend()
    cache = MetricCache()
    be_series(cache, steady(2900, 3), steady(10000, 3), steady(3000, 3))
    config = {**BE_CONFIG, "cpuEvictTimeWindowSeconds": 10}
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=config, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["a"]


def test_unlabelled_kubernetes_besteffort_pods_are_not_be_victims() -> None:
    plain = known_pod("plain-besteffort", kube="BestEffort")  # no koordinator.sh/qosClass
    pods = [plain, be_pod("labelled", 1000)]
    backend = Backend()
    ctx = make_ctx(pods, {"plain-besteffort": 1.9, "labelled": 0.3}, config=BE_CONFIG,
                   gates=BE_GATE, cache=starved_cache())  # fmt: skip

    CPUEvict(Evictor(backend)).run(ctx)

    # 2000m to release; the labelled pod gives back only 1000m, and the busier unlabelled pod
    # (no batch-cpu to give back) is still not chosen.
    assert backend.victims == ["labelled"]


@pytest.mark.parametrize(
    ("lower", "upper", "message"),
    [
        pytest.param(None, 50, "must be set", id="no-lower"),
        pytest.param(40, None, "must be set", id="no-upper"),
        pytest.param(0, 50, "outside", id="lower-zero"),
        pytest.param(61, 70, "outside", id="lower-over-60"),
        pytest.param(40, 0, "outside", id="upper-zero"),
        pytest.param(40, 100, "outside", id="upper-100"),
        pytest.param(50, 40, "below lower", id="upper-below-lower"),
    ],
)
def test_satisfaction_bounds_are_checked(
    lower: int | None, upper: int | None, message: str
) -> None:
    config = {k: v for k, v in BE_CONFIG.items() if "Satisfaction" not in k}
    if lower is not None:
        config["cpuEvictBESatisfactionLowerPercent"] = lower
    if upper is not None:
        config["cpuEvictBESatisfactionUpperPercent"] = upper
    backend = Backend()
    ctx = make_ctx(
        [be_pod("a", 4000)], {"a": 1.0}, config=config, gates=BE_GATE, cache=starved_cache()
    )

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert status(ctx).startswith("BECPUEvict: ")
    assert message in status(ctx)


@pytest.mark.parametrize(
    ("lower", "upper", "expected"),
    [
        pytest.param(60, 60, "= 5000m", id="upper-equal-lower"),  # 10000 x (0.6 - 0.1)
        pytest.param(60, 99, "= 8900m", id="widest"),  # 10000 x (0.99 - 0.1)
        pytest.param(1, 99, "satisfaction is above the lower bound", id="lowest-lower"),
    ],
)
def test_satisfaction_bounds_at_the_edges_are_accepted(
    lower: int, upper: int, expected: str
) -> None:
    config = {
        **BE_CONFIG,
        "cpuEvictBESatisfactionLowerPercent": lower,
        "cpuEvictBESatisfactionUpperPercent": upper,
    }
    cache = MetricCache()
    be_series(cache, steady(900), steady(10000), steady(1000))  # satisfaction 0.1
    ctx = make_ctx([be_pod("a", 4000)], {"a": 1.0}, config=config, gates=BE_GATE, cache=cache)

    CPUEvict(Evictor(Backend())).run(ctx)

    assert expected in status(ctx)


def test_be_cpu_evict_cools_down_for_20_seconds() -> None:
    backend = Backend()
    strategy = CPUEvict(Evictor(backend))
    assert strategy.cool_down == 20.0
    strategy.run(
        make_ctx(
            [be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates=BE_GATE, cache=starved_cache()
        )
    )
    assert backend.victims == ["a"]

    later = NOW + 19
    resting = make_ctx(
        [be_pod("b", 4000)],
        {"b": 1.0},
        config=BE_CONFIG,
        gates=BE_GATE,
        cache=starved_cache(later),
        now=later,
    )
    strategy.run(resting)
    assert backend.victims == ["a"]
    assert status(resting) == "cooling down after an eviction"

    later = NOW + 20
    strategy.run(
        make_ctx(
            [be_pod("b", 4000)],
            {"b": 1.0},
            config=BE_CONFIG,
            gates=BE_GATE,
            cache=starved_cache(later),
            now=later,
        )
    )
    assert backend.victims == ["a", "b"]


def test_no_feature_gate_no_eviction() -> None:
    backend = Backend()
    ctx = make_ctx(
        [be_pod("a", 4000)], {"a": 1.0}, config=BE_CONFIG, gates="", cache=starved_cache()
    )
    strategy = CPUEvict(Evictor(backend))

    assert not strategy.enabled(ctx.rules.gates)
    strategy.run(ctx)
    assert backend.calls == []
    assert status(ctx) == "no feature enabled"


def test_threshold_disabled_does_nothing() -> None:
    backend = Backend()
    config = {**BE_CONFIG, "enable": False}
    ctx = make_ctx(
        [be_pod("a", 4000)], {"a": 1.0}, config=config, gates=BE_GATE, cache=starved_cache()
    )

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert status(ctx).startswith("off")


# -- CPUEvict (node usage) --------------------------------------------------------------------


def node_cache(cores: float, n: int = WINDOW) -> MetricCache:
    cache = MetricCache()
    cache.append(Sample("node_cpu_usage", {}, NOW - (n - 1) + i, cores) for i in range(n))
    return cache


def opted_in(name: str, priority: int | None = 5500) -> KnownPod:
    """An LS pod that opted in, with a spec.priority (cluster mode) unless None."""
    return known_pod(name, qos="LS", labels=OPTED_IN, spec=PodSpecFacts(priority=priority))


def test_node_cpu_evict_releases_capacity_times_usage_minus_lower() -> None:
    pods = [opted_in("a"), opted_in("b"), opted_in("c"), known_pod("shy", qos="LS")]
    cpu = {"a": 0.5, "b": 0.8, "c": 0.3, "shy": 4.0}
    backend = Backend()
    # 7.25 of 8 cores = 90%: release 8000 x (90 - 78)% = 960m
    ctx = make_ctx(pods, cpu, config=NODE_CONFIG, gates=NODE_GATE, cache=node_cache(7.25))

    CPUEvict(Evictor(backend)).run(ctx)

    assert "release 90% - 78% of 8 cores = 960m" in status(ctx)
    assert backend.victims == ["b", "a"]  # usage descending until 960m: 800 + 500
    assert ctx.audit.recent()[0].inputs == {"usage_percent": 90, "release_milli": 960}


def test_node_cpu_evict_lower_percent_overrides_the_default() -> None:
    config = {**NODE_CONFIG, "cpuEvictLowerPercent": 50}
    ctx = make_ctx(
        [opted_in("a")], {"a": 0.5}, config=config, gates=NODE_GATE, cache=node_cache(7.25)
    )

    CPUEvict(Evictor(Backend())).run(ctx)

    assert "= 3200m" in status(ctx)  # 8000 x (90 - 50)%


def test_node_cpu_under_the_threshold_or_bad_lower_means_no_eviction() -> None:
    backend = Backend()
    ctx = make_ctx(
        [opted_in("a")], {"a": 0.5}, config=NODE_CONFIG, gates=NODE_GATE, cache=node_cache(6.25)
    )
    CPUEvict(Evictor(backend)).run(ctx)
    assert status(ctx) == "CPUEvict: node CPU 78% < threshold 80%"

    config = {**NODE_CONFIG, "cpuEvictLowerPercent": 80}
    ctx = make_ctx(
        [opted_in("a")], {"a": 0.5}, config=config, gates=NODE_GATE, cache=node_cache(7.25)
    )
    CPUEvict(Evictor(backend)).run(ctx)
    assert "must be under the threshold" in status(ctx)

    config = {k: v for k, v in NODE_CONFIG.items() if k != "evictEnabledPriorityThreshold"}
    ctx = make_ctx(
        [opted_in("a")], {"a": 0.5}, config=config, gates=NODE_GATE, cache=node_cache(7.25)
    )
    CPUEvict(Evictor(backend)).run(ctx)
    assert "must be set" in status(ctx)

    ctx = make_ctx([opted_in("a")], {"a": 0.5}, config=NODE_CONFIG, gates=NODE_GATE)
    CPUEvict(Evictor(backend)).run(ctx)
    assert "stale or missing" in status(ctx)
    assert backend.calls == []


def test_without_spec_priority_a_pod_has_its_classs_default_priority() -> None:
    # Koordinator's GetPodPriorityValueWithDefault: an LS pod is koord-prod (9500 > 7999) and
    # stays; a koord-batch pod (5500) goes; spec.priority 0 counts as unset
    prod = opted_in("prod", priority=None)
    batch = known_pod(
        "batch", qos="LS", labels={**OPTED_IN, keys.LABEL_PRIORITY_CLASS: "koord-batch"}
    )
    zero = opted_in("zero", priority=0)
    backend = Backend()
    ctx = make_ctx(
        [prod, batch, zero],
        {"prod": 4.0, "batch": 0.1, "zero": 2.0},
        config=NODE_CONFIG,
        gates=NODE_GATE,
        cache=node_cache(7.25),
    )

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["batch"]


def test_a_be_victim_counts_toward_the_node_usage_task() -> None:
    cache = starved_cache()
    cache.append(Sample("node_cpu_usage", {}, NOW - i, 7.25) for i in range(WINDOW))
    hog = be_pod("hog", 2000, labels=OPTED_IN)
    pods = [hog, opted_in("ls")]
    cpu = {"hog": 1.9, "ls": 0.5}
    backend = Backend()
    ctx = make_ctx(
        pods,
        cpu,
        config={**BE_CONFIG, **NODE_CONFIG},
        gates="BECPUEvict=true,CPUEvict=true",
        cache=cache,
    )

    CPUEvict(Evictor(backend)).run(ctx)

    # hog: 2000m of batch request (>= 2000m for BECPUEvict) and 1900m used (>= 960m)
    assert backend.victims == ["hog"]


def test_a_pod_with_a_bad_batch_annotation_does_not_stop_eviction() -> None:
    bad = known_pod(
        "bad",
        qos="BE",
        kube="BestEffort",
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"},
    )
    backend = Backend()
    ctx = make_ctx(
        [bad, be_pod("good", 4000)],
        {"bad": 0.5, "good": 1.0},
        config=BE_CONFIG,
        gates=BE_GATE,
        cache=starved_cache(),
    )

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["good"]  # bad has no known request: ratio 0, last in line
