"""The shared eviction machinery: run_tasks, the Evictor, eligibility, order."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from koordapi import keys
from koordlet.metrics import KoordletMetrics
from koordlet.qosmanager.eviction import (
    REMEMBER_SECONDS,
    Candidate,
    Evictor,
    EvictTask,
    eviction_allowed,
    generic_order,
    run_tasks,
)
from koordlet.qosmanager.framework import Context
from runtimehooks.request import PodSpecFacts
from tests.unit.koordlet.qosmanager.fakes import NOW, Backend, context, known_pod

GIB = 1 << 30


def mem(name: str, used: int) -> Candidate:
    return Candidate(known_pod(name, qos="BE", kube="BestEffort"), memory_used=used)


def memory_task(feature: str, to_release: int, candidates: Sequence[Candidate]) -> EvictTask:
    return EvictTask(
        feature, to_release, candidates, lambda c: c.memory_used, "memory-used", f"{feature} why"
    )


def ctx_at(now: float = NOW) -> Context:
    return context(now=now)


# -- run_tasks --------------------------------------------------------------------------------


def test_a_pod_evicted_for_one_task_counts_for_the_next() -> None:
    a, b, c = mem("a", GIB), mem("b", GIB), mem("c", GIB)
    backend = Backend()
    ctx = ctx_at()

    evicted = run_tasks(
        ctx,
        Evictor(backend),
        "MemoryEvict",
        [
            memory_task("BEMemoryEvict", GIB, [a]),
            memory_task("MemoryEvict", GIB * 3 // 2, [a, b, c]),
        ],
    )

    # a's gigabyte is already released when MemoryEvict starts: it needs only b on top
    assert evicted
    assert backend.victims == ["a", "b"]
    assert [act.value for act in ctx.audit.recent()] == ["BEMemoryEvict", "MemoryEvict"]


def test_a_task_already_satisfied_by_earlier_victims_evicts_nobody() -> None:
    a, b = mem("a", 2 * GIB), mem("b", GIB)
    backend = Backend()

    run_tasks(
        ctx_at(),
        Evictor(backend),
        "MemoryEvict",
        [memory_task("BEMemoryEvict", GIB, [a]), memory_task("MemoryEvict", 2 * GIB, [b])],
    )

    assert backend.victims == ["a"]


def test_a_failed_eviction_moves_on_to_the_next_candidate() -> None:
    backend = Backend(refuse=frozenset({"a"}))
    ctx = ctx_at()

    evicted = run_tasks(
        ctx,
        Evictor(backend),
        "MemoryEvict",
        [memory_task("BEMemoryEvict", GIB, [mem("a", GIB), mem("b", GIB), mem("c", GIB)])],
    )

    assert evicted
    assert backend.victims == ["a", "b"]  # a refused: b instead, then enough
    assert [act.target for act in ctx.audit.recent()] == ["default/b"]


def test_nobody_evicted_when_every_eviction_fails() -> None:
    backend = Backend(refuse=frozenset({"a", "b"}))
    ctx = ctx_at()

    evicted = run_tasks(
        ctx,
        Evictor(backend),
        "MemoryEvict",
        [memory_task("BEMemoryEvict", GIB, [mem("a", GIB), mem("b", GIB)])],
    )

    assert not evicted
    assert backend.victims == ["a", "b"]
    assert ctx.audit.recent() == []
    assert (
        "eviction of default/b failed: runtime said no" in ctx.audit.statuses()["MemoryEvict"].text
    )


def test_tasks_with_different_targets_credit_each_victim_per_target() -> None:
    def cpu(name: str, request: int, used: int) -> Candidate:
        known = known_pod(name, qos="BE", kube="BestEffort")
        return Candidate(known, cpu_used_milli=used, cpu_request_milli=request)

    a, b, c = cpu("a", 2000, 300), cpu("b", 500, 400), cpu("c", 500, 900)
    batch = EvictTask(
        "BECPUEvict", 1000, [a], lambda x: x.cpu_request_milli, "batch-cpu-request", "be"
    )
    used = EvictTask("CPUEvict", 500, [a, b, c], lambda x: x.cpu_used_milli, "cpu-used", "node")
    backend = Backend()

    run_tasks(ctx_at(), Evictor(backend), "CPUEvict", [batch, used])

    # a gives 2000m of request to BECPUEvict and 300m of usage to CPUEvict; b's 400m is enough
    assert backend.victims == ["a", "b"]


def test_a_pod_still_terminating_counts_and_is_not_evicted_again() -> None:
    a, b = mem("a", GIB), mem("b", GIB)
    backend = Backend()
    evictor = Evictor(backend)
    assert run_tasks(ctx_at(), evictor, "MemoryEvict", [memory_task("BEMemoryEvict", GIB, [a, b])])
    assert backend.victims == ["a"]

    # a second later the node still looks short: a is on its way out, so nobody is evicted
    evicted = run_tasks(
        ctx_at(NOW + 1), evictor, "MemoryEvict", [memory_task("BEMemoryEvict", GIB, [a, b])]
    )
    assert not evicted
    assert backend.victims == ["a"]


def test_is_terminating_forgets_after_120_seconds_or_when_the_containers_are_gone() -> None:
    a = mem("a", GIB)
    evictor = Evictor(Backend())
    assert not evictor.is_terminating(a, NOW)
    assert evictor.evict(ctx_at(), "MemoryEvict", memory_task("BEMemoryEvict", GIB, [a]), a)

    assert REMEMBER_SECONDS == 120.0  # Koordinator remembers an evicted pod for 2 minutes
    assert evictor.is_terminating(a, NOW + 119)
    assert evictor.is_terminating(a, NOW + 120)
    assert not evictor.is_terminating(a, NOW + 120.5)
    assert not evictor.is_terminating(a, NOW + 1)  # forgotten for good

    b = mem("b", GIB)
    assert evictor.evict(ctx_at(), "MemoryEvict", memory_task("BEMemoryEvict", GIB, [b]), b)
    b.known.containers.clear()
    assert not evictor.is_terminating(b, NOW + 1)


class VanishingDict(dict[str, float]):
    """Another strategy's thread forgets the entry right after this one has read it."""

    def get(self, key: str, default: Any = None) -> Any:
        value = super().get(key, default)
        self.pop(key, None)
        return value


