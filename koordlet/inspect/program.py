"""The BPF program that measures run-queue latency per cgroup, and its loader.

How it measures, with tracepoint arguments and BPF helpers only (no kernel structs: the
installed headers need not match the running kernel). The raw tracepoints are used, which
cost far less per event than the formatted ones; their arguments are task pointers, used only
as keys, never read:

* ``sched_wakeup`` / ``sched_wakeup_new``: the woken thread is runnable from now on.
* ``sched_switch``: the thread getting the CPU (``next``) waited from then until now; the wait
  is parked with the thread. The thread leaving the CPU (``prev``) is still the current task,
  so ``bpf_get_current_cgroup_id()`` names its cgroup: the wait parked when it got the CPU
  goes into that cgroup's histogram. A thread preempted, or leaving while still
  ``TASK_RUNNING`` (``prev_state`` 0, an argument since Linux 5.18), is runnable again.

Only log2 histograms per (cgroup id, slot) leave the kernel, read every few seconds: no
per-event traffic to user space. The cgroup id is the inode number of the thread's cgroup in
the cgroup v2 hierarchy (``/sys/fs/cgroup/unified`` on a hybrid host).
"""

from __future__ import annotations

import os
import platform
import socket
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from koordlet.inspect import bpfsys

BPF_TEXT = r"""
struct hist_key {
    u64 cgroup;
    u64 slot;
};

/* Per-thread state in a plain array indexed by a hash of the task pointer: an array lookup
   is a few instructions, a hash map's much more, and this runs on every context switch. A
   slot shared by two threads keeps the newer one; the other's current wait is dropped. */
struct task_state {
    u64 task;   /* the task pointer this slot holds */
    u64 since;  /* when it became runnable (ns); 0 while it runs or sleeps */
    u64 wait;   /* how long it waited before its current run (ns); 0 once counted */
};

BPF_ARRAY(tasks, struct task_state, 65536);
BPF_PERCPU_HASH(hist, struct hist_key, u64, 16384);

static inline struct task_state *slot_of(u64 task) {
    u32 index = (u32)((task * 0x9E3779B97F4A7C15ULL) >> 48);
    return tasks.lookup(&index);
}

static inline void runnable(u64 task, u64 now) {
    struct task_state *state = slot_of(task);
    if (state) {
        state->task = task;
        state->since = now;
        state->wait = 0;
    }
}

/* sched_wakeup(struct task_struct *p) */
int on_sched_wakeup(struct bpf_raw_tracepoint_args *ctx) {
    runnable(ctx->args[0], bpf_ktime_get_ns());
    return 0;
}

/* sched_wakeup_new(struct task_struct *p) */
int on_sched_wakeup_new(struct bpf_raw_tracepoint_args *ctx) {
    runnable(ctx->args[0], bpf_ktime_get_ns());
    return 0;
}

/* sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
                unsigned int prev_state) */
int on_sched_switch(struct bpf_raw_tracepoint_args *ctx) {
    u64 prev = ctx->args[1];
    u64 next = ctx->args[2];
    u64 now = 0;
    struct task_state *state = slot_of(prev);
    if (state && state->task == prev && state->wait) {
        struct hist_key key = {};
        key.cgroup = bpf_get_current_cgroup_id();
        key.slot = bpf_log2l(state->wait / 1000);
        u64 *count = hist.lookup(&key);  /* per-CPU counters: no atomics */
        if (count) {
            (*count)++;
        } else {
            u64 one = 1;
            hist.update(&key, &one);
        }
        state->wait = 0;
    }
    /* Preempted, or leaving while still TASK_RUNNING: runnable again from now. The idle
       task (pid 0, still "current" here) is never queued. */
    if ((ctx->args[0] || ctx->args[3] == 0) && (u32)bpf_get_current_pid_tgid() != 0) {
        now = bpf_ktime_get_ns();
        runnable(prev, now);
    }
    state = slot_of(next);
    if (state && state->task == next && state->since) {
        if (!now)
            now = bpf_ktime_get_ns();
        state->wait = now - state->since;
        state->since = 0;
    }
    return 0;
}
"""

