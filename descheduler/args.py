"""LowNodeLoad's arguments: LowNodeLoadArgs and its node pools (NodePool, AnomalyCondition,
PodSelector), the evictor's pod protections (EvictorArgs), and how both are read from the
camelCase YAML/JSON users write, defaulted and validated (ArgsError).

It follows Koordinator v1.8.0's pkg/descheduler/apis/config/v1alpha2/types_loadaware.go,
defaults.go and conversion_plugins.go (the arguments, their defaults, the top-level
thresholds becoming the first node pool) and config/validation/validation_loadaware.go (the
checks); EvictorArgs the filter part of its MigrationControllerArgs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from descheduler.fields import ArgsError, check_keys, json_list, json_object
from descheduler.selectors import LabelSelector
from koordapi.duration import parse_go_duration

PLUGIN_NAME = "LowNodeLoad"
DEFAULT_POOL_NAME = "__default_node_pool__"  # the pool the top-level thresholds become

_INT32_MAX = 2**31 - 1
_UINT32_MAX = 2**32 - 1


# -- arguments -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnomalyCondition:
    """LoadAnomalyCondition: a node turns abnormal once more than ``consecutive_abnormalities``
    reports in a row found it over its high thresholds, and normal again once more than
    ``consecutive_normalities`` found it fine, or ``timeout`` seconds after turning abnormal."""

    consecutive_abnormalities: int = 5
    consecutive_normalities: int = 3
    timeout: float = 60.0


@dataclass(frozen=True)
class NodePool:
    """LowNodeLoadNodePool after defaulting: the nodes its selector picks and how to judge
    them. Thresholds are percentages of each node's (raw) allocatable, by resource name."""

    name: str
    node_selector: LabelSelector | None = None  # None: every node (and processed ones too)
    use_deviation_thresholds: bool = False
    low_thresholds: Mapping[str, float] = field(default_factory=dict)
    high_thresholds: Mapping[str, float] = field(default_factory=dict)
    prod_low_thresholds: Mapping[str, float] = field(default_factory=dict)
    prod_high_thresholds: Mapping[str, float] = field(default_factory=dict)
    resource_weights: Mapping[str, int] = field(default_factory=lambda: {"cpu": 1, "memory": 1})
    anomaly_condition: AnomalyCondition = field(default_factory=AnomalyCondition)


@dataclass(frozen=True)
class PodSelector:
    name: str
    selector: LabelSelector | None


@dataclass(frozen=True)
class LowNodeLoadArgs:
    """LowNodeLoadArgs in Koordinator's internal form: defaulted, with the top-level
    thresholds moved into the first pool (``DEFAULT_POOL_NAME``), as conversion does.
    Construction validates (ArgsError); ``from_dict`` reads the YAML/JSON users write."""

    node_pools: tuple[NodePool, ...]
    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = 180
    evictable_namespaces_include: tuple[str, ...] = ()
    evictable_namespaces_exclude: tuple[str, ...] = ()
    pod_selectors: tuple[PodSelector, ...] = ()
    node_fit: bool = True
    detector_cache_timeout: float = 300.0

    def __post_init__(self) -> None:
        problems = _args_problems(self)
        if problems:
            raise ArgsError("; ".join(problems))

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> LowNodeLoadArgs:
        """The args of a LowNodeLoad plugin config (camelCase keys, ``apiVersion`` and
        ``kind`` allowed), defaulted as Koordinator's SetDefaults_LowNodeLoadArgs does. Raises
        ArgsError naming the field: unknown keys, wrong types, and what validation refuses."""
        return _parse_args(config)


