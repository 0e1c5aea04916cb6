"""Koordinator's decaying histogram (pkg/util/histogram, itself the VPA recommender's).

Buckets grow exponentially: bucket 0 is [0, first), bucket i starts at
``first * (ratio**i - 1) / (ratio - 1)``, and the last bucket takes everything above
``max_value``. A sample's weight is multiplied by ``2 ** ((t - reference) / half_life)``, so a
sample one half-life newer counts twice as much; instead of growing without bound, the
reference moves forward (every weight scaled down by the same power of two) once a sample is
more than ``MAX_DECAY_EXPONENT`` half-lives past it. Percentiles answer the *end* of the bucket
where the cumulative weight reaches the fraction, so a prediction errs upwards by at most one
bucket (with Koordinator's ratio a little over 5 % of the value, except in the first buckets).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

MAX_DECAY_EXPONENT = 100
MAX_CHECKPOINT_WEIGHT = 10_000  # a checkpoint's largest bucket, the others scaled alike


class CheckpointError(ValueError):
    """A histogram checkpoint that cannot be loaded."""


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


@dataclass(frozen=True)
class ExponentialBuckets:
    """Koordinator's NewExponentialHistogramOptions: where values fall, and bucket starts."""

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float  # a bucket lighter than this counts as empty
    count: int = field(init=False)

    def __post_init__(self) -> None:
        if (
            self.max_value <= 0
            or self.first_bucket_size <= 0
            or self.ratio <= 1
            or self.epsilon <= 0
        ):
            raise ValueError("max value, first bucket size and epsilon > 0, ratio > 1")
        span = self.max_value * (self.ratio - 1) / self.first_bucket_size + 1
        object.__setattr__(self, "count", math.ceil(math.log(span, self.ratio)) + 1)

    def find(self, value: float) -> int:
        if value < self.first_bucket_size:
            return 0
        bucket = int(math.log(value * (self.ratio - 1) / self.first_bucket_size + 1, self.ratio))
        return min(bucket, self.count - 1)

    def start(self, bucket: int) -> float:
        if not 0 <= bucket < self.count:
            raise IndexError(f"bucket {bucket} out of range [0..{self.count - 1}]")
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio**bucket - 1) / (self.ratio - 1)


