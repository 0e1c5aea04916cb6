"""The decaying histogram, against cases derived from Koordinator's (VPA's) histogram tests
(pkg/util/histogram/*_test.go) with other numbers.

Test buckets: first 1, ratio 2 up to 100: starts 0, 1, 3, 7, 15, 31, 63, 127 (8 buckets:
ceil(log2(100 + 1)) + 1), so a value's bucket and the percentile answered (the bucket's end)
are easy to see.
"""

from __future__ import annotations

import pytest

from koordlet.prediction.histogram import CheckpointError, DecayingHistogram, ExponentialBuckets
from koordlet.prediction.server import CPU_BUCKETS, MEMORY_BUCKETS

BUCKETS = ExponentialBuckets(100, 1, 2, 1e-10)
HALF_LIFE = 1800.0
T0 = 1_765_000_800.0  # a multiple of the half-life: the reference lands on it


def test_exponential_buckets_count_find_and_start() -> None:
    assert BUCKETS.count == 8
    assert [BUCKETS.start(b) for b in range(8)] == [0, 1, 3, 7, 15, 31, 63, 127]
    assert [BUCKETS.find(v) for v in (0.4, 1, 2.9, 3, 6.99, 7, 99, 5000)] == [
        0,
        1,
        1,
        2,
        2,
        3,
        6,
        7,
    ]
    with pytest.raises(IndexError):
        BUCKETS.start(8)
    with pytest.raises(ValueError, match="ratio > 1"):
        ExponentialBuckets(100, 1, 1, 1e-10)


def test_koordinators_cpu_and_memory_buckets() -> None:
    # cpu: ceil(ln(1024 * 0.05 / 0.025 + 1) / ln 1.05) + 1 = ceil(156.28) + 1
    assert CPU_BUCKETS.count == 158
    # memory: ceil(ln(2^41 * 0.05 / 5 MiB + 1) / ln 1.05) + 1 = ceil(203.95) + 1
    assert MEMORY_BUCKETS.count == 205
    # 0.3 cores: ln(0.3 * 0.05 / 0.025 + 1) / ln 1.05 = 9.63 → bucket 9, which ends at
    # 0.025 * (1.05^10 - 1) / 0.05 = 0.31444...
    assert CPU_BUCKETS.find(0.3) == 9
    assert CPU_BUCKETS.start(10) == pytest.approx(0.3144473, rel=1e-6)


def test_an_empty_histogram_answers_zero_for_any_percentile() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    assert h.is_empty()
    assert [h.percentile(p) for p in (-0.5, 0, 0.5, 1, 1.5)] == [0.0] * 5


def test_percentiles_with_four_samples_one_half_life_apart() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    # values 2, 4, 8, 16 (buckets 1..4) with weights 3, 1, 5, 2, each a half-life later: the
    # weights count 3/8, 1/4, 5/2, 2 (total 5.125); cumulative 7.3 %, 12.2 %, 61.0 %, 100 %
    for i, (v, w) in enumerate(((2, 3), (4, 1), (8, 5), (16, 2))):
        h.add_sample(v, w, T0 + i * HALF_LIFE)
    assert h.percentile(0.07) == 3
    assert h.percentile(0.074) == 7
    assert h.percentile(0.12) == 7
    assert h.percentile(0.123) == 15
    assert h.percentile(0.60) == 15
    assert h.percentile(0.61) == 31
    assert h.percentile(1.0) == 31
    # stored against the reference T0: 3 * 1 + 1 * 2 + 5 * 4 + 2 * 8
    assert h.total == pytest.approx(41)


def test_without_time_passing_it_is_a_plain_weighted_histogram() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    for v, w in ((2, 3), (4, 1), (8, 5), (16, 2)):  # total 11: 27.3 %, 36.4 %, 81.8 %, 100 %
        h.add_sample(v, w, T0)
    got = [h.percentile(p) for p in (0.27, 0.28, 0.36, 0.37, 0.818, 0.82, 1.0)]
    assert got == [3, 7, 7, 15, 15, 31, 31]


def test_an_old_heavy_sample_decays_to_almost_nothing() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    h.add_sample(40, 500, T0)  # bucket 5
    h.add_sample(4, 1, T0 + 20 * HALF_LIFE)  # counts 2^20 = 1,048,576 times one at T0
    assert h.percentile(0.999) == 7  # 500 / 1,049,076 of the weight is above: 0.05 %
    assert h.percentile(1.0) == 63  # but it is still there


def test_a_sample_past_the_decay_limit_moves_the_reference_and_drops_the_old() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    h.add_sample(40, 1, T0)
    h.add_sample(4, 1, T0 + 101 * HALF_LIFE)  # past 100 half-lives: weights scaled by 2^-101
    assert h.reference == T0 + 101 * HALF_LIFE
    assert h.percentile(1.0) == 7  # the old sample fell under epsilon
    assert h.total == pytest.approx(1.0)


def test_a_checkpoint_round_trip_keeps_the_percentiles() -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    for i, (v, w) in enumerate(((2, 3), (4, 1), (8, 5), (16, 2))):
        h.add_sample(v, w, T0 + i * HALF_LIFE)
    saved = h.save()
    # the heaviest bucket (8: 5 * 2^2 = 20) is 10,000; bucket 1: 3 * 2^0 = 3 → 1,500
    assert saved["bucketWeights"] == {"1": 1500, "2": 1000, "3": 10000, "4": 8000}
    assert saved["referenceTimestamp"] == T0
    back = DecayingHistogram(BUCKETS, HALF_LIFE)
    back.load(saved)
    assert back.total == pytest.approx(h.total)
    for p in (0.07, 0.074, 0.123, 0.61, 1.0):
        assert back.percentile(p) == h.percentile(p)
    back.add_sample(16, 1, T0 + 3 * HALF_LIFE)  # same reference: weights keep their scale
    assert back.total == pytest.approx(h.total + 8)


@pytest.mark.parametrize(
    ("checkpoint", "message"),
    [
        ({"totalWeight": -2, "bucketWeights": {"1": 3}}, "total weight"),
        ({"totalWeight": 5, "bucketWeights": {"8": 3}}, "outside"),
        ({"totalWeight": 5, "bucketWeights": {"x": 3}}, "not a number"),
        ({"totalWeight": 5, "bucketWeights": {"2": -1}}, "not a count"),
        ({"totalWeight": 5, "referenceTimestamp": "soon"}, "reference time"),
        ([1, 2], "an object"),
    ],
)
def test_a_malformed_checkpoint_is_refused_and_changes_nothing(
    checkpoint: object, message: str
) -> None:
    h = DecayingHistogram(BUCKETS, HALF_LIFE)
    h.add_sample(4, 1, T0)
    with pytest.raises(CheckpointError, match=message):
        h.load(checkpoint)
    assert h.total == 1 and h.percentile(1.0) == 7
