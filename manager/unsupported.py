"""What an ``slo-controller-config`` ConfigMap carries that is accepted but not acted on.

A ConfigMap written for Koordinator must apply here unchanged, so the admission webhook lets
these through (as admission warnings) and the manager renders what it can; the rest is named:

* ``cpu-normalization-config`` and ``resource-amplification-config`` with anything enabled
  are refused as a whole: this manager has neither NodeResource plugin (``REFUSED_KEYS``
  says why). Their content is left out of everything it computes (it never reads them).
* NodeSLO fields koordlet does not use (``koordapi.unsupported``), at their ConfigMap paths
  (``resource-qos-config: clusterStrategy.beClass.blkioQOS.enable``), and
  ``host-application-config``'s applications.
* ``colocation-config``'s ``metricMemoryCollectPolicy`` other than usageWithoutPageCache and
  its ``extensions``, in the cluster strategy or a ``nodeConfigs`` entry.
* unknown fields of the keys above (Go's decoder ignores them; usually a misspelling) and
  keys that nothing reads.

``find_unsupported`` is pure. ``SLOConfigAudit`` logs the findings once per change of the
ConfigMap (a refused key at error level, the rest as warnings) and counts them in
``koord_manager_slo_config_unsupported_reports_total{key}`` (each finding once per change)
and ``koord_manager_slo_config_unsupported_fields{key}`` (the findings of the ConfigMap now).
A key whose JSON does not parse is not looked into: the NodeSLO controller reports it.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordapi.unsupported import HOST_APPLICATIONS, unsupported_in
from manager.colocation import parse_colocation_config
from manager.errors import ConfigError
from manager.metrics import ManagerMetrics
from manager.sloconfig import (
    COLOCATION_CONFIG,
    CPU_NORMALIZATION_CONFIG,
    HOST_APPLICATION_CONFIG,
    RESOURCE_AMPLIFICATION_CONFIG,
    SPEC_FIELDS,
    parse_slo_config,
)

log = logging.getLogger(__name__)

REFUSED_KEYS: Mapping[str, str] = {
    CPU_NORMALIZATION_CONFIG: (
        "not supported: no cpu-normalization-ratio is derived from CPU models here (one "
        "annotated on the Node by hand is honoured)"
    ),
    RESOURCE_AMPLIFICATION_CONFIG: (
        "not supported: no resource-amplification-ratio is written and no Node allocatable "
        "amplified here"
    ),
}
KNOWN_KEYS = frozenset({COLOCATION_CONFIG, *SPEC_FIELDS, *REFUSED_KEYS})
MEMORY_COLLECT_POLICY = "usageWithoutPageCache"
MEMORY_COLLECT = (
    "koordlet reports node and pod memory without page cache only (usageWithoutPageCache)"
)
COLOCATION_EXTENSION = "no plugin here reads colocation extensions"
UNKNOWN_FIELD = "unknown field: ignored (misspelt?)"
UNKNOWN_KEY = "not a key koord-manager reads: ignored"


@dataclass(frozen=True)
class Finding:
    """One thing the ConfigMap sets that changes nothing: ``path`` inside ``key``'s JSON ("" for
    the key as a whole), why, and whether the whole key is refused."""

    key: str
    path: str
    why: str
    refused: bool = False

    def __str__(self) -> str:
        return f"{self.key}: {self.path}: {self.why}" if self.path else f"{self.key}: {self.why}"


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return None


def _entries(doc: Mapping[str, Any], name: str) -> list[tuple[str, Mapping[str, Any]]]:
    entries = doc.get(name)
    if not isinstance(entries, list):
        return []
    return [(f"{name}[{i}]", e) for i, e in enumerate(entries) if isinstance(e, Mapping)]


def _refused(key: str, text: str) -> Finding | None:
    """The key refused, naming what is enabled in it; None when nothing is."""
    doc = _json(text)
    if not isinstance(doc, Mapping):
        why = f"{REFUSED_KEYS[key]} (and the value is not a JSON object)"
        return Finding(key, "", why, refused=True)
    enabled = ["enable"] if doc.get("enable") is True else []
    enabled += [f"{where}.enable" for where, e in _entries(doc, "nodeConfigs") if e.get("enable")]
    if not enabled:
        return None
    verb = "is" if len(enabled) == 1 else "are"
    why = f"{REFUSED_KEYS[key]}; ignored although {', '.join(enabled)} {verb} true"
    return Finding(key, "", why, refused=True)


def _colocation(text: str) -> list[Finding]:
    try:
        config = parse_colocation_config(text)
    except ConfigError:
        return []  # the manager keeps the last good one and says why
    doc = _json(text)
    if not isinstance(doc, Mapping):
        return []  # an empty value: the defaults
    found = []
    for where, strategy in [("", doc), *_entries(doc, "nodeConfigs")]:
        prefix = f"{where}." if where else ""
        policy = strategy.get("metricMemoryCollectPolicy")
        if policy is not None and policy != MEMORY_COLLECT_POLICY:
            found.append(
                Finding(COLOCATION_CONFIG, f"{prefix}metricMemoryCollectPolicy", MEMORY_COLLECT)
            )
        extensions = strategy.get("extensions")
        if isinstance(extensions, Mapping):
            found += [
                Finding(COLOCATION_CONFIG, f"{prefix}extensions.{name}", COLOCATION_EXTENSION)
                for name, value in extensions.items()
                if value is not None
            ]
    found += [Finding(COLOCATION_CONFIG, path, UNKNOWN_FIELD) for path in config.ignored_fields]
    return found


def _strategy(key: str, doc: Mapping[str, Any]) -> list[Finding]:
    """NodeSLO fields koordlet does not use, in the cluster strategy and each node entry."""
    found = []
    if key == HOST_APPLICATION_CONFIG:
        for where, entry in [("", doc), *_entries(doc, "nodeConfigs")]:
            if entry.get("applications"):
                path = f"{where}.applications" if where else "applications"
                found.append(Finding(key, path, HOST_APPLICATIONS))
        return found
    spec_field = SPEC_FIELDS[key]
    bodies = [("clusterStrategy", doc.get("clusterStrategy")), *_entries(doc, "nodeStrategies")]
    for where, body in bodies:
        found += [Finding(key, f.path, f.why) for f in unsupported_in(spec_field, body, where)]
    return found


def find_unsupported(data: Mapping[str, str]) -> list[Finding]:
    """Everything in the ConfigMap's ``data`` that is set and accepted but changes nothing."""
    found: list[Finding] = []
    for key in sorted(data):
        if key not in KNOWN_KEYS:
            found.append(Finding(key, "", UNKNOWN_KEY))
        elif key in REFUSED_KEYS:
            refused = _refused(key, data[key])
            found += [refused] if refused is not None else []
        elif key == COLOCATION_CONFIG:
            found += _colocation(data[key])
    config = parse_slo_config(data)
    for key, strategy in config.strategies.items():
        doc = _json(data.get(key))
        if isinstance(doc, Mapping):
            found += _strategy(key, doc)
        found += [Finding(key, path, UNKNOWN_FIELD) for path in strategy.unknown_fields]
    return found