@dataclass(frozen=True)
class EvictorArgs:
    """The pod protections of the evictor LowNodeLoad hands its pods to (the filter part of
    Koordinator's MigrationControllerArgs, defaults included). DaemonSet, mirror, static and
    terminating pods are never evicted, whatever these say."""

    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold: int | None = None  # only pods below it; checked with critical pods
    label_selector: LabelSelector | None = None

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> EvictorArgs:
        """Reads the filter fields of a MigrationControllerArgs object (other fields are the
        migration controller's and are not read). Raises ArgsError for bad values, and for
        ``priorityThreshold.name``: resolving a PriorityClass needs the API server."""
        obj = json_object(config, "evictorArgs")
        flags = {
            name: _bool(obj.get(key), key, default=False)
            for name, key in (
                ("evict_local_storage_pods", "evictLocalStoragePods"),
                ("evict_system_critical_pods", "evictSystemCriticalPods"),
                ("evict_failed_bare_pods", "evictFailedBarePods"),
                ("evict_all_bare_pods", "evictAllBarePods"),
                ("ignore_pvc_pods", "ignorePvcPods"),
            )
        }
        threshold = None
        raw = obj.get("priorityThreshold")
        if raw is not None:
            thresholds = json_object(raw, "priorityThreshold")
            check_keys(thresholds, ("name", "value"), "priorityThreshold")
            if thresholds.get("name") and thresholds.get("value") is not None:
                raise ArgsError("priorityThreshold: only one of name and value can be set")
            if thresholds.get("name"):
                raise ArgsError(
                    "priorityThreshold.name: resolving a PriorityClass is not supported here; "
                    "give priorityThreshold.value"
                )
            if thresholds.get("value") is not None:
                threshold = _int(
                    thresholds["value"], "priorityThreshold.value", -(2**31), _INT32_MAX
                )
        selector = obj.get("labelSelector")
        return cls(
            **flags,
            priority_threshold=threshold,
            label_selector=None
            if selector is None
            else LabelSelector.parse(selector, "labelSelector"),
        )


# -- parsing helpers -------------------------------------------------------------------------

