"""CPUAllocatableEvict and MemoryAllocatableEvict: eviction by requests against allocatable.

Cases follow Koordinator's cpu_evict_test.go / memory_evict_test.go
(Test_calculate*ReleaseByAllocatableThresholdPercent, Test_isAllocatableThresholdConfigValid),
with other numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from koordapi import keys
from koordlet.metriccache import MetricCache
from koordlet.qosmanager.cpuevict import CPUEvict
from koordlet.qosmanager.eviction import Evictor
from koordlet.qosmanager.framework import Context
from koordlet.qosmanager.memoryevict import MemoryEvict
from koordlet.states.pods import KnownPod
from runtimehooks.request import PodSpecFacts
from tests.unit.koordlet.qosmanager.fakes import NOW, Backend, context, known_pod, rules, samples

OPTED_IN = {keys.LABEL_EVICTION_ENABLED: "true"}
CPU_CONFIG: dict[str, Any] = {
    "enable": True,
    "cpuAllocatableEvictThresholdPercent": 85,
    "cpuAllocatableEvictLowerPercent": 71,
    "allocatableEvictPriorityThreshold": 7999,
}
MEMORY_CONFIG: dict[str, Any] = {
    "enable": True,
    "memoryAllocatableEvictThresholdPercent": 80,
    "memoryAllocatableEvictLowerPercent": 75,
    "allocatableEvictPriorityThreshold": 5999,
}


def batch_pod(name: str, resource: str, request: int, *, opted_in: bool = True) -> KnownPod:
    """A BE pod (koord-batch by default) requesting ``request`` of a batch resource."""
    return known_pod(
        name,
        qos="BE",
        kube="BestEffort",
        labels=OPTED_IN if opted_in else {},
        batch={"main": {"requests": {resource: str(request)}}},
    )


def mid_pod(name: str, resource: str, request: int, priority: int = 7100) -> KnownPod:
    """An LS pod with a koord-mid spec.priority (cluster mode) requesting a mid resource."""
    return known_pod(
        name,
        qos="LS",
        labels=OPTED_IN,
        batch={"main": {"requests": {resource: str(request)}}},
        spec=PodSpecFacts(priority=priority),
    )


def make_ctx(
    pods: list[KnownPod],
    config: Mapping[str, Any],
    gates: str,
    allocatable: Mapping[str, int],
    measured: bool = True,
) -> Context:
    cache = MetricCache()
    if measured:
        for known in pods:
            usage = {"pod_cpu_usage": 0.5, "pod_memory_usage": 1 << 30}
            samples(cache, usage, NOW, pod_uid=known.request.uid)
    return context(
        pods=pods,
        cache=cache,
        rules_=rules({"resourceUsedThresholdWithBE": dict(config)}, gates),
        allocatable=allocatable,
    )


def cpu_status(ctx: Context) -> str:
    return ctx.audit.statuses()["CPUEvict"].text


def test_batch_cpu_requests_past_the_threshold_release_down_to_the_lower_percent() -> None:
    # 17100 + 14900 = 32000 of 37300 = 85.8% > 85%: release int(32000 - 0.71 x 37300) = 5517
    pods = [
        batch_pod("small", keys.BATCH_CPU, 14900),
        batch_pod("large", keys.BATCH_CPU, 17100),
    ]
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert "release down to 71% = 5517" in cpu_status(ctx)
    assert backend.victims == ["large"]  # request descending; 17100 >= 5517
    assert ctx.audit.recent()[0].inputs == {
        "requested": 32000,
        "allocatable": 37300,
        "release": 5517,
    }


def test_requests_at_the_threshold_release_nothing() -> None:
    # 85% exactly is not above 85%
    pods = [batch_pod("a", keys.BATCH_CPU, 31705)]
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert "<= 85%" in cpu_status(ctx)


def test_without_allocatable_everything_requested_is_released() -> None:
    pods = [batch_pod("a", keys.BATCH_CPU, 300), batch_pod("b", keys.BATCH_CPU, 700)]
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "CPUAllocatableEvict=true", {})

    CPUEvict(Evictor(backend)).run(ctx)

    assert sorted(backend.victims) == ["a", "b"]
    assert "none allocatable: release all" in cpu_status(ctx)


def test_mid_pods_count_against_mid_cpu_under_a_mid_priority_threshold() -> None:
    pods = [batch_pod("batch", keys.BATCH_CPU, 91000), mid_pod("mid", keys.MID_CPU, 93000)]
    allocatable = {keys.BATCH_CPU: 100000, keys.MID_CPU: 100000}
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "CPUAllocatableEvict=true", allocatable)

    CPUEvict(Evictor(backend)).run(ctx)

    # batch-cpu: release 91000 - 71000 = 20000 (batch goes, 5500 before 7100); mid-cpu: 22000
    assert sorted(backend.victims) == ["batch", "mid"]
    reasons = [a.reason for a in ctx.audit.recent()]
    assert any("kubernetes.io/batch-cpu" in r and "= 20000" in r for r in reasons)


def test_a_priority_threshold_under_mid_leaves_mid_pods_alone() -> None:
    pods = [batch_pod("batch", keys.BATCH_CPU, 91000), mid_pod("mid", keys.MID_CPU, 93000)]
    allocatable = {keys.BATCH_CPU: 100000, keys.MID_CPU: 100000}
    config = {**CPU_CONFIG, "allocatableEvictPriorityThreshold": 5999}
    backend = Backend()
    ctx = make_ctx(pods, config, "CPUAllocatableEvict=true", allocatable)

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["batch"]


def test_pods_that_did_not_opt_in_count_but_are_not_victims() -> None:
    pods = [
        batch_pod("shy", keys.BATCH_CPU, 30000, opted_in=False),
        batch_pod("willing", keys.BATCH_CPU, 4000),
    ]
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["willing"]  # releases 4000 of 7517; nobody else may go


def test_pods_without_a_usage_sample_are_not_victims() -> None:
    pods = [batch_pod("a", keys.BATCH_CPU, 34000)]
    backend = Backend()
    ctx = make_ctx(
        pods, CPU_CONFIG, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300}, measured=False
    )

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []


def test_the_eviction_policy_annotation_can_exclude_the_feature() -> None:
    pod = known_pod(
        "a",
        qos="BE",
        kube="BestEffort",
        labels=OPTED_IN,
        annotations={keys.ANNOTATION_EVICTION_POLICY: json.dumps(["CPUEvict"])},
        batch={"main": {"requests": {keys.BATCH_CPU: "34000"}}},
    )
    backend = Backend()
    ctx = make_ctx([pod], CPU_CONFIG, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []


@pytest.mark.parametrize(
    ("change", "said"),
    [
        pytest.param(
            {"cpuAllocatableEvictThresholdPercent": None}, "must be set", id="no-threshold"
        ),
        pytest.param({"cpuAllocatableEvictLowerPercent": 85}, "must be under", id="lower-equal"),
        pytest.param({"allocatableEvictPriorityThreshold": None}, "must be set", id="no-priority"),
    ],
)
# (an allocatableEvictPriorityThreshold past 7999, koord-prod, is refused with the NodeSLO)
def test_invalid_configuration_evicts_nobody_and_says_why(
    change: Mapping[str, Any], said: str
) -> None:
    config = {k: v for k, v in {**CPU_CONFIG, **change}.items() if v is not None}
    backend = Backend()
    pods = [batch_pod("a", keys.BATCH_CPU, 37000)]
    ctx = make_ctx(pods, config, "CPUAllocatableEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []
    assert said in cpu_status(ctx)


def test_the_gate_off_means_no_allocatable_eviction() -> None:
    pods = [batch_pod("a", keys.BATCH_CPU, 37000)]
    backend = Backend()
    ctx = make_ctx(pods, CPU_CONFIG, "BECPUEvict=true", {keys.BATCH_CPU: 37300})

    CPUEvict(Evictor(backend)).run(ctx)

    assert backend.calls == []


def test_memory_releases_by_its_own_float64_formula() -> None:
    # 25351386237 of 30159402264 bytes = 84.06% > 80%: Koordinator's memory formula
    # int((ratio - 0.75) x allocatable) gives 2731834538 (the CPU one would give ...539)
    pods = [
        batch_pod("a", keys.BATCH_MEMORY, 20_000_000_000),
        batch_pod("b", keys.BATCH_MEMORY, 5_351_386_237),
    ]
    backend = Backend()
    ctx = make_ctx(
        pods, MEMORY_CONFIG, "MemoryAllocatableEvict=true", {keys.BATCH_MEMORY: 30159402264}
    )

    MemoryEvict(Evictor(backend)).run(ctx)

    assert ctx.audit.recent()[0].inputs["release"] == 2731834538
    assert backend.victims == ["a"]


def test_memory_allocatable_eviction_does_not_need_node_memory_pressure() -> None:
    # no node_memory_usage sample at all: BEMemoryEvict cannot act, allocatable eviction can
    pods = [batch_pod("a", keys.BATCH_MEMORY, 9 << 30)]
    backend = Backend()
    gates = "BEMemoryEvict=true,MemoryAllocatableEvict=true"
    ctx = make_ctx(pods, MEMORY_CONFIG, gates, {keys.BATCH_MEMORY: 10 << 30})

    MemoryEvict(Evictor(backend)).run(ctx)

    assert backend.victims == ["a"]
