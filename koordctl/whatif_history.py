"""``koordctl whatif``'s input: koordlet's metric cache read back onto a one-second grid.

The database is opened read-only (SQLite ``mode=ro``): the replay never writes it, and it can
run beside a koordlet that is writing (write-ahead logging lets a reader see the last commit).
Its layout (series, chunks of packed time/value doubles) is koordlet.metriccache's; chunks are
decoded with its ``unpack``.

Each series becomes one value per second ("bin"); a sample stays valid for ``max_age`` seconds
after it was taken (2 x the collect interval, koordlet's "fresh" rule), so a strategy that runs
at second t sees what ``MetricCache.last(..., max_age)`` would have given it. Pod series are
summed per bin, fresh ones only, as the suppress formula and the system collector sum them.
Missing values are NaN.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from array import array
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from math import isnan
from pathlib import Path

from koordlet.metriccache.store import unpack

NAN = math.nan
STEP = 1.0  # seconds per bin: the QoS strategies' and the collectors' default interval


class HistoryError(Exception):
    """The metric cache cannot be read, or holds nothing in the window (one line)."""


@dataclass
class History:
    """Per-second series of one node (index i is the second ``start + i``)."""

    start: float
    end: float
    node_cpu: array[float]  # cores
    node_memory: array[float]  # bytes
    pods_cpu: array[float]  # Σ fresh pod_cpu_usage (0 where no pod is fresh)
    pods_memory: array[float]
    be_pods_memory: array[float]  # Σ of the pods named BE (``be_uids``)
    be_cpu_usage: array[float]  # node_be usage, cores
    be_cpu_request: array[float]  # node_be request, cores
    be_cpu_limit: array[float]  # node_be real-limit, cores
    psi_some: array[float]  # highest cpu some avg10 (%) of the non-BE pods
    psi_full: array[float]
    runq_p99: array[float]  # highest recorded qos_runq_latency_p99 of a non-BE class (µs)
    # koordlet's prodReclaimable of each training pass (cores, bytes), held until the next
    prod_reclaimable_cpu: array[float]
    prod_reclaimable_memory: array[float]
    samples: int = 0
    series: int = 0
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.node_cpu)


def _grid(n: int, fill: float = NAN) -> array[float]:
    return array("d", [fill]) * n


class _Reader:
    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise HistoryError(f"{path}: no such metric cache (koordlet's --tsdb-path/metrics.db)")
        try:
            self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            rows = self.db.execute("SELECT id, name, labels FROM series").fetchall()
        except sqlite3.Error as err:
            raise HistoryError(f"{path}: not a readable metric cache ({err})") from None
        self.series: dict[str, list[tuple[int, str]]] = {}
        for sid, name, labels in rows:
            self.series.setdefault(name, []).append((sid, labels))

    def ids(self, name: str) -> list[tuple[int, str]]:
        return self.series.get(name, [])

    def points(self, sid: int, start: float, end: float) -> Iterator[tuple[array[float], int]]:
        """Each chunk overlapping [start, end] as (interleaved times and values, count)."""
        rows = self.db.execute(
            "SELECT points, count FROM chunks WHERE series_id = ? AND last >= ? AND first <= ?",
            (sid, start, end),
        )
        for blob, count in rows:
            flat = array("d")
            flat.frombytes(blob)
            yield flat, count

    def span(self, name: str) -> tuple[float, float] | None:
        ids = [sid for sid, _ in self.ids(name)]
        if not ids:
            return None
        spans = [
            self.db.execute(
                "SELECT MIN(first), MAX(last) FROM chunks WHERE series_id = ?", (sid,)
            ).fetchone()
            for sid in ids
        ]
        found = [(float(a), float(b)) for a, b in spans if a is not None]
        return (min(a for a, _ in found), max(b for _, b in found)) if found else None

    def spacing(self, sid: int, end: float) -> float:
        """The median gap between the newest samples of a series (its collect interval).
        Several chunks: a series written less often than the cache flushes (a prediction every
        training interval) has one sample a chunk."""
        rows = self.db.execute(
            "SELECT points FROM chunks WHERE series_id = ? AND last <= ?"
            " ORDER BY last DESC LIMIT 16",
            (sid, end),
        ).fetchall()
        times = sorted(t for (blob,) in rows for t, _ in unpack(blob))
        gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
        return gaps[len(gaps) // 2] if gaps else STEP


class _Binner:
    """Puts samples of [start, end] on the grid, each valid for ``fresh`` more bins."""

    def __init__(self, reader: _Reader, start: float, n: int, fresh: int) -> None:
        self.reader, self.start, self.n, self.fresh = reader, start, n, fresh
        self.samples = 0

    def one(self, sid: int, *, scale: float = 1.0) -> array[float]:
        """The series on the grid: each bin its own newest sample, else the newest of the
        ``fresh`` bins before it (one pass placing samples, one filling gaps, if any)."""
        n, start, fresh = self.n, self.start, self.fresh
        out = _grid(n)
        taken = _grid(n)  # the time of the sample in each bin: the newest wins
        filled = 0
        before, before_ts = NAN, -math.inf  # the newest sample ahead of the grid
        for flat, _ in self.reader.points(sid, start - fresh, start + n):
            for ts, value in zip(flat[0::2], flat[1::2], strict=True):
                if ts < start:
                    if ts >= start - fresh and ts > before_ts:
                        before, before_ts = value, ts
                    continue
                i = int(ts - start)
                if i >= n:
                    continue
                if isnan(taken[i]):
                    filled += 1
                elif taken[i] >= ts:
                    continue
                taken[i] = ts
                out[i] = value
        self.samples += filled + (not isnan(before))
        if filled < n:  # gaps: a sample stays valid for ``fresh`` bins after its own
            last, age = before, math.floor(start - before_ts) if before_ts > -math.inf else n
            for i in range(n):
                if isnan(out[i]):
                    age += 1
                    if age <= fresh:
                        out[i] = last
                else:
                    last, age = out[i], 0
        if scale != 1.0:
            out = array("d", (v * scale for v in out))
        return out

    def sum(self, sids: Collection[int], *, scale: float = 1.0) -> array[float]:
        total = _grid(self.n, 0.0)
        for sid in sids:
            values = self.one(sid, scale=scale)
            for i, value in enumerate(values):
                if not isnan(value):
                    total[i] += value
        return total

    def highest(self, sids: Collection[int]) -> array[float]:
        top = _grid(self.n)
        for sid in sids:
            values = self.one(sid)
            for i, value in enumerate(values):
                if not isnan(value) and not top[i] >= value:
                    top[i] = value
        return top


def _label(labels: str, key: str) -> str:
    """One label's value from the stored JSON text (avoids a JSON parse per series)."""
    marker = f'"{key}":"'
    at = labels.find(marker)
    if at < 0:
        return ""
    at += len(marker)
    return labels[at : labels.find('"', at)]


