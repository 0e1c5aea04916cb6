"""SystemCollector: node usage minus pod usage of the same pass, and the runner's passes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pytest

from koordlet.collectors.base import CollectorRunner, CollectorUnavailable
from koordlet.collectors.system import NO_NODE_SAMPLE, SystemCollector
from koordlet.metriccache import MetricCache, Sample


def test_system_usage_is_node_minus_the_pods_of_the_pass() -> None:
    samples = [
        Sample("node_cpu_usage", {}, 100.0, 3.75),
        Sample("pod_cpu_usage", {"pod_uid": "a"}, 100.0, 1.5),
        Sample("pod_cpu_usage", {"pod_uid": "b"}, 100.0, 0.25),
        Sample("pod_cpu_throttled", {"pod_uid": "b"}, 100.0, 0.5),  # not usage
        Sample("container_cpu_usage", {"pod_uid": "a", "container_id": "c"}, 100.0, 1.5),
        Sample("node_memory_usage", {}, 100.0, 7e9),
        Sample("pod_memory_usage", {"pod_uid": "a"}, 100.0, 3e9),
        Sample("pod_memory_usage_with_page_cache", {"pod_uid": "a"}, 100.0, 5e9),
    ]
    found = SystemCollector().derive(100.0, samples)
    assert {s.name: s.value for s in found} == {
        "sys_cpu_usage": 3.75 - 1.5 - 0.25,
        "sys_memory_usage": 7e9 - 3e9,
    }
    assert all(s.labels == {} and s.ts == 100.0 for s in found)


def test_pods_above_the_node_clamp_at_zero() -> None:
    samples = [
        Sample("node_memory_usage", {}, 10.0, 1e9),
        Sample("pod_memory_usage", {"pod_uid": "a"}, 10.0, 2e9),
    ]
    found = SystemCollector().derive(10.0, samples)
    assert [(s.name, s.value) for s in found] == [("sys_memory_usage", 0.0)]


def test_no_node_sample_in_the_pass_gives_no_system_sample() -> None:
    collector = SystemCollector()
    assert collector.derive(5.0, [Sample("pod_cpu_usage", {"pod_uid": "a"}, 5.0, 1.0)]) == []
    assert collector.skipped == {NO_NODE_SAMPLE: 2}  # cpu and memory


class Scripted:
    """A collector that returns what its script says for each pass (or raises it)."""

    def __init__(self, name: str, script: Iterable[list[Sample] | Exception]) -> None:
        self.name = name
        self.interval = 1.0
        self.skipped: Counter[str] = Counter()
        self._script = iter(script)

    def collect(self, now: float) -> list[Sample]:
        step = next(self._script)
        if isinstance(step, Exception):
            raise step
        return [Sample(s.name, s.labels, now, s.value) for s in step]


def test_a_pass_never_pairs_a_node_sample_with_pods_of_another_moment() -> None:
    """The case `koordctl top` showed: the node busy in one pass, quieter in the next, with the
    pods' read failing in the second. Reading the newest cache values gave system > node."""
    cache = MetricCache(None)
    node = Scripted(
        "node",
        [[Sample("node_cpu_usage", {}, 0, 1.9)], [Sample("node_cpu_usage", {}, 0, 1.08)]],
    )
    pods = Scripted(
        "pods", [[Sample("pod_cpu_usage", {"pod_uid": "a"}, 0, 0.53)], OSError("cgroup gone")]
    )
    system = SystemCollector()
    runner = CollectorRunner([node, pods, system], cache)

    runner.run_pass(runner.passes()[0], 100.0)
    assert cache.last("sys_cpu_usage", {}, 100.0, 0) == pytest.approx(1.9 - 0.53)
    runner.run_pass(runner.passes()[0], 101.0)

    node_now = cache.last("node_cpu_usage", {}, 101.0, 0)
    system_now = cache.last("sys_cpu_usage", {}, 101.0, 0)
    assert node_now == 1.08
    assert system_now == 1.08  # the failed pod read counts as system, never above the node
    assert runner.health["pods"].errors == 1 and runner.health["system"].passes == 2


def test_collectors_sharing_an_interval_are_one_pass_and_others_their_own() -> None:
    fast = [Scripted("a", []), Scripted("b", [])]
    slow = Scripted("c", [])
    slow.interval = 10.0
    runner = CollectorRunner([fast[0], slow, fast[1]], MetricCache(None))
    assert runner.passes() == [fast, [slow]]


class FailingCache(MetricCache):
    def append(self, samples: Iterable[Sample]) -> int:
        raise OSError("No space left on device")


def test_a_pass_that_cannot_be_stored_is_an_error_of_each_collector_in_it() -> None:
    node = Scripted("node", [[Sample("node_cpu_usage", {}, 0, 1.0)]])
    gone = Scripted("gone", [CollectorUnavailable("no such source")])
    runner = CollectorRunner([node, gone], FailingCache(None))
    runner.run_pass([node, gone], 5.0)
    assert runner.health["node"].errors == 1 and runner.health["node"].passes == 0
    assert "No space left on device" in runner.health["node"].last_error
    assert runner.health["gone"].unavailable == "no such source"