TRACEFS_PLACES = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
TRACEPOINTS = ("sched_wakeup", "sched_wakeup_new", "sched_switch")
HIST_KEY = struct.Struct("<QQ")  # struct hist_key: cgroup id, slot
LOAD_TIMEOUT = 120.0  # compiling takes a second or two; a very busy node more


class InspectUnavailable(RuntimeError):
    """Why the program cannot run here, in one line naming what is missing."""


class Probe(Protocol):
    def read(self) -> dict[int, dict[int, int]]:
        """Cumulative counts: cgroup id → {slot: count}."""
        ...

    def attach(self) -> None: ...

    def detach(self) -> None: ...

    def close(self) -> None: ...


class FdProbe:
    """The loaded program, held as file descriptors: the three programs and the histogram map.

    Attached on creation; ``detach`` and ``attach`` switch the probes off and on (sampling)
    without loading again; ``read`` walks the per-CPU histogram map."""

    def __init__(self, programs: dict[str, int], hist_fd: int) -> None:
        self.programs = programs
        self.hist_fd = hist_fd
        self.cpus = bpfsys.possible_cpus()
        self._links: dict[str, int] = {}
        self.attach()

    @property
    def attached(self) -> bool:
        return bool(self._links)

    def attach(self) -> None:
        for tp, prog_fd in self.programs.items():
            if tp not in self._links:
                self._links[tp] = bpfsys.raw_tracepoint_open(tp, prog_fd)

    def detach(self) -> None:
        for fd in self._links.values():
            os.close(fd)
        self._links = {}

    def read(self) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        for key, count in bpfsys.percpu_u64_items(self.hist_fd, HIST_KEY.size, self.cpus):
            cgroup, slot = HIST_KEY.unpack(key)
            out.setdefault(cgroup, {})[slot] = count
        return out

    def close(self) -> None:
        self.detach()
        for fd in (*self.programs.values(), self.hist_fd):
            os.close(fd)
        self.programs = {}


def missing_prerequisite(
    tracefs_places: tuple[Path, ...] = TRACEFS_PLACES,
    modules: Path = Path("/lib/modules"),
    euid: Callable[[], int] = os.geteuid,
) -> str | None:
    """The first thing this machine lacks for the program, or None."""
    if euid() != 0:
        return "not root: loading BPF programs needs CAP_BPF and CAP_PERFMON"
    if not any((p / "events" / "sched" / "sched_switch").exists() for p in tracefs_places):
        return "tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)"
    build = modules / platform.release() / "build"
    if not build.exists():
        return (
            f"no kernel headers at {build} (bcc compiles the program against them; "
            "Debian: apt install linux-headers-amd64 and link the folder)"
        )
    return None


def load(text: str = BPF_TEXT, *, python: str = sys.executable) -> FdProbe:
    """Compile and load the program in a child process (``koordlet.inspect.loader``), keep
    its descriptors and attach it; InspectUnavailable says why it cannot be."""
    problem = missing_prerequisite()
    if problem is not None:
        raise InspectUnavailable(problem)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        child = subprocess.Popen(
            [python, "-m", "koordlet.inspect.loader", str(theirs.fileno())],
            stdin=subprocess.PIPE,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        assert child.stdin is not None
        child.stdin.write(text.encode())
        child.stdin.close()
        ours.settimeout(LOAD_TIMEOUT)
        try:
            message, fds, _, _ = socket.recv_fds(ours, 65536, len(TRACEPOINTS) + 1)
        except (OSError, TimeoutError) as err:
            child.kill()
            raise InspectUnavailable(f"the BPF loader did not answer: {err}") from None
        finally:
            child.wait()
    reply = message.decode(errors="replace")
    if reply != "ok" or len(fds) != len(TRACEPOINTS) + 1:
        for fd in fds:
            os.close(fd)
        raise InspectUnavailable(reply.removeprefix("error: ") or "the BPF loader failed")
    return FdProbe(dict(zip(TRACEPOINTS, fds[:-1], strict=True)), fds[-1])
