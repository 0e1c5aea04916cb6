"""Counters exported as Koordinator's Go daemons export them.

Koordinator's Go client exports a counter under its plain name (``# TYPE name counter`` and
samples ``name{...}``), while prometheus_client always adds ``_total``. So that queries,
dashboards and alerts written for Koordinator's control plane work unchanged, its counters are
kept here by ``GoCounter`` and written out in the Go client's form, before the rest of a
registry (``exposition``).

Usage::

    evicted = GoCounter("descheduler_pods_evicted", "Number of evicted pods", ["result"])
    evicted.labels("success").inc()
    body = exposition(registry, [evicted])       # /metrics' body
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.utils import floatToGoString


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class _Child:
    def __init__(self, lock: threading.Lock) -> None:
        self._lock, self.value = lock, 0.0

    def inc(self, amount: float = 1.0) -> None:
        with self._lock:
            self.value += amount


class GoCounter:
    """A labelled counter exported as Koordinator's Go client exports one: ``# TYPE name
    counter`` and samples named ``name``, without the ``_total`` prometheus_client adds."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        self._children: dict[tuple[str, ...], _Child] = {}

    def labels(self, *values: str) -> _Child:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values, got {values}")
        key = tuple(str(v) for v in values)
        with self._lock:
            return self._children.setdefault(key, _Child(self._lock))

    def samples(self) -> list[tuple[dict[str, str], float]]:
        with self._lock:
            return [
                (dict(zip(self.labelnames, key, strict=True)), child.value)
                for key, child in sorted(self._children.items())
            ]

    def text(self) -> str:
        """The family in the Prometheus text format (0.0.4); nothing before a first sample,
        as the Go client."""
        samples = self.samples()
        if not samples:
            return ""
        help_text = self.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines = [f"# HELP {self.name} {help_text}", f"# TYPE {self.name} counter"]
        for labels, value in samples:
            pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            number = floatToGoString(value)  # type: ignore[no-untyped-call]
            lines.append(f"{self.name}{{{pairs}}} {number}")
        return "\n".join(lines) + "\n"


def exposition(registry: CollectorRegistry, counters: Iterable[GoCounter]) -> bytes:
    """/metrics' body: the Go-named counters, then ``registry``'s metrics."""
    return "".join(counter.text() for counter in counters).encode() + generate_latest(registry)
