"""LoadAwareScheduling (Koordinator pkg/scheduler/plugins/loadaware) on plain Kubernetes JSON:
the pod estimator, the load a node carries (its NodeMetric plus what recently assigned pods
add), the usage-threshold filter and the least-used score. No I/O and no clock: callers pass
``now`` (seconds since the epoch).

    estimate = estimate_pod(pod, args)
    load = cache.node_load(name, node, node_metric, assigned, args)
    reason = filter_node(estimate, load, args, now, daemonset=is_daemonset_pod(pod))
    score = score_node(estimate, load, args, now)     # 0..100; extender_score() maps to 0..10

Only cpu and memory count: they are what koordlet reports. Also as in Koordinator:
``prodUsageThresholds`` (a koord-prod pod is checked against the usage of the node's prod pods,
podsMetric's prod entries plus prod pods' estimates, instead of the node's usage),
``scoreAccordingProdUsage``, ``prodUsageIncludeSys``, and ``aggregated``: a non-prod pod checked
against a percentile of the node's usage over a duration (NodeMetric's aggregatedNodeUsages)
instead of its latest usage, and scored on one. Not modelled: custom estimation annotations
(allowCustomizeEstimation), forced-estimation windows (estimatedSeconds*) and resources other
than cpu and memory. CPU is in milli-cores and memory in bytes throughout.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi import keys, qos
from koordapi.duration import parse_go_duration
from koordapi.errors import ModelError
from koordapi.nodemetric import AggregateKey, MetricError, PodMetric, read_node_metric
from koordapi.pod import pod_limits, pod_requests, priority_class_with_default
from koordapi.quantity import Pair, milli_value, resource_value
from koordapi.quantity import value as quantity_value

REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_CPU_USAGE = "node(s) cpu usage exceed threshold"
REASON_MEMORY_USAGE = "node(s) memory usage exceed threshold"
REASON_CPU_AGGREGATED_USAGE = "node(s) cpu aggregated usage exceed threshold"
REASON_MEMORY_AGGREGATED_USAGE = "node(s) memory aggregated usage exceed threshold"
AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")  # Koordinator's AggregationType values

DEFAULT_MILLI_CPU_REQUEST = 250  # estimate of a pod that requests no cpu
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # ... and no memory
DEFAULT_REPORT_INTERVAL_SECONDS = 60  # koordlet's NodeMetric report interval if the spec has none

AssignedPods = Sequence[tuple[Mapping[str, Any], float]]
"""(pod, when it was assigned to the node, seconds since the epoch)."""

_EMPTY: Mapping[str, Any] = {}
_TERMINATED = ("Succeeded", "Failed")
_READ_ERRORS = (ModelError, TypeError, AttributeError, ValueError)

# Koordinator estimates a pod from the resource its priority class is charged in
# (TranslateResourceNameByPriorityClass). koord-free has no entry there, so its pods estimate
# to 0: mirrored, not fixed.
_CHARGED_AS: dict[str, tuple[str, str] | None] = {
    qos.BATCH.name: (keys.BATCH_CPU, keys.BATCH_MEMORY),
    qos.MID.name: (keys.MID_CPU, keys.MID_MEMORY),
    qos.FREE.name: None,
}
_DEFAULT_RESOURCES = ("cpu", "memory")
# A zero request estimates to these only for cpu/memory and batch-*; mid-* estimate to 0.
_DEFAULTS = {
    "cpu": DEFAULT_MILLI_CPU_REQUEST,
    keys.BATCH_CPU: DEFAULT_MILLI_CPU_REQUEST,
    "memory": DEFAULT_MEMORY_REQUEST,
    keys.BATCH_MEMORY: DEFAULT_MEMORY_REQUEST,
}


class PodReadError(ValueError):
    """A pod's resources do not parse (the API server would have refused it)."""


def _json_map(value: Mapping[str, int]) -> str:
    return json.dumps(dict(sorted(value.items())), separators=(",", ":"))


def _threshold_errors(path: str, thresholds: Mapping[str, int]) -> list[str]:
    """Koordinator's validateResourceThresholds, its message (one per map, as Go stops at
    the first bad entry)."""
    for name, percent in thresholds.items():
        if percent < 0:
            detail = f"resource Threshold of {name} should be a positive value, got {percent}"
        elif percent > 100:
            detail = f"resource Threshold of {name} should be less than 100, got {percent}"
        else:
            continue
        return [f"{path}: Invalid value: {_json_map(thresholds)}: {detail}"]
    return []


def _seconds(config: Mapping[str, Any], key: str, path: str) -> float:
    """A metav1.Duration field ("5m", "300s"); absent or null is 0 (Koordinator: unset)."""
    value = config.get(key)
    if value is None:
        return 0.0
    text = value.strip() if isinstance(value, str) else ""
    sign = -1.0 if text.startswith("-") else 1.0
    try:
        return sign * parse_go_duration(text.lstrip("+-"))
    except ValueError:
        raise ValueError(f"{path}: not a duration: {value!r}") from None


