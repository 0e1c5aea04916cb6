"""Lease leader election, following client-go's ``tools/leaderelection`` step by step.

Candidates share one coordination.k8s.io/v1 Lease. A candidate takes it when the holder is
empty, or when the record has not changed for ``leaseDurationSeconds`` *as measured by the
candidate's own clock from when it last saw the record change*; renewTime is never compared with
the local clock, so clock skew between machines does not matter (only clock rate). Every write
is an UPDATE carrying the resourceVersion just read, so of two candidates racing for an expired
lease one gets 409 Conflict and simply fails that attempt.

The leader renews every RetryPeriod; if no renewal succeeds within RenewDeadline it stops
leading: the leading coroutine is cancelled and ``run`` returns (kube components then exit).
On shutdown the lease is released (empty holder, leaseDurationSeconds 1) so a successor need
not wait out the lease. This does not fence: a paused leader may act briefly after losing.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from lightkube.resources.coordination_v1 import Lease

from koordkube.client import KubeApi
from koordkube.errors import Conflict, Forbidden, NotFound
from koordkube.resources import Object

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""client-go's: acquire retries wait RetryPeriod * (1 + rand * 1.2)."""


def default_identity() -> str:
    """``<hostname>_<uuid>``, as kube components name themselves."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(moment: datetime) -> str:
    """Format a MicroTime: RFC 3339 in UTC with exactly six fractional digits."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease lives, who we are, and client-go's "core clients" timings (seconds)."""

    name: str
    namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    """How long others wait, from the last change they saw, before taking the lease."""
    renew_deadline: float = 10.0
    """How long the leader keeps retrying a renewal before it gives up leading."""
    retry_period: float = 2.0
    """Pause between attempts, for candidates (jittered) and the leader."""
    release_on_cancel: bool = True
    """Give the lease up when ``run`` ends, so a successor can take it at once."""

    def __post_init__(self) -> None:
        # The order and wording of client-go's NewLeaderElector checks.
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration <= 0:
            raise ValueError("leaseDuration must be greater than zero")
        if self.renew_deadline <= 0:
            raise ValueError("renewDeadline must be greater than zero")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        if not self.identity:
            raise ValueError("Lock identity is empty")
        # Not in client-go, which silently writes leaseDurationSeconds 0 for a sub-second
        # duration: a lease that is never valid, so every candidate would take it at once.
        if self.lease_duration < 1:
            raise ValueError("leaseDuration must be at least one second (the Lease has seconds)")
        if not self.name or not self.namespace:
            raise ValueError("the Lease needs a name and a namespace")


class Clock(Protocol):
    """Local time for the elector: ``monotonic`` judges expiry, ``now`` stamps the record."""

    def monotonic(self) -> float: ...

    def now(self) -> datetime: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass(frozen=True)
class Record:
    """client-go's LeaderElectionRecord: the Lease spec fields the election uses."""

    holder: str = ""
    duration: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0
    preferred_holder: str = ""
    strategy: str = ""

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> Record:
        return cls(
            holder=spec.get("holderIdentity") or "",
            duration=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            preferred_holder=spec.get("preferredHolder") or "",
            strategy=spec.get("strategy") or "",
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }
        if self.preferred_holder:
            spec["preferredHolder"] = self.preferred_holder
        if self.strategy:
            spec["strategy"] = self.strategy
        return spec


