"""The colocation strategy: the ``colocation-config`` key of the slo-controller ConfigMap, and
the strategy one node ends up with.

The JSON keys are Koordinator's (``cpuReclaimThresholdPercent``, ``midCPUThresholdPercent``,
...), so an existing ConfigMap keeps working; attributes are their snake_case forms. The
defaults are Koordinator's code defaults (``DefaultColocationStrategy``), not the Helm chart's:
``enable`` is False until the ConfigMap says otherwise.

A node's strategy is layered, each layer overlaying only the fields it sets: the cluster
strategy, then the first ``nodeConfigs`` entry whose ``nodeSelector`` matches the node's
labels, then the JSON in the node annotation ``node.koordinator.sh/colocation-strategy``, then
four ratio labels (``node.koordinator.sh/cpu-reclaim-ratio: "0.5"`` means 50 %).

Decisions that differ from Koordinator, all on the side of refusing rather than guessing:

* Values are validated field by field when the ConfigMap is parsed (Koordinator validates the
  merged strategy and silently falls back); any error raises ConfigError naming the path, and
  the caller keeps its previous configuration.
* ``cpuCalculatePolicy: request`` is refused: Koordinator accepts it and quietly computes by
  usage. ``midReclaimMode`` accepts only ``static`` (unset means dynamic).
* A ``nodeConfigs`` entry without ``nodeSelector`` is refused (Koordinator lets it match no
  node, which is never what its author meant).
* An annotation strategy with an invalid value is ignored as a whole (Koordinator applies
  whatever decoded, unchecked); a ratio label outside the field's range is ignored.
* Ratio labels are converted exactly ("0.29" is 29 %; Koordinator's float arithmetic makes it 28).
* Unknown keys are ignored, as Go's JSON decoder does, but listed in ``ignored_fields`` so the
  controller can warn about a misspelt field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from manager.errors import ConfigError
from manager.selectors import matches, validate_selector

COLOCATION_CONFIG_KEY = "colocation-config"
ANNOTATION_NODE_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"

POLICY_USAGE = "usage"
POLICY_REQUEST = "request"
POLICY_MAX_USAGE_REQUEST = "maxUsageRequest"
CPU_CALCULATE_POLICIES = (POLICY_USAGE, POLICY_MAX_USAGE_REQUEST)
MEMORY_CALCULATE_POLICIES = (POLICY_USAGE, POLICY_REQUEST, POLICY_MAX_USAGE_REQUEST)
MEMORY_COLLECT_POLICIES = ("usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache")
MID_RECLAIM_MODE_STATIC = "static"
_GO_DURATION = re.compile(r"^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+\Z")


@dataclass(frozen=True)
class ColocationStrategy:
    """One resolved strategy: every field has a value (Koordinator's code defaults)."""

    enable: bool = False
    metric_aggregate_duration_seconds: int = 300
    metric_report_interval_seconds: int = 60
    metric_aggregate_policy: tuple[str, ...] = ("5m0s", "10m0s", "30m0s")  # its "durations"
    metric_memory_collect_policy: str = "usageWithoutPageCache"
    cpu_reclaim_threshold_percent: int = 60
    cpu_calculate_policy: str = POLICY_USAGE
    memory_reclaim_threshold_percent: int = 65
    memory_calculate_policy: str = POLICY_USAGE
    degrade_time_minutes: int = 15
    update_time_threshold_seconds: int = 300
    resource_diff_threshold: float = 0.1
    mid_reclaim_mode: str | None = None  # None: dynamic
    mid_cpu_threshold_percent: int = 100
    mid_memory_threshold_percent: int = 100
    mid_unallocated_percent: int = 0
    mid_static_cpu_reserved_percent: int = 0
    mid_static_memory_reserved_percent: int = 0
    batch_cpu_threshold_percent: int | None = None  # None: no cap
    batch_memory_threshold_percent: int | None = None
    # ours: publish each batch resource's lowest value of this many seconds (noderesource/
    # smoothing.py); 0: off
    batch_smoothing_window_seconds: int = 0
    extensions: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def merged(self, overrides: Mapping[str, Any]) -> ColocationStrategy:
        """This strategy with ``overrides`` (attribute → value, as parsed) laid over it;
        ``extensions`` merge key by key, as Koordinator's JSON overlay does."""
        if not overrides:
            return self
        changes = dict(overrides)
        if "extensions" in changes:
            changes["extensions"] = {**self.extensions, **changes["extensions"]}
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The strategy with Koordinator's JSON keys; unset optional fields are left out."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if f.name == "metric_aggregate_policy":
                value = {"durations": list(value)}
            elif f.name == "extensions":
                if not value:
                    continue
                value = dict(value)
            out[_JSON_NAMES[f.name]] = value
        return out


@dataclass(frozen=True)
class NodeColocationConfig:
    """One ``nodeConfigs`` entry: the fields it sets, for the nodes its selector matches."""

    name: str
    node_selector: Mapping[str, Any] = field(hash=False)
    overrides: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class ColocationConfig:
    """The parsed ConfigMap key: the cluster strategy (defaults filled in) and the node
    configs in order; strategy_for_node applies them."""

    strategy: ColocationStrategy = field(default_factory=ColocationStrategy)
    node_configs: tuple[NodeColocationConfig, ...] = ()
    ignored_fields: tuple[str, ...] = ()  # unknown keys, as paths, for a warning


# -- field table -----------------------------------------------------------------------------


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: must be true or false, got {value!r}")
    return value


def _int(lo: int, hi: int | None = None) -> Callable[[str, Any], int]:
    def check(where: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer, got {value!r}")
        if value < lo or (hi is not None and value > hi):
            bounds = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise ConfigError(f"{where}: {value} is outside {bounds}")
        return value

    return check


def _diff_ratio(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{where}: must be a number, got {value!r}")
    if not 0 < value <= 1:
        raise ConfigError(f"{where}: {value} is outside (0, 1]")
    return float(value)


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def check(where: str, value: Any) -> str:
        if value not in options:
            raise ConfigError(f"{where}: {value!r} is not one of {', '.join(options)}")
        return str(value)

    return check


def _durations(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be an object with a durations list")
    durations = value.get("durations") or []
    if not isinstance(durations, list):
        raise ConfigError(f"{where}.durations: must be a list")
    for i, text in enumerate(durations):
        if not isinstance(text, str) or not _GO_DURATION.match(text):
            raise ConfigError(f"{where}.durations[{i}]: {text!r} is not a duration like 5m0s")
    return tuple(durations)


def _extensions(where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be an object")
    return dict(value)


_FIELDS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "enable": ("enable", _bool),
    "metricAggregateDurationSeconds": ("metric_aggregate_duration_seconds", _int(1)),
    "metricReportIntervalSeconds": ("metric_report_interval_seconds", _int(1)),
    "metricAggregatePolicy": ("metric_aggregate_policy", _durations),
    "metricMemoryCollectPolicy": ("metric_memory_collect_policy", _choice(MEMORY_COLLECT_POLICIES)),
    "cpuReclaimThresholdPercent": ("cpu_reclaim_threshold_percent", _int(0)),
    "cpuCalculatePolicy": ("cpu_calculate_policy", _choice(CPU_CALCULATE_POLICIES)),
    "memoryReclaimThresholdPercent": ("memory_reclaim_threshold_percent", _int(0)),
    "memoryCalculatePolicy": ("memory_calculate_policy", _choice(MEMORY_CALCULATE_POLICIES)),
    "degradeTimeMinutes": ("degrade_time_minutes", _int(1)),
    "updateTimeThresholdSeconds": ("update_time_threshold_seconds", _int(1)),
    "resourceDiffThreshold": ("resource_diff_threshold", _diff_ratio),
    "midReclaimMode": ("mid_reclaim_mode", _choice((MID_RECLAIM_MODE_STATIC,))),
    "midCPUThresholdPercent": ("mid_cpu_threshold_percent", _int(0, 100)),
    "midMemoryThresholdPercent": ("mid_memory_threshold_percent", _int(0, 100)),
    "midUnallocatedPercent": ("mid_unallocated_percent", _int(0, 100)),
    "midStaticCPUReservedPercent": ("mid_static_cpu_reserved_percent", _int(0, 100)),
    "midStaticMemoryReservedPercent": ("mid_static_memory_reserved_percent", _int(0, 100)),
    "batchCPUThresholdPercent": ("batch_cpu_threshold_percent", _int(0)),
    "batchMemoryThresholdPercent": ("batch_memory_threshold_percent", _int(0)),
    "batchResourceSmoothingWindowSeconds": ("batch_smoothing_window_seconds", _int(0)),
    "extensions": ("extensions", _extensions),
}
_JSON_NAMES = {attr: name for name, (attr, _) in _FIELDS.items()}
_CHECKS = {attr: check for attr, check in _FIELDS.values()}

# ratio label → the percent attribute it sets
_RATIO_LABELS = (
    (LABEL_CPU_RECLAIM_RATIO, "cpu_reclaim_threshold_percent"),
    (LABEL_MEMORY_RECLAIM_RATIO, "memory_reclaim_threshold_percent"),
    (LABEL_MID_STATIC_CPU_RESERVED_RATIO, "mid_static_cpu_reserved_percent"),
    (LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "mid_static_memory_reserved_percent"),
)


def parse_strategy_fields(
    data: Mapping[str, Any],
    where: str = "",
    ignored: list[str] | None = None,
    skip: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The fields ``data`` sets, as attribute → checked value. A JSON null counts as unset (Go
    decodes it to a nil pointer). Keys in ``skip`` belong to the caller; unknown keys are
    appended to ``ignored``. Raises ConfigError naming ``where.<key>``."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else key
        if key in skip:
            continue
        if key not in _FIELDS:
            if ignored is not None:
                ignored.append(path)
            continue
        if value is None:
            continue
        attr, check = _FIELDS[key]
        out[attr] = check(path, value)
    return out


def parse_colocation_config(text: str) -> ColocationConfig:
    """The ``colocation-config`` value; an empty value means all defaults (as Koordinator).
    Raises ConfigError with the path of the first invalid value."""
    if not text.strip():
        return ColocationConfig()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ConfigError(f"{COLOCATION_CONFIG_KEY}: not valid JSON: {err}") from None
    if not isinstance(data, Mapping):
        raise ConfigError(f"{COLOCATION_CONFIG_KEY}: must be a JSON object")
    ignored: list[str] = []
    cluster = ColocationStrategy().merged(
        parse_strategy_fields(data, ignored=ignored, skip=("nodeConfigs",))
    )
    entries = data.get("nodeConfigs")
    entries = [] if entries is None else entries
    if not isinstance(entries, list):
        raise ConfigError("nodeConfigs: must be a list")
    node_configs = []
    for i, entry in enumerate(entries):
        where = f"nodeConfigs[{i}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}: must be an object")
        name = entry.get("name") or ""
        if not isinstance(name, str):
            raise ConfigError(f"{where}.name: must be a string")
        selector = entry.get("nodeSelector")
        if selector is None:
            raise ConfigError(f"{where}.nodeSelector: required (use {{}} to match every node)")
        validate_selector(selector, f"{where}.nodeSelector")
        overrides = parse_strategy_fields(
            entry, where, ignored=ignored, skip=("name", "nodeSelector")
        )
        node_configs.append(NodeColocationConfig(name, dict(selector), overrides))
    return ColocationConfig(cluster, tuple(node_configs), tuple(ignored))


def _ratio_percent(text: str) -> int | None:
    """A ratio label ("0.6") as a whole percent (60), truncated; None when not a number >= 0."""
    try:
        ratio = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not ratio.is_finite() or ratio < 0:
        return None
    return int(ratio * 100)


def strategy_for_node(
    config: ColocationConfig, node: Mapping[str, Any], notes: list[str] | None = None
) -> ColocationStrategy:
    """The strategy for ``node`` (a Node object dict). Node metadata that cannot be used is
    skipped, and why is appended to ``notes`` when given."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    strategy = config.strategy
    for node_config in config.node_configs:
        if matches(node_config.node_selector, labels):
            strategy = strategy.merged(node_config.overrides)
            break

    text = annotations.get(ANNOTATION_NODE_COLOCATION_STRATEGY)
    if text:
        key = ANNOTATION_NODE_COLOCATION_STRATEGY
        try:
            data = json.loads(text)
            if not isinstance(data, Mapping):
                raise ConfigError(f"{key}: must be a JSON object")
            strategy = strategy.merged(parse_strategy_fields(data, key))
        except (ValueError, RecursionError) as err:  # ConfigError is a ValueError
            if notes is not None:
                notes.append(f"ignored annotation {key}: {err}")

    for label, attr in _RATIO_LABELS:
        text = labels.get(label)
        if text is None:
            continue
        percent = _ratio_percent(text)
        try:
            if percent is None:
                raise ConfigError(f"{text!r} is not a ratio >= 0")
            strategy = replace(strategy, **{attr: _CHECKS[attr](_JSON_NAMES[attr], percent)})
        except ConfigError as err:
            if notes is not None:
                notes.append(f"ignored label {label}: {err}")
    return strategy
