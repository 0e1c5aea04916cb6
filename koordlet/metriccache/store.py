"""The metric cache: an embedded SQLite time series store with retention and a size cap.

A series is a metric name plus labels (``node_cpu_usage``; ``pod_cpu_usage{pod_uid=...}``).
Samples are (series, unix time, value). The QoS manager, the NodeMetric report and
``koordctl`` read aggregates over a window (avg, p50, p90, p95, p99, last, count, with
Koordinator's percentile: sort ascending, take index int(n * p) - 1, at least 0) or the last
value no older than a bound.

Appended samples are held in memory, per series, and written every ``flush_seconds`` (10 s
in koordlet) as one row per series: a chunk of packed (time, value) doubles with its first
and last time. A row and a commit per sample per second rewrote the same index pages every
second and were the largest part of koordlet's steady-state CPU; a chunk per series per flush
is a tenth of the rows in one transaction. Every read writes what is pending first, so
readers see every sample; a crash loses at most the last ``flush_seconds`` of history, never
the database. Write-ahead logging lets readers (the HTTP server thread) run while the
collector writes; one lock serializes use of the connection.

Samples older than the retention (12 h by default) are deleted (a chunk across the cut is
trimmed), and the oldest chunks too while the database is larger than its cap. A database of
the earlier row-per-sample layout is emptied of its samples once, when first opened: it is a
cache, and its series are kept.

Usage::

    cache = MetricCache(Path("/var/lib/koordlet/metrics.db"))
    cache.append([Sample("node_cpu_usage", {}, now, 1.5)])
    cache.aggregate("node_cpu_usage", {}, now - 300, now).p95
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_RETENTION_SECONDS = 12 * 3600
DEFAULT_MAX_BYTES = 100 << 20
MAX_PENDING_SAMPLES = 100_000  # written at once beyond this, whatever the time

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    labels TEXT NOT NULL,
    UNIQUE (name, labels)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL,
    first REAL NOT NULL,
    last REAL NOT NULL,
    count INTEGER NOT NULL,
    points BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_series_last ON chunks (series_id, last);
CREATE INDEX IF NOT EXISTS chunks_by_first ON chunks (first);
"""
_OLD_LAYOUT = "samples"  # the row-per-sample table of earlier versions


def pack(flat: array[float]) -> tuple[float, float, int, bytes]:
    """(first time, last time, count, blob) of a chunk of times and values interleaved."""
    times = flat[0::2]
    return min(times), max(times), len(times), flat.tobytes()


def unpack(blob: bytes) -> list[tuple[float, float]]:
    flat = array("d")
    flat.frombytes(blob)
    return list(zip(flat[0::2], flat[1::2], strict=True))


