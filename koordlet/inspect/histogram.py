"""Log2 histograms of wait times in microseconds, as the BPF program fills them.

Slot ``s`` counts waits in [2^s, 2^(s+1)) µs (slot 0 also holds waits under 1 µs). The kernel
keeps cumulative counts; a window is the difference of two reads. Percentiles interpolate
linearly inside the slot that holds the rank, which is as good as a log2 histogram allows.

Usage::

    window = diff(now_counts, before_counts)      # {slot: count}
    percentile(window, 0.99)                      # µs, or None when empty
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MAX_SLOT = 40  # 2^40 µs is 12 days: anything above is a corrupt read


def slot_bounds(slot: int) -> tuple[float, float]:
    """[low, high) of a slot in µs."""
    return (0.0 if slot == 0 else float(1 << slot), float(1 << (slot + 1)))


def diff(now: Mapping[int, int], before: Mapping[int, int]) -> dict[int, int]:
    """Counts added since ``before``; a slot that went down (a reset map) counts from zero."""
    out = {}
    for slot, count in now.items():
        added = count - before.get(slot, 0)
        if added < 0:
            added = count
        if added > 0:
            out[slot] = added
    return out


def merge(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    total: dict[int, int] = {}
    for hist in histograms:
        for slot, count in hist.items():
            total[slot] = total.get(slot, 0) + count
    return total


def count(hist: Mapping[int, int]) -> int:
    return sum(hist.values())


def percentile(hist: Mapping[int, int], p: float) -> float | None:
    """The p-quantile in µs (0 < p <= 1), or None for an empty histogram."""
    total = count(hist)
    if total == 0:
        return None
    rank = p * total
    seen = 0
    for slot in sorted(hist):
        n = hist[slot]
        if seen + n >= rank:
            low, high = slot_bounds(slot)
            return low + (high - low) * max(0.0, rank - seen) / n
        seen += n
    return slot_bounds(max(hist))[1]


def mean(hist: Mapping[int, int]) -> float | None:
    """The mean in µs, each wait taken at its slot's midpoint."""
    total = count(hist)
    if total == 0:
        return None
    return sum(sum(slot_bounds(s)) / 2 * n for s, n in hist.items()) / total