class DecayingHistogram:
    """Weights per bucket with exponential decay in time (times are unix seconds)."""

    __slots__ = (
        "buckets",
        "half_life",
        "max_bucket",
        "min_bucket",
        "reference",
        "total",
        "weights",
    )

    def __init__(self, buckets: ExponentialBuckets, half_life: float) -> None:
        if half_life <= 0:
            raise ValueError("the half-life must be positive")
        self.buckets = buckets
        self.half_life = half_life
        # array of doubles: 8 bytes a bucket (a list would hold a float object per bucket)
        self.weights = array("d", bytes(8 * buckets.count))
        self.total = 0.0
        self.min_bucket = buckets.count - 1
        self.max_bucket = 0
        # None: no sample yet (Koordinator's zero time, which its first sample always moves)
        self.reference: float | None = None

    # -- plain histogram ----------------------------------------------------------------------

    def _add(self, value: float, weight: float) -> None:
        bucket = self.buckets.find(value)
        self.weights[bucket] += weight
        self.total += weight
        heavy = self.weights[bucket] >= self.buckets.epsilon
        if bucket < self.min_bucket and heavy:
            self.min_bucket = bucket
        if bucket > self.max_bucket and heavy:
            self.max_bucket = bucket

    def _scale(self, factor: float) -> None:
        for bucket in range(self.min_bucket, self.max_bucket + 1):
            self.weights[bucket] *= factor
        self.total *= factor
        self._update_min_max()

    def _update_min_max(self) -> None:
        epsilon, last = self.buckets.epsilon, self.buckets.count - 1
        while self.weights[self.min_bucket] < epsilon and self.min_bucket < last:
            self.min_bucket += 1
        while self.weights[self.max_bucket] < epsilon and self.max_bucket > 0:
            self.max_bucket -= 1

    def is_empty(self) -> bool:
        return self.weights[self.min_bucket] < self.buckets.epsilon

    def percentile(self, fraction: float) -> float:
        """The end of the bucket where the cumulative weight reaches ``fraction`` of the total
        (the last bucket's start when that is the last bucket); 0 when empty."""
        if self.is_empty():
            return 0.0
        threshold = fraction * self.total
        partial = 0.0
        bucket = self.min_bucket
        while bucket < self.max_bucket:
            partial += self.weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.buckets.count - 1:
            return self.buckets.start(bucket + 1)
        return self.buckets.start(bucket)

    # -- decay --------------------------------------------------------------------------------

    def add_sample(self, value: float, weight: float, at: float) -> None:
        if weight < 0:
            raise ValueError("a sample's weight must not be negative")
        self._add(value, weight * self._decay_factor(at))

    def _decay_factor(self, at: float) -> float:
        if self.reference is None or at > self.reference + self.half_life * MAX_DECAY_EXPONENT:
            self._shift_reference(at)
        assert self.reference is not None
        return math.exp2((at - self.reference) / self.half_life)

    def _shift_reference(self, at: float) -> None:
        # Go's Time.Round counts from year 1, a whole number of days before the unix epoch:
        # the same multiples for any half-life that divides a day
        new_reference = _round_half_up(at / self.half_life) * self.half_life
        if self.reference is not None:
            exponent = _round_half_up((self.reference - new_reference) / self.half_life)
            self._scale(math.ldexp(1.0, exponent))
        self.reference = new_reference

    # -- checkpoints --------------------------------------------------------------------------

    def save(self) -> dict[str, Any]:
        """Koordinator's HistogramCheckpoint: the buckets scaled so the heaviest is 10,000
        (integers, as VPA stores them), the total weight and the reference time."""
        weights: dict[str, int] = {}
        heaviest = max(
            (self.weights[b] for b in range(self.min_bucket, self.max_bucket + 1)), default=0.0
        )
        if heaviest > 0:
            ratio = MAX_CHECKPOINT_WEIGHT / heaviest
            for bucket in range(self.min_bucket, self.max_bucket + 1):
                scaled = _round_half_up(self.weights[bucket] * ratio)
                if scaled > 0:
                    weights[str(bucket)] = scaled
        return {
            "referenceTimestamp": self.reference,
            "bucketWeights": weights,
            "totalWeight": self.total,
        }

    def load(self, checkpoint: object) -> None:
        """Add a checkpoint's weights (Koordinator's LoadFromCheckpoint); raises
        CheckpointError for one that is malformed, leaving the histogram unchanged."""
        if not isinstance(checkpoint, dict):
            raise CheckpointError("a checkpoint must be an object")
        total = checkpoint.get("totalWeight", 0.0)
        reference = checkpoint.get("referenceTimestamp")
        raw = checkpoint.get("bucketWeights") or {}
        if not isinstance(total, int | float) or total < 0 or not math.isfinite(total):
            raise CheckpointError(f"total weight {total!r} is not a non-negative number")
        if reference is not None and not isinstance(reference, int | float):
            raise CheckpointError(f"reference time {reference!r} is not a number")
        if not isinstance(raw, dict):
            raise CheckpointError("bucket weights must be an object")
        parsed: dict[int, int] = {}
        for key, weight in raw.items():
            try:
                bucket = int(key)
            except ValueError:
                raise CheckpointError(f"bucket {key!r} is not a number") from None
            if not 0 <= bucket < self.buckets.count:
                raise CheckpointError(f"bucket {bucket} is outside [0..{self.buckets.count - 1}]")
            if not isinstance(weight, int) or weight < 0:
                raise CheckpointError(f"bucket {bucket}'s weight {weight!r} is not a count")
            parsed[bucket] = weight
        count = sum(parsed.values())
        self.reference = None if reference is None else float(reference)
        if count == 0:
            return
        ratio = total / count
        for bucket, weight in parsed.items():
            self.min_bucket = min(self.min_bucket, bucket)
            self.max_bucket = max(self.max_bucket, bucket)
            self.weights[bucket] += weight * ratio
        self.total += total
