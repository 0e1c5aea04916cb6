"""LoadAwareScheduling (Koordinator pkg/scheduler/plugins/loadaware) on plain Kubernetes JSON:
the pod estimator, the load a node carries (its NodeMetric plus what recently assigned pods
add), the usage-threshold filter and the least-used score. No I/O and no clock: callers pass
``now`` (seconds since the epoch).

    estimate = estimate_pod(pod, args)
    load = cache.node_load(name, node, node_metric, assigned, args)
    reason = filter_node(estimate, load, args, now, daemonset=is_daemonset_pod(pod))
    score = score_node(estimate, load, args, now)     # 0..100; extender_score() maps to 0..10

Only cpu and memory count: they are what koordlet reports. Not modelled: prodUsageThresholds,
aggregated (percentile) usage, custom estimation annotations and forced-estimation windows.
CPU is in milli-cores and memory in bytes throughout.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi import keys, qos
from koordapi.errors import ModelError
from koordapi.nodemetric import MetricError, read_node_metric
from koordapi.pod import pod_limits, pod_requests, priority_class_with_default
from koordapi.quantity import Pair, milli_value, resource_value
from koordapi.quantity import value as quantity_value

REASON_NODE_METRIC_EXPIRED = "node(s) nodeMetric expired"
REASON_CPU_USAGE = "node(s) cpu usage exceed threshold"
REASON_MEMORY_USAGE = "node(s) memory usage exceed threshold"

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
            value = config.get(key) or {}
            if not isinstance(value, Mapping):
                raise ValueError(f"{key} must be an object")
            for name, amount in value.items():
                if name not in _DEFAULT_RESOURCES:
                    raise ValueError(f"{key}: only cpu and memory are supported, got {name!r}")
                if isinstance(amount, bool) or not isinstance(amount, int):
                    raise ValueError(f"{key}.{name} must be an integer, got {amount!r}")
            return dict(value)

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
    return MetricDigest(
        view.update_time, float(interval), node_part is not None, (cpu, memory), pods
    )


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


def node_thresholds(node: Mapping[str, Any], args: LoadAwareArgs) -> Pair:
    """(cpu, memory) usage thresholds in percent: the node's usage-thresholds annotation
    replaces the args' usageThresholds whole when it names any; unreadable -> the args."""
    default = (args.cpu_threshold, args.memory_threshold)
    text = ((node.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(
        keys.ANNOTATION_CUSTOM_USAGE_THRESHOLDS
    )
    if not text:
        return default
    try:
        custom = json.loads(text).get("usageThresholds") or {}
        cpu, memory = custom.get("cpu", 0), custom.get("memory", 0)
    except (ValueError, AttributeError):
        return default
    if not custom or any(isinstance(v, bool) or not isinstance(v, int) for v in (cpu, memory)):
        return default
    return cpu, memory


# -- the decisions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node as the filter and the score see it."""

    allocatable: Pair
    thresholds: Pair  # percent; 0 = no check
    metric: MetricDigest | None  # None: no NodeMetric, or one that does not parse
    used: Pair  # node usage + what assigned pods add (Koordinator's nodeUsage + nodeDelta)
    note: str = ""  # why the NodeMetric was ignored
    # What filter_nodes and score_nodes read, worked out once per load: they run for every
    # node of every request. reported: 0 no NodeMetric (or no thresholds, for the filter),
    # 1 one without status.nodeMetric, 2 a full one. The update time is -inf if unknown.
    filter_facts: tuple[int, float, float, float] = field(init=False)
    """(reported, update time, the smallest cpu and memory estimates that exceed the
    thresholds: inf when unchecked)"""
    score_facts: tuple[int, float, dict[str, int], int, int, int, int] = field(init=False)
    """(reported, update time, scores by estimate key, free cpu, allocatable cpu, free
    memory, allocatable memory); free is -1 where allocatable is 0 (scored 0 then)"""

    def __post_init__(self) -> None:
        metric = self.metric
        reported = 0 if metric is None else 2 if metric.has_node_metric else 1
        updated = -math.inf if metric is None or metric.update_time is None else metric.update_time
        (cpu_total, memory_total), (cpu_used, memory_used) = self.allocatable, self.used
        cpu_max, memory_max = self.thresholds
        checked = reported if cpu_max or memory_max else 0
        facts = (
            checked,
            updated,
            _exceeding_estimate(cpu_used, cpu_total, cpu_max),
            _exceeding_estimate(memory_used, memory_total, memory_max),
        )
        object.__setattr__(self, "filter_facts", facts)
        memo: dict[str, int] = {}
        score = (
            reported,
            updated,
            memo,
            cpu_total - cpu_used if cpu_total > 0 else -1,
            cpu_total,
            memory_total - memory_used if memory_total > 0 else -1,
            memory_total,
        )
        object.__setattr__(self, "score_facts", score)


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


def assigned_delta(
    metric: MetricDigest, assigned: AssignedPods, estimate: Callable[[Mapping[str, Any]], Pair]
) -> Pair:
    """What assigned pods add to the reported usage (Koordinator's nodeDelta): a pod adds
    max(0, estimate - reported usage) when the NodeMetric has no usage for it, or when it was
    assigned after updateTime - reportInterval (its usage may not be in the report yet).
    ``estimate`` maps a pod to its estimate; terminated and unreadable pods add nothing."""
    if metric.update_time is None:
        window_start = -math.inf
    else:
        window_start = metric.update_time - metric.report_interval
    usage_of = metric.pod_usage.get
    cpu = memory = 0
    for pod, assigned_at in assigned:
        if is_terminated(pod):
            continue
        try:
            e_cpu, e_memory = estimate(pod)
        except PodReadError:
            continue
        usage = usage_of(pod_key(pod))
        if usage is None:
            cpu, memory = cpu + e_cpu, memory + e_memory
        elif assigned_at > window_start:
            cpu += max(0, e_cpu - usage[0])
            memory += max(0, e_memory - usage[1])
    return cpu, memory


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
    return _load(
        node_allocatable(node), node_thresholds(node, args), digest, note, assigned, estimate
    )


def _load(  # noqa: PLR0917 - a private helper of node_load and LoadCache.node_load
    allocatable: Pair,
    thresholds: Pair,
    digest: MetricDigest | None,
    note: str,
    assigned: AssignedPods,
    estimate: Callable[[Mapping[str, Any]], Pair],
) -> NodeLoad:
    used: Pair = (0, 0)
    if digest is not None:
        delta = assigned_delta(digest, assigned, estimate)
        used = (digest.node_usage[0] + delta[0], digest.node_usage[1] + delta[1])
    return NodeLoad(allocatable, thresholds, digest, used, note)


def filter_node(
    estimate: Pair, load: NodeLoad, args: LoadAwareArgs, now: float, daemonset: bool = False
) -> str | None:
    """None when the pod fits the node's usage thresholds, else the reason. A node without a
    NodeMetric (no koordlet) passes: load awareness is an optimisation, not a requirement."""
    return filter_nodes(estimate, (load,), args, now, daemonset)[0]


def score_node(estimate: Pair, load: NodeLoad, args: LoadAwareArgs, now: float) -> int:
    """Koordinator's 0..100 score: the weighted mean of each resource's free share after the
    pod, (allocatable - used) * 100 // allocatable (0 when over), plus the smallest share at
    the dominant weight. 0 for a node without a fresh NodeMetric."""
    return score_nodes(estimate, (load,), args, now)[0]


# The extender runs these for every node of every request, so they take all the nodes at
# once and are written out: a Python call per node would cost more than the arithmetic.


def filter_nodes(
    estimate: Pair,
    loads: Sequence[NodeLoad | None],
    args: LoadAwareArgs,
    now: float,
    daemonset: bool = False,
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
        checked, updated, cpu_over, memory_over = load.filter_facts
        if not checked:
            append(None)
        elif check_expiry and updated <= stale_before:
            append(expired_reason)
        elif checked == 1 or (e_cpu < cpu_over and e_memory < memory_over):
            append(None)
        else:
            append(REASON_CPU_USAGE if e_cpu >= cpu_over else REASON_MEMORY_USAGE)
    return reasons


_MEMO_LIMIT = 256  # scores remembered per load, one per distinct pod estimate


def score_nodes(
    estimate: Pair, loads: Sequence[NodeLoad | None], args: LoadAwareArgs, now: float
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
        reported, updated, memo, cpu_free, cpu_total, memory_free, memory_total = load.score_facts
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
            allocatable, thresholds = entry.load.allocatable, entry.load.thresholds
        else:
            allocatable, thresholds = node_allocatable(node), node_thresholds(node, args)
        estimate = functools.partial(self.estimate, args=args)
        load = _load(allocatable, thresholds, digest, note, snapshot, estimate)
        if len(self._nodes) >= self.limit:
            self._nodes.clear()
        self._nodes[name] = _Entry(args, node, node_metric, snapshot, load)
        return load