@dataclass(frozen=True)
class AggregatedArgs:
    """LoadAwareSchedulingAggregatedArgs. ``usage_thresholds`` None: the args name none (then
    no aggregated filter); durations in seconds, 0 = unset (the longest the NodeMetric has)."""

    usage_thresholds: Pair | None = None
    usage_aggregation_type: str = ""
    usage_aggregated_duration: float = 0.0
    score_aggregation_type: str = ""
    score_aggregated_duration: float = 0.0

    def __post_init__(self) -> None:
        # Koordinator's validateAggregatedArgs, with its messages, all of them at once
        errors: list[str] = []
        if self.usage_thresholds is not None:
            named = dict(zip(_DEFAULT_RESOURCES, self.usage_thresholds, strict=True))
            # a 0 is what an unnamed resource reads as: leave it out of the quoted map
            named = {k: v for k, v in named.items() if v}
            errors += _threshold_errors("aggregated.usageThresholds", named)
        for name, kind in (
            ("usageAggregationType", self.usage_aggregation_type),
            ("scoreAggregationType", self.score_aggregation_type),
        ):
            if kind and kind not in AGGREGATION_TYPES:
                supported = ", ".join(f'"{t}"' for t in AGGREGATION_TYPES)
                errors.append(
                    f'aggregated.{name}: Unsupported value: "{kind}": supported values: {supported}'
                )
        for name, seconds in (
            ("usageAggregatedDuration", self.usage_aggregated_duration),
            ("scoreAggregatedDuration", self.score_aggregated_duration),
        ):
            if seconds < 0:
                errors.append(
                    f'aggregated.{name}: Invalid value: "{seconds:g}s": duration must be >= 0'
                )
        if errors:
            raise ValueError("; ".join(errors))

    @property
    def filters(self) -> bool:
        """Koordinator's aggregated filter profile: thresholds named and a type set."""
        return self.usage_thresholds is not None and bool(self.usage_aggregation_type)

    @classmethod
    def from_koordinator(cls, config: Any) -> AggregatedArgs:
        if not isinstance(config, Mapping):
            raise ValueError("aggregated must be an object")
        named = _resources(config, "usageThresholds", "aggregated.usageThresholds")
        kinds = []
        for key in ("usageAggregationType", "scoreAggregationType"):
            kind = config.get(key) or ""
            if not isinstance(kind, str):
                raise ValueError(f"aggregated.{key} must be a string, got {kind!r}")
            kinds.append(kind)
        return cls(
            usage_thresholds=(named.get("cpu", 0), named.get("memory", 0)) if named else None,
            usage_aggregation_type=kinds[0],
            usage_aggregated_duration=_seconds(
                config, "usageAggregatedDuration", "aggregated.usageAggregatedDuration"
            ),
            score_aggregation_type=kinds[1],
            score_aggregated_duration=_seconds(
                config, "scoreAggregatedDuration", "aggregated.scoreAggregatedDuration"
            ),
        )


