"""Koordinator's NodeMetric status: built by koordlet, read by koord-manager and
koord-scheduler, so both sides of the format live here.

Building: usage as a ResourceMap (``{"resources": {"cpu": "1250m", "memory": "123456"}}``),
CPU in milli-cores rounded to the nearest, memory in whole bytes, never negative.

Reading (``read_node_metric``): update time, system and node usage, the node's aggregated
usages (percentile per duration), per-pod usage with the reported priority, host applications
and the predicted prod-reclaimable amount, as (milli-cores, bytes). A malformed or negative
quantity, or a wrong shape, raises MetricError naming the path: the caller degrades rather
than act on a broken report. A missing usage is
not an error; it reads as None and each caller decides what that means.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi import qos
from koordapi.duration import parse_go_duration
from koordapi.errors import ModelError
from koordapi.quantity import Pair, milli_value, value

# -- building --------------------------------------------------------------------------------


def cpu_quantity(cores: float) -> str:
    """Cores (a float) as the milli-core quantity a NodeMetric reports: "1250m"."""
    return f"{max(0, round(cores * 1000))}m"


def memory_quantity(bytes_: float) -> str:
    """Bytes (a float) as the whole-byte quantity a NodeMetric reports."""
    return str(max(0, int(bytes_)))


def resource_map(cpu: float | None, memory: float | None) -> dict[str, Any]:
    """A ResourceMap of usage (cores, bytes); a resource that is None is left out."""
    resources = {}
    if cpu is not None:
        resources["cpu"] = cpu_quantity(cpu)
    if memory is not None:
        resources["memory"] = memory_quantity(memory)
    return {"resources": resources}


# -- reading ---------------------------------------------------------------------------------

AggregateKey = tuple[str, float]
"""(aggregation type as koordlet names it: avg, p50, p90, p95, p99; duration in seconds)"""

PodMetric = tuple[str, int | None, int | None]
"""(priority as reported by koordlet, cpu usage or None, memory usage or None)"""

_EMPTY: Mapping[str, Any] = {}
_SHAPE_ERRORS = (ModelError, AttributeError, TypeError)


class MetricError(ValueError):
    """The NodeMetric holds a value the formulas cannot use."""


@dataclass(frozen=True)
class MetricView:
    update_time: float | None  # seconds since the epoch
    system_usage: Pair | None  # None when cpu or memory is missing
    node_usage: Pair | None
    pods: Mapping[str, PodMetric] = field(default_factory=dict)  # by namespace/name
    host_apps: tuple[tuple[str, Pair], ...] = ()  # (priority, usage)
    prod_reclaimable: Pair | None = None
    # status.nodeMetric.aggregatedNodeUsages; a resource an entry leaves out reads as 0 and
    # an entry without resources is absent, as Koordinator's scheduler reads them
    aggregated: Mapping[AggregateKey, Pair] = field(default_factory=dict)


def _pair_of(resource_map: Any) -> tuple[int | None, int | None]:
    """(cpu, memory) of a ResourceMap ({"resources": {...}}), None for a missing one. Raises
    ModelError, or AttributeError/TypeError for a wrong shape (callers add the path)."""
    if not resource_map:
        return None, None
    resources = resource_map.get("resources")
    if not resources:
        return None, None
    cpu = resources.get("cpu")
    memory = resources.get("memory")
    c = milli_value(cpu) if cpu is not None else None
    m = value(memory) if memory is not None else None
    if (c is not None and c < 0) or (m is not None and m < 0):
        raise ModelError(f"negative usage (cpu {cpu!r}, memory {memory!r})")
    return c, m


def _describe(err: Exception) -> str:
    return str(err) if isinstance(err, ModelError) else f"malformed ({err})"


def _checked_pair(resource_map: Any, where: str) -> tuple[int | None, int | None]:
    try:
        return _pair_of(resource_map)
    except _SHAPE_ERRORS as err:
        raise MetricError(f"{where}: {_describe(err)}") from None


def _usage(resource_map: Any, where: str) -> Pair | None:
    cpu, memory = _checked_pair(resource_map, where)
    if cpu is None or memory is None:
        return None
    return cpu, memory


def _parse_time(text: Any) -> float | None:
    if not text:
        return None
    if not isinstance(text, str):
        raise MetricError(f"status.updateTime: not a time: {text!r}")
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise MetricError(f"status.updateTime: not an RFC 3339 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not value:
        return _EMPTY
    if not isinstance(value, Mapping):
        raise MetricError(f"{where}: must be an object")
    return value


def _pods_metric(entries: Any) -> dict[str, PodMetric]:
    pods: dict[str, PodMetric] = {}
    position = -1
    try:
        # hot path: a hundred entries per node; the path is only spelt out on error
        for entry in entries or ():
            position += 1
            c, m = _pair_of(entry.get("podUsage"))
            key = f"{entry.get('namespace', '')}/{entry.get('name', '')}"
            pods[key] = (entry.get("priority") or "", c, m)
    except _SHAPE_ERRORS as err:
        raise MetricError(f"status.podsMetric[{position}]: {_describe(err)}") from None
    return pods


def _aggregated(entries: Any) -> dict[AggregateKey, Pair]:
    usages: dict[AggregateKey, Pair] = {}
    if not entries:
        return usages
    if not isinstance(entries, list):
        raise MetricError("status.nodeMetric.aggregatedNodeUsages: must be a list")
    for i, item in enumerate(entries):
        where = f"status.nodeMetric.aggregatedNodeUsages[{i}]"
        entry = _object(item, where)
        duration = entry.get("duration") or "0s"
        try:
            seconds = parse_go_duration(duration) if isinstance(duration, str) else None
        except ValueError:
            seconds = None
        if seconds is None:
            raise MetricError(f"{where}.duration: not a duration: {duration!r}")
        for kind, usage in _object(entry.get("usage"), f"{where}.usage").items():
            cpu, memory = _checked_pair(usage, f"{where}.usage.{kind}")
            if cpu is not None or memory is not None:
                usages[str(kind), seconds] = (cpu or 0, memory or 0)
    return usages


def read_node_metric(node_metric: Mapping[str, Any]) -> MetricView:
    """The parts of a NodeMetric object the formulas read; raises MetricError."""
    status = _object(node_metric.get("status"), "status")
    node_part = _object(status.get("nodeMetric"), "status.nodeMetric")
    host_apps = []
    for i, entry in enumerate(status.get("hostApplicationMetric") or ()):
        where = f"status.hostApplicationMetric[{i}]"
        cpu, memory = _checked_pair(_object(entry, where).get("usage"), f"{where}.usage")
        host_apps.append((entry.get("priority") or "", (cpu or 0, memory or 0)))
    reclaimable = _object(status.get("prodReclaimableMetric"), "status.prodReclaimableMetric")
    return MetricView(
        update_time=_parse_time(status.get("updateTime")),
        system_usage=_usage(node_part.get("systemUsage"), "status.nodeMetric.systemUsage"),
        node_usage=_usage(node_part.get("nodeUsage"), "status.nodeMetric.nodeUsage"),
        pods=_pods_metric(status.get("podsMetric")),
        host_apps=tuple(host_apps),
        prod_reclaimable=_usage(
            reclaimable.get("resource"), "status.prodReclaimableMetric.resource"
        ),
        aggregated=_aggregated(node_part.get("aggregatedNodeUsages")),
    )


def host_apps_above(metric: MetricView, priority: qos.PriorityClass) -> Pair:
    """Usage of host applications whose priority class ranks above ``priority`` (they use
    the node's reserved share, so they count as system usage); "" ranks lowest."""
    cpu = memory = 0
    for name, usage in metric.host_apps:
        if qos.priority_class_by_name(name).default > priority.default:
            cpu, memory = cpu + usage[0], memory + usage[1]
    return cpu, memory
