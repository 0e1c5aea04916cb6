"""The metric cache: an embedded SQLite time series store with retention and a size cap.

A series is a metric name plus labels (``node_cpu_usage``; ``pod_cpu_usage{pod_uid=...}``).
Samples are (series, unix time, value). Collectors append a batch per pass in one transaction;
the QoS manager, the NodeMetric report and ``koordctl`` read aggregates over a window (avg,
p50, p90, p95, p99, last, count, with Koordinator's percentile: sort ascending, take index
int(n * p) - 1, at least 0) or the last value no older than a bound.

Write-ahead logging lets readers (the HTTP server thread) run while the collector writes; one
lock serializes use of the connection. Samples older than the retention (12 h by default) are
deleted, and the oldest ones too while the database is larger than its cap.

Usage::

    cache = MetricCache(Path("/var/lib/koordlet/metrics.db"))
    cache.append([Sample("node_cpu_usage", {}, now, 1.5)])
    cache.aggregate("node_cpu_usage", {}, now - 300, now).p95
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RETENTION_SECONDS = 12 * 3600
DEFAULT_MAX_BYTES = 100 << 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    UNIQUE (name, labels)
);
CREATE TABLE IF NOT EXISTS samples (
    series_id INTEGER NOT NULL,
    ts REAL NOT NULL,
    value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_by_series_time ON samples (series_id, ts);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples (ts);
"""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    ts: float
    value: float


@dataclass(frozen=True)
class Aggregate:
    count: int
    avg: float
    p50: float
    p90: float
    p95: float
    p99: float
    last: float
    last_ts: float

    def get(self, name: str) -> float:
        """One aggregate by name ("avg", "p95", "last", "count", ...)."""
        if name not in {"count", "avg", "p50", "p90", "p95", "p99", "last"}:
            raise ValueError(f"unknown aggregate {name!r}: avg, p50, p90, p95, p99, last or count")
        return float(getattr(self, name))


def percentile(ordered: list[float], p: float) -> float:
    """Koordinator's percentile of an ascending list: element int(n * p) - 1, at least the first."""
    index = max(0, int(len(ordered) * p) - 1)
    return ordered[index]


LabelKey = tuple[tuple[str, str], ...]


