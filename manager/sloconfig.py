"""The ``slo-controller-config`` ConfigMap turned into each node's NodeSLO spec (pure, no I/O).

Koordinator's pkg/slo-controller/nodeslo, on plain Kubernetes JSON dicts. The NodeSLO
controller calls ``render_node_slo`` per node; the ConfigMap webhook calls
``validate_slo_configmap``.

Each strategy key holds ``{clusterStrategy, nodeStrategies[]}``. ``clusterStrategy`` is
overlaid on the code default, each ``nodeStrategies`` entry (``name``, ``nodeSelector`` and
the strategy fields inline) on the merged cluster strategy, so every entry is complete. A node
gets the first entry whose selector matches its labels, else the cluster strategy.

Decisions (where Koordinator leaves room or Python needs a rule):

* ``resourceQOSStrategy`` defaults to ``{}`` and a configured strategy is written as sparse as
  the user wrote it, as Koordinator's manager does: koordlet (ours and upstream) deep-merges
  the NodeSLO over its built-in defaults, so the effective values are the same, NodeSLOs match
  what Koordinator writes, and a koordlet with newer defaults needs no NodeSLO rewrite.
* Values are validated with ``koordapi.nodeslo``'s schema (koordlet would reject a NodeSLO
  that fails it), plus Koordinator's webhook bounds that schema leaves out. A key whose JSON
  or values are invalid keeps its previous value and yields a warning; other keys render.
* Unknown fields are not errors (Go's unmarshal ignores them; a newer Koordinator may know
  them). Like ``koordapi.nodeslo``, they are kept and reported (``SLOConfig.unknown_fields``);
  the NodeSLO CRD preserves unknown fields inside each strategy.
* A ``nodeStrategies`` entry without ``nodeSelector`` matches no node and ``{}`` matches every
  node (Go's ``LabelSelectorAsSelector``); the webhook rejects both.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError, NodeSLOError
from koordapi.keys import ANNOTATION_NETWORK_BANDWIDTH
from koordapi.nodeslo import CLASS_KEYS, SCHEMA, deep_merge, default_spec, validate
from koordapi.qos import PRIORITY_CLASSES, QoSClass
from koordapi.quantity import parse_quantity
from manager.errors import ConfigError
from manager.selectors import matches, validate_selector

COLOCATION_CONFIG = "colocation-config"
RESOURCE_THRESHOLD_CONFIG = "resource-threshold-config"
RESOURCE_QOS_CONFIG = "resource-qos-config"
CPU_BURST_CONFIG = "cpu-burst-config"
SYSTEM_CONFIG = "system-config"
HOST_APPLICATION_CONFIG = "host-application-config"
CPU_NORMALIZATION_CONFIG = "cpu-normalization-config"
RESOURCE_AMPLIFICATION_CONFIG = "resource-amplification-config"

# The keys that render a NodeSLO spec field, and that field.
SPEC_FIELDS: dict[str, str] = {
    RESOURCE_THRESHOLD_CONFIG: "resourceUsedThresholdWithBE",
    RESOURCE_QOS_CONFIG: "resourceQOSStrategy",
    CPU_BURST_CONFIG: "cpuBurstStrategy",
    SYSTEM_CONFIG: "systemStrategy",
    HOST_APPLICATION_CONFIG: "hostApplications",
}

# Koordinator's validate tags that koordapi's schema leaves looser: (min, max), None = open.
_EXTRA_BOUNDS: dict[str, dict[str, tuple[int | None, int | None]]] = {
    "resourceUsedThresholdWithBE": {"cpuEvictTimeWindowSeconds": (1, None)},
    "cpuBurstStrategy": {"cpuBurstPercent": (1, 10000)},
    "systemStrategy": {"minFreeKbytesFactor": (1, None), "watermarkScaleFactor": (1, 400)},
}
# (lower, upper) pairs that must be strictly ordered when both are set (gtfield/ltfield tags).
_ORDERED_THRESHOLDS = (
    ("memoryEvictLowerPercent", "memoryEvictThresholdPercent"),
    ("memoryAllocatableEvictLowerPercent", "memoryAllocatableEvictThresholdPercent"),
    ("cpuEvictBESatisfactionLowerPercent", "cpuEvictBESatisfactionUpperPercent"),
    ("cpuEvictLowerPercent", "cpuEvictThresholdPercent"),
    ("cpuAllocatableEvictLowerPercent", "cpuAllocatableEvictThresholdPercent"),
)
_CGROUP_BASES = ("", "CgroupRoot", "Kubepods", "KubepodsBurstable", "KubepodsBesteffort")
_PROFILE_FIELDS = ("name", "nodeSelector")


def default_value(key: str) -> Any:
    """What a NodeSLO gets for ``key`` when the ConfigMap lacks it (Koordinator's defaults)."""
    if key == RESOURCE_QOS_CONFIG:
        return {}  # koordlet merges over its own defaults (see the module docstring)
    if key == HOST_APPLICATION_CONFIG:
        return []
    return default_spec()[SPEC_FIELDS[key]]


@dataclass(frozen=True)
class NodeStrategy:
    """One ``nodeStrategies`` (or host-application ``nodeConfigs``) entry, merged."""

    path: str  # "nodeStrategies[0]": where it sits in the key's JSON, for messages
    name: str
    selector: Mapping[str, Any] | None
    value: Any  # the complete strategy object, or the applications list


@dataclass(frozen=True)
class StrategyConfig:
    """One parsed key; read-only (``for_node`` hands out copies)."""

    key: str
    cluster: Any
    nodes: tuple[NodeStrategy, ...] = ()
    unknown_fields: tuple[str, ...] = ()

    @property
    def spec_field(self) -> str:
        return SPEC_FIELDS[self.key]

    def for_node(self, labels: Mapping[str, str] | None) -> Any:
        """The first node entry whose selector matches ``labels``, else the cluster value."""
        for entry in self.nodes:
            if entry.selector is not None and matches(entry.selector, labels):
                return copy.deepcopy(entry.value)
        return copy.deepcopy(self.cluster)


def parse_strategy_key(key: str, text: str) -> StrategyConfig:
    """Parse one NodeSLO key of the ConfigMap; ConfigError names the key and the field path."""
    if key not in SPEC_FIELDS:
        raise ConfigError(f"{key}: not a NodeSLO key (one of {', '.join(SPEC_FIELDS)})")
    try:
        doc = _load(text)
        if key == HOST_APPLICATION_CONFIG:
            return _parse_host_applications(doc)
        return _parse_strategies(key, doc)
    except (ConfigError, NodeSLOError) as err:
        raise ConfigError(f"{key}: {err}") from None


def _reject_constant(name: str) -> Any:
    raise ConfigError(f"invalid JSON: {name} is not a number")


def _load(text: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise ConfigError(f"must be a JSON string, got {type(text).__name__}")
    if not text.strip():
        raise ConfigError("is empty; remove the key to use the defaults")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)  # Go rejects NaN/Infinity
    except json.JSONDecodeError as err:
        raise ConfigError(f"invalid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"must be a JSON object, got {type(doc).__name__}")
    return doc


def _entries(doc: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    entries = doc.get(name)
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError(f"{name}: must be a list, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{name}[{i}]: must be an object, got {type(entry).__name__}")
    return entries


def _profile(entry: Mapping[str, Any], where: str) -> tuple[str, Mapping[str, Any] | None]:
    name = entry.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}.name: must be a string, got {name!r}")
    selector = entry.get("nodeSelector")
    validate_selector(selector, f"{where}.nodeSelector")
    return name or "", selector


def _parse_strategies(key: str, doc: Mapping[str, Any]) -> StrategyConfig:
    spec_field = SPEC_FIELDS[key]
    unknown = [k for k in doc if k not in ("clusterStrategy", "nodeStrategies")]
    cluster, found = _strategy(
        spec_field, doc.get("clusterStrategy"), default_value(key), "clusterStrategy"
    )
    unknown += found
    nodes = []
    for i, entry in enumerate(_entries(doc, "nodeStrategies")):
        where = f"nodeStrategies[{i}]"
        name, selector = _profile(entry, where)
        body = {k: v for k, v in entry.items() if k not in _PROFILE_FIELDS}
        value, found = _strategy(spec_field, body, cluster, where)
        unknown += found
        nodes.append(NodeStrategy(where, name, selector, value))
    return StrategyConfig(key, cluster, tuple(nodes), tuple(unknown))


def _strategy(
    spec_field: str, raw: Any, base: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], list[str]]:
    """``raw`` validated and overlaid on ``base``; also the unknown field paths in it."""
    if raw is None:
        return copy.deepcopy(dict(base)), []
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be an object, got {type(raw).__name__}")
    unknown = validate(raw, SCHEMA[spec_field], where)
    merged = deep_merge(base, raw)
    _check_bounds(spec_field, merged, where)
    return merged, unknown


def _check_bounds(spec_field: str, strategy: Mapping[str, Any], where: str) -> None:
    """Koordinator's webhook rules beyond koordapi's schema, on the merged strategy."""
    for name, (lo, hi) in _EXTRA_BOUNDS.get(spec_field, {}).items():
        value = strategy.get(name)
        if value is not None and (
            (lo is not None and value < lo) or (hi is not None and value > hi)
        ):
            raise ConfigError(f"{where}.{name}: {value} is outside [{lo}, {hi}]")
    if spec_field == "resourceUsedThresholdWithBE":
        _check_ordered(strategy, _ORDERED_THRESHOLDS, where)
    elif spec_field == "resourceQOSStrategy":
        # The sparse strategy is merged over koordlet's defaults: those are what it enforces.
        effective = deep_merge(default_spec()[spec_field], strategy)
        for section in (*CLASS_KEYS.values(), "cgroupRoot"):
            resctrl = (effective.get(section) or {}).get("resctrlQOS") or {}
            pair = (("catRangeStartPercent", "catRangeEndPercent"),)
            _check_ordered(resctrl, pair, f"{where}.{section}.resctrlQOS")


def _check_ordered(
    section: Mapping[str, Any], pairs: tuple[tuple[str, str], ...], where: str
) -> None:
    for lower, upper in pairs:
        low, high = section.get(lower), section.get(upper)
        if low is not None and high is not None and low >= high:
            raise ConfigError(f"{where}.{lower}: {low} must be below {upper} ({high})")


# -- host-application-config: {applications[], nodeConfigs[{name, nodeSelector, applications}]}


def _string(path: str, value: Any) -> None:
    if not isinstance(value, str):
        raise NodeSLOError(path, f"must be a string, got {value!r}")


def _one_of(*choices: str) -> Any:
    def check(path: str, value: Any) -> None:
        if value not in choices:
            raise NodeSLOError(
                path, f"must be one of {', '.join(map(repr, choices))}, got {value!r}"
            )

    return check


_HOST_APP_SCHEMA: dict[str, Any] = {
    "name": _string,
    "priority": _one_of("", *(pc.name for pc in PRIORITY_CLASSES)),
    "qos": _one_of(*(q.value for q in QoSClass)),
    "cgroupPath": {
        "base": _one_of(*_CGROUP_BASES),
        "parentDir": _string,
        "relativePath": _string,
    },
    "strategy": {},  # HostApplicationStrategy has no fields yet
}


def _applications(raw: Any, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list, got {type(raw).__name__}")
    unknown: list[str] = []
    seen: dict[str, int] = {}
    for i, app in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(app, Mapping):
            raise ConfigError(f"{at}: must be an object, got {type(app).__name__}")
        unknown += validate(app, _HOST_APP_SCHEMA, at)
        name = app.get("name")
        if not name:
            raise ConfigError(f"{at}.name: required")
        if name in seen:
            raise ConfigError(f"{at}.name: {name!r} is already used by {where}[{seen[name]}]")
        seen[name] = i
    return copy.deepcopy(raw), unknown


def _parse_host_applications(doc: Mapping[str, Any]) -> StrategyConfig:
    # Unlike the strategies, a node entry's list replaces the cluster list (as Koordinator).
    unknown = [k for k in doc if k not in ("applications", "nodeConfigs")]
    cluster, found = _applications(doc.get("applications"), "applications")
    unknown += found
    nodes = []
    for i, entry in enumerate(_entries(doc, "nodeConfigs")):
        where = f"nodeConfigs[{i}]"
        name, selector = _profile(entry, where)
        unknown += [f"{where}.{k}" for k in entry if k not in (*_PROFILE_FIELDS, "applications")]
        apps, found = _applications(entry.get("applications"), f"{where}.applications")
        unknown += found
        nodes.append(NodeStrategy(where, name, selector, apps))
    return StrategyConfig(HOST_APPLICATION_CONFIG, cluster, tuple(nodes), tuple(unknown))


# -- the whole ConfigMap ----------------------------------------------------------------------


@dataclass(frozen=True)
class SLOConfig:
    """Every NodeSLO key of one ConfigMap: parsed, failed (with why) or absent (default)."""

    strategies: Mapping[str, StrategyConfig]
    errors: Mapping[str, str]

    @property
    def unknown_fields(self) -> list[str]:
        """``key: path`` of each field this version does not know (kept, not an error)."""
        return [f"{c.key}: {path}" for c in self.strategies.values() for path in c.unknown_fields]


def parse_slo_config(data: Mapping[str, str]) -> SLOConfig:
    """Parse the NodeSLO keys of ``data``; the last few results are cached (read-only)."""
    items = tuple((key, data.get(key)) for key in SPEC_FIELDS)
    if all(text is None or isinstance(text, str) for _, text in items):
        return _parse_cached(items)  # one ConfigMap change renders every node
    return _parse_items(items)


@functools.lru_cache(maxsize=4)
def _parse_cached(items: tuple[tuple[str, str | None], ...]) -> SLOConfig:
    return _parse_items(items)


def _parse_items(items: tuple[tuple[str, str | None], ...]) -> SLOConfig:
    strategies: dict[str, StrategyConfig] = {}
    errors: dict[str, str] = {}
    for key, text in items:
        if text is None:
            continue
        try:
            strategies[key] = parse_strategy_key(key, text)
        except ConfigError as err:
            errors[key] = str(err)
    return SLOConfig(strategies, errors)


@dataclass(frozen=True)
class RenderedNodeSLO:
    spec: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def render_node_slo(
    data: Mapping[str, str], node: Mapping[str, Any], previous: Mapping[str, Any] | None = None
) -> RenderedNodeSLO:
    """The NodeSLO spec for ``node``; ``previous`` is its current NodeSLO spec, if any.

    A key that fails to parse keeps ``previous``'s value of its field (the default if there is
    none) and adds a warning; the other keys render normally.
    """
    config = parse_slo_config(data)
    metadata = node.get("metadata") or {}
    spec: dict[str, Any] = {}
    warnings: list[str] = []
    if previous and previous.get("extensions") is not None:
        # Not rendered here (third-party extensions); carried so an update never drops it.
        spec["extensions"] = copy.deepcopy(previous["extensions"])
    for key, spec_field in SPEC_FIELDS.items():
        if key in config.errors:
            kept = previous.get(spec_field) if previous else None
            value = copy.deepcopy(kept) if kept is not None else default_value(key)
            what = "the previous" if kept is not None else "the default"
            warnings.append(f"{config.errors[key]}; keeping {what} {spec_field}")
        elif key in config.strategies:
            value = config.strategies[key].for_node(metadata.get("labels"))
        else:
            value = default_value(key)
        if spec_field != "hostApplications" or value:  # omitempty, as Koordinator writes it
            spec[spec_field] = value
    warning = _override_bandwidth(spec, metadata.get("annotations") or {})
    if warning:
        warnings.append(warning)
    return RenderedNodeSLO(spec, warnings)


def _override_bandwidth(spec: dict[str, Any], annotations: Mapping[str, str]) -> str | None:
    """The node's network-bandwidth annotation wins over any system-config value."""
    value = annotations.get(ANNOTATION_NETWORK_BANDWIDTH)
    if value is None:
        return None
    try:
        if parse_quantity(value) < 0:
            raise ModelError(f"must not be negative, got {value!r}")
    except ModelError as err:
        return f"annotation {ANNOTATION_NETWORK_BANDWIDTH}: {err}; ignored"
    system = spec.get("systemStrategy")
    spec["systemStrategy"] = {**(system if isinstance(system, Mapping) else {})}
    spec["systemStrategy"]["totalNetworkBandwidth"] = value
    return None


def validate_slo_configmap(data: Mapping[str, str]) -> list[str]:
    """Every problem of the ConfigMap for the admission webhook; ``[]`` means valid.

    Stricter than rendering: node entries need a non-empty ``nodeSelector`` and unique names
    (a name may be left out). Overlapping selectors are allowed (the first match wins).
    cpu-normalization-config and resource-amplification-config are not checked here: they are
    accepted and, when enabled, refused as a whole (``manager.unsupported``, which the webhook
    turns into admission warnings).
    """
    problems = []
    for key in SPEC_FIELDS:
        text = data.get(key)
        if text is None:
            continue
        try:
            config = parse_strategy_key(key, text)
        except ConfigError as err:
            problems.append(str(err))
            continue
        problems += _profile_problems(config)
    if data.get(COLOCATION_CONFIG) is not None:
        # Looked up at call time: manager.colocation (the NodeResource side) may import this
        # module, and importlib keeps mypy from needing it when this module is checked alone.
        colocation = importlib.import_module("manager.colocation")
        try:
            colocation.parse_colocation_config(data[COLOCATION_CONFIG])
        except ConfigError as err:
            message = str(err)
            if not message.startswith(COLOCATION_CONFIG):
                message = f"{COLOCATION_CONFIG}: {message}"
            problems.append(message)
    return problems


def _profile_problems(config: StrategyConfig) -> list[str]:
    problems = []
    names: dict[str, str] = {}
    for entry in config.nodes:
        if not entry.selector:
            problems.append(
                f"{config.key}: {entry.path}.nodeSelector: must not be empty "
                "(a missing selector matches no node, an empty one every node)"
            )
        if entry.name in names:
            problems.append(
                f"{config.key}: {entry.path}.name: {entry.name!r} is already used by "
                f"{names[entry.name]}"
            )
        elif entry.name:
            names[entry.name] = entry.path
    return problems
