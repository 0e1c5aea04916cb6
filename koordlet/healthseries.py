"""koordlet's collector health and latest usage, built fresh on each scrape from the collectors'
runner and the metric cache (kept apart from ``koordlet.metrics`` so that the NRI side, which
counts through that module, does not depend on the collectors)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from koordlet.collectors.base import CollectorRunner
from koordlet.metriccache import MetricCache
from koordlet.states.pods import PodStore


class HealthCollector:
    """Metrics built fresh on each scrape: collector health and current usage from the cache.

    koordlet_collector_{up,errors_total,skipped_series_total,last_success_timestamp_seconds,
    duration_seconds}{collector} say whether each source works; koordlet_node_used_* and
    koordlet_pod_used_* give the latest usage (no older than 10 s).
    """

    FRESH_SECONDS = 10.0

    def __init__(
        self, node: str, runner: CollectorRunner, cache: MetricCache, pods: PodStore
    ) -> None:
        self.node = node
        self.runner = runner
        self.cache = cache
        self.pods = pods

    def describe(self) -> list[Metric]:
        return []  # built per scrape; nothing to register up front

    def collect(self) -> Iterator[Metric]:
        node = self.node
        up = GaugeMetricFamily(
            "koordlet_collector_up", "1 while the collector works", labels=["node", "collector"]
        )
        errors = CounterMetricFamily(
            "koordlet_collector_errors", "Failed collection passes", labels=["node", "collector"]
        )
        skipped = CounterMetricFamily(
            "koordlet_collector_skipped_series",
            "Series left out of a pass (gone, unreadable, malformed, counter reset)",
            labels=["node", "collector", "reason"],
        )
        last = GaugeMetricFamily(
            "koordlet_collector_last_success_timestamp_seconds",
            "When the collector last succeeded",
            labels=["node", "collector"],
        )
        duration = GaugeMetricFamily(
            "koordlet_collector_duration_seconds",
            "Time of the last pass",
            labels=["node", "collector"],
        )
        for collector in self.runner.collectors:
            name = collector.name
            health = self.runner.health[name]
            works = (
                not health.unavailable
                and health.passes > 0
                and (not health.last_error or health.last_success > 0)
            )
            up.add_metric([node, name], 1.0 if works else 0.0)
            errors.add_metric([node, name], float(health.errors))
            last.add_metric([node, name], health.last_success)
            duration.add_metric([node, name], health.seconds)
            for reason, count in sorted(collector.skipped.items()):
                skipped.add_metric([node, name, reason], float(count))
        yield from (up, errors, skipped, last, duration)
        now = time.time()
        cpu = GaugeMetricFamily("koordlet_node_used_cpu_cores", "Node CPU usage", labels=["node"])
        memory = GaugeMetricFamily(
            "koordlet_node_used_memory_bytes", "Node memory usage", labels=["node"]
        )
        for family, series in ((cpu, "node_cpu_usage"), (memory, "node_memory_usage")):
            value = self.cache.last(series, {}, now, self.FRESH_SECONDS)
            if value is not None:
                family.add_metric([node], value)
        labels = ["node", "pod_name", "pod_namespace", "pod_uid", "qos"]
        pod_cpu = GaugeMetricFamily("koordlet_pod_used_cpu_cores", "Pod CPU usage", labels=labels)
        pod_memory = GaugeMetricFamily(
            "koordlet_pod_used_memory_bytes", "Pod memory usage", labels=labels
        )
        for known in self.pods.snapshot():
            pod = known.request
            key = [node, pod.name, pod.namespace, pod.uid, pod.qos.value or "none"]
            for family, series in ((pod_cpu, "pod_cpu_usage"), (pod_memory, "pod_memory_usage")):
                value = self.cache.last(series, {"pod_uid": pod.uid}, now, self.FRESH_SECONDS)
                if value is not None:
                    family.add_metric(key, value)
        yield from (cpu, memory, pod_cpu, pod_memory)
