"""Core-scheduling cookie groups with a recording prctl (this kernel has no core scheduling)."""

from __future__ import annotations

import os
import threading

import pytest

from koordlet.executor import coresched
from koordlet.executor.coresched import (
    PIDTYPE_PID,
    PIDTYPE_TGID,
    PR_SCHED_CORE_CREATE,
    PR_SCHED_CORE_SHARE_FROM,
    PR_SCHED_CORE_SHARE_TO,
    CookieGroups,
)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int]] = []
        self.threads: set[str] = set()

    def __call__(self, op: int, pid: int, kind: int) -> None:
        self.calls.append((op, pid, kind))
        self.threads.add(threading.current_thread().name)


def test_a_group_cookie_is_created_once_and_shared_with_later_members() -> None:
    prctl = Recorder()
    groups = CookieGroups(prctl)
    first = os.getpid()  # a live process, so it stays the group's holder

    groups.assign("g1-expeller", [first, 222])
    groups.assign("g1-expeller", [333])

    assert prctl.calls == [
        (PR_SCHED_CORE_CREATE, first, PIDTYPE_TGID),
        (PR_SCHED_CORE_SHARE_FROM, first, PIDTYPE_PID),
        (PR_SCHED_CORE_SHARE_TO, 222, PIDTYPE_TGID),
        (PR_SCHED_CORE_SHARE_FROM, first, PIDTYPE_PID),
        (PR_SCHED_CORE_SHARE_TO, 333, PIDTYPE_TGID),
    ]
    assert prctl.threads == {"core-sched"}  # never in koordlet's own threads


def test_a_gone_holder_is_replaced_by_the_next_member() -> None:
    prctl = Recorder()
    groups = CookieGroups(prctl)
    groups.members["g"] = 2**22 + 12345  # no such process
    groups.assign("g", [444])
    assert prctl.calls[0] == (PR_SCHED_CORE_CREATE, 444, PIDTYPE_TGID)
    assert groups.members["g"] == 444


def test_clearing_shares_cookie_zero_from_a_fresh_thread() -> None:
    prctl = Recorder()
    CookieGroups(prctl).clear([5, 6])
    assert prctl.calls == [
        (PR_SCHED_CORE_SHARE_TO, 5, PIDTYPE_TGID),
        (PR_SCHED_CORE_SHARE_TO, 6, PIDTYPE_TGID),
    ]


def test_errors_of_the_worker_reach_the_caller() -> None:
    def refuse(op: int, pid: int, kind: int) -> None:
        raise coresched.CoreSchedError(22, "Invalid argument")

    with pytest.raises(coresched.CoreSchedError) as err:
        CookieGroups(refuse).clear([7])
    assert err.value.errno == 22
