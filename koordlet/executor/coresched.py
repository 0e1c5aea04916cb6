"""Linux core scheduling (prctl PR_SCHED_CORE): share one cookie among a group's processes.

Needs CONFIG_SCHED_CORE; ``supported()`` probes it once with a harmless GET on this process, so
koordlet can say clearly that the kernel lacks it instead of failing per container.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence

PR_SCHED_CORE = 62
PR_SCHED_CORE_GET = 0
PR_SCHED_CORE_CREATE = 1
PR_SCHED_CORE_SHARE_TO = 2
PR_SCHED_CORE_SHARE_FROM = 3
PIDTYPE_TGID = 1  # the whole thread group

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


class CoreSchedError(OSError):
    pass


def _prctl(op: int, pid: int, kind: int, arg: int = 0) -> None:
    if _libc.prctl(PR_SCHED_CORE, op, pid, kind, arg) != 0:
        err = ctypes.get_errno()
        raise CoreSchedError(err, os.strerror(err))


def supported() -> bool:
    """Whether this kernel has core scheduling (a GET of our own cookie succeeds)."""
    cookie = ctypes.c_ulong(0)
    result = _libc.prctl(
        PR_SCHED_CORE, PR_SCHED_CORE_GET, 0, PIDTYPE_TGID, ctypes.addressof(cookie)
    )
    return result == 0 or ctypes.get_errno() not in (errno.EINVAL, errno.ENODEV)


def share_cookie(pids: Sequence[int]) -> None:
    """Give every pid in ``pids`` one new cookie: create it on the first, share it to the rest."""
    if not pids:
        return
    _prctl(PR_SCHED_CORE_CREATE, pids[0], PIDTYPE_TGID)
    # Take the first process's cookie into this thread, then push it to the others.
    _prctl(PR_SCHED_CORE_SHARE_FROM, pids[0], PIDTYPE_TGID)
    for pid in pids[1:]:
        _prctl(PR_SCHED_CORE_SHARE_TO, pid, PIDTYPE_TGID)
