"""The metric cache: aggregation (Koordinator's percentiles), freshness, retention, size cap."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from koordlet.metriccache import MetricCache, Sample, percentile

POD = {"pod_uid": "u1"}


def fill(
    cache: MetricCache,
    name: str,
    labels: dict[str, str],
    values: list[float],
    start: float = 1000.0,
) -> None:
    cache.append(Sample(name, labels, start + i, v) for i, v in enumerate(values))


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        pytest.param([1.0], 0.5, 1.0, id="single"),
        pytest.param([1.0, 2.0, 3.0, 4.0], 0.5, 2.0, id="even-p50-is-index-1"),
        pytest.param([float(i) for i in range(1, 11)], 0.9, 9.0, id="p90-of-ten"),
        pytest.param([float(i) for i in range(1, 11)], 0.95, 9.0, id="p95-of-ten-int-truncates"),
        pytest.param([float(i) for i in range(1, 101)], 0.99, 99.0, id="p99-of-hundred"),
        pytest.param([5.0, 6.0], 0.1, 5.0, id="small-p-clamps-to-first"),
    ],
)
def test_percentile_follows_koordinator(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == expected


def test_aggregate_over_a_window(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db")
    fill(cache, "pod_cpu_usage", POD, [4.0, 1.0, 3.0, 2.0, 10.0])  # ts 1000..1004
    fill(cache, "pod_cpu_usage", {"pod_uid": "other"}, [100.0] * 5)

    agg = cache.aggregate("pod_cpu_usage", POD, 1000, 1003)

    assert agg is not None
    assert agg.count == 4
    assert agg.avg == 2.5
    assert (agg.p50, agg.p90, agg.last, agg.last_ts) == (2.0, 3.0, 2.0, 1003)
    assert agg.get("p95") == 3.0
    assert cache.aggregate("pod_cpu_usage", POD, 2000, 3000) is None
    assert cache.aggregate("node_cpu_usage", {}, 0, 3000) is None
    with pytest.raises(ValueError, match="unknown aggregate"):
        agg.get("median")


def test_last_is_returned_only_while_fresh() -> None:
    cache = MetricCache()
    fill(cache, "node_cpu_usage", {}, [0.5, 0.7])  # ts 1000, 1001
    assert cache.last("node_cpu_usage", {}, now=1002.5, max_age=2) == 0.7
    assert cache.last("node_cpu_usage", {}, now=1004, max_age=2) is None  # stale: no value
    assert cache.last("pod_cpu_usage", POD, now=1001, max_age=2) is None


def test_non_finite_values_are_never_stored() -> None:
    cache = MetricCache()
    stored = cache.append(
        [Sample("x", {}, 1.0, math.nan), Sample("x", {}, 2.0, math.inf), Sample("x", {}, 3.0, 1.0)]
    )
    assert stored == 1
    agg = cache.aggregate("x", {}, 0, 10)
    assert agg is not None and agg.count == 1


def test_retention_deletes_old_samples(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db", retention_seconds=10)
    fill(cache, "x", {}, [1.0] * 20, start=0)  # ts 0..19

    deleted = cache.expire(now=20)

    assert deleted == 10
    agg = cache.aggregate("x", {}, 0, 100)
    assert agg is not None and agg.count == 10


def test_the_size_cap_drops_the_oldest_samples(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db", max_bytes=256 * 1024)
    for batch in range(20):
        fill(cache, "x", {"c": str(batch % 5)}, [float(i) for i in range(2000)], start=batch * 2000)
    assert cache.size_bytes() > 256 * 1024

    cache.expire(now=40000)

    assert cache.size_bytes() <= 256 * 1024
    newest = cache.aggregate("x", {"c": "4"}, 0, 1e9)
    assert newest is not None and newest.last_ts == 19 * 2000 + 1999  # the newest survived


def test_series_survive_a_reopen(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db")
    fill(cache, "pod_cpu_usage", POD, [1.0, 2.0])
    cache.close()

    again = MetricCache(tmp_path / "m.db")

    assert again.series("pod_cpu_usage") == [("pod_cpu_usage", POD)]
    agg = again.aggregate("pod_cpu_usage", POD, 0, 1e9)
    assert agg is not None and agg.count == 2
    again.drop_series("pod_cpu_usage", POD)
    assert again.series() == []


def test_a_cache_that_cannot_be_opened_is_kept_in_memory_with_the_reason(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    cache, problem = MetricCache.open(not_a_dir / "metrics.db")
    assert problem is not None and problem.startswith(f"{not_a_dir}/metrics.db: ")
    assert "File exists" in problem
    assert cache.path is None
    cache.append([Sample("node_cpu_usage", {}, 100.0, 1.5)])  # and it works
    assert cache.last("node_cpu_usage", {}, now=100.0, max_age=2) == 1.5

    garbage = tmp_path / "metrics.db"
    garbage.write_bytes(b"this is not an SQLite database, but a file of the same name" * 100)
    cache, problem = MetricCache.open(garbage)
    assert cache.path is None and problem is not None and "not a database" in problem

    cache, problem = MetricCache.open(tmp_path / "fine" / "metrics.db")
    assert problem is None and cache.path == tmp_path / "fine" / "metrics.db"


def stored_chunks(path: Path) -> int:
    """Chunks on disk, seen through a connection of its own (what another reader sees)."""
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])


def test_samples_are_written_in_batches_and_every_read_sees_the_pending_ones(
    tmp_path: Path,
) -> None:
    clock = [100.0]
    cache = MetricCache(tmp_path / "m.db", flush_seconds=10, clock=lambda: clock[0])
    fill(cache, "x", {}, [1.0, 2.0])
    clock[0] += 9.5
    fill(cache, "x", {}, [3.0], start=1002)
    assert stored_chunks(tmp_path / "m.db") == 0  # not due yet: nothing written

    clock[0] += 0.5
    fill(cache, "y", {}, [7.0])
    assert stored_chunks(tmp_path / "m.db") == 2  # one chunk per series, in one write

    fill(cache, "x", {}, [4.0], start=1003)  # pending again
    agg = cache.aggregate("x", {}, 0, 2000)
    assert agg is not None and (agg.count, agg.last, agg.last_ts) == (4, 4.0, 1003)
    assert stored_chunks(tmp_path / "m.db") == 3  # the read wrote it first


def test_closing_writes_the_pending_samples(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db", flush_seconds=3600)
    fill(cache, "x", POD, [5.0, 6.0])
    cache.close()

    again = MetricCache(tmp_path / "m.db")
    assert again.last("x", POD, now=1001.5, max_age=1) == 6.0  # from disk: nothing in memory


def test_samples_out_of_order_across_chunks_are_read_in_time_order(tmp_path: Path) -> None:
    cache = MetricCache(tmp_path / "m.db")
    fill(cache, "x", {}, [50.0, 60.0], start=1005)
    fill(cache, "x", {}, [10.0, 20.0, 30.0], start=1000)
    fill(cache, "x", {}, [99.0], start=1003)

    agg = cache.aggregate("x", {}, 1001, 1005)
    assert agg is not None
    assert (agg.count, agg.last, agg.last_ts, agg.avg) == (4, 50.0, 1005, 49.75)  # 20, 30, 99, 50
    cache.close()
    assert MetricCache(tmp_path / "m.db").last("x", {}, now=1006, max_age=1) == 60.0


def test_a_database_of_the_row_per_sample_layout_keeps_its_series_only(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "m.db") as old:
        old.executescript(
            "CREATE TABLE series (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "labels TEXT NOT NULL, UNIQUE (name, labels));"
            "CREATE TABLE samples (series_id INTEGER NOT NULL, ts REAL NOT NULL, "
            "value REAL NOT NULL);"
            """INSERT INTO series VALUES (7, 'pod_cpu_usage', '{"pod_uid":"u1"}');"""
            "INSERT INTO samples VALUES (7, 1000.0, 0.5);"
        )

    cache = MetricCache(tmp_path / "m.db")

    assert cache.series() == [("pod_cpu_usage", POD)]
    assert cache.aggregate("pod_cpu_usage", POD, 0, 1e9) is None
    fill(cache, "pod_cpu_usage", POD, [0.25])
    agg = cache.aggregate("pod_cpu_usage", POD, 0, 1e9)
    assert agg is not None and agg.count == 1


class FullDisk:
    """The cache's connection on a disk that filled up: inserts fail as SQLite reports it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def executemany(self, sql: str, rows: object) -> sqlite3.Cursor:
        raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)

    def __enter__(self) -> sqlite3.Connection:
        return self.db.__enter__()

    def __exit__(self, *exc: object) -> bool | None:
        return self.db.__exit__(*exc)  # type: ignore[arg-type]


