"""The collector contract and the runner that keeps each collector on its own schedule.

A collector is an object with a ``name``, an ``interval`` (seconds) and ``collect(now)``
returning samples. It raises ``CollectorUnavailable`` when its source does not exist on this
node (no PSI, no perf counters, no NVML): the runner reports that once and stops calling it.
Any other exception fails that pass only: counted, logged once per distinct message, and the
next pass runs as usual. A single series that cannot be read (a container that disappeared
mid-read, a malformed file, a counter that went backwards) is the collector's to skip; it
counts those in ``skipped`` so they show up in the metrics.

Usage::

    runner = CollectorRunner([NodeCollector(proc_root)], cache)
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

log = logging.getLogger(__name__)


class CollectorUnavailable(Exception):
    """The collector's source does not exist on this node; the message says what is missing."""


class Collector(Protocol):
    name: str
    interval: float
    skipped: Counter[str]  # reason → series skipped since start

    def collect(self, now: float) -> list[Sample]: ...


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
    collectors: Sequence[Collector]
    cache: MetricCache
    health: dict[str, CollectorHealth] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for collector in self.collectors:
            self.health.setdefault(collector.name, CollectorHealth())

    def run_once(self, collector: Collector, now: float | None = None) -> None:
        """One pass of one collector; never raises except for cancellation."""
        health = self.health[collector.name]
        if health.unavailable:
            return
        start = time.perf_counter()
        try:
            samples = collector.collect(time.time() if now is None else now)
            health.samples = self.cache.append(samples)
        except CollectorUnavailable as err:
            health.unavailable = str(err)
            log.warning("collector %s is off: %s", collector.name, err)
            return
        except Exception as err:  # one source failing must not stop the others
            health.errors += 1
            message = f"{type(err).__name__}: {err}"
            if message != health.last_error:
                log.warning("collector %s failed: %s", collector.name, message)
            health.last_error = message
            return
        finally:
            health.seconds = time.perf_counter() - start
        health.passes += 1
        health.last_success = time.time()

    async def _loop(self, collector: Collector) -> None:
        while not self.health[collector.name].unavailable:
            await asyncio.to_thread(self.run_once, collector)
            await asyncio.sleep(collector.interval)

    async def run(self) -> None:
        await asyncio.gather(*(self._loop(c) for c in self.collectors))

    def close(self) -> None:
        """Release what collectors hold open (the network collector's netlink socket)."""
        for collector in self.collectors:
            close = getattr(collector, "close", None)
            if callable(close):
                close()
