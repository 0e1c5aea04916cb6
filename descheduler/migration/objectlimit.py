"""objectLimiters: how often the pods of one workload, or of one namespace, may be evicted.

It follows Koordinator v1.8.0's migration controller (initObjectLimiters,
checkPodExceedObjectLimiter, trackEvictedPod, track): each eviction feeds a token bucket of the
evicted pod's object (its controller for ``workload``, its namespace for ``namespace``) that
refills at ``maxMigrating`` tokens per ``duration`` and holds up to ``burst`` (0: 1), starting
full; a job whose pod's bucket holds less than one token waits (the controller looks again
after 3 s) instead of evicting. ``maxMigrating`` of a workload limiter is the limiter's own,
else ``maxMigratingPerWorkload``, scaled to the workload's expected replicas as arbitration
scales it; a namespace limiter takes a whole number only (a percentage counts as 0). A
maxMigrating of 0 (or a workload whose replicas are unknown) tracks nothing, and, as upstream,
the limiters after it are not fed for that eviction either. A limiter with no duration is off;
a bucket not fed for 1.5 durations is forgotten (upstream's cache expiry; its janitor may keep
one up to twice as long, which only matters for a bucket that has refilled anyway).

The buckets behave as golang.org/x/time/rate's Limiter: tokens accrue continuously, a changed
rate applies from the moment it changes, and an eviction that finds the bucket empty is not
charged (the eviction has happened all the same; the bucket only gates the next ones).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from descheduler.migration.args import LIMITER_NAMESPACE, LIMITER_WORKLOAD, ObjectLimiter
from descheduler.migration.int_or_percent import IntOrPercent, max_migrating
from descheduler.migration.view import PodView

log = logging.getLogger(__name__)

EXPIRY_FACTOR = 1.5  # limiterExpiration = trackExpiration + trackExpiration/2


@dataclass
class _Bucket:
    rate: float  # tokens a second
    burst: int
    tokens: float
    stamp: float  # when ``tokens`` was right
    fed: float  # the last eviction tracked: the bucket is forgotten EXPIRY_FACTOR durations on

    def advance(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now


def _object(kind: str, pod: PodView) -> tuple[str, str]:
    """(the bucket's key, the object as the log names it); no key: not limited by ``kind``."""
    if kind == LIMITER_WORKLOAD:
        if pod.owner is None:
            return "", ""
        return pod.owner.uid, pod.owner.describe()
    if kind == LIMITER_NAMESPACE:
        return pod.namespace, pod.namespace
    return "", ""


def _whole_number(value: IntOrPercent | None) -> int:
    """intstr's IntValue of a namespace limiter's maxMigrating: a percentage is 0."""
    if isinstance(value, int):
        return value
    if value is None or value.endswith("%"):
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


class ObjectLimiters:
    """The buckets of every configured limiter; ``clock`` gives seconds."""

    def __init__(self, limiters: Mapping[str, ObjectLimiter], clock: Callable[[], float]) -> None:
        self.limiters = {kind: lim for kind, lim in limiters.items() if lim.duration > 0}
        self.clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def _expire(self, now: float) -> None:
        for (kind, key), bucket in list(self._buckets.items()):
            if now - bucket.fed >= EXPIRY_FACTOR * self.limiters[kind].duration:
                del self._buckets[(kind, key)]

    def exceeded(self, pod: PodView) -> tuple[str, str] | None:
        """(the limiter, why) when ``pod`` may not be evicted yet (a limiter's bucket of it is
        empty), else None."""
        now = self.clock()
        self._expire(now)
        for kind in self.limiters:
            key, scope = _object(kind, pod)
            bucket = self._buckets.get((kind, key)) if key else None
            if bucket is None:
                continue
            bucket.advance(now)
            if bucket.tokens < 1:
                wait = (1 - bucket.tokens) / bucket.rate
                return kind, (
                    f"the {kind} {scope} has been frequently descheduled recently "
                    f"(object limiter: next in {wait:.0f}s)"
                )
        return None

    def track(
        self,
        pod: PodView,
        expected_replicas: Callable[[str], int | None],
        max_migrating_per_workload: IntOrPercent | None,
    ) -> None:
        """trackEvictedPod: ``pod`` was just evicted. ``expected_replicas`` gives a workload's
        (by its uid), None when its controller is not found."""
        now = self.clock()
        self._expire(now)
        for kind, limiter in self.limiters.items():
            key, scope = _object(kind, pod)
            if not key:
                continue
            if kind == LIMITER_NAMESPACE:
                most = _whole_number(limiter.max_migrating)
            else:
                expected = expected_replicas(key)
                value = limiter.max_migrating
                if value is None:
                    value = max_migrating_per_workload
                most = 0 if expected is None else max_migrating(expected, value)
            if most <= 0:
                return  # as upstream: the limiters after this one are not fed either
            rate = most / limiter.duration
            bucket = self._buckets.get((kind, key))
            if bucket is None:
                burst = limiter.burst or 1
                bucket = _Bucket(rate, burst, float(burst), now, now)
                self._buckets[(kind, key)] = bucket
            else:
                bucket.advance(now)  # SetLimit: what accrued so far at the old rate
                bucket.rate = rate
            if bucket.tokens >= 1:
                bucket.tokens -= 1
            else:
                log.info(
                    "the %s %s has been frequently descheduled recently and needs to be "
                    "limited for a period of time",
                    kind,
                    scope,
                )
            bucket.fed = now