def _resources(config: Mapping[str, Any], key: str, path: str | None = None) -> dict[str, int]:
    """A map of cpu/memory to integers; ValueError for other resources or non-integers."""
    path = path or key
    value = config.get(key) or {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{path} must be an object")
    for name, amount in value.items():
        if name not in _DEFAULT_RESOURCES:
            raise ValueError(f"{path}: only cpu and memory are supported, got {name!r}")
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise ValueError(f"{path}.{name} must be an integer, got {amount!r}")
    return dict(value)


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")
    return value


@dataclass(frozen=True)
class LoadAwareArgs:
    """LoadAwareSchedulingArgs with Koordinator's code defaults (Koordinator's Helm chart
    instead sets filter_expired_node_metrics=False and node_metric_expiration_seconds=300).
    Percentages are 0..100; a threshold or weight of 0 switches that resource off."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = 180
    enable_schedule_when_node_metrics_expired: bool = False
    cpu_threshold: int = 65
    memory_threshold: int = 95
    cpu_weight: int = 1
    memory_weight: int = 1
    dominant_resource_weight: int = 0
    cpu_scaling_factor: int = 85
    memory_scaling_factor: int = 70
    # off by default; Koordinator range-checks no prod threshold: any integer is accepted
    prod_cpu_threshold: int = 0
    prod_memory_threshold: int = 0
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    aggregated: AggregatedArgs | None = None

    def __post_init__(self) -> None:
        # Koordinator's ValidateLoadAwareSchedulingArgs
        if self.node_metric_expiration_seconds <= 0:
            raise ValueError("node_metric_expiration_seconds must be positive")
        for name in ("cpu_threshold", "memory_threshold", "cpu_weight", "memory_weight"):
            if not 0 <= getattr(self, name) <= 100:
                raise ValueError(f"{name} must be in 0..100, got {getattr(self, name)}")
        if not 0 <= self.dominant_resource_weight <= 100:
            raise ValueError("dominant_resource_weight must be in 0..100")
        for name in ("cpu_scaling_factor", "memory_scaling_factor"):
            if not 1 <= getattr(self, name) <= 100:
                raise ValueError(f"{name} must be in 1..100, got {getattr(self, name)}")

    @classmethod
    def from_koordinator(cls, config: Mapping[str, Any]) -> LoadAwareArgs:
        """Args from a LoadAwareSchedulingArgs object (camelCase keys), defaulted as
        Koordinator's SetDefaults does: empty weights (with no dominant weight) and empty
        thresholds take the defaults whole; scaling factors are filled per resource. Raises
        ValueError for resources other than cpu and memory, or values out of range."""

        def resources(key: str) -> dict[str, int]:
            return _resources(config, key)

        base = cls()
        dominant = config.get("dominantResourceWeight", 0)
        weights = resources("resourceWeights")
        if not weights and not dominant:
            weights = {"cpu": base.cpu_weight, "memory": base.memory_weight}
        thresholds = resources("usageThresholds") or {
            "cpu": base.cpu_threshold,
            "memory": base.memory_threshold,
        }
        factors = {"cpu": base.cpu_scaling_factor, "memory": base.memory_scaling_factor}
        factors.update(resources("estimatedScalingFactors"))
        prod = resources("prodUsageThresholds")
        aggregated = config.get("aggregated")
        return cls(
            filter_expired_node_metrics=bool(config.get("filterExpiredNodeMetrics", True)),
            node_metric_expiration_seconds=int(
                config.get("nodeMetricExpirationSeconds", base.node_metric_expiration_seconds)
            ),
            enable_schedule_when_node_metrics_expired=bool(
                config.get("enableScheduleWhenNodeMetricsExpired", False)
            ),
            cpu_threshold=thresholds.get("cpu", 0),
            memory_threshold=thresholds.get("memory", 0),
            cpu_weight=weights.get("cpu", 0),
            memory_weight=weights.get("memory", 0),
            dominant_resource_weight=int(dominant),
            cpu_scaling_factor=factors["cpu"],
            memory_scaling_factor=factors["memory"],
            prod_cpu_threshold=prod.get("cpu", 0),
            prod_memory_threshold=prod.get("memory", 0),
            prod_usage_include_sys=_flag(config, "prodUsageIncludeSys"),
            score_according_prod_usage=_flag(config, "scoreAccordingProdUsage"),
            aggregated=None if aggregated is None else AggregatedArgs.from_koordinator(aggregated),
        )


# -- pods ------------------------------------------------------------------------------------


def _go_round(value: float) -> int:
    """Go's math.Round for value >= 0: halves away from zero (Python's round() goes to even)."""
    whole = math.trunc(value)
    return whole + 1 if value - whole >= 0.5 else whole


def _estimate(name: str, request: int, limit: int, factor: int) -> int:
    quantity = limit if limit > request else request
    if quantity == 0:
        return _DEFAULTS.get(name, 0)
    value = _go_round(quantity * factor / 100)
    return limit if 0 < limit < value else value


def estimate_pod(pod: Mapping[str, Any], args: LoadAwareArgs) -> Pair:
    """Koordinator's default estimator: for cpu and memory, max(request, limit) * scaling
    factor, capped at the limit; 250m / 200 MiB for a pod that asks for neither. Batch and mid
    pods are read in their batch-*/mid-* resources. Raises PodReadError."""
    try:
        names = _CHARGED_AS.get(priority_class_with_default(pod).name, _DEFAULT_RESOURCES)
        if names is None:
            return 0, 0
        spec = pod.get("spec") or _EMPTY
        cpu_name, memory_name = names
        cpu_request, memory_request = pod_requests(spec, names)
        cpu_limit, memory_limit = pod_limits(spec, names)
        cpu = _estimate(cpu_name, cpu_request, cpu_limit, args.cpu_scaling_factor)
        memory = _estimate(memory_name, memory_request, memory_limit, args.memory_scaling_factor)
    except _READ_ERRORS as err:
        raise PodReadError(f"pod {pod_key(pod)}: unreadable resources ({err})") from None
    return cpu, memory


def pod_key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or _EMPTY
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Koordinator never filters DaemonSet pods: they must run on every node."""
    owners = (pod.get("metadata") or _EMPTY).get("ownerReferences") or ()
    return any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in owners)


def is_terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or _EMPTY).get("phase") in _TERMINATED


# -- nodes and NodeMetrics -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricDigest:
    """What LoadAware reads from one NodeMetric object."""

    update_time: float | None  # None: never reported, which counts as expired
    report_interval: float
    has_node_metric: bool  # status.nodeMetric is present
    node_usage: Pair  # a resource not reported counts as 0, as in Koordinator
    pod_usage: Mapping[str, Pair]  # by namespace/name; pods reported without usage are absent
    # aggregatedNodeUsages by (type, seconds), and by (type, 0) the longest duration of each
    # type (Koordinator's choice when the args set no duration)
    aggregated: Mapping[AggregateKey, Pair] = field(default_factory=dict)
    # podsMetric as read (its priorities tell which pods it reports as koord-prod)
    pods_metric: Mapping[str, PodMetric] = field(default_factory=dict)
    system_usage: Pair = (0, 0)  # a resource not reported counts as 0


