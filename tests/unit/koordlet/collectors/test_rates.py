"""The shared counter arithmetic: first reading, deltas, resets, time that does not advance."""

from __future__ import annotations

import pytest

from koordlet.cgroupfs.readers import Skip
from koordlet.collectors.rates import COUNTER_RESET, TIME_NOT_ADVANCING, Counters, Delta


def test_the_first_reading_gives_nothing_and_the_second_a_delta() -> None:
    counters: Counters[str] = Counters()
    assert counters.update("a", 10.0, 5_000_000_000) is None
    delta = counters.update("a", 11.0, 7_000_000_000)
    assert delta == Delta((2_000_000_000,), 1.0)
    assert delta.per_second(unit=1e9) == 2.0  # Δ2e9 ns over 1 s = 2 cores


def test_a_rate_is_per_elapsed_second() -> None:
    counters: Counters[str] = Counters()
    counters.update("ticks", 100.0, 170)
    delta = counters.update("ticks", 102.0, 470)
    assert delta is not None
    assert delta.per_second(unit=100) == 1.5  # 300 ticks / 2 s / 100 ticks per core-second


def test_a_counter_that_went_backwards_is_skipped_once_and_then_rebased() -> None:
    counters: Counters[str] = Counters()
    counters.update("a", 1.0, 500)
    with pytest.raises(Skip) as caught:
        counters.update("a", 2.0, 100)
    assert caught.value.reason == COUNTER_RESET
    delta = counters.update("a", 3.0, 300)
    assert delta == Delta((200,), 1.0)


def test_time_that_did_not_advance_is_skipped() -> None:
    counters: Counters[str] = Counters()
    counters.update("a", 5.0, 1)
    with pytest.raises(Skip) as caught:
        counters.update("a", 5.0, 2)
    assert caught.value.reason == TIME_NOT_ADVANCING
    with pytest.raises(Skip):
        counters.update("a", 4.0, 3)  # a wall clock stepped back
    assert counters.update("a", 6.0, 5) == Delta((2,), 2.0)


def test_several_counters_move_together_and_any_reset_skips_all() -> None:
    counters: Counters[str] = Counters()
    counters.update("t", 0.0, 100, 10)
    assert counters.update("t", 1.0, 150, 20) == Delta((50, 10), 1.0)
    with pytest.raises(Skip):
        counters.update("t", 2.0, 160, 5)


def test_retain_and_forget_drop_state() -> None:
    counters: Counters[tuple[str, str]] = Counters()
    counters.update(("cpu", "a"), 0.0, 1)
    counters.update(("cpu", "b"), 0.0, 1)
    assert counters.retain(lambda key: key[1] == "a") == 1
    assert ("cpu", "b") not in counters
    assert ("cpu", "a") in counters
    counters.forget(("cpu", "a"))
    assert len(counters) == 0
    assert counters.update(("cpu", "a"), 1.0, 5) is None  # a new series starts over


@pytest.mark.parametrize("width", [1, 2, 3])
def test_a_reset_of_any_one_counter_skips_whatever_the_number_of_counters(width: int) -> None:
    counters: Counters[str] = Counters()
    counters.update("t", 0.0, *[100] * width)
    assert counters.update("t", 1.0, *[150] * width) == Delta((50,) * width, 1.0)
    for reset in range(width):
        values = [200] * width
        values[reset] = 10
        with pytest.raises(Skip):
            counters.update("t", 2.0 + reset, *values)
        counters.update("t", 2.5 + reset, *[1000] * width)  # a fresh baseline


def test_retain_only_keeps_the_live_series_and_says_how_many_went() -> None:
    counters: Counters[tuple[str, str]] = Counters()
    for key in (("cpu", "a"), ("cpu", "b"), ("throttle", "b")):
        counters.update(key, 0.0, 1)
    assert counters.retain_only({("cpu", "b"), ("cpu", "z")}) == 2
    assert ("cpu", "b") in counters and len(counters) == 1
    assert counters.update(("cpu", "a"), 1.0, 5) is None  # a new series starts over
