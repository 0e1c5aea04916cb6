"""Usage outside the pods: node usage - Σ pod usage, of the same collection pass.

``sys_cpu_usage`` (cores) = node_cpu_usage - Σ pod_cpu_usage, ``sys_memory_usage`` (bytes) =
node_memory_usage - Σ pod_memory_usage, each clamped at 0, from the samples the node and pod
collectors read in this pass (the runner runs them first, at the same instant; see
``collectors.base``). An earlier version read the newest samples from the metric cache: those
could be a node sample of one moment against pod samples of another, and a system usage above
the node's (1.37 cores on a node using 1.08) showed in ``koordctl top``. Now a system sample
is never above the node sample of its pass.

No node sample in this pass (its read failed) means no system sample for that resource; a
pod whose read failed in this pass is left out of the sum (its usage counts as system then,
never more than the node's). Host applications and per-NUMA system usage are not subtracted or
computed here. This collector reads nothing itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from koordlet.metriccache import Sample

NO_NODE_SAMPLE = "no-node-sample"

# (system metric, node metric, pod metric)
_RESOURCES = (
    ("sys_cpu_usage", "node_cpu_usage", "pod_cpu_usage"),
    ("sys_memory_usage", "node_memory_usage", "pod_memory_usage"),
)


class SystemCollector:
    """See the module docstring."""

    name = "system"

    def __init__(self, *, interval: float = 1.0) -> None:
        self.interval = interval
        self.skipped: Counter[str] = Counter()

    def derive(self, now: float, samples: Sequence[Sample]) -> list[Sample]:
        node: dict[str, float] = {}
        pods: dict[str, float] = {}
        for sample in samples:
            if not sample.labels and sample.name.startswith("node_"):
                node[sample.name] = sample.value
            elif sample.name.startswith("pod_"):
                pods[sample.name] = pods.get(sample.name, 0.0) + sample.value
        found = []
        for system_name, node_name, pod_name in _RESOURCES:
            if node_name not in node:
                self.skipped[NO_NODE_SAMPLE] += 1
                continue
            value = max(0.0, node[node_name] - pods.get(pod_name, 0.0))
            found.append(Sample(system_name, {}, now, value))
        return found
