"""Linux core scheduling (prctl PR_SCHED_CORE): one cookie per group of processes.

Tasks with different cookies never share a core's hyper-threads at the same time. A group's
cookie is created once, on its first process, and copied to later members from a process that
has it (``CookieGroups`` remembers one per group). Every prctl that takes a cookie into the
calling task runs in a short-lived worker thread, so koordlet's own threads never carry one.
Needs CONFIG_SCHED_CORE; ``supported()`` probes it once so koordlet reports a missing feature
instead of failing per container.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PR_SCHED_CORE_CREATE = 1
PR_SCHED_CORE_SHARE_TO = 2
PR_SCHED_CORE_SHARE_FROM = 3
PIDTYPE_PID = 0
PIDTYPE_TGID = 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]

Prctl = Callable[[int, int, int], None]  # (op, pid, pidtype)


class CoreSchedError(OSError):
    pass


def prctl(op: int, pid: int, kind: int) -> None:
    if _libc.prctl(PR_SCHED_CORE, op, pid, kind, 0) != 0:
        err = ctypes.get_errno()
        raise CoreSchedError(err, f"prctl(PR_SCHED_CORE, {op}, pid {pid}): {os.strerror(err)}")


def supported() -> bool:
    """Whether this kernel has core scheduling (a GET of our own cookie succeeds)."""
    cookie = ctypes.c_ulong(0)
    result = _libc.prctl(
        PR_SCHED_CORE, PR_SCHED_CORE_GET, 0, PIDTYPE_TGID, ctypes.addressof(cookie)
    )
    return result == 0 or ctypes.get_errno() not in (errno.EINVAL, errno.ENODEV)


def _in_worker(work: Callable[[], None]) -> None:
    """Run ``work`` in a new thread (which starts without a cookie) and re-raise its error."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as err:  # handed to the caller below
            errors.append(err)

    thread = threading.Thread(target=run, name="core-sched")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


class CookieGroups:
    """Keeps each group's processes on one cookie; see the module docstring."""

    def __init__(self, call: Prctl = prctl) -> None:
        self.call = call
        self.members: dict[str, int] = {}  # group → a pid known to hold its cookie

    def assign(self, group: str, pids: Sequence[int]) -> None:
        """Put ``pids`` in ``group`` (creating its cookie on the first one if needed)."""
        if not pids:
            return

        def work() -> None:
            holder = self.members.get(group)
            if holder is not None and not Path(f"/proc/{holder}").exists():
                holder = None  # that process ended: the next member becomes the holder
            targets = list(pids)
            if holder is None:
                holder = targets.pop(0)
                self.call(PR_SCHED_CORE_CREATE, holder, PIDTYPE_TGID)
            self.call(PR_SCHED_CORE_SHARE_FROM, holder, PIDTYPE_PID)
            for pid in targets:
                if pid != holder:
                    self.call(PR_SCHED_CORE_SHARE_TO, pid, PIDTYPE_TGID)
            self.members[group] = holder

        _in_worker(work)

    def clear(self, pids: Sequence[int]) -> None:
        """Give ``pids`` cookie 0: a fresh thread has none and shares that."""

        def work() -> None:
            for pid in pids:
                self.call(PR_SCHED_CORE_SHARE_TO, pid, PIDTYPE_TGID)

        _in_worker(work)