_ARGS_KEYS = (
    "apiVersion",
    "kind",
    "paused",
    "dryRun",
    "numberOfNodes",
    "nodeMetricExpirationSeconds",
    "evictableNamespaces",
    "nodeSelector",
    "podSelectors",
    "nodeFit",
    "useDeviationThresholds",
    "highThresholds",
    "lowThresholds",
    "prodHighThresholds",
    "prodLowThresholds",
    "resourceWeights",
    "anomalyCondition",
    "detectorCacheTimeout",
    "nodePools",
)
_POOL_KEYS = (
    "name",
    "nodeSelector",
    "useDeviationThresholds",
    "highThresholds",
    "lowThresholds",
    "prodHighThresholds",
    "prodLowThresholds",
    "resourceWeights",
    "anomalyCondition",
)
_THRESHOLD_KEYS = (
    ("lowThresholds", "low_thresholds"),
    ("highThresholds", "high_thresholds"),
    ("prodLowThresholds", "prod_low_thresholds"),
    ("prodHighThresholds", "prod_high_thresholds"),
)


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _bool(value: Any, where: str, *, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ArgsError(f"{where}: must be true or false, got {value!r}")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    # JSON decoding into Go integers refuses fractions and booleans alike
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgsError(f"{where}: must be an integer, got {value!r}")
    if not low <= value <= high:
        raise ArgsError(f"{where}: {value} is out of range {low}..{high}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    items = json_list(value, where)
    if not all(isinstance(item, str) for item in items):
        raise ArgsError(f"{where}: must be a list of strings")
    return tuple(items)


def _duration(value: Any, where: str) -> float:
    if not isinstance(value, str):
        raise ArgsError(f"{where}: must be a duration such as 5m or 30s, got {value!r}")
    try:
        return parse_go_duration(value)
    except ValueError:
        raise ArgsError(f"{where}: not a duration: {value!r}") from None


def _percentages(value: Any, where: str) -> dict[str, float] | None:
    """Resource → percent, or None when the field is absent (an empty object is not absent:
    node pools inherit only absent thresholds, as a Go nil map)."""
    if value is None:
        return None
    result = {}
    for name, percent in json_object(value, where).items():
        if isinstance(percent, bool) or not isinstance(percent, int | float):
            raise ArgsError(f"{where}.{name}: must be a number, got {percent!r}")
        if not math.isfinite(percent):
            raise ArgsError(f"{where}.{name}: must be finite, got {percent!r}")
        result[str(name)] = float(percent)
    return result


def _weights(value: Any, where: str) -> dict[str, int] | None:
    if value is None:
        return None
    return {
        str(name): _int(weight, f"{where}.{name}", -(2**63), 2**63 - 1)
        for name, weight in json_object(value, where).items()
    }


def _raw_anomaly(value: Any, where: str) -> tuple[int, int, float | None] | None:
    """(consecutiveAbnormalities, consecutiveNormalities, timeout or None); None if absent."""
    if value is None:
        return None
    obj = json_object(value, where)
    check_keys(obj, ("timeout", "consecutiveAbnormalities", "consecutiveNormalities"), where)
    abnormalities = obj.get("consecutiveAbnormalities")
    normalities = obj.get("consecutiveNormalities")
    timeout = obj.get("timeout")
    return (
        0
        if abnormalities is None
        else _int(abnormalities, f"{where}.consecutiveAbnormalities", 0, _UINT32_MAX),
        0
        if normalities is None
        else _int(normalities, f"{where}.consecutiveNormalities", 0, _UINT32_MAX),
        None if timeout is None else _duration(timeout, f"{where}.timeout"),
    )


def _top_anomaly(value: Any) -> AnomalyCondition:
    raw = _raw_anomaly(value, "anomalyCondition")
    default = AnomalyCondition()
    if raw is None:
        return default
    abnormalities, normalities, timeout = raw
    # Koordinator's defaulting is an if/else-if chain: a zero normalities count is only filled
    # when abnormalities was set, so {} leaves normalities at 0 and validation refuses it.
    if abnormalities == 0:
        abnormalities = default.consecutive_abnormalities
    elif normalities == 0:
        normalities = default.consecutive_normalities
    # A missing timeout is a nil pointer upstream (dereferenced later); the detector's own
    # default (one minute) is what it would have meant.
    return AnomalyCondition(
        abnormalities, normalities, default.timeout if timeout is None else timeout
    )


def _pool_anomaly(value: Any, where: str, top: AnomalyCondition) -> AnomalyCondition:
    raw = _raw_anomaly(value, where)
    if raw is None:
        return top
    abnormalities, normalities, timeout = raw
    return AnomalyCondition(
        abnormalities or top.consecutive_abnormalities,
        normalities or top.consecutive_normalities,
        top.timeout if timeout is None else timeout,
    )


def _selector_or_none(value: Any, where: str) -> LabelSelector | None:
    return None if value is None else LabelSelector.parse(value, where)


def _parse_args(config: Mapping[str, Any]) -> LowNodeLoadArgs:
    obj = json_object(config, "")
    check_keys(obj, _ARGS_KEYS, "")
    if obj.get("kind") not in (None, f"{PLUGIN_NAME}Args"):
        raise ArgsError(f"kind: must be {PLUGIN_NAME}Args, got {obj.get('kind')!r}")
    top = {attr: _percentages(obj.get(key), key) for key, attr in _THRESHOLD_KEYS}
    # Weights default to 1 for cpu, memory and every resource of the top-level low and high
    # thresholds; a given weight of 0 or less for one of those takes the default too.
    defaults = dict.fromkeys(["cpu", "memory", *(top["low_thresholds"] or {})], 1)
    defaults.update(dict.fromkeys(top["high_thresholds"] or {}, 1))
    weights = _weights(obj.get("resourceWeights"), "resourceWeights")
    if weights is None:
        weights = defaults
    else:
        for name, weight in defaults.items():
            if weights.get(name, 0) <= 0:
                weights[name] = weight
    anomaly = _top_anomaly(obj.get("anomalyCondition"))
    pools = [
        NodePool(
            name=DEFAULT_POOL_NAME,
            node_selector=_selector_or_none(obj.get("nodeSelector"), "nodeSelector"),
            use_deviation_thresholds=_bool(
                obj.get("useDeviationThresholds"), "useDeviationThresholds", default=False
            ),
            **{attr: dict(value or {}) for attr, value in top.items()},
            resource_weights=weights,
            anomaly_condition=anomaly,
        )
    ]
    for i, raw in enumerate(json_list(obj.get("nodePools"), "nodePools")):
        where = f"nodePools[{i}]"
        pool = json_object(raw, where)
        check_keys(pool, _POOL_KEYS, where)
        name = pool.get("name", "")
        if not isinstance(name, str):
            raise ArgsError(f"{where}.name: must be a string, got {name!r}")
        own = {attr: _percentages(pool.get(key), _at(where, key)) for key, attr in _THRESHOLD_KEYS}
        own_weights = _weights(pool.get("resourceWeights"), _at(where, "resourceWeights"))
        pools.append(
            NodePool(
                name=name,
                node_selector=_selector_or_none(pool.get("nodeSelector"), f"{where}.nodeSelector"),
                # not inherited: a pool's deviation mode is its own (a plain bool upstream)
                use_deviation_thresholds=_bool(
                    pool.get("useDeviationThresholds"),
                    f"{where}.useDeviationThresholds",
                    default=False,
                ),
                **{
                    attr: dict(top[attr] or {}) if value is None else value
                    for attr, value in own.items()
                },
                resource_weights=dict(weights) if own_weights is None else own_weights,
                anomaly_condition=_pool_anomaly(
                    pool.get("anomalyCondition"), f"{where}.anomalyCondition", anomaly
                ),
            )
        )
    namespaces = json_object(obj.get("evictableNamespaces"), "evictableNamespaces")
    check_keys(namespaces, ("include", "exclude"), "evictableNamespaces")
    selectors = []
    for i, raw in enumerate(json_list(obj.get("podSelectors"), "podSelectors")):
        where = f"podSelectors[{i}]"
        entry = json_object(raw, where)
        check_keys(entry, ("name", "selector"), where)
        selector_name = entry.get("name", "")
        if not isinstance(selector_name, str):
            raise ArgsError(f"{where}.name: must be a string, got {selector_name!r}")
        selectors.append(
            PodSelector(
                selector_name,
                _selector_or_none(entry.get("selector"), f"{where}.selector"),
            )
        )
    expiration = obj.get("nodeMetricExpirationSeconds")
    cache_timeout = obj.get("detectorCacheTimeout")
    return LowNodeLoadArgs(
        node_pools=tuple(pools),
        paused=_bool(obj.get("paused"), "paused", default=False),
        dry_run=_bool(obj.get("dryRun"), "dryRun", default=False),
        number_of_nodes=0
        if obj.get("numberOfNodes") is None
        else _int(obj["numberOfNodes"], "numberOfNodes", -(2**31), _INT32_MAX),
        node_metric_expiration_seconds=180
        if expiration is None
        else _int(expiration, "nodeMetricExpirationSeconds", -(2**63), 2**63 - 1),
        evictable_namespaces_include=_strings(
            namespaces.get("include"), "evictableNamespaces.include"
        ),
        evictable_namespaces_exclude=_strings(
            namespaces.get("exclude"), "evictableNamespaces.exclude"
        ),
        pod_selectors=tuple(selectors),
        node_fit=_bool(obj.get("nodeFit"), "nodeFit", default=True),
        detector_cache_timeout=300.0
        if cache_timeout is None
        else _duration(cache_timeout, "detectorCacheTimeout"),
    )


def _pool_problems(pool: NodePool, where: str) -> list[str]:
    """ValidateLowLoadUtilizationArgs for one pool (``where`` prefixes the paths). Thresholds
    above 100 are accepted, as upstream."""
    problems = []
    for key, percentages in (
        ("highThresholds", pool.high_thresholds),
        ("lowThresholds", pool.low_thresholds),
        ("prodHighThresholds", pool.prod_high_thresholds),
        ("prodLowThresholds", pool.prod_low_thresholds),
    ):
        for name, percent in percentages.items():
            if percent < 0:
                problems.append(
                    f"{where}{key}.{name}: percentage must be greater than or equal to 0"
                )
    # (lower map, its key, upper map, the words of upstream's message)
    ordered = (
        (pool.low_thresholds, "lowThresholds", pool.high_thresholds,
         "low percentage must be less than or equal to highThresholds"),
        (pool.prod_high_thresholds, "prodHighThresholds", pool.high_thresholds,
         "must be less than or equal to highThresholds"),
        (pool.prod_low_thresholds, "prodLowThresholds", pool.prod_high_thresholds,
         "low percentage must be less than or equal to prodHighThresholds"),
    )  # fmt: skip
    for lower, key, upper, message in ordered:
        for name, percent in lower.items():
            high = upper.get(name)
            if high is not None and percent > high:
                problems.append(f"{where}{key}.{name}: {message}")
    condition = pool.anomaly_condition
    if condition.consecutive_abnormalities <= 0:
        problems.append(f"{where}anomalyCondition.consecutiveAbnormalities: must be greater than 0")
    if condition.consecutive_normalities <= 0:
        problems.append(f"{where}anomalyCondition.consecutiveNormalities: must be greater than 0")
    return problems


def _args_problems(args: LowNodeLoadArgs) -> list[str]:
    problems = []
    if args.number_of_nodes < 0:
        problems.append("numberOfNodes: must be greater than or equal to 0")
    if args.node_metric_expiration_seconds <= 0:
        problems.append("nodeMetricExpirationSeconds: should be a positive value")
    if args.evictable_namespaces_include and args.evictable_namespaces_exclude:
        problems.append("evictableNamespaces: only one of Include/Exclude namespaces can be set")
    # the default pool carries the top-level fields, so its problems name them
    user_pools = 0
    for pool in args.node_pools:
        if pool.name == DEFAULT_POOL_NAME:
            problems += _pool_problems(pool, "")
        else:
            problems += _pool_problems(pool, f"nodePools[{user_pools}].")
            user_pools += 1
    return problems