def digest_node_metric(node_metric: Mapping[str, Any]) -> MetricDigest:
    """Raises MetricError for a NodeMetric the API server would not have accepted."""
    view = read_node_metric(node_metric)
    status = node_metric.get("status") or _EMPTY
    node_part = status.get("nodeMetric")
    cpu = memory = 0
    try:
        usage = ((node_part or _EMPTY).get("nodeUsage") or _EMPTY).get("resources") or _EMPTY
        if "cpu" in usage:
            cpu = milli_value(usage["cpu"])
        if "memory" in usage:
            memory = quantity_value(usage["memory"])
        if cpu < 0 or memory < 0:
            raise ModelError(f"negative usage (cpu {cpu}, memory {memory})")
        policy = (node_metric.get("spec") or _EMPTY).get("metricCollectPolicy") or _EMPTY
    except _READ_ERRORS as err:
        raise MetricError(f"status.nodeMetric.nodeUsage: malformed ({err})") from None
    interval = policy.get("reportIntervalSeconds", DEFAULT_REPORT_INTERVAL_SECONDS)
    if isinstance(interval, bool) or not isinstance(interval, int):
        raise MetricError(f"spec.metricCollectPolicy.reportIntervalSeconds: {interval!r}")
    pods = {
        key: (c or 0, m or 0)
        for key, (_, c, m) in view.pods.items()
        if c is not None or m is not None
    }
    aggregated = dict(view.aggregated)
    longest: dict[str, float] = {}
    for kind, seconds in view.aggregated:
        longest[kind] = max(seconds, longest.get(kind, 0.0))
    for kind, seconds in longest.items():
        aggregated[kind, 0.0] = view.aggregated[kind, seconds]
    system = view.system_usage
    if system is None:  # one resource missing: read as 0, as Koordinator does
        try:
            system = _pair_or_zero((node_part or _EMPTY).get("systemUsage") or _EMPTY)
        except _READ_ERRORS as err:
            raise MetricError(f"status.nodeMetric.systemUsage: malformed ({err})") from None
    return MetricDigest(
        view.update_time,
        float(interval),
        node_part is not None,
        (cpu, memory),
        pods,
        aggregated,
        view.pods,
        system,
    )


def _pair_or_zero(resource_map: Mapping[str, Any]) -> Pair:
    usage = resource_map.get("resources") or _EMPTY
    cpu = milli_value(usage["cpu"]) if "cpu" in usage else 0
    memory = quantity_value(usage["memory"]) if "memory" in usage else 0
    return cpu, memory


