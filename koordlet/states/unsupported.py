"""The NodeSLO fields in force that koordlet accepts but does not act on: said once per change.

A NodeSLO written for Koordinator must apply here unchanged, so fields koordlet does not
implement are accepted (``koordapi.unsupported`` lists them, with why). Each time the NodeSLO
spec in force changes, every such field that is set is logged as a warning with its path and
reason, and served on /metrics (registered on koordlet's registry, built per scrape):

* ``koordlet_node_slo_unsupported_field{node, field}`` 1 for each such field now;
* ``koordlet_node_slo_unsupported_fields_total{node}`` how many were reported so far (each
  field once per change of the spec).

``koordctl doctor`` reads the first. A change of the Node alone (allocatable, annotations)
reports nothing again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from koordapi.nodeslo import NodeSLOSpec
from koordapi.unsupported import UnsupportedField, unsupported_fields

log = logging.getLogger(__name__)

FIELD_METRIC = "koordlet_node_slo_unsupported_field"
TOTAL_METRIC = "koordlet_node_slo_unsupported_fields"  # a counter: exposed with _total


class UnsupportedFieldsReport:
    """Call ``note`` with the spec in force whenever it may have changed; register the object
    on a Prometheus registry for its metrics."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.fields: tuple[UnsupportedField, ...] = ()
        self.reported = 0
        self._raw: Mapping[str, Any] | None = None

    def note(self, spec: NodeSLOSpec) -> tuple[UnsupportedField, ...] | None:
        """Log and count the spec's unsupported fields if the spec changed since the last call;
        returns them then (None when the spec is the same as last time)."""
        if self._raw is not None and (spec.raw is self._raw or spec.raw == self._raw):
            return None
        self._raw = spec.raw
        found = tuple(unsupported_fields(spec.raw))
        for field in found:
            log.warning(
                "NodeSLO %s: %s is set but not used here: %s (the rest of the NodeSLO applies)",
                self.node,
                field.path,
                field.why,
            )
        self.fields = found
        self.reported += len(found)
        return found

    def describe(self) -> list[Metric]:
        return []  # built per scrape

    def collect(self) -> Iterator[Metric]:
        fields, reported = self.fields, self.reported
        now = GaugeMetricFamily(
            FIELD_METRIC,
            "1 for each field of the NodeSLO in force that is set but not used here (koordlet's "
            "log says why)",
            labels=["node", "field"],
        )
        for field in fields:
            now.add_metric([self.node, field.path], 1.0)
        total = CounterMetricFamily(
            TOTAL_METRIC,
            "NodeSLO fields reported as set but not used here, each once per change of the spec",
            labels=["node"],
        )
        total.add_metric([self.node], float(reported))
        yield from (now, total)
