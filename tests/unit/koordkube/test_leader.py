"""Lease election as client-go runs it: two electors against the fake API, a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from koordkube.leader import LeaderElectionConfig, LeaderElector, micro_time
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import ManualClock, eventually, run, settle

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def config(identity: str, *, release: bool = True) -> LeaderElectionConfig:
    # Short timings keep the tests fast; the lease itself must be a whole second.
    return LeaderElectionConfig(
        "koord-manager",
        "koordinator-system",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.3,
        retry_period=0.02,
        release_on_cancel=release,
    )


class Candidate:
    """An elector plus a task running it, recording when its leading work runs."""

    def __init__(self, fake: FakeKubeAPI, identity: str, clock: ManualClock, **kw: Any) -> None:
        self.elector = LeaderElector(fake.kube_api(), config(identity, **kw), clock=clock)
        self.leading = False
        self.started = self.stopped = 0
        self.task: asyncio.Task[None] | None = None

    async def work(self) -> None:
        self.leading, self.started = True, self.started + 1
        try:
            await asyncio.Event().wait()
        finally:
            self.leading = False

    def on_stopped(self) -> None:
        self.stopped += 1

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.work, self.on_stopped))

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def spec(fake: FakeKubeAPI) -> dict[str, Any]:
    lease = fake.get("Lease", "koord-manager", "koordinator-system")
    assert lease is not None
    return dict(lease["spec"])


def test_default_timings_are_client_gos_and_pass_validation() -> None:
    cfg = LeaderElectionConfig("koord-manager", "koordinator-system")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert cfg.release_on_cancel
    host, _, uid = cfg.identity.rpartition("_")
    assert host == socket.gethostname() and len(uid) == 36


@pytest.mark.parametrize(
    ("timings", "message"),
    [
        pytest.param(
            (10, 10, 2), "leaseDuration must be greater than renewDeadline", id="lease-eq-renew"
        ),
        pytest.param(
            (15, 2.4, 2), "renewDeadline must be greater than retryPeriod", id="renew-le-jitter"
        ),
        pytest.param((15, 10, 0), "retryPeriod must be greater than zero", id="zero-retry"),
        pytest.param((0.9, 0.5, 0.1), "at least one second", id="sub-second-lease"),
    ],
)
def test_invalid_timings_are_refused(timings: tuple[float, float, float], message: str) -> None:
    lease, renew, retry = timings
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(
            "l", "ns", identity="me", lease_duration=lease, renew_deadline=renew, retry_period=retry
        )


def test_an_empty_identity_is_refused() -> None:
    with pytest.raises(ValueError, match="identity is empty"):
        LeaderElectionConfig("l", "ns", identity="")


def test_micro_time_always_has_six_fractional_digits_in_utc() -> None:
    moment = datetime(2026, 7, 24, 12, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    assert micro_time(moment) == "2026-07-24T10:00:05.000000Z"
    assert micro_time(moment.replace(microsecond=123)) == "2026-07-24T10:00:05.000123Z"


def test_the_first_candidate_creates_the_lease_and_the_second_waits() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a, b = Candidate(fake, "a", clock), Candidate(fake, "b", clock)
        a.start()
        await eventually(lambda: a.leading)
        created = fake.calls("create", "/leases$")[0].body
        assert created["metadata"] == {"name": "koord-manager", "namespace": "koordinator-system"}
        first = spec(fake)
        assert first["holderIdentity"] == "a" and first["leaseDurationSeconds"] == 1
        assert first["leaseTransitions"] == 0
        assert MICRO_TIME.match(first["acquireTime"]) and MICRO_TIME.match(first["renewTime"])
        b.start()
        await settle(0.2)  # many retry periods
        assert a.leading and not b.leading and b.elector.leader() == "a"
        renewed = spec(fake)
        assert renewed["acquireTime"] == first["acquireTime"]  # a renewal keeps acquireTime
        assert renewed["renewTime"] > first["renewTime"]
        assert fake.calls("update", "/leases/")  # renewals are conditional PUTs
        assert all(c.body["metadata"]["resourceVersion"] for c in fake.calls("update"))
        await a.stop()
        await b.stop()

    run(scenario())


def test_a_crashed_leaders_lease_is_taken_after_the_lease_duration_observed_locally() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a = Candidate(fake, "a", clock, release=False)
        b = Candidate(fake, "b", clock)
        a.start()
        await eventually(lambda: a.leading)
        b.start()
        await settle(0.1)
        await a.stop()  # a dies without releasing: its record stays, unrenewed
        held = spec(fake)
        assert held["holderIdentity"] == "a"
        await settle(0.1)  # b sees the record unchanged from now on
        clock.advance(0.9)
        await settle(0.1)
        assert not b.leading  # 0.9 s since b last saw a change: not expired yet
        clock.advance(0.2)
        await eventually(lambda: b.leading)
        taken = spec(fake)
        assert taken["holderIdentity"] == "b" and taken["leaseTransitions"] == 1
        assert taken["acquireTime"] > held["acquireTime"]  # a new term starts
        await b.stop()

    run(scenario())


def test_renewals_keep_the_lease_even_when_the_clock_jumps_between_them() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a, b = Candidate(fake, "a", clock), Candidate(fake, "b", clock)
        a.start()
        await eventually(lambda: a.leading)
        b.start()
        for _ in range(4):
            await settle(0.15)  # b reads the renewed record several times in between
            clock.advance(0.5)  # within the lease, and a renews in between each time
        assert a.leading and not b.leading
        await a.stop()
        await b.stop()

    run(scenario())


def test_releasing_on_shutdown_lets_the_other_take_over_at_once() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a, b = Candidate(fake, "a", clock), Candidate(fake, "b", clock)
        a.start()
        await eventually(lambda: a.leading)
        b.start()
        await settle(0.1)
        await a.stop()
        assert a.stopped == 1 and not a.leading
        released = spec(fake)
        assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
        assert released["leaseTransitions"] == 0
        await eventually(lambda: b.leading, timeout=5)  # no clock advance needed
        assert spec(fake)["leaseTransitions"] == 1
        await b.stop()

    run(scenario())


@pytest.mark.parametrize(("verb", "code"), [("get", 403), ("update", 403), ("get", 404)])
def test_a_release_refused_as_an_uninstall_refuses_it_is_a_warning_not_an_error(
    verb: str, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a = Candidate(fake, "a", clock)
        a.start()
        await eventually(lambda: a.leading)
        fake.fail(verb, r"/leases/", code, times=7)
        await a.stop()
        assert spec(fake)["holderIdentity"] == "a"  # not released: it runs out by itself

    with caplog.at_level("WARNING", logger="koordkube.leader"):
        run(scenario())
    (record,) = [r for r in caplog.records if "not released" in r.getMessage()]
    assert record.levelname == "WARNING"
    assert ("Forbidden" if code == 403 else "NotFound") in record.getMessage()
    assert "runs out by itself within 1s;" in record.getMessage()  # config(): 1 s
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_conflict_while_acquiring_is_a_lost_race() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        elector = LeaderElector(fake.kube_api(), config("b"), clock=clock)
        fake.seed(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "koord-manager", "namespace": "koordinator-system"},
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 3},
            }
        )
        fake.fail("update", "/leases/koord-manager$", 409)
        assert not await elector.try_acquire_or_renew()
        assert not elector.is_leader()
        assert await elector.try_acquire_or_renew()
        assert elector.is_leader() and spec(fake)["leaseTransitions"] == 4

    run(scenario())


def test_two_electors_racing_for_a_free_lease_elect_one() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        fake.seed(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "koord-manager", "namespace": "koordinator-system"},
                "spec": {"holderIdentity": ""},
            }
        )
        a = LeaderElector(fake.kube_api(), config("a"), clock=clock)
        b = LeaderElector(fake.kube_api(), config("b"), clock=clock)
        results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
        assert sorted(results) == [False, True]
        assert spec(fake)["holderIdentity"] == ("a" if results[0] else "b")

    run(scenario())


def test_a_leader_that_cannot_renew_within_the_deadline_stops_leading() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a = Candidate(fake, "a", clock)
        new_leaders: list[str] = []
        a.elector.on_new_leader = new_leaders.append
        a.start()
        await eventually(lambda: a.leading)
        fake.fail("update", "/leases/", 500, times=1000)
        fake.fail("get", "/leases/", 500, times=1000)
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert a.task is not None
        await asyncio.wait_for(a.task, 2)  # run returns: leadership lost
        assert 0.25 < loop.time() - start < 1.0  # about the 0.3 s renew deadline
        assert not a.leading and a.started == 1 and a.stopped == 1
        assert new_leaders == ["a"]

    run(scenario())


def test_leading_work_that_fails_steps_down_and_reraises() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        elector = LeaderElector(fake.kube_api(), config("a"), clock=clock)

        async def crash() -> None:
            raise RuntimeError("controller crashed")

        with pytest.raises(RuntimeError, match="controller crashed"):
            await elector.run(crash)
        assert spec(fake)["holderIdentity"] == ""

    run(scenario())


def test_only_one_of_two_candidates_leads_at_any_time() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        a, b = Candidate(fake, "a", clock), Candidate(fake, "b", clock)
        a.start()
        b.start()
        both_seen = False
        for step in range(60):
            await asyncio.sleep(0.005)
            both_seen |= a.leading and b.leading
            if step == 20:
                first = a if a.leading else b
                await first.stop()  # hands over through release
        assert not both_seen
        assert a.started == 1 and b.started == 1
        assert spec(fake)["leaseTransitions"] == 1
        await a.stop()
        await b.stop()

    run(scenario())


def test_health_check_fails_when_the_leader_stops_renewing() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        elector = LeaderElector(fake.kube_api(), config("a"), clock=clock)
        assert elector.healthy()
        assert await elector.try_acquire_or_renew()
        clock.advance(1.5)
        assert elector.healthy(tolerance=1.0) and not elector.healthy(tolerance=0.2)

    run(scenario())


def test_the_lease_times_are_written_in_utc() -> None:
    async def scenario() -> None:
        fake, clock = FakeKubeAPI(), ManualClock()
        elector = LeaderElector(fake.kube_api(), config("a"), clock=clock)
        before = datetime.now(UTC).replace(tzinfo=None)
        assert await elector.try_acquire_or_renew()
        written = datetime.strptime(spec(fake)["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert abs((written - before).total_seconds()) < 5

    run(scenario())
