"""The predict server: training from the metric cache, expiry and checkpoints (Koordinator's
predict_server_test.go and checkpoint_test.go, with other numbers and an injected clock)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from koordlet.metriccache import MetricCache, Sample
from koordlet.prediction.checkpoint import FILE_NAME, CheckpointStore
from koordlet.prediction.pods import PodFacts
from koordlet.prediction.server import (
    CPU_BUCKETS,
    MEMORY_BUCKETS,
    NODE_UID,
    Peak,
    PredictServer,
    ServerSettings,
    node_item_uid,
)

NOW = 1_765_000_800.0
MI = 1 << 20
SETTINGS = ServerSettings(
    training_interval=30.0,
    cpu_half_life=3600.0,
    memory_half_life=7200.0,
    model_expiration=900.0,
    checkpoint_interval=300.0,
    checkpoint_max_per_step=2,
)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def facts(uid: str, priority: str = "koord-prod") -> PodFacts:
    return PodFacts(uid, f"ns/{uid}", priority, 1000, 0, None, False)


def series(cache: MetricCache, name: str, labels: dict[str, str], values: Sequence[float]) -> None:
    """``values`` one second apart, the last at NOW."""
    n = len(values)
    cache.append(Sample(name, labels, NOW - n + 1 + i, v) for i, v in enumerate(values))


def end_of_bucket_cpu(cores: float) -> int:
    return int(CPU_BUCKETS.start(CPU_BUCKETS.find(cores) + 1) * 1000)


def end_of_bucket_memory(amount: float) -> int:
    return int(MEMORY_BUCKETS.start(MEMORY_BUCKETS.find(amount) + 1))


def trained(cache: MetricCache, path: Path | None = None) -> tuple[PredictServer, Clock]:
    clock = Clock(NOW)
    server = PredictServer(cache, CheckpointStore(path), SETTINGS, clock)
    return server, clock


def test_one_pass_samples_the_p90_of_the_interval_for_pods_classes_node_and_system() -> None:
    cache = MetricCache()
    # ten samples: Koordinator's p90 is the 9th smallest (index int(10 * 0.9) - 1)
    series(cache, "pod_cpu_usage", {"pod_uid": "a"}, [0.1 * i for i in range(10, 0, -1)])
    series(cache, "pod_memory_usage", {"pod_uid": "a"}, [300 * MI] * 9 + [900 * MI])
    series(cache, "pod_cpu_usage", {"pod_uid": "b"}, [0.35] * 4)
    series(cache, "pod_memory_usage", {"pod_uid": "b"}, [70 * MI] * 4)
    series(cache, "pod_cpu_usage", {"pod_uid": "c"}, [2.2])
    series(cache, "pod_memory_usage", {"pod_uid": "c"}, [1000 * MI])
    series(cache, "node_cpu_usage", {}, [3.7])
    series(cache, "node_memory_usage", {}, [2000 * MI])
    series(cache, "sys_cpu_usage", {}, [0.45])
    series(cache, "sys_memory_usage", {}, [130 * MI])
    server, _ = trained(cache)
    server.train([facts("a"), facts("b", ""), facts("c", "koord-batch"), facts("no-samples")])
    assert server.synced
    # one sample each: every percentile is that sample's bucket's end
    assert server.peak("a", 0.95, 0.98) == Peak(
        end_of_bucket_cpu(0.9), end_of_bucket_memory(300 * MI)
    )
    assert server.peak("no-samples", 0.95, 0.98) is None
    assert server.peak(node_item_uid("koord-prod"), 1, 1) == server.peak("a", 1, 1)
    assert server.peak(node_item_uid(""), 1, 1) == server.peak("b", 1, 1)
    assert server.peak(node_item_uid("koord-batch"), 1, 1) == server.peak("c", 1, 1)
    # a class without pods gets a 0 sample: its model exists and answers 0
    assert server.peak(node_item_uid("koord-mid"), 1, 1) == Peak(
        int(CPU_BUCKETS.start(1) * 1000), int(MEMORY_BUCKETS.start(1))
    )
    assert server.peak(NODE_UID, 1, 1) == Peak(
        end_of_bucket_cpu(3.7), end_of_bucket_memory(2000 * MI)
    )
    assert server.peak(node_item_uid("sys"), 1, 1) == Peak(
        end_of_bucket_cpu(0.45), end_of_bucket_memory(130 * MI)
    )


def test_without_system_series_the_system_is_the_node_minus_its_pods() -> None:
    cache = MetricCache()
    series(cache, "pod_cpu_usage", {"pod_uid": "a"}, [1.25])
    series(cache, "pod_memory_usage", {"pod_uid": "a"}, [600 * MI])
    series(cache, "node_cpu_usage", {}, [2.0])
    series(cache, "node_memory_usage", {}, [500 * MI])  # less than the pod: 0, not negative
    server, _ = trained(cache)
    server.train([facts("a")])
    assert server.peak(node_item_uid("sys"), 1, 1) == Peak(
        end_of_bucket_cpu(0.75), int(MEMORY_BUCKETS.start(1))
    )


def test_samples_older_than_the_training_interval_are_not_used() -> None:
    cache = MetricCache()
    cache.append([Sample("pod_cpu_usage", {"pod_uid": "a"}, NOW - 31, 5.0)])
    cache.append([Sample("pod_memory_usage", {"pod_uid": "a"}, NOW - 31, 5.0)])
    server, _ = trained(cache)
    server.train([facts("a")])
    assert server.peak("a", 1, 1) is None


def test_a_model_without_samples_expires_with_its_checkpoint(tmp_path: Path) -> None:
    cache = MetricCache()
    series(cache, "pod_cpu_usage", {"pod_uid": "a"}, [0.5])
    series(cache, "pod_memory_usage", {"pod_uid": "a"}, [50 * MI])
    server, clock = trained(cache, tmp_path / FILE_NAME)
    server.train([facts("a")])
    server.checkpoint()
    assert server.gc() == []
    clock.now = NOW + 900  # exactly the expiration: kept
    assert server.gc() == []
    clock.now = NOW + 901
    expired = server.gc()
    assert "a" in expired and server.peak("a", 1, 1) is None
    assert "a" not in {s.uid for s in server.checkpoints.restore()}


def test_checkpoints_are_saved_oldest_first_at_most_max_per_step_per_interval() -> None:
    server, clock = trained(MetricCache())
    assert server.checkpoint() == 0  # not trained yet: nothing to save
    server.train([])  # the node-item models: five classes and the system
    assert len(server.models) == 6
    assert server.checkpoint() == 2
    assert server.checkpoint() == 2
    assert server.checkpoint() == 2
    assert server.checkpoint() == 0  # all saved within the interval
    clock.now += 299
    assert server.checkpoint() == 0
    clock.now += 1
    assert server.checkpoint() == 2
    assert len(server.checkpoints.restore()) == 6


def test_a_restart_restores_the_models_from_the_checkpoint_file(tmp_path: Path) -> None:
    path = tmp_path / "metric-data" / FILE_NAME
    cache = MetricCache()
    series(cache, "pod_cpu_usage", {"pod_uid": "a"}, [1.7, 0.2, 0.4])
    series(cache, "pod_memory_usage", {"pod_uid": "a"}, [321 * MI])
    first, clock = trained(cache, path)
    first.train([facts("a")])
    first.checkpoint()
    first.checkpoints.close()

    again, _ = trained(MetricCache(), path)
    assert again.restore() == 2  # a's and one node item (max per step 2)
    clock.now = NOW
    assert again.peak("a", 0.95, 0.98) == first.peak("a", 0.95, 0.98)
    assert again.first_seen("a") == NOW
    assert again.models["a"].last_updated == NOW


def test_a_corrupt_checkpoint_is_skipped_and_removed_and_the_others_restored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    store = CheckpointStore(path)
    good = {
        "cpu": {"referenceTimestamp": NOW, "bucketWeights": {"12": 10000}, "totalWeight": 3.0},
        "memory": {"referenceTimestamp": NOW, "bucketWeights": {"40": 10000}, "totalWeight": 3.0},
        "lastUpdated": NOW,
        "firstSeen": NOW - 86_400,
    }
    store.save(
        {
            "good": good,
            "out-of-range": {**good, "cpu": {"bucketWeights": {"999": 1}, "totalWeight": 1}},
            "no-time": {**good, "lastUpdated": "yesterday"},
        }
    )
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO checkpoints VALUES ('garbled', '{\"cpu\": [')")
    server, _ = trained(MetricCache(), path)
    assert server.restore() == 1
    assert server.peak("good", 1, 1) == Peak(
        int(CPU_BUCKETS.start(13) * 1000), int(MEMORY_BUCKETS.start(41))
    )
    assert server.first_seen("good") == NOW - 86_400
    assert {s.uid for s in server.checkpoints.restore()} == {"good"}
    logged = caplog.text
    assert "out-of-range" in logged and "garbled" in logged and "no-time" in logged


def test_a_checkpoint_file_that_is_not_a_database_means_checkpoints_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / FILE_NAME
    path.write_bytes(b"\x00\xff not sqlite " * 100)
    server, _ = trained(MetricCache(), path)
    assert server.restore() == 0
    server.train([])
    assert server.checkpoint() == 2  # still works, in memory
    assert "keeping them in memory" in caplog.text
