"""The raw bpf(2) system call through ctypes: hash maps, program loading, and the classifier.

What it does: create a BPF hash map, read, write and delete its entries, load a program
(returning the verifier's log when the kernel refuses it), ask a program's id, and assemble the
one program koordlet needs (``classifier``: the sender's cgroup v2 id → an HTB class id).

What it does not: pin objects in bpffs, attach programs (tc filters go through netlink in
``netqos``), or assemble anything general. There is no libbpf and no compiler: the classifier
is ten hand-encoded instructions, checked byte for byte by a unit test. Constants are those of
``/usr/include/linux/bpf.h`` (the helper numbers are positions in ``__BPF_FUNC_MAPPER``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from collections.abc import Iterator
from typing import Literal

# enum bpf_cmd
BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_MAP_GET_NEXT_KEY = 4
BPF_PROG_LOAD = 5
BPF_OBJ_GET_INFO_BY_FD = 15

BPF_MAP_TYPE_HASH = 1  # enum bpf_map_type
BPF_PROG_TYPE_SCHED_CLS = 3  # enum bpf_prog_type
BPF_ANY = 0  # map update flag: create or replace

# Helper numbers: index in __BPF_FUNC_MAPPER (FN(unspec) is 0).
BPF_FUNC_MAP_LOOKUP_ELEM = 1
BPF_FUNC_SKB_CGROUP_ID = 79

BPF_PSEUDO_MAP_FD = 1  # src_reg of BPF_LD_IMM64: imm is a map fd, the kernel relocates it

# Opcodes (class | size/op | mode/source), as the kernel's BPF_* macros compose them.
OP_CALL = 0x05 | 0x80  # BPF_JMP | BPF_CALL
OP_EXIT = 0x05 | 0x90  # BPF_JMP | BPF_EXIT
OP_JEQ_IMM = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
OP_MOV64_REG = 0x07 | 0xB0 | 0x08  # BPF_ALU64 | BPF_MOV | BPF_X
OP_ADD64_IMM = 0x07 | 0x00 | 0x00  # BPF_ALU64 | BPF_ADD | BPF_K
OP_STX_DW = 0x03 | 0x18 | 0x60  # BPF_STX | BPF_DW | BPF_MEM
OP_LDX_W = 0x01 | 0x00 | 0x60  # BPF_LDX | BPF_W | BPF_MEM
OP_LD_IMM64 = 0x00 | 0x18 | 0x00  # BPF_LD | BPF_DW | BPF_IMM (two instruction slots)

R0, R1, R2, R10 = 0, 1, 2, 10
INSN_SIZE = 8

# bpf(2) has no libc wrapper; its number depends on the architecture.
_NR_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280, "riscv64": 280, "ppc64le": 361}
_ATTR_SIZE = 128  # larger than every attr used here; the kernel wants unknown tail bytes zero
_LOG_SIZE = 1 << 20

ByteOrder = Literal["little", "big"]


class BpfError(OSError):
    """A bpf(2) call failed; ``log`` holds the verifier's explanation for a refused program."""

    def __init__(self, err: int, message: str, log: str = "") -> None:
        super().__init__(err, message)
        self.log = log


def insn(
    code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0, *, order: ByteOrder
) -> bytes:
    """One ``struct bpf_insn``: u8 code, u8 dst_reg:4/src_reg:4, s16 off, s32 imm.

    The register byte is a C bitfield, so its nibble order follows the host's byte order.
    """
    regs = (src << 4) | dst if order == "little" else (dst << 4) | src
    return struct.pack("<BBhi" if order == "little" else ">BBhi", code, regs, off, imm)


