"""The collector contract and the runner that keeps collectors on their schedules.

A collector is an object with a ``name``, an ``interval`` (seconds) and ``collect(now)``
returning samples. Collectors that share an interval run as one pass: each reads at the same
``now``, in list order, and the pass is stored with one append, so a reader sees all of a pass
or none of it. A collector with ``derive(now, samples)`` instead of reading files computes its
samples from what the collectors before it read in the same pass (system usage = node - pods
of the same instant, never a node sample of one moment against pods of another).

A collector raises ``CollectorUnavailable`` when its source does not exist on this node (no
PSI, no perf counters, no NVML): the runner reports that once and stops calling it.
Any other exception fails that pass only: counted, logged once per distinct message, and the
next pass runs as usual. A single series that cannot be read (a container that disappeared
mid-read, a malformed file, a counter that went backwards) is the collector's to skip; it
counts those in ``skipped`` so they show up in the metrics.

Usage::

    runner = CollectorRunner([NodeCollector(proc_root), PodCollector(...), SystemCollector()],
                             cache)
    await runner.run()            # until cancelled
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from koordlet.metriccache import MetricCache, Sample
from koordlet.threads import in_thread

log = logging.getLogger(__name__)


class CollectorUnavailable(Exception):
    """The collector's source does not exist on this node; the message says what is missing."""


class Collector(Protocol):
    name: str
    interval: float
    skipped: Counter[str]  # reason → series skipped since start

    def collect(self, now: float) -> list[Sample]: ...


class Derived(Protocol):
    """A collector computed from the samples the collectors before it read in its pass."""

    name: str
    interval: float
    skipped: Counter[str]

    def derive(self, now: float, samples: Sequence[Sample]) -> list[Sample]: ...


@dataclass
class CollectorHealth:
    passes: int = 0
    errors: int = 0
    last_success: float = 0.0
    last_error: str = ""
    unavailable: str = ""  # why the collector is off, when it is
    samples: int = 0
    seconds: float = 0.0  # time of the last pass


@dataclass
class CollectorRunner:
    collectors: Sequence[Collector | Derived]
    cache: MetricCache
    health: dict[str, CollectorHealth] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for collector in self.collectors:
            self.health.setdefault(collector.name, CollectorHealth())

    def passes(self) -> list[list[Collector | Derived]]:
        """The collectors grouped by interval, each group in list order."""
        groups: dict[float, list[Collector | Derived]] = {}
        for collector in self.collectors:
            groups.setdefault(collector.interval, []).append(collector)
        return list(groups.values())

    def run_once(self, collector: Collector | Derived, now: float | None = None) -> None:
        """One pass of one collector (a derived one sees nothing); never raises."""
        self.run_pass([collector], now)

    def run_pass(self, collectors: Sequence[Collector | Derived], now: float | None = None) -> None:
        """One pass of collectors sharing an interval, stored with one append; never raises
        except for cancellation."""
        now = time.time() if now is None else now
        read: list[Sample] = []
        counted: list[tuple[CollectorHealth, int]] = []
        for collector in collectors:
            samples = self._read(collector, now, read)
            if samples is not None:
                read.extend(samples)
                counted.append((self.health[collector.name], len(samples)))
        try:
            self.cache.append(read)
        except Exception as err:  # a full disk fails the pass's reads, not the daemon
            message = f"{type(err).__name__}: {err}"
            if any(health.last_error != message for health, _ in counted):
                log.warning("a collection pass was not stored: %s", message)
            for health, _ in counted:
                health.errors += 1
                health.last_error = message
            return
        succeeded = time.time()
        for health, count in counted:
            health.samples = count
            health.passes += 1
            health.last_success = succeeded

    def _read(
        self, collector: Collector | Derived, now: float, read: Sequence[Sample]
    ) -> list[Sample] | None:
        """The collector's samples of this pass; None when it is off or failed."""
        health = self.health[collector.name]
        if health.unavailable:
            return None
        start = time.perf_counter()
        try:
            if hasattr(collector, "derive"):
                return collector.derive(now, read)
            return collector.collect(now)
        except CollectorUnavailable as err:
            health.unavailable = str(err)
            log.warning("collector %s is off: %s", collector.name, err)
            return None
        except Exception as err:  # one source failing must not stop the others
            health.errors += 1
            message = f"{type(err).__name__}: {err}"
            if message != health.last_error:
                log.warning("collector %s failed: %s", collector.name, message)
            health.last_error = message
            return None
        finally:
            health.seconds = time.perf_counter() - start

    async def _loop(self, collectors: list[Collector | Derived]) -> None:
        while any(not self.health[c.name].unavailable for c in collectors):
            await in_thread(self.run_pass, collectors)
            await asyncio.sleep(collectors[0].interval)

    async def run(self) -> None:
        await asyncio.gather(*(self._loop(group) for group in self.passes()))

    def close(self) -> None:
        """Release what collectors hold open (the network collector's netlink socket)."""
        for collector in self.collectors:
            close = getattr(collector, "close", None)
            if callable(close):
                close()