def test_is_terminating_tolerates_an_entry_forgotten_meanwhile() -> None:
    # CPUEvict and MemoryEvict share one Evictor and run in different threads
    a = mem("a", GIB)
    evictor = Evictor(Backend())
    evictor._evicted = VanishingDict({a.uid: NOW - 2 * REMEMBER_SECONDS})

    assert not evictor.is_terminating(a, NOW)


def test_an_eviction_is_audited_and_counted() -> None:
    metrics = KoordletMetrics("node1")
    a = mem("a", 2 * GIB)
    ctx = ctx_at()
    task = EvictTask(
        "BEMemoryEvict",
        GIB,
        [a],
        lambda c: c.memory_used,
        "memory-used",
        "node memory 80% >= 70%",
        {"usage_percent": 80},
    )

    assert Evictor(Backend(), metrics).evict(ctx, "MemoryEvict", task, a)

    (action,) = ctx.audit.recent()
    assert action.kind == "evict" and action.pod_uid == "uid-a" and action.target == "default/a"
    expected = "node memory 80% >= 70%; victim gives back 2048 MiB (containers stopped)"
    assert action.reason == expected
    assert action.inputs == {"usage_percent": 80}
    labels = {"node": "node1", "reason": "trigger by koordlet feature BEMemoryEvict"}
    assert metrics.registry.get_sample_value("koordlet_pod_eviction_total", labels) == 1.0
    detail = {**labels, "pod_namespace": "default", "pod_name": "a"}
    get = metrics.registry.get_sample_value
    assert get("koordlet_pod_eviction_detail_total", detail) == 1.0
    # Koordinator forgets a pod's detail series 5 minutes after its last change
    metrics.expire_eviction_details(ctx.now + 299)
    assert get("koordlet_pod_eviction_detail_total", detail) == 1.0
    metrics.expire_eviction_details(ctx.now + 301)
    assert get("koordlet_pod_eviction_detail_total", detail) is None
    assert get("koordlet_pod_eviction_total", labels) == 1.0  # the total stays