class LeaderElector:
    """Run work only while holding the Lease::

        elector = LeaderElector(api, LeaderElectionConfig("koord-manager", "koordinator-system"))
        await elector.run(start_controllers)   # returns once leadership is lost

    ``run`` cancels the ``on_started`` coroutine when leadership is lost, releases the lease
    (``release_on_cancel``) and calls ``on_stopped``; if the coroutine ends by itself (or
    raises), ``run`` steps down the same way (and re-raises).
    """

    def __init__(
        self,
        api: KubeApi,
        config: LeaderElectionConfig,
        *,
        clock: Clock | None = None,
        rand: Callable[[], float] = random.random,
        on_new_leader: Callable[[str], None] | None = None,
    ) -> None:
        self.api, self.config = api, config
        self.clock: Clock = clock or SystemClock()
        self.on_new_leader = on_new_leader
        self._rand = rand
        self._lease: Object | None = None  # the Lease as last read or written
        self._observed = Record()
        self._observed_raw: Record | None = None  # the record as last read from the server
        self._observed_time = 0.0
        self._reported_leader = ""

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def describe(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    def leader(self) -> str:
        """The holder last observed ("" if none yet)."""
        return self._observed.holder

    def is_leader(self) -> bool:
        return self._observed.holder == self.identity

    def healthy(self, tolerance: float = 0.0) -> bool:
        """client-go's ``Check``: False when leading without a renewal for LeaseDuration +
        tolerance (a wedged renew loop)."""
        if not self.is_leader():
            return True
        return (
            self.clock.monotonic() - self._observed_time <= self.config.lease_duration + tolerance
        )

    async def run(
        self,
        on_started: Callable[[], Coroutine[Any, Any, None]],
        on_stopped: Callable[[], None] | None = None,
    ) -> None:
        """Acquire, run ``on_started()`` while renewing, and step down when that stops."""
        await self._acquire()
        leading = asyncio.create_task(on_started(), name=f"leading {self.describe}")
        try:
            await self._renew(leading)
        finally:
            # The work must have stopped before the lease is given up, or two replicas could
            # act at once.
            leading.cancel()
            await asyncio.wait({leading})
            if self.config.release_on_cancel:
                await self.release()
            if on_stopped is not None:
                on_stopped()
        failure = None if leading.cancelled() else leading.exception()
        if failure is not None:
            raise failure

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go ``tryAcquireOrRenew``); True when we hold the lease after it."""
        now = self.clock.monotonic()
        stamp = micro_time(self.clock.now())
        record = Record(
            holder=self.identity,
            duration=int(self.config.lease_duration),
            acquire_time=stamp,
            renew_time=stamp,
        )
        # 1. Fast path: the leader writes over the object it last wrote, skipping the GET.
        if self.is_leader() and self._lease_valid(now):
            fast = Record(
                holder=record.holder,
                duration=record.duration,
                acquire_time=self._observed.acquire_time,
                renew_time=stamp,
                transitions=self._observed.transitions,
            )
            try:
                await self._update(fast)
            except Exception as exc:
                log.debug("renewing lease %s optimistically failed: %s", self.describe, exc)
            else:
                self._set_observed(fast)
                return True
        # 2. Read the lease, creating it if there is none.
        try:
            self._lease = await self.api.get(
                Lease, self.config.name, namespace=self.config.namespace
            )
        except NotFound:
            try:
                self._lease = await self.api.create(Lease, self._object(record))
            except Exception as exc:  # whatever it was, this attempt failed; the next one tries
                log.error("creating lease %s failed: %s", self.describe, exc)
                return False
            self._set_observed(record)
            return True
        except Exception as exc:  # whatever it was, this attempt failed; the next one tries
            log.error("reading lease %s failed: %s", self.describe, exc)
            return False
        # 3. A changed record restarts the expiry clock; a valid foreign lease stops us.
        old = Record.from_spec(self._lease.get("spec") or {})
        if old != self._observed_raw:
            self._set_observed(old)
            self._observed_raw = old
        if old.holder and self._lease_valid(now) and not self.is_leader():
            log.debug("lease %s is held by %s and has not expired", self.describe, old.holder)
            return False
        # 4. Take or renew it: a renewal keeps acquireTime, a takeover counts a transition.
        if self.is_leader():
            record = Record(
                holder=record.holder,
                duration=record.duration,
                acquire_time=old.acquire_time,
                renew_time=stamp,
                transitions=old.transitions,
            )
        else:
            record = Record(
                holder=record.holder,
                duration=record.duration,
                acquire_time=stamp,
                renew_time=stamp,
                transitions=old.transitions + 1,
            )
        try:
            await self._update(record)
        except Conflict as exc:  # a lost race: someone else wrote the lease since we read it
            log.debug("updating lease %s failed: %s", self.describe, exc)
            return False
        except Exception as exc:  # whatever it was, this attempt failed; the next one tries
            log.error("updating lease %s failed: %s", self.describe, exc)
            return False
        self._set_observed(record)
        return True

    async def release(self) -> bool:
        """Give the lease up (empty holder, 1 s duration) if we hold it; retry on conflict."""
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                while True:
                    try:
                        lease = await self.api.get(
                            Lease, self.config.name, namespace=self.config.namespace
                        )
                    except (Forbidden, NotFound) as exc:
                        self._not_released(exc)
                        return False
                    except Exception as exc:
                        log.error("reading lease %s to release it failed: %s", self.describe, exc)
                        return False
                    current = Record.from_spec(lease.get("spec") or {})
                    # client-go checks only its own observation; checking the holder it just
                    # read as well keeps a late release from wiping a successor's lease.
                    if not self.is_leader() or current.holder != self.identity:
                        return True
                    stamp = micro_time(self.clock.now())
                    released = Record(
                        duration=1,
                        acquire_time=stamp,
                        renew_time=stamp,
                        transitions=current.transitions,
                    )
                    self._lease = lease
                    try:
                        await self._update(released)
                    except Conflict:
                        continue  # written meanwhile: read it again
                    except (Forbidden, NotFound) as exc:
                        self._not_released(exc)
                        return False
                    except Exception as exc:  # release is best effort: the lease expires
                        log.error("releasing lease %s failed: %s", self.describe, exc)
                        return False
                    self._set_observed(released)
                    log.info("released lease %s", self.describe)
                    return True
        except TimeoutError:
            log.error("releasing lease %s timed out", self.describe)
            return False

    def _not_released(self, exc: Forbidden | NotFound) -> None:
        """The rights or the Lease went first: what ``helm uninstall`` does, deleting the
        release's Roles while its pods are still stopping. Nothing to repair: the lease runs
        out by itself."""
        log.warning(
            "lease %s not released (%s: %s): it runs out by itself within %gs; an uninstall "
            "removes the rights before its pods stop",
            self.describe, type(exc).__name__, exc, self.config.lease_duration,
        )  # fmt: skip

    async def _acquire(self) -> None:
        log.info("attempting to acquire lease %s as %s", self.describe, self.identity)
        while True:
            acquired = await self.try_acquire_or_renew()
            self._report_transition()
            if acquired:
                log.info("acquired lease %s", self.describe)
                return
            period = self.config.retry_period
            await asyncio.sleep(period + self._rand() * JITTER_FACTOR * period)

    async def _renew(self, leading: asyncio.Task[None]) -> None:
        """Renew every RetryPeriod until a renewal misses RenewDeadline or the work ends."""
        period = self.config.retry_period
        while not leading.done():
            try:
                async with asyncio.timeout(self.config.renew_deadline):
                    while True:
                        if await self.try_acquire_or_renew():
                            break
                        await asyncio.sleep(period)
            except TimeoutError:
                self._report_transition()
                log.warning("lost lease %s: no renewal within the deadline", self.describe)
                return
            self._report_transition()
            await asyncio.wait({leading}, timeout=period)

    async def _update(self, record: Record) -> None:
        if self._lease is None:
            raise RuntimeError("lease not initialized: read or create it first")
        lease = {**self._lease, "spec": record.to_spec()}
        self._lease = await self.api.replace(Lease, lease)

    def _object(self, record: Record) -> Object:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": record.to_spec(),
        }

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.duration > now

    def _set_observed(self, record: Record) -> None:
        self._observed = record
        self._observed_time = self.clock.monotonic()

    def _report_transition(self) -> None:
        holder = self._observed.holder
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        log.info("lease %s is held by %s", self.describe, holder or "nobody")
        if self.on_new_leader is not None:
            self.on_new_leader(holder)