@dataclass(frozen=True, slots=True)
class Sample:
    """One value of a series at a time. ``labels`` is not changed once given to a sample (one
    labels object may serve the several samples of a pod)."""

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
        flush_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.retention_seconds = retention_seconds
        self.max_bytes = max_bytes
        self.flush_seconds = flush_seconds
        self._clock = clock
        self._pending: dict[int, array[float]] = {}  # series id → time, value, time, ...
        self._pending_count = 0
        self._pending_since = 0.0
        self._flush_error = ""  # the last failed write's error, logged once
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
                self._drop_old_layout()
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
        flush_seconds: float = 0.0,
    ) -> tuple[MetricCache, str | None]:
        """The cache at ``path``, or, where that cannot be (a full or read-only disk, a file
        that is not a database), one in memory and the reason: the node agent must keep
        applying QoS without its history rather than stop."""

        def build(at: Path | None) -> MetricCache:
            return cls(
                at,
                retention_seconds=retention_seconds,
                max_bytes=max_bytes,
                flush_seconds=flush_seconds,
            )

        try:
            return build(path), None
        except (OSError, sqlite3.Error) as err:
            return build(None), f"{path}: {err}"

    def _drop_old_layout(self) -> None:
        old = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_OLD_LAYOUT,)
        ).fetchone()
        if old is not None:
            log.warning("metric cache: samples of the row-per-sample layout dropped (a cache)")
            self._db.execute(f"DROP TABLE {_OLD_LAYOUT}")
            self._db.commit()

    def close(self) -> None:
        """Write what is pending (a failure is logged: stopping must not fail) and close."""
        with self._lock:
            try:
                self._flush_locked()
            except sqlite3.Error as err:
                log.warning("metric cache: the last samples were not written: %s", err)
            finally:
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
        """Store a batch (written within ``flush_seconds``); non-finite values are dropped.
        Returns how many were kept. Raises sqlite3.Error when a due write fails: the pending
        samples are dropped then, so a full disk cannot grow the process instead."""
        with self._lock:
            if not self._pending:
                self._pending_since = self._clock()
            pending, latest = self._pending, self._latest
            kept = 0
            # A collector gives the samples of one pod or container the same labels object:
            # sorted once per object (holding it, so its id is not reused within the call).
            label_keys: dict[int, tuple[Mapping[str, str], LabelKey]] = {}
            for s in samples:
                if not (math.isfinite(s.value) and math.isfinite(s.ts)):
                    continue
                known = label_keys.get(id(s.labels))
                if known is None or known[0] is not s.labels:
                    known = label_keys[id(s.labels)] = (s.labels, label_key(s.labels))
                key = (s.name, known[1])
                sid = self._series_id(key)
                points = pending.get(sid)
                if points is None:
                    points = pending[sid] = array("d")
                points.append(s.ts)
                points.append(s.value)
                kept += 1
                previous = latest.get(key)
                if previous is None or previous[0] <= s.ts:
                    latest[key] = (s.ts, s.value)
            self._pending_count += kept
            due = self._clock() - self._pending_since >= self.flush_seconds
            if due or self._pending_count >= MAX_PENDING_SAMPLES:
                self._flush_locked()
        return kept

    def _flush_before_read(self) -> None:
        """Write what is pending so a read sees it; a write that fails (a full disk) drops it
        and is logged once per distinct error, and the read goes on with what is stored."""
        try:
            self._flush_locked()
        except sqlite3.Error as err:
            if str(err) != self._flush_error:
                log.warning("metric cache: pending samples dropped, not written: %s", err)
            self._flush_error = str(err)
        else:
            self._flush_error = ""

    def _flush_locked(self) -> None:
        pending, self._pending, self._pending_count = self._pending, {}, 0
        if pending:
            rows = [(sid, *pack(flat)) for sid, flat in pending.items()]
            with self._db:
                self._db.executemany(
                    "INSERT INTO chunks (series_id, first, last, count, points) "
                    "VALUES (?, ?, ?, ?, ?)",
                    rows,
                )

    def size_bytes(self) -> int:
        with self._lock:
            self._flush_before_read()
            pages = self._db.execute("PRAGMA page_count").fetchone()[0]
            size = self._db.execute("PRAGMA page_size").fetchone()[0]
        return int(pages) * int(size)

    def expire(self, now: float | None = None) -> int:
        """Delete samples past the retention, then the oldest chunks while above the size cap.
        Returns how many samples were deleted."""
        now = time.time() if now is None else now
        cut = now - self.retention_seconds
        with self._lock:
            self._flush_before_read()
        with self._lock, self._db:
            deleted = self._db.execute(
                "SELECT COALESCE(SUM(count), 0) FROM chunks WHERE first < ? AND last < ?",
                (cut, cut),
            ).fetchone()[0]
            self._db.execute("DELETE FROM chunks WHERE first < ? AND last < ?", (cut, cut))
            across = self._db.execute(
                "SELECT id, count, points FROM chunks WHERE first < ?", (cut,)
            ).fetchall()
            for chunk_id, count, blob in across:  # trimmed to the samples from the cut on
                kept = array("d", [x for p in unpack(blob) if p[0] >= cut for x in p])
                deleted += count - len(kept) // 2
                self._db.execute(
                    "UPDATE chunks SET first = ?, last = ?, count = ?, points = ? WHERE id = ?",
                    (*pack(kept), chunk_id),
                )
        while (size := self.size_bytes()) > self.max_bytes:
            # Drop the oldest share of chunks the excess suggests (at least a tenth).
            share = min(0.9, max(0.1, 1 - self.max_bytes / size + 0.05))
            with self._lock, self._db:
                count = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
                if count == 0:
                    break
                cutoff = self._db.execute(
                    "SELECT first FROM chunks ORDER BY first LIMIT 1 OFFSET ?",
                    (max(1, int(count * share)) - 1,),
                ).fetchone()[0]
                deleted += self._db.execute(
                    "SELECT COALESCE(SUM(count), 0) FROM chunks WHERE first <= ?", (cutoff,)
                ).fetchone()[0]
                self._db.execute("DELETE FROM chunks WHERE first <= ?", (cutoff,))
            with self._lock:
                self._db.executescript("PRAGMA incremental_vacuum;")  # commits, then frees pages
        return int(deleted)

    # -- reading ------------------------------------------------------------------------------

    def _values(
        self, name: str, labels: Mapping[str, str], start: float, end: float
    ) -> list[tuple[float, float]]:
        sid = self._series.get((name, label_key(labels)))
        if sid is None:
            return []
        self._flush_before_read()
        chunks = self._db.execute(
            "SELECT points FROM chunks WHERE series_id = ? AND last >= ? AND first <= ?",
            (sid, start, end),
        ).fetchall()
        points = [p for (blob,) in chunks for p in unpack(blob) if start <= p[0] <= end]
        points.sort(key=lambda p: p[0])  # chunks may overlap when samples came out of order
        return points

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
                    self._flush_before_read()
                    row = self._db.execute(
                        "SELECT points FROM chunks WHERE series_id = ? ORDER BY last DESC LIMIT 1",
                        (sid,),
                    ).fetchone()
            found = None if row is None else max(unpack(row[0]), key=lambda p: p[0])
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
                self._flush_before_read()
                with self._db:
                    self._db.execute("DELETE FROM chunks WHERE series_id = ?", (sid,))
                    self._db.execute("DELETE FROM series WHERE id = ?", (sid,))
