"""Rates from monotonic counters: the last reading per series and the delta to the next one.

Every CPU figure a collector reports (node ticks, cgroup nanoseconds, throttled periods) is
a counter that only grows, so usage is (value now - value before) / (time now - time before).
``Counters`` keeps the previous reading of each series and turns the next one into a
``Delta``; the first reading of a series gives nothing, because a rate needs two.

A counter that went backwards (the container restarted under the same cgroup, a CPU went
offline, a wrap) gives no delta: its new value becomes the baseline and the caller skips the
sample with reason ``counter-reset``. Time that did not advance (the same ``now`` twice, a
wall clock stepped back) is skipped the same way, as ``time-not-advancing``; a rate over zero
or negative seconds would be infinite or negative.

This module does no I/O and knows nothing about metrics; ``Skip`` (from
``koordlet.cgroupfs.readers``) is the one exception the collectors use for "this series has
no sample this pass, and here is why".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from koordlet.cgroupfs.readers import Skip

K = TypeVar("K", bound=Hashable)

COUNTER_RESET = "counter-reset"
TIME_NOT_ADVANCING = "time-not-advancing"


@dataclass(frozen=True)
class Delta:
    """How much each counter of a series grew, and over how many seconds."""

    values: tuple[float, ...]
    seconds: float

    @property
    def value(self) -> float:
        return self.values[0]

    def per_second(self, index: int = 0, unit: float = 1.0) -> float:
        """Growth per second of counter ``index``, divided by ``unit`` (ticks or ns per core)."""
        return self.values[index] / self.seconds / unit


class Counters(Generic[K]):
    """The last reading (time, counter values) of each series, keyed by anything hashable."""

    def __init__(self) -> None:
        self._last: dict[K, tuple[float, tuple[float, ...]]] = {}

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, key: object) -> bool:
        return key in self._last

    def update(self, key: K, now: float, *values: float) -> Delta | None:
        """Record a reading; the delta since the previous one, None for a series' first.

        Raises ``Skip`` (counter-reset or time-not-advancing) when no honest delta exists;
        the reading still becomes the baseline, so the next pass computes normally.
        """
        previous = self._last.get(key)
        self._last[key] = (now, values)
        if previous is None:
            return None
        before, old = previous
        if len(old) != len(values):  # a different shape is a different series
            return None
        # one and two counters written out: this runs for every series every second, and a
        # generator costs more than the arithmetic it carries
        if len(values) == 1:
            grown: tuple[float, ...] = (values[0] - old[0],)
        elif len(values) == 2:
            grown = (values[0] - old[0], values[1] - old[1])
        else:
            grown = tuple([new - prior for new, prior in zip(values, old, strict=True)])
        if min(grown) < 0:
            raise Skip(COUNTER_RESET, f"{key!r} went from {old} to {values}")
        seconds = now - before
        if seconds <= 0:
            raise Skip(TIME_NOT_ADVANCING, f"{key!r}: {seconds:+.3f} s since the last reading")
        return Delta(grown, seconds)

    def forget(self, key: K) -> None:
        self._last.pop(key, None)

    def retain_only(self, live: Collection[K]) -> int:
        """Drop the state of every series not in ``live``; returns how many (a set
        difference: it runs over every series every pass)."""
        gone = self._last.keys() - live
        for key in gone:
            del self._last[key]
        return len(gone)

    def retain(self, keep: Callable[[K], bool]) -> int:
        """Drop the state of every series ``keep`` rejects (gone pods); returns how many."""
        gone = [key for key in self._last if not keep(key)]
        for key in gone:
            del self._last[key]
        return len(gone)
