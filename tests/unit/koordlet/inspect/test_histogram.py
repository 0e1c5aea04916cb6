"""Log2 histogram arithmetic: windows, merging, percentiles by interpolation."""

from __future__ import annotations

import pytest

from koordlet.inspect import histogram


def test_slot_bounds_double_and_slot_zero_starts_at_zero() -> None:
    assert histogram.slot_bounds(0) == (0.0, 2.0)
    assert histogram.slot_bounds(1) == (2.0, 4.0)
    assert histogram.slot_bounds(10) == (1024.0, 2048.0)


def test_diff_is_the_window_and_a_reset_counts_from_zero() -> None:
    assert histogram.diff({1: 10, 2: 5}, {1: 4, 2: 5}) == {1: 6}
    assert histogram.diff({1: 3}, {1: 10}) == {1: 3}  # the map was reset: all 3 are new
    assert histogram.diff({}, {1: 2}) == {}


def test_merge_adds_slot_by_slot() -> None:
    assert histogram.merge([{1: 2, 3: 1}, {1: 1}, {}]) == {1: 3, 3: 1}


def test_percentile_interpolates_inside_the_slot() -> None:
    hist = {3: 50, 10: 50}  # half in [8, 16) us, half in [1024, 2048) us
    assert histogram.percentile(hist, 0.5) == 16.0  # the top of the first half's slot
    assert histogram.percentile(hist, 0.25) == 12.0  # halfway through [8, 16)
    assert histogram.percentile(hist, 0.99) == pytest.approx(1024 + 1024 * 49 / 50)
    assert histogram.percentile({}, 0.5) is None


def test_mean_uses_slot_midpoints() -> None:
    assert histogram.mean({1: 1, 2: 1}) == pytest.approx((3.0 + 6.0) / 2)
    assert histogram.mean({}) is None
