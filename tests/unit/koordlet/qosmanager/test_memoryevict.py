"""MemoryEvict: thresholds, victim order, how much is released, cool-down and bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from koordapi import keys
from koordlet.metriccache import MetricCache
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.audit import AuditTrail
from koordlet.qosmanager.eviction import Evictor
from koordlet.qosmanager.framework import Context
from koordlet.qosmanager.memoryevict import NAME, MemoryEvict, thresholds
from koordlet.states.pods import KnownPod
from runtimehooks.request import PodSpecFacts
from tests.unit.koordlet.qosmanager.fakes import NOW, Backend, context, known_pod, rules, samples

GIB = 1 << 30
MIB = 1 << 20
CAPACITY = 16 * GIB  # fakes.topology() default
ON: dict[str, Any] = {"resourceUsedThresholdWithBE": {"enable": True}}
BE_GATE = "BEMemoryEvict=true"


def used_bytes(percent: int) -> int:
    """The smallest byte count that is ``percent``% of the capacity in whole percent."""
    return -(-CAPACITY * percent // 100)


def release_for(percent: int, lower: int) -> int:
    return CAPACITY * (percent - lower) // 100


def be(name: str) -> KnownPod:
    return known_pod(name, qos="BE", kube="BestEffort")


def run_ctx(
    pods: list[KnownPod],
    memory: Mapping[str, int],
    *,
    percent: int | None,
    spec: Mapping[str, Any] | None = None,
    gates: str = BE_GATE,
    now: float = NOW,
    node_age: float = 0.0,
    audit: AuditTrail | None = None,
) -> Context:
    cache = MetricCache()
    if percent is not None:
        samples(cache, {"node_memory_usage": used_bytes(percent)}, now - node_age)
    for known in pods:
        if known.request.name in memory:
            samples(
                cache,
                {"pod_memory_usage": memory[known.request.name]},
                now,
                pod_uid=known.request.uid,
            )
    return context(
        pods=pods,
        cache=cache,
        rules_=rules(ON if spec is None else spec, gates),
        now=now,
        audit=audit,
    )


def status(ctx: Context) -> str:
    return ctx.audit.statuses()[NAME].text


# -- thresholds -------------------------------------------------------------------------------


def test_lower_defaults_to_threshold_minus_two_and_can_be_overridden() -> None:
    assert thresholds({"memoryEvictThresholdPercent": 70}) == (70, 68)
    assert thresholds({"memoryEvictThresholdPercent": 90}) == (90, 88)
    assert thresholds({"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 50}) == (
        70,
        50,
    )


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 70}, id="eq"),
        pytest.param({"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 80}, id="gt"),
        pytest.param({}, id="no-threshold"),
    ],
)
def test_thresholds_that_make_no_sense_are_refused(config: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="memoryEvict"):
        thresholds(config)


# -- BEMemoryEvict ----------------------------------------------------------------------------


def test_be_victims_go_by_memory_descending_then_name_descending() -> None:
    pods = [be("a"), be("b"), be("c"), be("d"), known_pod("web", qos="LS")]
    memory = {"a": GIB, "b": 3 * GIB, "c": GIB, "d": 512 * MIB, "web": 8 * GIB}
    backend = Backend()
    ctx = run_ctx(pods, memory, percent=99)

    MemoryEvict(Evictor(backend)).run(ctx)

    # release = 16 GiB x 31% = 4.96 GiB: b (3) + c (1) + a (1) = 5 GiB is enough, d is spared
    assert release_for(99, 68) < 5 * GIB
    assert backend.victims == ["b", "c", "a"]


def test_release_is_capacity_times_usage_minus_lower_and_eviction_stops_there() -> None:
    pods = [be("a"), be("b"), be("c")]
    memory = {"a": GIB, "b": GIB, "c": GIB}
    backend = Backend()
    ctx = run_ctx(pods, memory, percent=80)

    MemoryEvict(Evictor(backend)).run(ctx)

    # 16 GiB x (80 - 68)% = 1966 MiB: one 1 GiB pod is not enough, two are
    assert release_for(80, 68) == 2_061_584_302
    assert backend.victims == ["c", "b"]
    action = ctx.audit.recent()[-1]
    assert action.inputs["release"] == 2_061_584_302
    assert action.inputs["usage_percent"] == 80
    assert action.inputs["lower_percent"] == 68


def test_memory_evict_lower_percent_raises_how_much_is_released() -> None:
    memory = {"a": GIB, "b": GIB, "c": GIB}
    default = Backend()
    MemoryEvict(Evictor(default)).run(
        run_ctx([be("a"), be("b"), be("c")], memory, percent=72)
    )  # 4% of 16 GiB = 655 MiB: one pod
    assert default.victims == ["c"]

    lowered = Backend()
    spec = {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictLowerPercent": 60}}
    ctx = run_ctx([be("a"), be("b"), be("c")], memory, percent=72, spec=spec)
    MemoryEvict(Evictor(lowered)).run(ctx)  # 12% of 16 GiB = 1966 MiB: two pods
    assert lowered.victims == ["c", "b"]
    assert ctx.audit.recent()[-1].inputs["lower_percent"] == 60


def test_under_the_threshold_nobody_is_evicted() -> None:
    backend = Backend()
    ctx = run_ctx([be("a")], {"a": GIB}, percent=69)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert status(ctx) == "BEMemoryEvict: memory 69% < threshold 70%"


def test_lower_at_or_above_the_threshold_means_no_eviction_and_says_why() -> None:
    backend = Backend()
    spec = {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictLowerPercent": 75}}
    ctx = run_ctx([be("a")], {"a": GIB}, percent=95, spec=spec)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert status(ctx).startswith("BEMemoryEvict: no action:")
    assert "75" in status(ctx) and "70" in status(ctx)


def test_threshold_disabled_does_nothing() -> None:
    backend = Backend()
    spec = {"resourceUsedThresholdWithBE": {"enable": False}}
    ctx = run_ctx([be("a")], {"a": GIB}, percent=99, spec=spec)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert ctx.audit.recent() == []
    assert status(ctx).startswith("off")


@pytest.mark.parametrize("percent", [99, None], ids=["old-sample", "no-sample"])
def test_stale_or_missing_node_memory_means_no_eviction(percent: int | None) -> None:
    backend = Backend()
    ctx = run_ctx([be("a")], {"a": GIB}, percent=percent, node_age=3.0)
    assert ctx.max_age < 3.0

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "stale" in status(ctx)


def test_cool_down_after_an_eviction() -> None:
    backend = Backend()
    strategy = MemoryEvict(Evictor(backend))
    memory = {"a": GIB, "b": GIB}

    strategy.run(run_ctx([be("a"), be("b")], memory, percent=72))
    assert backend.victims == ["b"]

    # 3 s later memory is still high, but the strategy rests (b's memory may still drain)
    resting = run_ctx([be("a")], memory, percent=72, now=NOW + 3)
    strategy.run(resting)
    assert backend.victims == ["b"]
    assert status(resting) == "cooling down after an eviction"

    # after 4 s it acts again: b is gone, a is next
    strategy.run(run_ctx([be("a")], memory, percent=72, now=NOW + 4))
    assert backend.victims == ["b", "a"]


def test_failed_evictions_do_not_start_the_cool_down() -> None:
    backend = Backend(refuse=frozenset({"default/a"}))
    strategy = MemoryEvict(Evictor(backend))

    ctx = run_ctx([be("a")], {"a": GIB}, percent=72)
    strategy.run(ctx)
    assert ctx.audit.recent() == []

    strategy.run(run_ctx([be("a")], {"a": GIB}, percent=72, now=NOW + 1))
    assert backend.victims == ["a", "a"]  # tried again at once


def test_a_refused_victim_is_skipped_for_the_next_one() -> None:
    backend = Backend(refuse=frozenset({"default/c"}))
    ctx = run_ctx([be("a"), be("b"), be("c")], {"a": GIB, "b": GIB, "c": GIB}, percent=72)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["c", "b"]
    assert [a.target for a in ctx.audit.recent()] == ["default/b"]
    assert status(ctx) == "eviction of default/c failed: runtime said no"


def test_a_victim_still_terminating_counts_as_released_and_is_not_evicted_again() -> None:
    backend = Backend()
    strategy = MemoryEvict(Evictor(backend))
    memory = {"a": GIB, "b": GIB}

    strategy.run(run_ctx([be("a"), be("b")], memory, percent=72))
    assert backend.victims == ["b"]

    # 5 s later (after the cool-down) b still has its containers and memory is still high:
    # b's gigabyte is counted as on its way out, so neither b nor a is evicted
    later = run_ctx([be("a"), be("b")], memory, percent=72, now=NOW + 5)
    strategy.run(later)
    assert backend.victims == ["b"]
    assert later.audit.recent() == []

    # after 120 s it is no longer believed to be terminating: it is evicted again
    strategy.run(run_ctx([be("a"), be("b")], memory, percent=72, now=NOW + 121))
    assert backend.victims == ["b", "b"]


def test_a_remembered_victim_without_containers_counts_for_nothing() -> None:
    backend = Backend()
    strategy = MemoryEvict(Evictor(backend))
    memory = {"a": GIB, "b": GIB}
    strategy.run(run_ctx([be("a"), be("b")], memory, percent=72))

    gone = be("b")
    gone.containers.clear()
    strategy.run(run_ctx([be("a"), gone], memory, percent=72, now=NOW + 5))

    assert backend.victims == ["b", "a"]


def test_a_pod_without_containers_is_not_a_candidate() -> None:
    empty = be("empty")
    empty.containers.clear()
    backend = Backend()
    ctx = run_ctx([empty, be("a")], {"empty": 8 * GIB, "a": GIB}, percent=72)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["a"]


def test_only_be_pods_are_victims_of_be_memory_evict() -> None:
    pods = [
        known_pod("lsr", qos="LSR", kube="Guaranteed"),
        known_pod("ls", qos="LS"),
        known_pod("plain", kube="Burstable"),  # no class label: not BE
        # Kubernetes BestEffort without the label: not BE for eviction (Koordinator's
        # GetPodQoSClassRaw), though it uses the most memory
        known_pod("kube-be", kube="BestEffort"),
        known_pod("labelled-be", qos="BE", kube="BestEffort"),
    ]
    memory = {"lsr": 8 * GIB, "ls": 8 * GIB, "plain": 8 * GIB, "kube-be": 9 * GIB,
              "labelled-be": GIB}  # fmt: skip
    backend = Backend()

    MemoryEvict(Evictor(backend)).run(run_ctx(pods, memory, percent=99))

    assert backend.victims == ["labelled-be"]


def test_be_memory_victims_by_priority_then_memory() -> None:
    def prioritized(name: str, priority: int) -> KnownPod:
        return known_pod(name, qos="BE", kube="BestEffort", spec=PodSpecFacts(priority=priority))

    pods = [prioritized("big", 5800), prioritized("small-low", 5200), prioritized("mid", 5800)]
    memory = {"big": 6 * GIB, "small-low": GIB // 2, "mid": 3 * GIB}
    backend = Backend()

    MemoryEvict(Evictor(backend)).run(run_ctx(pods, memory, percent=99))

    # release 99% - 68% of 16 GiB = 4.96 GiB: small-low (lowest priority), then big
    assert backend.victims == ["small-low", "big"]


def test_no_be_pod_means_no_eviction_and_a_status() -> None:
    backend = Backend()
    ctx = run_ctx([known_pod("ls", qos="LS")], {"ls": 8 * GIB}, percent=99)

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "no pod may be evicted" in status(ctx)


def test_the_eviction_is_an_audited_action_with_the_numbers() -> None:
    backend = Backend()
    ctx = run_ctx([be("big")], {"big": 2 * GIB}, percent=80)

    MemoryEvict(Evictor(backend)).run(ctx)

    (action,) = ctx.audit.recent()
    assert (action.strategy, action.kind, action.target, action.value) == (
        "MemoryEvict",
        "evict",
        "default/big",
        "BEMemoryEvict",
    )
    assert action.pod_uid == "uid-big"
    assert action.ts == NOW
    for number in ("80%", "70%", "68%", "16.0 GiB", "1966 MiB", "2048 MiB"):
        assert number in action.reason
    (key, message) = backend.calls[0]
    assert key == "default/big"
    assert "1966 MiB" in message  # the backend is told why, too
    assert ctx.audit.for_pod("uid-big", "BE") == [action]


def test_evictions_are_counted_in_the_metric() -> None:
    metrics = KoordletMetrics("node1")
    labels = {"node": "node1", "reason": "trigger by koordlet feature BEMemoryEvict"}
    assert not metrics.registry.get_sample_value("koordlet_pod_eviction_total", labels)

    ctx = run_ctx([be("a"), be("b"), be("c")], {"a": GIB, "b": GIB, "c": GIB}, percent=80)
    MemoryEvict(Evictor(Backend(), metrics)).run(ctx)

    assert metrics.registry.get_sample_value("koordlet_pod_eviction_total", labels) == 2.0


# -- MemoryEvict (the generic variant) --------------------------------------------------------

GENERIC_SPEC = {
    "resourceUsedThresholdWithBE": {"enable": True, "evictEnabledPriorityThreshold": 7999}
}
OPTED_IN = {keys.LABEL_EVICTION_ENABLED: "true"}
BATCH_PRIORITY = PodSpecFacts(priority=5500)  # as the kubelet's pod list reports it


def test_generic_memory_evict_leaves_prod_pods_and_pods_not_opted_in() -> None:
    # standalone: an LS pod is koord-prod by default (9500 > 7999); the BE pod did not opt in
    pods = [known_pod("x", qos="LS", labels=OPTED_IN), be("y")]
    backend = Backend()
    ctx = run_ctx(
        pods, {"x": 4 * GIB, "y": GIB}, percent=99, spec=GENERIC_SPEC, gates="MemoryEvict=true"
    )

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "no pod may be evicted" in status(ctx)


def test_generic_memory_evict_takes_opted_in_pods_with_a_priority() -> None:
    pods = [
        known_pod("small", qos="LS", labels=OPTED_IN, spec=BATCH_PRIORITY),
        known_pod("large", qos="LS", labels=OPTED_IN, spec=BATCH_PRIORITY),
        known_pod("shy", qos="LS", spec=BATCH_PRIORITY),  # no label: never
    ]
    memory = {"small": GIB, "large": 3 * GIB, "shy": 8 * GIB}
    backend = Backend()
    ctx = run_ctx(pods, memory, percent=99, spec=GENERIC_SPEC, gates="MemoryEvict=true")

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["large", "small"]
    assert {a.value for a in ctx.audit.recent()} == {"MemoryEvict"}


def test_generic_memory_evict_needs_the_priority_threshold() -> None:
    backend = Backend()
    ctx = run_ctx(
        [known_pod("x", qos="LS", labels=OPTED_IN, spec=BATCH_PRIORITY)],
        {"x": 4 * GIB},
        percent=99,
        gates="MemoryEvict=true",
    )

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []


def test_enabled_follows_either_gate() -> None:
    strategy = MemoryEvict(Evictor(Backend()))
    assert not strategy.enabled(rules(None, "").gates)
    assert strategy.enabled(rules(None, "BEMemoryEvict=true").gates)
    assert strategy.enabled(rules(None, "MemoryEvict=true").gates)