class SLOConfigAudit:
    """Says what the ConfigMap carries that changes nothing, once per change of its data."""

    def __init__(self, metrics: ManagerMetrics, name: str = "slo-controller-config") -> None:
        self.metrics = metrics
        self.name = name
        self.findings: list[Finding] = []
        self._last: tuple[tuple[str, str], ...] | None = None
        self._keys: set[str] = set()  # keys with a gauge series

    def note(self, data: Mapping[str, str] | None) -> list[Finding] | None:
        """Look at the ConfigMap's data (None: deleted); returns the findings when the data
        changed since the last call, else None."""
        current = tuple(sorted((data or {}).items()))
        if current == self._last:
            return None
        self._last = current
        self.findings = find_unsupported(data or {})
        for finding in self.findings:
            if finding.refused:
                log.error("%s %s: refused, %s", self.name, finding.key, finding.why)
            else:
                log.warning(
                    "%s %s: %s is set but not used here: %s",
                    self.name,
                    finding.key,
                    finding.path,
                    finding.why,
                )
            self.metrics.slo_config_unsupported_reports.labels(finding.key).inc()
        counts = Counter(f.key for f in self.findings)
        for key in sorted(self._keys | set(counts)):
            self.metrics.slo_config_unsupported_fields.labels(key).set(counts.get(key, 0))
        self._keys |= set(counts)
        return self.findings
