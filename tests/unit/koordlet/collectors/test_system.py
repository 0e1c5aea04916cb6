"""SystemCollector: node usage minus fresh pod usage, from the metric cache."""

from __future__ import annotations

from koordlet.collectors.system import SystemCollector
from koordlet.metriccache import MetricCache, Sample


def cache_with(samples: list[Sample]) -> MetricCache:
    cache = MetricCache(None)
    cache.append(samples)
    return cache


def test_system_usage_is_node_minus_fresh_pods() -> None:
    cache = cache_with(
        [
            Sample("node_cpu_usage", {}, 99.0, 3.0),
            Sample("node_cpu_usage", {}, 100.0, 4.0),  # the latest counts
            Sample("pod_cpu_usage", {"pod_uid": "a"}, 100.0, 1.5),
            Sample("pod_cpu_usage", {"pod_uid": "b"}, 99.5, 1.0),
            Sample("pod_cpu_usage", {"pod_uid": "gone"}, 90.0, 5.0),  # stale: left out
            Sample("node_memory_usage", {}, 100.0, 8e9),
            Sample("pod_memory_usage", {"pod_uid": "a"}, 100.0, 3e9),
            Sample("pod_memory_usage", {"pod_uid": "b"}, 100.0, 1e9),
        ]
    )
    collector = SystemCollector(cache)
    assert collector.max_age == 2.0
    samples = collector.collect(101.0)
    assert {s.name: s.value for s in samples} == {
        "sys_cpu_usage": 4.0 - 1.5 - 1.0,
        "sys_memory_usage": 8e9 - 3e9 - 1e9,
    }
    assert all(s.labels == {} and s.ts == 101.0 for s in samples)


def test_pods_above_the_node_clamp_at_zero() -> None:
    cache = cache_with(
        [
            Sample("node_memory_usage", {}, 10.0, 1e9),
            Sample("pod_memory_usage", {"pod_uid": "a"}, 10.0, 2e9),
        ]
    )
    samples = SystemCollector(cache).collect(10.5)
    assert [(s.name, s.value) for s in samples] == [("sys_memory_usage", 0.0)]


def test_a_stale_node_sample_gives_no_sample() -> None:
    cache = cache_with(
        [
            Sample("node_cpu_usage", {}, 97.0, 4.0),  # 3 s old at 100 > 2 * 1 s
            Sample("pod_cpu_usage", {"pod_uid": "a"}, 100.0, 1.0),
        ]
    )
    collector = SystemCollector(cache)
    assert collector.collect(100.0) == []
    assert collector.skipped == {"stale-node-sample": 2}  # cpu stale, memory absent
    assert [s.value for s in SystemCollector(cache, max_age=5.0).collect(100.0)] == [3.0]


def test_no_pods_means_everything_is_system() -> None:
    cache = cache_with([Sample("node_cpu_usage", {}, 5.0, 2.25)])
    assert [s.value for s in SystemCollector(cache, interval=1.0).collect(5.0)] == [2.25]
