"""Usage outside the pods: node usage - Σ pod usage, from what the metric cache already holds.

``sys_cpu_usage`` (cores) = node_cpu_usage - Σ pod_cpu_usage, ``sys_memory_usage`` (bytes) =
node_memory_usage - Σ pod_memory_usage, each clamped at 0 (the node and pod readings are
not taken at the same instant, so a busy node can show pods briefly above the node).

Only fresh samples count: the node sample and each pod sample must be at most ``max_age``
old (2 * interval by default, the QoS manager's "fresh" rule). A stale node sample means no
sample for that resource; a stale pod series (a pod that is gone, or whose cgroup could not
be read) is left out of the sum. Host applications and per-NUMA system usage are not
subtracted or computed here. This collector reads only the cache, never files.
"""

from __future__ import annotations

from collections import Counter

from koordlet.metriccache import MetricCache, Sample

STALE_NODE = "stale-node-sample"

# (system metric, node metric, pod metric)
_RESOURCES = (
    ("sys_cpu_usage", "node_cpu_usage", "pod_cpu_usage"),
    ("sys_memory_usage", "node_memory_usage", "pod_memory_usage"),
)


class SystemCollector:
    """See the module docstring."""

    name = "system"

    def __init__(
        self, cache: MetricCache, *, interval: float = 1.0, max_age: float | None = None
    ) -> None:
        self.cache = cache
        self.interval = interval
        self.max_age = 2 * interval if max_age is None else max_age
        self.skipped: Counter[str] = Counter()

    def collect(self, now: float) -> list[Sample]:
        samples = []
        for system_name, node_name, pod_name in _RESOURCES:
            node = self.cache.last(node_name, {}, now, self.max_age)
            if node is None:
                self.skipped[STALE_NODE] += 1
                continue
            pods = 0.0
            for _, series_labels in self.cache.series(pod_name):
                value = self.cache.last(pod_name, series_labels, now, self.max_age)
                if value is not None:
                    pods += value
            samples.append(Sample(system_name, {}, now, max(0.0, node - pods)))
        return samples