def node_allocatable(node: Mapping[str, Any]) -> Pair:
    """cpu and memory allocatable, the raw (unamplified) amounts where the node has a
    raw-allocatable annotation; an unreadable annotation is ignored as Koordinator does, and
    an unreadable or negative quantity counts as 0 (that resource is then neither filtered
    nor scored)."""
    allocatable = dict((node.get("status") or _EMPTY).get("allocatable") or _EMPTY)
    raw = ((node.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(
        keys.ANNOTATION_NODE_RAW_ALLOCATABLE
    )
    if raw:
        try:
            amplified = json.loads(raw)
        except ValueError:
            amplified = None
        if isinstance(amplified, dict):
            allocatable.update(amplified)
    result = []
    for name in _DEFAULT_RESOURCES:
        try:
            amount = resource_value(name, allocatable[name]) if name in allocatable else 0
        except _READ_ERRORS:
            amount = 0
        result.append(max(0, amount))
    return result[0], result[1]


@dataclass(frozen=True, slots=True)
class ThresholdProfile:
    """Koordinator's usageThresholdsFilterProfile for one node, percentages (0: no check).
    ``aggregated`` None: a non-prod pod is checked against ``usage`` on the latest usage, else
    against ``aggregated`` on the aggregate ``aggregation`` names (type, seconds; 0 = the
    longest). ``prod`` all 0: prod pods are checked as the others are."""

    usage: Pair
    prod: Pair = (0, 0)
    aggregated: Pair | None = None
    aggregation: AggregateKey = ("", 0.0)


def _args_profile(args: LoadAwareArgs) -> ThresholdProfile:
    agg = args.aggregated
    filters = agg is not None and agg.filters
    return ThresholdProfile(
        (args.cpu_threshold, args.memory_threshold),
        (args.prod_cpu_threshold, args.prod_memory_threshold),
        agg.usage_thresholds if agg is not None and filters else None,
        (agg.usage_aggregation_type, agg.usage_aggregated_duration)
        if agg is not None and filters
        else ("", 0.0),
    )


def _custom_pair(custom: Any, key: str) -> Pair | None:
    """A thresholds map of the annotation; None when absent or empty; ValueError if bad."""
    value = custom.get(key) or {}
    if not value:
        return None
    cpu, memory = value.get("cpu", 0), value.get("memory", 0)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (cpu, memory)):
        raise ValueError(f"{key}: not integers")
    return cpu, memory


def node_threshold_profile(node: Mapping[str, Any], args: LoadAwareArgs) -> ThresholdProfile:
    """The args' thresholds, each of usageThresholds, prodUsageThresholds and aggregatedUsage
    replaced whole where the node's custom-usage-thresholds annotation names it (its
    aggregatedUsage only with thresholds and a type; its duration does not fall back to the
    args'); an unreadable annotation -> the args', as in Koordinator."""
    default = _args_profile(args)
    text = ((node.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(
        keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS
    )
    if not text:
        return default
    try:
        custom = json.loads(text)
        usage = _custom_pair(custom, "usageThresholds")
        prod = _custom_pair(custom, "prodUsageThresholds")
        agg = custom.get("aggregatedUsage") or {}
        agg_usage = _custom_pair(agg, "usageThresholds")
        kind = agg.get("usageAggregationType") or ""
        duration = agg.get("usageAggregatedDuration")
        seconds = parse_go_duration(duration) if isinstance(duration, str) else 0.0
        if not isinstance(kind, str):
            raise ValueError("usageAggregationType: not a string")
    except (ValueError, AttributeError, TypeError):
        return default
    if agg_usage is None or not kind:
        agg_usage = None
    if usage is None and prod is None and agg_usage is None:
        return default
    return ThresholdProfile(
        default.usage if usage is None else usage,
        default.prod if prod is None else prod,
        default.aggregated if agg_usage is None else agg_usage,
        default.aggregation if agg_usage is None else (kind, seconds),
    )


def node_thresholds(node: Mapping[str, Any], args: LoadAwareArgs) -> Pair:
    """(cpu, memory) usage thresholds in percent (node_threshold_profile's usage)."""
    return node_threshold_profile(node, args).usage


# -- the decisions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node as the filter and the score see it."""

    allocatable: Pair
    thresholds: Pair  # percent; 0 = no check
    metric: MetricDigest | None  # None: no NodeMetric, or one that does not parse
    used: Pair  # node usage + what assigned pods add (Koordinator's nodeUsage + nodeDelta)
    note: str = ""  # why the NodeMetric was ignored
    # Koordinator's prodUsageThresholds: the prod pods' reported usage + what assigned prod
    # pods add (prodUsage + prodDelta); all 0 thresholds: prod pods are judged as the others
    prod_thresholds: Pair = (0, 0)
    prod_used: Pair = (0, 0)
    # the aggregated filter: None, or (thresholds, the aggregate + nodeDelta, or the full
    # estimates of the node's pods where the NodeMetric lacks that aggregate)
    aggregated: tuple[Pair, Pair] | None = None
    score_used: Pair | None = None  # what a non-prod pod is scored on; None: used
    prod_score_used: Pair | None = None  # ... a prod pod (scoreAccordingProdUsage); None: same
    # What filter_nodes and score_nodes read, worked out once per load: they run for every
    # node of every request. reported: 0 no NodeMetric (or no thresholds, for the filter),
    # 1 one without status.nodeMetric, 2 a full one. The update time is -inf if unknown.
    filter_facts: tuple[int, float, float, float] = field(init=False)
    """(reported, update time, the smallest cpu and memory estimates that exceed the
    thresholds: inf when unchecked) for a non-prod pod"""
    prod_filter_facts: tuple[int, float, float, float] = field(init=False)
    reasons: tuple[str, str] = field(init=False)  # (cpu, memory), for a non-prod pod
    prod_reasons: tuple[str, str] = field(init=False)
    score_facts: tuple[int, float, dict[str, int], int, int, int, int] = field(init=False)
    """(reported, update time, scores by estimate key, free cpu, allocatable cpu, free
    memory, allocatable memory); free is -1 where allocatable is 0 (scored 0 then)"""
    prod_score_facts: tuple[int, float, dict[str, int], int, int, int, int] = field(init=False)

    def __post_init__(self) -> None:
        metric = self.metric
        reported = 0 if metric is None else 2 if metric.has_node_metric else 1
        updated = -math.inf if metric is None or metric.update_time is None else metric.update_time
        usage_reasons = reasons = (REASON_CPU_USAGE, REASON_MEMORY_USAGE)
        if self.aggregated is None:
            facts = self._filter_facts(reported, updated, self.thresholds, self.used)
        else:
            thresholds, used = self.aggregated
            reasons = (REASON_CPU_AGGREGATED_USAGE, REASON_MEMORY_AGGREGATED_USAGE)
            facts = self._filter_facts(reported, updated, thresholds, used)
        object.__setattr__(self, "filter_facts", facts)
        object.__setattr__(self, "reasons", reasons)
        if self.prod_thresholds != (0, 0):
            prod = self.prod_thresholds
            facts = self._filter_facts(reported, updated, prod, self.prod_used)
            reasons = usage_reasons
        object.__setattr__(self, "prod_filter_facts", facts)
        object.__setattr__(self, "prod_reasons", reasons)
        used = self.used if self.score_used is None else self.score_used
        score = self._score_facts(reported, updated, used)
        object.__setattr__(self, "score_facts", score)
        if self.prod_score_used is not None:
            score = self._score_facts(reported, updated, self.prod_score_used)
        object.__setattr__(self, "prod_score_facts", score)

    def _filter_facts(
        self, reported: int, updated: float, thresholds: Pair, used: Pair
    ) -> tuple[int, float, float, float]:
        (cpu_total, memory_total), (cpu_used, memory_used) = self.allocatable, used
        cpu_max, memory_max = thresholds
        return (
            reported if cpu_max or memory_max else 0,
            updated,
            _exceeding_estimate(cpu_used, cpu_total, cpu_max),
            _exceeding_estimate(memory_used, memory_total, memory_max),
        )

    def _score_facts(
        self, reported: int, updated: float, used: Pair
    ) -> tuple[int, float, dict[str, int], int, int, int, int]:
        (cpu_total, memory_total), (cpu_used, memory_used) = self.allocatable, used
        return (
            reported,
            updated,
            {},
            cpu_total - cpu_used if cpu_total > 0 else -1,
            cpu_total,
            memory_total - memory_used if memory_total > 0 else -1,
            memory_total,
        )


def _over_threshold(used: int, total: int, threshold: int) -> bool:
    """Koordinator's test: Round(used / total * 100) > threshold, in float64 as Go does; the
    rounded quotient exceeds the threshold once the quotient reaches threshold + 0.5."""
    return used / total * 100 >= threshold + 0.5


def _exceeding_estimate(used: int, total: int, threshold: int) -> float:
    """The smallest estimate that takes the node over the threshold (inf: never checked).
    The float test is monotonic in the estimate, so a guess from the algebra is corrected by
    stepping until the test flips exactly there."""
    if not threshold or total <= 0:
        return math.inf
    guess = max(0, math.ceil((threshold + 0.5) * total / 100) - used)
    while guess > 0 and _over_threshold(used + guess - 1, total, threshold):
        guess -= 1
    while not _over_threshold(used + guess, total, threshold):
        guess += 1
    return guess


@dataclass(frozen=True, slots=True)
class AssignedSums:
    """What the node's pods add to its NodeMetric, as Koordinator's podAssignCache sums it."""

    node_delta: Pair  # nodeDelta: what the NodeMetric's node usage may miss
    estimated: Pair  # nodeEstimated: every pod's full estimate (when an aggregate is missing)
    prod_usage: Pair  # prodUsage: reported usage of the prod pods podsMetric calls prod
    prod_delta: Pair  # prodDelta: what prodUsage may miss of the prod pods


def assigned_sums(
    metric: MetricDigest,
    assigned: AssignedPods,
    estimate: Callable[[Mapping[str, Any]], Pair],
    prod: bool = True,
) -> AssignedSums:
    """A pod adds max(0, estimate - reported usage) to node_delta when the NodeMetric has no
    usage for it, or when it was assigned after updateTime - reportInterval (its usage may not
    be in the report yet). A koord-prod pod adds its usage to prod_usage where podsMetric
    reports it as koord-prod too, and to prod_delta as for node_delta, its whole estimate
    where podsMetric does not call it prod. ``estimate`` maps a pod to its estimate;
    terminated and unreadable pods add nothing. ``assigned`` must hold every active pod of
    the node for estimated and prod_usage to be whole. prod=False: the prod sums are left 0
    (nothing reads them: the pods' priorities are then not worked out)."""
    want_prod = prod
    if metric.update_time is None:
        window_start = -math.inf
    else:
        window_start = metric.update_time - metric.report_interval
    usage_of, reported_as = metric.pod_usage.get, metric.pods_metric.get
    prod_name = qos.PROD.name
    cpu = memory = all_cpu = all_memory = 0
    prod_cpu = prod_memory = delta_cpu = delta_memory = 0
    for pod, assigned_at in assigned:
        if is_terminated(pod):
            continue
        try:
            e_cpu, e_memory = estimate(pod)
            prod = want_prod and priority_class_with_default(pod) is qos.PROD
        except (PodReadError, *_READ_ERRORS):
            continue
        key = pod_key(pod)
        usage = usage_of(key)
        recent = usage is None or assigned_at > window_start
        if recent:
            cpu += e_cpu if usage is None else max(0, e_cpu - usage[0])
            memory += e_memory if usage is None else max(0, e_memory - usage[1])
        all_cpu, all_memory = all_cpu + e_cpu, all_memory + e_memory
        if not prod:
            continue
        if usage is not None and (reported_as(key) or ("",))[0] == prod_name:
            prod_cpu, prod_memory = prod_cpu + usage[0], prod_memory + usage[1]
            if recent:
                delta_cpu += max(0, e_cpu - usage[0])
                delta_memory += max(0, e_memory - usage[1])
        else:  # not reported as prod: its usage is in no prod sum, so its estimate counts
            delta_cpu, delta_memory = delta_cpu + e_cpu, delta_memory + e_memory
    return AssignedSums(
        (cpu, memory), (all_cpu, all_memory), (prod_cpu, prod_memory), (delta_cpu, delta_memory)
    )


def assigned_delta(
    metric: MetricDigest, assigned: AssignedPods, estimate: Callable[[Mapping[str, Any]], Pair]
) -> Pair:
    """Koordinator's nodeDelta (AssignedSums.node_delta)."""
    return assigned_sums(metric, assigned, estimate, prod=False).node_delta


def node_load(
    node: Mapping[str, Any],
    node_metric: Mapping[str, Any] | None,
    assigned: AssignedPods,
    args: LoadAwareArgs,
) -> NodeLoad:
    """The node's load without a cache (LoadCache.node_load is the memoized form). A
    NodeMetric that does not parse counts as none, with the reason in NodeLoad.note."""
    digest, note = None, ""
    if node_metric is not None:
        try:
            digest = digest_node_metric(node_metric)
        except MetricError as err:
            note = f"NodeMetric ignored: {err}"
    estimate = functools.partial(estimate_pod, args=args)
    profile = node_threshold_profile(node, args)
    return _load(node_allocatable(node), profile, digest, note, assigned, estimate, args)


def _add(a: Pair, b: Pair) -> Pair:
    return a[0] + b[0], a[1] + b[1]


def _aggregate_used(digest: MetricDigest, sums: AssignedSums, key: AggregateKey) -> Pair:
    """Koordinator's getTargetAggregatedUsage: the aggregate of that type and duration (0: the
    longest reported; no aggregate of the type at all: the latest usage) plus nodeDelta; where
    the NodeMetric lacks it for a set duration, the full estimates of the node's pods."""
    usage = digest.aggregated.get(key)
    if usage is None and key[1] == 0:
        usage = digest.node_usage
    if usage is None:
        return sums.estimated
    return _add(usage, sums.node_delta)


def _load(  # noqa: PLR0917 - a private helper of node_load and LoadCache.node_load
    allocatable: Pair,
    profile: ThresholdProfile,
    digest: MetricDigest | None,
    note: str,
    assigned: AssignedPods,
    estimate: Callable[[Mapping[str, Any]], Pair],
    args: LoadAwareArgs,
) -> NodeLoad:
    if digest is None:
        return NodeLoad(allocatable, profile.usage, None, (0, 0), note, profile.prod)
    # prod sums are read only with prod thresholds (the args' or the node's) or prod scores
    want_prod = profile.prod != (0, 0) or args.score_according_prod_usage
    sums = assigned_sums(digest, assigned, estimate, want_prod)
    used = _add(digest.node_usage, sums.node_delta)
    prod_used = _add(sums.prod_usage, sums.prod_delta)
    if args.prod_usage_include_sys:
        prod_used = _add(prod_used, digest.system_usage)
    aggregated = None
    if profile.aggregated is not None:
        aggregated = (profile.aggregated, _aggregate_used(digest, sums, profile.aggregation))
    agg = args.aggregated
    score_used = None
    if agg is not None and agg.score_aggregation_type:
        key = (agg.score_aggregation_type, agg.score_aggregated_duration)
        score_used = _aggregate_used(digest, sums, key)
    return NodeLoad(
        allocatable,
        profile.usage,
        digest,
        used,
        note,
        profile.prod,
        prod_used,
        aggregated,
        score_used,
        prod_used if args.score_according_prod_usage else None,
    )


def is_prod_pod(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is koord-prod (GetPodPriorityClassWithDefault): prodUsageThresholds
    and scoreAccordingProdUsage judge it on the prod pods' usage. Raises PodReadError."""
    try:
        return priority_class_with_default(pod) is qos.PROD
    except _READ_ERRORS as err:
        raise PodReadError(f"pod {pod_key(pod)}: unreadable priority ({err})") from None


def filter_node(  # noqa: PLR0917 - the verb's inputs
    estimate: Pair,
    load: NodeLoad,
    args: LoadAwareArgs,
    now: float,
    daemonset: bool = False,
    prod: bool = False,
) -> str | None:
    """None when the pod fits the node's usage thresholds, else the reason. A node without a
    NodeMetric (no koordlet) passes: load awareness is an optimisation, not a requirement.
    ``prod``: the pod is koord-prod (is_prod_pod)."""
    return filter_nodes(estimate, (load,), args, now, daemonset, prod)[0]


def score_node(
    estimate: Pair, load: NodeLoad, args: LoadAwareArgs, now: float, prod: bool = False
) -> int:
    """Koordinator's 0..100 score: the weighted mean of each resource's free share after the
    pod, (allocatable - used) * 100 // allocatable (0 when over), plus the smallest share at
    the dominant weight. 0 for a node without a fresh NodeMetric."""
    return score_nodes(estimate, (load,), args, now, prod)[0]


# The extender runs these for every node of every request, so they take all the nodes at
# once and are written out: a Python call per node would cost more than the arithmetic.


def filter_nodes(  # noqa: PLR0917 - the verb's inputs
    estimate: Pair,
    loads: Sequence[NodeLoad | None],
    args: LoadAwareArgs,
    now: float,
    daemonset: bool = False,
    prod: bool = False,
) -> list[str | None]:
    """filter_node for each load (None for a None load)."""
    if daemonset:
        return [None] * len(loads)
    e_cpu, e_memory = estimate
    # expired: now - updateTime >= expiration, that is updateTime <= now - expiration
    check_expiry = args.filter_expired_node_metrics
    stale_before = now - args.node_metric_expiration_seconds
    expired_reason = (
        None if args.enable_schedule_when_node_metrics_expired else REASON_NODE_METRIC_EXPIRED
    )
    reasons: list[str | None] = []
    append = reasons.append
    for load in loads:
        if load is None:
            append(None)
            continue
        checked, updated, cpu_over, memory_over = (
            load.prod_filter_facts if prod else load.filter_facts
        )
        if not checked:
            append(None)
        elif check_expiry and updated <= stale_before:
            append(expired_reason)
        elif checked == 1 or (e_cpu < cpu_over and e_memory < memory_over):
            append(None)
        else:
            cpu_reason, memory_reason = load.prod_reasons if prod else load.reasons
            append(cpu_reason if e_cpu >= cpu_over else memory_reason)
    return reasons


_MEMO_LIMIT = 256  # scores remembered per load, one per distinct pod estimate


def score_nodes(
    estimate: Pair,
    loads: Sequence[NodeLoad | None],
    args: LoadAwareArgs,
    now: float,
    prod: bool = False,
) -> list[int]:
    """score_node for each load (0 for a None load). A load remembers the score of each
    estimate it saw: pods come in few shapes, and the arithmetic is on byte counts."""
    cpu_weight, memory_weight = args.cpu_weight, args.memory_weight
    dominant = args.dominant_resource_weight
    weights = cpu_weight + memory_weight + dominant
    if not weights:
        return [0] * len(loads)
    e_cpu, e_memory = estimate
    # a str key: its hash is computed once, not once per node; the weights are part of it
    key = f"{e_cpu}/{e_memory}/{cpu_weight}/{memory_weight}/{dominant}"
    stale_before = now - args.node_metric_expiration_seconds
    scores: list[int] = []
    append = scores.append
    for load in loads:
        if load is None:
            append(0)
            continue
        reported, updated, memo, cpu_free, cpu_total, memory_free, memory_total = (
            load.prod_score_facts if prod else load.score_facts
        )
        if reported != 2 or updated <= stale_before:
            append(0)
            continue
        score = memo.get(key)
        if score is None:
            # (allocatable - used) * 100 // allocatable, 0 when used exceeds allocatable
            cpu_free -= e_cpu
            memory_free -= e_memory
            cpu = cpu_free * 100 // cpu_total if cpu_free >= 0 else 0
            memory = memory_free * 100 // memory_total if memory_free >= 0 else 0
            score = cpu_weight * cpu + memory_weight * memory
            if dominant:  # Koordinator's minimum runs over every resource, weighted or not
                score += dominant * min(cpu, memory)
            score //= weights
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[key] = score
        append(score)
    return scores


def extender_score(score: int) -> int:
    """A 0..100 score on the extender's 0..10 scale (MaxExtenderPriority), rounded half up:
    kube-scheduler multiplies it back by 10, so rounding keeps it within 5 of the plugin's
    score where truncation would lose up to 9."""
    return min(10, max(0, (score + 5) // 10))


# -- per-node memo ---------------------------------------------------------------------------


def _same_object(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """The same object, or one the API server would give the same uid and resourceVersion
    (kube-scheduler sends freshly decoded nodes with every request)."""
    if old is new:
        return True
    if old is None or new is None:
        return False
    old_meta, new_meta = old.get("metadata") or _EMPTY, new.get("metadata") or _EMPTY
    version = new_meta.get("resourceVersion")
    return bool(version) and (
        version == old_meta.get("resourceVersion") and new_meta.get("uid") == old_meta.get("uid")
    )


@dataclass(slots=True)
class _Entry:
    args: LoadAwareArgs
    node: Mapping[str, Any]
    metric: Mapping[str, Any] | None
    assigned: AssignedPods
    load: NodeLoad
    profile: ThresholdProfile


class LoadCache:
    """NodeLoads and pod estimates, recomputed only when their inputs change: a NodeMetric is
    parsed once per version, a pod estimated once per object, a node's sum redone only when
    its NodeMetric or assigned pods change. Objects are compared by identity, or by uid and
    resourceVersion, so a changed object must be a new one, never edited in place (as
    informers do). The caller owns one per extender; not thread-safe. Bounded: emptied when
    it holds ``limit`` entries."""

    def __init__(self, limit: int = 1 << 17) -> None:
        self.limit = limit
        self._estimates: dict[int, tuple[Mapping[str, Any], LoadAwareArgs, Pair | None]] = {}
        self._nodes: dict[str, _Entry] = {}
        self._digests: dict[str, tuple[Mapping[str, Any], MetricDigest | None, str]] = {}

    def estimate(self, pod: Mapping[str, Any], args: LoadAwareArgs) -> Pair:
        """estimate_pod, memoized by pod object: meant for the pods a view keeps."""
        entry = self._estimates.get(id(pod))
        if entry is None or entry[0] is not pod or entry[1] is not args:
            if len(self._estimates) >= self.limit:
                self._estimates.clear()
            try:
                result: Pair | None = estimate_pod(pod, args)
            except PodReadError:
                result = None
            entry = (pod, args, result)
            self._estimates[id(pod)] = entry
        if entry[2] is None:
            raise PodReadError(f"pod {pod_key(pod)}: unreadable resources")
        return entry[2]

    def _digest(self, name: str, metric: Mapping[str, Any]) -> tuple[MetricDigest | None, str]:
        cached = self._digests.get(name)
        if cached is not None and _same_object(cached[0], metric):
            return cached[1], cached[2]
        try:
            digest: MetricDigest | None = digest_node_metric(metric)
            note = ""
        except MetricError as err:
            digest, note = None, f"NodeMetric ignored: {err}"
        self._digests[name] = (metric, digest, note)
        return digest, note

    def node_load(
        self,
        name: str,
        node: Mapping[str, Any],
        node_metric: Mapping[str, Any] | None,
        assigned: AssignedPods,
        args: LoadAwareArgs,
    ) -> NodeLoad:
        """node_load(), memoized per node name."""
        entry = self._nodes.get(name)
        if (
            entry is not None
            and entry.args is args
            and entry.assigned == assigned
            # identity first: the common case costs no call
            and (entry.node is node or _same_object(entry.node, node))
            and (entry.metric is node_metric or _same_object(entry.metric, node_metric))
        ):
            entry.node, entry.metric = node, node_metric
            return entry.load
        snapshot = assigned[:]  # a copy of the same type, for the comparison above
        if node_metric is None:
            digest, note = None, ""
        else:
            digest, note = self._digest(name, node_metric)
        if entry is not None and entry.args is args and _same_object(entry.node, node):
            allocatable, profile = entry.load.allocatable, entry.profile
        else:
            allocatable, profile = node_allocatable(node), node_threshold_profile(node, args)
        estimate = functools.partial(self.estimate, args=args)
        load = _load(allocatable, profile, digest, note, snapshot, estimate, args)
        if len(self._nodes) >= self.limit:
            self._nodes.clear()
        self._nodes[name] = _Entry(args, node, node_metric, snapshot, load, profile)
        return load