def test_a_failed_eviction_is_not_counted() -> None:
    metrics = KoordletMetrics("node1")
    a = mem("a", GIB)
    evictor = Evictor(Backend(refuse=frozenset({"a"})), metrics)

    assert not evictor.evict(ctx_at(), "MemoryEvict", memory_task("BEMemoryEvict", GIB, [a]), a)

    labels = {"node": "node1", "reason": "trigger by koordlet feature BEMemoryEvict"}
    assert not metrics.registry.get_sample_value("koordlet_pod_eviction_total", labels)
    assert not evictor.is_terminating(a, NOW)


# -- eligibility of the generic variants ------------------------------------------------------

OPTED_IN = {keys.LABEL_EVICTION_ENABLED: "true"}


def spec(priority: int | None) -> PodSpecFacts:
    return PodSpecFacts(priority=priority)


def policy(features: object) -> dict[str, str]:
    return {keys.ANNOTATION_EVICTION_POLICY: json.dumps(features)}


@pytest.mark.parametrize(
    ("qos", "kube", "labels", "priority", "expected"),
    [
        pytest.param("LS", "Burstable", {}, None, 9500, id="standalone-LS-is-prod"),
        pytest.param(None, "Guaranteed", {}, None, 9500, id="standalone-guaranteed-is-prod"),
        pytest.param("BE", "BestEffort", {}, None, 5500, id="standalone-BE-is-batch"),
        pytest.param(None, "BestEffort", {}, None, 5500, id="kube-besteffort-is-batch"),
        pytest.param(
            "LS", "Burstable", {keys.LABEL_PRIORITY_CLASS: "koord-free"}, None, 3500, id="free"
        ),
        pytest.param(
            "LS", "Burstable", {keys.LABEL_PRIORITY_CLASS: "koord-nope"}, None, 9500,
            id="unknown-class-label-falls-back-to-qos",
        ),
        pytest.param("LS", "Burstable", {}, 5999, 5999, id="spec-priority-wins"),
        pytest.param("BE", "BestEffort", {}, 0, 5500, id="spec-priority-zero-is-unset"),
        pytest.param("LS", "Burstable", {}, 8500, 8500, id="between-classes-kept"),
        pytest.param(
            "LS", "Burstable", {keys.LABEL_PRIORITY_CLASS: "koord-mid"}, 0, 7500,
            id="class-label-with-zero-priority",
        ),
    ],
)  # fmt: skip
def test_priority_with_koordinators_defaults(
    qos: str | None, kube: str, labels: Mapping[str, str], priority: int | None, expected: int
) -> None:
    known = known_pod("p", qos=qos, kube=kube, labels=labels, spec=spec(priority))
    assert known.request.priority == expected


def test_standalone_ls_pods_are_prod_and_not_eligible_under_7999() -> None:
    ls = known_pod("ls", qos="LS", labels=OPTED_IN)
    be = known_pod("be", qos="BE", kube="BestEffort", labels=OPTED_IN)
    assert not eviction_allowed(ls, "CPUEvict", 7999)
    assert eviction_allowed(be, "CPUEvict", 7999)