def label_key(labels: Mapping[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


def label_text(key: LabelKey) -> str:
    """How a series' labels are stored in the database."""
    return json.dumps(dict(key), separators=(",", ":"))


class MetricCache:
    """See the module docstring. ``path=None`` keeps everything in memory (tests, benchmarks)."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.path = path
        self.retention_seconds = retention_seconds
        self.max_bytes = max_bytes
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, LabelKey], int] = {}
        # The newest sample of every series, kept in memory: "last within 2 x interval" is
        # the QoS manager's and the status API's most frequent question.
        self._latest: dict[tuple[str, LabelKey], tuple[float, float]] = {}
        try:
            with self._lock:
                # Freed pages go back to the file system on incremental_vacuum, so the size cap
                # can be met without a full VACUUM (must be set before the first table exists).
                self._db.execute("PRAGMA auto_vacuum=INCREMENTAL")
                if path is not None:
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA cache_size=-2048")  # 2 MiB of page cache at most
                self._db.executescript(_SCHEMA)
                for sid, name, labels in self._db.execute("SELECT id, name, labels FROM series"):
                    self._series[(name, label_key(json.loads(labels)))] = sid
        except BaseException:
            self._db.close()
            raise
        self.kv: dict[str, object] = {}  # node info and the like: latest value only

    @classmethod
    def open(
        cls,
        path: Path | None,
        *,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> tuple[MetricCache, str | None]:
        """The cache at ``path``, or, where that cannot be (a full or read-only disk, a file
        that is not a database), one in memory and the reason: the node agent must keep
        applying QoS without its history rather than stop."""
        try:
            return cls(path, retention_seconds=retention_seconds, max_bytes=max_bytes), None
        except (OSError, sqlite3.Error) as err:
            memory = cls(None, retention_seconds=retention_seconds, max_bytes=max_bytes)
            return memory, f"{path}: {err}"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writing ------------------------------------------------------------------------------

    def _series_id(self, key: tuple[str, LabelKey]) -> int:
        sid = self._series.get(key)
        if sid is None:
            row_key = (key[0], label_text(key[1]))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO series (name, labels) VALUES (?, ?)", row_key
            )
            if cursor.lastrowid and cursor.rowcount:
                sid = int(cursor.lastrowid)
            else:
                row = self._db.execute(
                    "SELECT id FROM series WHERE name = ? AND labels = ?", row_key
                ).fetchone()
                sid = int(row[0])
            self._series[key] = sid
        return sid

    def append(self, samples: Iterable[Sample]) -> int:
        """Store a batch in one transaction; non-finite values are dropped. Returns how many."""
        with self._lock:
            rows = []
            latest = self._latest
            for s in samples:
                if not (math.isfinite(s.value) and math.isfinite(s.ts)):
                    continue
                key = (s.name, label_key(s.labels))
                rows.append((self._series_id(key), s.ts, s.value))
                previous = latest.get(key)
                if previous is None or previous[0] <= s.ts:
                    latest[key] = (s.ts, s.value)
            with self._db:
                self._db.executemany(
                    "INSERT INTO samples (series_id, ts, value) VALUES (?, ?, ?)", rows
                )
        return len(rows)

    def size_bytes(self) -> int:
        with self._lock:
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    def expire(self, now: float | None = None) -> int:
        """Delete samples past the retention, then the oldest while above the size cap."""
        now = time.time() if now is None else now
        deleted = 0
        with self._lock, self._db:
            deleted += self._db.execute(
                "DELETE FROM samples WHERE ts < ?", (now - self.retention_seconds,)
            ).rowcount
        while (size := self.size_bytes()) > self.max_bytes:
            # Drop the oldest share of samples the excess suggests (at least a tenth).
            share = min(0.9, max(0.1, 1 - self.max_bytes / size + 0.05))
            with self._lock, self._db:
                count = self._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
                if count == 0:
                    break
                cutoff = self._db.execute(
                    "SELECT ts FROM samples ORDER BY ts LIMIT 1 OFFSET ?",
                    (max(1, int(count * share)) - 1,),
                ).fetchone()
                deleted += self._db.execute(
                    "DELETE FROM samples WHERE ts <= ?", (cutoff[0],)
                ).rowcount
            with self._lock:
                self._db.executescript("PRAGMA incremental_vacuum;")  # commits, then frees pages
        return deleted

    # -- reading ------------------------------------------------------------------------------

    def _values(
        self, name: str, labels: Mapping[str, str], start: float, end: float
    ) -> list[tuple[float, float]]:
        sid = self._series.get((name, label_key(labels)))
        if sid is None:
            return []
        return self._db.execute(
            "SELECT ts, value FROM samples WHERE series_id = ? AND ts >= ? AND ts <= ? ORDER BY ts",
            (sid, start, end),
        ).fetchall()

    def aggregate(
        self, name: str, labels: Mapping[str, str], start: float, end: float
    ) -> Aggregate | None:
        """Aggregates of one series over [start, end]; None when it has no sample there."""
        with self._lock:
            points = self._values(name, labels, start, end)
        if not points:
            return None
        values = sorted(v for _, v in points)
        last_ts, last = points[-1]
        return Aggregate(
            count=len(values),
            avg=sum(values) / len(values),
            p50=percentile(values, 0.5),
            p90=percentile(values, 0.9),
            p95=percentile(values, 0.95),
            p99=percentile(values, 0.99),
            last=last,
            last_ts=last_ts,
        )

    def last(
        self, name: str, labels: Mapping[str, str], now: float, max_age: float
    ) -> float | None:
        """The newest value if it is at most ``max_age`` old (the QoS manager's "fresh" rule)."""
        key = (name, label_key(labels))
        found = self._latest.get(key)
        if found is None:  # not written since start: perhaps stored by an earlier run
            with self._lock:
                sid = self._series.get(key)
                row = None
                if sid is not None:
                    row = self._db.execute(
                        "SELECT ts, value FROM samples WHERE series_id = ? "
                        "ORDER BY ts DESC LIMIT 1",
                        (sid,),
                    ).fetchone()
            found = None if row is None else (float(row[0]), float(row[1]))
        if found is None or now - found[0] > max_age:
            return None
        return found[1]

    def series(self, name: str | None = None) -> list[tuple[str, dict[str, str]]]:
        """Known series (optionally of one metric), as (name, labels)."""
        with self._lock:
            keys = list(self._series)
        return [(n, dict(lab)) for n, lab in keys if name is None or n == name]

    def drop_series(self, name: str, labels: Mapping[str, str]) -> None:
        """Forget a series and its samples (a pod that is gone)."""
        with self._lock:
            self._latest.pop((name, label_key(labels)), None)
            sid = self._series.pop((name, label_key(labels)), None)
            if sid is not None:
                with self._db:
                    self._db.execute("DELETE FROM samples WHERE series_id = ?", (sid,))
                    self._db.execute("DELETE FROM series WHERE id = ?", (sid,))
