"""The QoS manager frame: which strategies run, fresh-data reads, failures, the audit trail."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from koordapi.annotation import parse_node_reservation
from koordapi.features import FeatureGates
from koordlet.metriccache import MetricCache
from koordlet.qosmanager.audit import Action, AuditTrail
from koordlet.qosmanager.framework import Context, NodeResources, QoSManager, node_resources
from runtimehooks.rules import NodeState
from tests.unit.koordlet.qosmanager.fakes import NOW, context, rules, samples, topology


class Probe:
    """A strategy that counts its runs and fails when told to."""

    def __init__(self, name: str, gate: str, *, fail: bool = False) -> None:
        self.name, self.gate, self.fail = name, gate, fail
        self.interval = 0.01
        self.contexts: list[Context] = []

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(self.gate)

    def run(self, ctx: Context) -> None:
        self.contexts.append(ctx)
        if self.fail:
            raise RuntimeError("boom")


def manager(*strategies: Probe, gates: str = "", collect: float = 1.0) -> QoSManager:
    return QoSManager(
        strategies, context=context, gates=FeatureGates.parse(gates), collect_interval=collect
    )


def test_only_strategies_whose_gate_is_on_are_active() -> None:
    suppress, evict = Probe("CPUSuppress", "BECPUSuppress"), Probe("MemoryEvict", "BEMemoryEvict")
    assert manager(suppress, evict).active() == [suppress]
    assert manager(suppress, evict, gates="BEMemoryEvict=true").active() == [suppress, evict]


def test_a_collect_interval_under_one_second_turns_the_manager_off() -> None:
    probe = Probe("CPUSuppress", "BECPUSuppress")
    qos = manager(probe, collect=0.5)
    assert qos.active() == []
    asyncio.run(asyncio.wait_for(qos.run(), 1))  # returns at once instead of looping
    assert probe.contexts == []


def test_a_failing_run_is_counted_and_the_loop_goes_on() -> None:
    bad, good = Probe("Bad", "BECPUSuppress", fail=True), Probe("Good", "CPUBurst")
    qos = manager(bad, good)
    timed: list[str] = []

    async def main() -> None:
        # until each strategy ran twice (the bad one failing): the loop outlived a failure
        enough = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_run(name: str, seconds: float) -> None:  # in the strategy's worker thread
            if seconds >= 0:
                timed.append(name)
            if timed.count("Bad") >= 2 and timed.count("Good") >= 2:
                loop.call_soon_threadsafe(enough.set)

        qos.on_run = on_run
        task = asyncio.create_task(qos.run())
        await enough.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), 10))
    assert qos.failures["Bad"] >= 2 and qos.runs["Bad"] == qos.failures["Bad"]
    assert len(good.contexts) >= 2 and qos.failures["Good"] == 0
    assert timed.count("Bad") == qos.runs["Bad"]  # failed runs are timed too


def test_last_counts_only_fresh_samples() -> None:
    cache = MetricCache()
    samples(cache, {"node_cpu_usage": 3.0}, NOW - 1.5)
    samples(cache, {"node_memory_usage": 9.0}, NOW - 2.5)
    ctx = context(cache=cache)
    assert ctx.last("node_cpu_usage") == 3.0
    assert ctx.last("node_memory_usage") is None  # older than 2 x the collect interval


def test_reserved_cpu_is_the_larger_of_kubelet_and_annotation_reservations() -> None:
    assert NodeResources(8000, 1, {"cpu": 7000}).reserved_cpu_milli == 1000
    assert (
        NodeResources(8000, 1, {"cpu": 7000}, reservation_cpu_milli=2500).reserved_cpu_milli == 2500
    )
    assert NodeResources(8000, 1).allocatable_cpu_milli == 8000


@pytest.mark.parametrize(
    ("reservation", "expected"),
    [
        # cases after Koordinator's GetNodeReservationResources tests, with odd numbers
        pytest.param({"resources": {"cpu": "10"}}, 10_000, id="resources-cpu"),
        pytest.param({"resources": {"cpu": "2250m"}}, 2250, id="milli"),
        pytest.param({"resources": {"cpu": "0.0005"}}, 1, id="rounded-up"),
        pytest.param({"reservedCPUs": "0-1,5"}, 3000, id="reserved-cpus"),
        pytest.param({"resources": {"cpu": "10"}, "reservedCPUs": "0-1"}, 2000, id="cpus-win"),
        pytest.param({"resources": {"memory": "10Gi"}}, 0, id="no-cpu"),
    ],
)
def test_the_reservation_annotation_counts_reserved_cpus_as_koordinator(
    reservation: dict[str, object], expected: int
) -> None:
    annotation = parse_node_reservation(json.dumps(reservation))
    node = node_resources(topology(), rules(node=NodeState(reservation=annotation)), {})
    assert node.reservation_cpu_milli == expected


def test_audit_finds_actions_of_a_pod_and_of_its_class_and_logs_status_changes_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[Action] = []
    trail = AuditTrail(capacity=3, on_action=seen.append)
    trail.record(Action(1, "CPUSuppress", "cpuset", "kubepods/besteffort", "0-1", "r", scope="BE"))
    trail.record(Action(2, "MemoryEvict", "evict", "default/a", "BEMemoryEvict", "r", pod_uid="a"))
    trail.record(Action(3, "MemoryEvict", "evict", "default/b", "BEMemoryEvict", "r", pod_uid="b"))
    assert [a.ts for a in trail.for_pod("a", "BE")] == [1, 2]
    assert [a.ts for a in trail.for_pod("a", "LS")] == [2]
    trail.record(Action(4, "CPUSuppress", "cpuset", "x", "0", "r", scope="BE"))
    assert [a.ts for a in trail.recent()] == [2, 3, 4]  # bounded: the oldest went
    assert len(seen) == 4
    caplog.set_level(logging.INFO)
    trail.status("CPUSuppress", "no action: stale", 10)
    trail.status("CPUSuppress", "no action: stale", 11)
    assert trail.statuses()["CPUSuppress"].ts == 11
    said = [r.getMessage() for r in caplog.records if "qos strategy" in r.getMessage()]
    assert said == ["qos strategy CPUSuppress: no action: stale"]
