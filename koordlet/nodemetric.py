"""The NodeMetric report: Koordinator's NodeMetric ``status``, built from the metric cache
(the format itself, which the manager and the scheduler read, is koordapi.nodemetric).

Same shape as the custom resource (``nodeMetric.nodeUsage``, ``systemUsage``,
``aggregatedNodeUsages`` per duration, ``podsMetric``, ...), so the manager and ``koordctl`` read
one format whether it comes from the API server or from a node in standalone mode. Usage
averages over ``aggregate_seconds`` (300 s by default); aggregates (avg, p50, p90, p95, p99)
per duration (5m, 10m, 30m) appear only once samples exist for that window.

``prodReclaimableMetric`` is the peak predictor's answer (koordlet.prediction) for the pods
the report lists (those with usage, as Koordinator adds them); left out while it has none.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordapi import keys
from koordapi.duration import format_go_duration
from koordapi.nodemetric import resource_map
from koordapi.qos import priority_class_with_default
from koordlet.metriccache import MetricCache
from koordlet.states.pods import KnownPod

# the prod reclaimable (milli-cores, bytes) for the listed pods at a time; None: no prediction
Reclaimable = Callable[[list[KnownPod], float], tuple[int, int] | None]

DEFAULT_AGGREGATE_SECONDS = 300
DEFAULT_DURATIONS = (300, 600, 1800)
AGGREGATIONS = ("avg", "p50", "p90", "p95", "p99")


def _usage(
    cache: MetricCache,
    prefix: str,
    labels: Mapping[str, str],
    window: tuple[float, float],
    agg: str,
) -> dict[str, Any] | None:
    start, end = window
    cpu = cache.aggregate(f"{prefix}_cpu_usage", labels, start, end)
    memory = cache.aggregate(f"{prefix}_memory_usage", labels, start, end)
    if cpu is None and memory is None:
        return None
    return resource_map(cpu.get(agg) if cpu else None, memory.get(agg) if memory else None)


def build_status(
    cache: MetricCache,
    pods: Iterable[KnownPod],
    now: float,
    *,
    aggregate_seconds: int = DEFAULT_AGGREGATE_SECONDS,
    durations: Iterable[int] = DEFAULT_DURATIONS,
    reclaimable: Reclaimable | None = None,
) -> dict[str, Any]:
    start = now - aggregate_seconds
    node_metric: dict[str, Any] = {}
    for key, prefix in (("nodeUsage", "node"), ("systemUsage", "sys")):
        usage = _usage(cache, prefix, {}, (start, now), "avg")
        if usage is not None:
            node_metric[key] = usage
    for key, prefix in (("aggregatedNodeUsages", "node"), ("aggregatedSystemUsages", "sys")):
        aggregated = []
        for seconds in durations:
            per_agg = {
                a: u
                for a in AGGREGATIONS
                if (u := _usage(cache, prefix, {}, (now - seconds, now), a))
            }
            if per_agg:
                aggregated.append({"usage": per_agg, "duration": format_go_duration(seconds)})
        if aggregated:
            node_metric[key] = aggregated
    pods_metric = []
    reported: list[KnownPod] = []
    for known in pods:
        request = known.request
        usage = _usage(cache, "pod", {"pod_uid": request.uid}, (start, now), "avg")
        if usage is None:
            continue
        reported.append(known)
        pods_metric.append(
            {
                "namespace": request.namespace,
                "name": request.name,
                "podUsage": usage,
                # the label's class, else the QoS label's default; not spec.priority or the
                # Kubernetes QoS, unlike Koordinator's GetPodPriorityClassWithDefault
                "priority": priority_class_with_default(
                    request.labels.get(keys.LABEL_PRIORITY_CLASS), None, request.qos
                ).name,
                "qos": request.qos.value,
            }
        )
    updated = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"updateTime": updated, "nodeMetric": node_metric, "podsMetric": pods_metric}
    predicted = reclaimable(reported, now) if reclaimable is not None else None
    if predicted is not None:
        cpu_milli, memory = predicted
        status["prodReclaimableMetric"] = {"resource": resource_map(cpu_milli / 1000, memory)}
    return status