@pytest.mark.parametrize(
    ("labels", "annotations", "priority", "allowed"),
    [
        pytest.param(OPTED_IN, {}, 5500, True, id="opted-in"),
        pytest.param(OPTED_IN, {}, 7999, True, id="at-threshold"),
        pytest.param(OPTED_IN, {}, 8000, False, id="above-threshold"),
        pytest.param({}, {}, 5500, False, id="no-label"),
        pytest.param({keys.LABEL_EVICTION_ENABLED: "false"}, {}, 5500, False, id="label-false"),
        pytest.param(OPTED_IN, policy(["CPUEvict", "MemoryEvict"]), 5500, True, id="in-policy"),
        pytest.param(OPTED_IN, policy(["MemoryEvict"]), 5500, False, id="not-in-policy"),
        pytest.param(OPTED_IN, policy([]), 5500, False, id="empty-policy"),
        pytest.param(OPTED_IN, policy("CPUEvict"), 5500, False, id="policy-not-a-list"),
        pytest.param(
            OPTED_IN, {keys.ANNOTATION_EVICTION_POLICY: "[CPUEvict"}, 5500, False, id="malformed"
        ),
    ],
)
def test_eviction_allowed(
    labels: Mapping[str, str], annotations: Mapping[str, str], priority: int, allowed: bool
) -> None:
    known = known_pod("p", labels=labels, annotations=annotations, spec=spec(priority))

    assert eviction_allowed(known, "CPUEvict", 7999) is allowed


def test_a_pod_without_containers_is_not_eligible() -> None:
    known = known_pod("p", labels=OPTED_IN, spec=spec(5500))
    assert eviction_allowed(known, "CPUEvict", 7999)
    known.containers.clear()
    assert not eviction_allowed(known, "CPUEvict", 7999)


# -- generic order ----------------------------------------------------------------------------


def used(
    name: str, milli: int, priority: int | None = None, **meta: Mapping[str, str]
) -> Candidate:
    known = known_pod(
        name, labels=meta.get("labels"), annotations=meta.get("annotations"), spec=spec(priority)
    )
    return Candidate(known, cpu_used_milli=milli)


def names(candidates: Sequence[Candidate]) -> list[str]:
    return [c.name for c in candidates]


def test_generic_order_eviction_priority_annotation_first() -> None:
    def prio(value: str) -> dict[str, str]:
        return {keys.ANNOTATION_EVICTION_PRIORITY: value}

    pods = [
        used("two", 9000, annotations=prio("2")),
        used("one", 10, annotations=prio("1")),
        used("minus", 10, annotations=prio("-1")),
    ]

    assert names(generic_order(pods, lambda c: c.cpu_used_milli)) == ["minus", "one", "two"]


def test_generic_order_priority_label_ascending_then_usage_descending() -> None:
    def label(value: str) -> dict[str, str]:
        return {keys.LABEL_PRIORITY: value}

    pods = [
        used("p5-small", 100, labels=label("5")),
        used("p5-big", 900, labels=label("5")),
        used("p3", 10, labels=label("3")),
        used("p9", 5000, labels=label("9")),
    ]

    assert names(generic_order(pods, lambda c: c.cpu_used_milli)) == [
        "p3",
        "p5-big",
        "p5-small",
        "p9",
    ]


def test_generic_order_by_usage_when_nothing_else_differs() -> None:
    pods = [used("a", 100), used("b", 300), used("c", 200)]

    assert names(generic_order(pods, lambda c: c.cpu_used_milli)) == ["b", "c", "a"]
    # the measure is the caller's: by memory instead, all zero, the order is kept
    assert names(generic_order(pods, lambda c: c.memory_used)) == ["a", "b", "c"]


def test_generic_order_uses_the_spec_priority_when_known() -> None:
    pods = [used("mid", 10, priority=7000), used("batch", 5, priority=5000)]

    assert names(generic_order(pods, lambda c: c.cpu_used_milli)) == ["batch", "mid"]


def test_generic_order_a_missing_priority_label_counts_as_the_priority() -> None:
    # Koordinator's GetPodPriorityLabel(pod, priority): no label sorts by the priority itself
    def label(value: str) -> dict[str, str]:
        return {keys.LABEL_PRIORITY: value}

    pods = [
        used("label-6000", 900, priority=5500, labels=label("6000")),
        used("no-label", 10, priority=5500),
        used("label-1", 5, priority=5500, labels=label("1")),
        used("bad-label", 20, priority=5500, labels=label("x")),
    ]

    assert names(generic_order(pods, lambda c: c.cpu_used_milli)) == [
        "label-1",
        "bad-label",
        "no-label",
        "label-6000",
    ]