def classifier(map_fd: int, order: ByteOrder = sys.byteorder) -> bytes:
    """The cls_bpf classifier: return ``map[bpf_skb_cgroup_id(skb)]`` or 0 (no match).

    In a non-direct-action cls_bpf filter a non-zero return value is the class id
    (``res->classid``) and 0 means "no match", so unmapped traffic falls to HTB's default.
    ``r1`` holds the skb on entry and is exactly the argument bpf_skb_cgroup_id wants.
    """
    return b"".join(
        (
            insn(OP_CALL, imm=BPF_FUNC_SKB_CGROUP_ID, order=order),  # r0 = cgroup v2 id
            insn(OP_STX_DW, R10, R0, -8, order=order),  # *(u64 *)(fp - 8) = r0: the key
            insn(OP_MOV64_REG, R2, R10, order=order),  # r2 = fp
            insn(OP_ADD64_IMM, R2, imm=-8, order=order),  # r2 = fp - 8 (&key)
            insn(OP_LD_IMM64, R1, BPF_PSEUDO_MAP_FD, imm=map_fd, order=order),  # r1 = &map
            insn(0, order=order),  # upper half of the 64-bit immediate
            insn(OP_CALL, imm=BPF_FUNC_MAP_LOOKUP_ELEM, order=order),  # r0 = &value or NULL
            insn(OP_JEQ_IMM, R0, off=1, imm=0, order=order),  # NULL: return 0
            insn(OP_LDX_W, R0, R0, 0, order=order),  # r0 = *(u32 *)r0: the class id
            insn(OP_EXIT, order=order),
        )
    )


def _syscall_number() -> int:
    machine = platform.machine()
    if machine not in _NR_BPF:
        raise BpfError(errno.ENOSYS, f"bpf(2): unknown system call number on {machine}")
    return _NR_BPF[machine]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char], what: str) -> int:
    result = int(
        _libc.syscall(
            ctypes.c_long(_syscall_number()),
            ctypes.c_int(cmd),
            ctypes.byref(attr),
            ctypes.c_uint(ctypes.sizeof(attr)),
        )
    )
    if result < 0:
        err = ctypes.get_errno()
        raise BpfError(err, f"bpf({what}): {os.strerror(err)}")
    return result


def _attr(fmt: str, *values: int | bytes) -> ctypes.Array[ctypes.c_char]:
    buf = ctypes.create_string_buffer(_ATTR_SIZE)
    struct.pack_into(fmt, buf, 0, *values)
    return buf


def _addr(buf: ctypes.Array[ctypes.c_char]) -> int:
    return ctypes.addressof(buf)


