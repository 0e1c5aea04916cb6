"""The configurations ``koordctl whatif`` compares: a NodeSLO spec and a colocation strategy.

A file may be any of what Koordinator users write:

* the ``slo-controller-config`` ConfigMap (its ``data`` keys ``resource-threshold-config``,
  ``resource-qos-config``, ``colocation-config``, ...): rendered for the node by koord-manager's
  own code (``manager.sloconfig.render_node_slo``, ``manager.colocation.strategy_for_node``),
  after the admission webhook's checks (``validate_slo_configmap``);
* a NodeSLO object, or just its ``spec``;
* the ``colocation-config`` JSON (or YAML) alone.

What a file does not set comes from the other side of the comparison: a proposal with only a
colocation strategy keeps the baseline's NodeSLO, and the baseline without a file is
Koordinator's defaults (colocation disabled, resourceUsedThresholdWithBE disabled).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from koordapi.errors import NodeSLOError
from koordapi.nodeslo import NodeSLOSpec, default_spec
from manager.colocation import (
    COLOCATION_CONFIG_KEY,
    ColocationStrategy,
    parse_colocation_config,
    strategy_for_node,
)
from manager.errors import ConfigError
from manager.sloconfig import SPEC_FIELDS, render_node_slo, validate_slo_configmap

DEFAULTS = "Koordinator's defaults"


class ConfigFileError(Exception):
    """A configuration file that cannot be used (one line, naming the file)."""


@dataclass(frozen=True)
class Scenario:
    """One side of the comparison."""

    name: str  # "baseline" or "proposed"
    source: str  # the files it came from, or DEFAULTS
    strategy: ColocationStrategy
    slo: NodeSLOSpec


@dataclass(frozen=True)
class _Parts:
    slo: NodeSLOSpec | None
    strategy: ColocationStrategy | None


def baseline_defaults() -> Scenario:
    return Scenario("baseline", DEFAULTS, ColocationStrategy(), NodeSLOSpec.parse({}))


def _node(labels: Mapping[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels)}}


def _from_configmap(data: Mapping[str, Any], labels: Mapping[str, str]) -> _Parts:
    if not all(isinstance(v, str) for v in data.values()):
        raise ConfigError("data: every value must be a string (the JSON of one key)")
    problems = validate_slo_configmap(data)
    if problems:
        raise ConfigError(problems[0])
    slo = None
    if any(key in data for key in SPEC_FIELDS):
        slo = NodeSLOSpec.parse(render_node_slo(data, _node(labels)).spec)
    strategy = None
    if COLOCATION_CONFIG_KEY in data:
        config = parse_colocation_config(data[COLOCATION_CONFIG_KEY])
        strategy = strategy_for_node(config, _node(labels))
    if slo is None and strategy is None:
        keys = ", ".join([*SPEC_FIELDS, COLOCATION_CONFIG_KEY])
        raise ConfigError(f"data has none of the keys {keys}")
    return _Parts(slo, strategy)


def _parse(doc: Any, labels: Mapping[str, str]) -> _Parts:
    if not isinstance(doc, Mapping):
        raise ConfigError("not a YAML or JSON object")
    if doc.get("kind") == "ConfigMap" or isinstance(doc.get("data"), Mapping):
        return _from_configmap(doc.get("data") or {}, labels)
    if doc.get("kind") == "NodeSLO" or isinstance(doc.get("spec"), Mapping):
        return _Parts(NodeSLOSpec.parse(doc.get("spec") or {}), None)
    spec_fields = set(default_spec()) | set(SPEC_FIELDS.values())
    if any(key in spec_fields for key in doc):
        return _Parts(NodeSLOSpec.parse(doc), None)
    config = parse_colocation_config(json.dumps(doc))
    if config.ignored_fields and len(config.ignored_fields) == len(doc):
        raise ConfigError(
            "neither a ConfigMap, a NodeSLO nor a colocation-config "
            f"(unknown keys {', '.join(config.ignored_fields)})"
        )
    return _Parts(None, strategy_for_node(config, _node(labels)))


def read_parts(path: Path, labels: Mapping[str, str]) -> _Parts:
    """The NodeSLO spec and/or colocation strategy ``path`` sets for a node with ``labels``."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigFileError(f"{path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{path}: not YAML or JSON: {' '.join(str(err).split())}") from None
    try:
        return _parse(doc, labels)
    except (ConfigError, NodeSLOError) as err:
        raise ConfigFileError(f"{path}: {err}") from None


def scenarios(
    baseline: Path | None,
    nodeslo: Path | None,
    colocation: Path | None,
    labels: Mapping[str, str] | None = None,
) -> tuple[Scenario, Scenario]:
    """(baseline, proposed): the proposal is the baseline with what ``nodeslo`` and
    ``colocation`` set laid over it; at least one of them must be given."""
    labels = labels or {}
    if nodeslo is None and colocation is None:
        raise ConfigFileError("nothing to compare: give --nodeslo FILE and/or --colocation FILE")
    base = baseline_defaults()
    if baseline is not None:
        parts = read_parts(baseline, labels)
        base = Scenario(
            "baseline",
            str(baseline),
            parts.strategy or base.strategy,
            parts.slo or base.slo,
        )
    strategy, slo, sources = base.strategy, base.slo, []
    for path in (nodeslo, colocation):
        if path is None:
            continue
        parts = read_parts(path, labels)
        slo = parts.slo or slo
        strategy = parts.strategy or strategy
        sources.append(str(path))
    return base, Scenario("proposed", " + ".join(sources), strategy, slo)