def test_a_disk_that_fills_up_fails_the_due_write_but_never_a_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = [0.0]
    cache = MetricCache(tmp_path / "m.db", flush_seconds=10, clock=lambda: clock[0])
    fill(cache, "x", POD, [1.0, 2.0])
    cache.aggregate("x", POD, 0, 1e9)  # written: the disk still had room
    cache._db = FullDisk(cache._db)  # type: ignore[assignment]
    fill(cache, "x", POD, [3.0], start=1002)

    agg = cache.aggregate("x", POD, 0, 1e9)  # the pending sample cannot be written: dropped
    assert agg is not None and (agg.count, agg.last) == (2, 2.0)
    assert cache.last("x", POD, now=1002, max_age=1) == 3.0  # the newest is still known
    fill(cache, "x", POD, [4.0], start=1003)
    assert cache.aggregate("x", POD, 0, 1e9) is not None
    full = [r for r in caplog.records if "pending samples dropped" in r.getMessage()]
    assert len(full) == 1  # once per distinct error, not per read

    fill(cache, "x", POD, [5.0], start=1004)  # pending again, for 10 s from now
    clock[0] = 10.0
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        fill(cache, "x", POD, [6.0], start=1005)  # due: the collector's pass counts the error
    cache.close()  # logged, not raised