def load_history(
    path: Path, since: float | None, be_uids: Collection[str] = (), ls_qos: Collection[str] = ()
) -> History:
    """The node's history for the ``since`` seconds that end at its newest node CPU sample
    (None: everything stored). ``be_uids``: pods to count as BE for memory (the cache does not
    record a pod's QoS class); ``ls_qos``: qos labels of run-queue latency to report."""
    reader = _Reader(path)
    try:
        return _load(reader, since, be_uids, ls_qos)
    except sqlite3.Error as err:
        raise HistoryError(f"{path}: reading the metric cache failed ({err})") from None
    finally:
        reader.db.close()


def _load(
    reader: _Reader, since: float | None, be_uids: Collection[str], ls_qos: Collection[str]
) -> History:
    span = reader.span("node_cpu_usage")
    if span is None:
        raise HistoryError("the metric cache holds no node_cpu_usage samples")
    first, end = span
    start = first if since is None else max(first, end - since)
    start = math.floor(start)
    n = math.floor(end - start) + 1
    node_ids = reader.ids("node_cpu_usage")
    interval = max(reader.spacing(node_ids[0][0], end), STEP)
    fresh = math.floor(2 * interval / STEP)  # bins after the sample's own: age <= 2 x interval
    binner = _Binner(reader, start, n, fresh)

    def single(name: str, want: dict[str, str] | None = None, scale: float = 1.0) -> array[float]:
        for sid, labels in reader.ids(name):
            if want is None or all(_label(labels, k) == v for k, v in want.items()):
                return binner.one(sid, scale=scale)
        return _grid(n)

    pod_cpu = reader.ids("pod_cpu_usage")
    pod_memory = reader.ids("pod_memory_usage")
    be_memory = [sid for sid, labels in pod_memory if _label(labels, "pod_uid") in be_uids]
    psi: dict[str, list[int]] = {"some": [], "full": []}
    for sid, labels in reader.ids("pod_psi"):
        if (
            _label(labels, "psi_resource_type") == "cpu"
            and _label(labels, "psi_precision") == "avg10"
            and _label(labels, "pod_uid") not in be_uids
        ):
            psi.setdefault(_label(labels, "psi_degree"), []).append(sid)
    runq = [sid for sid, lab in reader.ids("qos_runq_latency_p99") if _label(lab, "qos") in ls_qos]

    def be(allocation: str) -> array[float]:
        return single("node_be", {"be_resource": "cpu", "be_allocation": allocation}, 1e-3)

    def predicted(name: str) -> array[float]:
        """A prediction series: one sample a training interval, so valid for two of those."""
        ids = reader.ids(name)
        if not ids:
            return _grid(n)
        every = max(reader.spacing(ids[0][0], end), STEP)
        return _Binner(reader, start, n, math.floor(2 * every / STEP)).one(ids[0][0])

    history = History(
        start=start,
        end=end,
        node_cpu=single("node_cpu_usage"),
        node_memory=single("node_memory_usage"),
        pods_cpu=binner.sum([sid for sid, _ in pod_cpu]),
        pods_memory=binner.sum([sid for sid, _ in pod_memory]),
        be_pods_memory=binner.sum(be_memory),
        be_cpu_usage=be("usage"),
        be_cpu_request=be("request"),
        be_cpu_limit=be("real-limit"),
        psi_some=binner.highest(psi["some"]),
        psi_full=binner.highest(psi["full"]),
        runq_p99=binner.highest(runq),
        prod_reclaimable_cpu=predicted("prod_reclaimable_cpu"),
        prod_reclaimable_memory=predicted("prod_reclaimable_memory"),
        series=sum(len(ids) for ids in reader.series.values()),
    )
    history.samples = binner.samples
    if interval > STEP:
        history.notes.append(f"samples every {interval:g}s: each holds for {2 * interval:g}s")
    if not pod_cpu:
        history.notes.append("no pod_cpu_usage samples: every pod's usage counts as system")
    return history