def _name(name: str) -> bytes:
    """An object name: at most 15 characters of [A-Za-z0-9_.], as the kernel accepts."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "_.") else "_" for c in name)
    return cleaned[:15].encode()


def create_hash_map(key_size: int, value_size: int, max_entries: int, name: str = "") -> int:
    """A BPF_MAP_TYPE_HASH map; returns its fd (the caller closes it)."""
    # union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries,
    # map_flags, inner_map_fd, numa_node (u32 each), then char map_name[16].
    attr = _attr(
        "=7I16s", BPF_MAP_TYPE_HASH, key_size, value_size, max_entries, 0, 0, 0, _name(name)
    )
    return _bpf(BPF_MAP_CREATE, attr, f"MAP_CREATE hash {key_size}→{value_size}")


def _elem_attr(
    map_fd: int, key: ctypes.Array[ctypes.c_char], value: int, flags: int = 0
) -> ctypes.Array[ctypes.c_char]:
    # map_fd (u32), padding, key (u64 pointer), value or next_key (u64 pointer), flags (u64)
    return _attr("=I4xQQQ", map_fd, _addr(key), value, flags)


def map_update(map_fd: int, key: bytes, value: bytes) -> None:
    k, v = (
        ctypes.create_string_buffer(key, len(key)),
        ctypes.create_string_buffer(value, len(value)),
    )
    _bpf(BPF_MAP_UPDATE_ELEM, _elem_attr(map_fd, k, _addr(v), BPF_ANY), "MAP_UPDATE_ELEM")


def map_delete(map_fd: int, key: bytes) -> bool:
    """Delete ``key``; False if it was not there."""
    k = ctypes.create_string_buffer(key, len(key))
    try:
        _bpf(BPF_MAP_DELETE_ELEM, _elem_attr(map_fd, k, 0), "MAP_DELETE_ELEM")
    except BpfError as err:
        if err.errno == errno.ENOENT:
            return False
        raise
    return True


def map_lookup(map_fd: int, key: bytes, value_size: int) -> bytes | None:
    k, v = ctypes.create_string_buffer(key, len(key)), ctypes.create_string_buffer(value_size)
    try:
        _bpf(BPF_MAP_LOOKUP_ELEM, _elem_attr(map_fd, k, _addr(v)), "MAP_LOOKUP_ELEM")
    except BpfError as err:
        if err.errno == errno.ENOENT:
            return None
        raise
    return v.raw


def map_keys(map_fd: int, key_size: int) -> Iterator[bytes]:
    """Every key, by BPF_MAP_GET_NEXT_KEY; do not delete while iterating (collect first)."""
    key = ctypes.create_string_buffer(key_size)
    nxt = ctypes.create_string_buffer(key_size)
    # A NULL key asks for the first key.
    attr = _attr("=I4xQQQ", map_fd, 0, _addr(nxt), 0)
    while True:
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, attr, "MAP_GET_NEXT_KEY")
        except BpfError as err:
            if err.errno == errno.ENOENT:
                return  # past the last key
            raise
        yield nxt.raw
        ctypes.memmove(key, nxt, key_size)
        attr = _attr("=I4xQQQ", map_fd, _addr(key), _addr(nxt), 0)


def load_program(prog_type: int, program: bytes, license: str, name: str = "") -> int:
    """Load ``program``; returns its fd. A refusal raises BpfError with the verifier log.

    The first try runs without a log (cheap, and a too-small log buffer fails loads on some
    kernels); only a refused program is loaded again with log_level 1 to explain why.
    """
    if len(program) % INSN_SIZE:
        raise ValueError(f"program length {len(program)} is not a multiple of {INSN_SIZE}")
    code = ctypes.create_string_buffer(program, len(program))
    lic = ctypes.create_string_buffer(license.encode())
    try:
        return _load(prog_type, code, lic, name, None)
    except BpfError as err:
        if err.errno not in (errno.EINVAL, errno.EACCES):
            raise
    log = ctypes.create_string_buffer(_LOG_SIZE)
    try:
        return _load(prog_type, code, lic, name, log)
    except BpfError as err:
        text = log.value.decode(errors="replace").strip()
        raise BpfError(err.errno or errno.EINVAL, err.strerror or "", text) from None


def _load(
    prog_type: int,
    code: ctypes.Array[ctypes.c_char],
    lic: ctypes.Array[ctypes.c_char],
    name: str,
    log: ctypes.Array[ctypes.c_char] | None,
) -> int:
    # prog_type, insn_cnt (u32); insns, license (u64 pointers); log_level, log_size (u32);
    # log_buf (u64); kern_version, prog_flags (u32); char prog_name[16].
    attr = _attr(
        "=IIQQIIQII16s",
        prog_type,
        len(code) // INSN_SIZE,
        _addr(code),
        _addr(lic),
        1 if log is not None else 0,
        len(log) if log is not None else 0,
        _addr(log) if log is not None else 0,
        0,
        0,
        _name(name),
    )
    return _bpf(BPF_PROG_LOAD, attr, f"PROG_LOAD type {prog_type}")


def prog_id(prog_fd: int) -> int:
    """The kernel's id of a loaded program (what ``bpftool prog`` and tc filter dumps show)."""
    info = ctypes.create_string_buffer(64)  # struct bpf_prog_info starts: u32 type, u32 id
    attr = _attr("=IIQ", prog_fd, len(info), _addr(info))
    _bpf(BPF_OBJ_GET_INFO_BY_FD, attr, "OBJ_GET_INFO_BY_FD")
    return int(struct.unpack_from("=I", info, 4)[0])
