"""The few bpf(2) commands koordlet needs once a program is loaded, through ctypes.

bcc compiles with LLVM, which costs a process over 100 MiB of memory; koordlet therefore lets a
short-lived child compile and load the program (``loader``) and keeps only file descriptors:
the programs (to attach them to raw tracepoints) and the histogram map (to read it). These
calls are all it takes, without bcc in koordlet's own process.

Layouts are the kernel's ``union bpf_attr`` members (include/uapi/linux/bpf.h): for map
element commands ``map_fd`` (u32), padding, ``key`` (u64 pointer), ``value``/``next_key`` (u64
pointer), ``flags`` (u64); for BPF_RAW_TRACEPOINT_OPEN ``name`` (u64 pointer), ``prog_fd`` (u32).
"""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_GET_NEXT_KEY = 4
BPF_RAW_TRACEPOINT_OPEN = 17
SYSCALL_BPF = {"x86_64": 321, "aarch64": 280}
ATTR_SIZE = 128  # larger than any member used here; the kernel checks the tail is zero


class _MapElem(ctypes.Structure):
    _fields_ = (
        ("map_fd", ctypes.c_uint32),
        ("pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    )


class _RawTracepoint(ctypes.Structure):
    _fields_ = (("name", ctypes.c_uint64), ("prog_fd", ctypes.c_uint32))


_libc = ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    number = SYSCALL_BPF.get(platform.machine())
    if number is None:
        raise OSError(f"bpf(2) syscall number unknown on {platform.machine()}")
    buf = ctypes.create_string_buffer(ATTR_SIZE)
    ctypes.memmove(buf, ctypes.addressof(attr), ctypes.sizeof(attr))
    result = int(_libc.syscall(number, cmd, buf, ATTR_SIZE))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def raw_tracepoint_open(name: str, prog_fd: int) -> int:
    """Attach a loaded program to a raw tracepoint; closing the returned fd detaches it."""
    text = ctypes.create_string_buffer(name.encode())
    return _bpf(BPF_RAW_TRACEPOINT_OPEN, _RawTracepoint(ctypes.addressof(text), prog_fd))


def possible_cpus(sys_root: Path = Path("/sys")) -> int:
    """How many values a per-CPU map holds per key: the possible CPUs ("0-3,8" → 5)."""
    text = (sys_root / "devices" / "system" / "cpu" / "possible").read_text().strip()
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def percpu_u64_items(map_fd: int, key_size: int, cpus: int) -> list[tuple[bytes, int]]:
    """Every (key, sum over CPUs) of a per-CPU hash map with u64 values."""
    key = ctypes.create_string_buffer(key_size)
    next_key = ctypes.create_string_buffer(key_size)
    values = (ctypes.c_uint64 * cpus)()
    out: list[tuple[bytes, int]] = []
    first = True
    while True:
        walk = _MapElem(map_fd, 0, 0 if first else ctypes.addressof(key), 0, 0)
        walk.value = ctypes.addressof(next_key)
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, walk)
        except FileNotFoundError:  # ENOENT: past the last key
            return out
        first = False
        ctypes.memmove(key, next_key, key_size)
        lookup = _MapElem(map_fd, 0, ctypes.addressof(key), ctypes.addressof(values), 0)
        try:
            _bpf(BPF_MAP_LOOKUP_ELEM, lookup)
        except FileNotFoundError:
            continue  # deleted between the two calls
        out.append((key.raw, sum(values)))
