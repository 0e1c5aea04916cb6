"""The cls_bpf classifier, byte for byte, and the bpf(2) constants against the UAPI header.

No root and no kernel needed: this checks the encoding the kernel will be handed, so a wrong
opcode or register nibble shows up here rather than as a verifier refusal on a node.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from koordlet.executor import bpf

UAPI = Path("/usr/include/linux/bpf.h")

# The program for map fd 7, encoded by hand from the instruction set's documentation
# (code, dst/src nibbles, little-endian s16 off and s32 imm), one instruction per line.
EXPECTED_FD7 = bytes.fromhex(
    "85 00 0000 4f000000"  # call 79                  bpf_skb_cgroup_id(skb)
    "7b 0a f8ff 00000000"  # *(u64 *)(r10 - 8) = r0   dst r10, src r0
    "bf a2 0000 00000000"  # r2 = r10                 dst r2, src r10
    "07 02 0000 f8ffffff"  # r2 += -8
    "18 11 0000 07000000"  # r1 = map fd 7            src 1 = BPF_PSEUDO_MAP_FD
    "00 00 0000 00000000"  #                          upper 32 bits of the immediate
    "85 00 0000 01000000"  # call 1                   bpf_map_lookup_elem(r1, r2)
    "15 00 0100 00000000"  # if r0 == 0 goto +1
    "61 00 0000 00000000"  # r0 = *(u32 *)(r0 + 0)
    "95 00 0000 00000000"  # exit
)


def slots(program: bytes) -> list[bytes]:
    return [program[i : i + bpf.INSN_SIZE] for i in range(0, len(program), bpf.INSN_SIZE)]


def test_classifier_is_byte_exact() -> None:
    assert bpf.classifier(7, order="little") == EXPECTED_FD7


def test_instruction_count_and_opcodes() -> None:
    program = bpf.classifier(3, order="little")
    assert len(program) == 10 * bpf.INSN_SIZE
    assert [s[0] for s in slots(program)] == [
        0x85,  # BPF_JMP | BPF_CALL
        0x7B,  # BPF_STX | BPF_DW | BPF_MEM
        0xBF,  # BPF_ALU64 | BPF_MOV | BPF_X
        0x07,  # BPF_ALU64 | BPF_ADD | BPF_K
        0x18,  # BPF_LD | BPF_DW | BPF_IMM (first half)
        0x00,  # (second half)
        0x85,  # BPF_JMP | BPF_CALL
        0x15,  # BPF_JMP | BPF_JEQ | BPF_K
        0x61,  # BPF_LDX | BPF_W | BPF_MEM
        0x95,  # BPF_JMP | BPF_EXIT
    ]
    calls = [int.from_bytes(s[4:], "little") for s in slots(program) if s[0] == 0x85]
    assert calls == [bpf.BPF_FUNC_SKB_CGROUP_ID, bpf.BPF_FUNC_MAP_LOOKUP_ELEM] == [79, 1]


@pytest.mark.parametrize("fd", [0, 3, 1000, 2**31 - 1])
def test_map_fd_relocation(fd: int) -> None:
    """Only the LD_IMM64's imm carries the fd, marked as a map fd for the kernel to relocate."""
    program = bpf.classifier(fd, order="little")
    ld, upper = slots(program)[4], slots(program)[5]
    assert ld[0] == bpf.OP_LD_IMM64
    assert ld[1] == (bpf.BPF_PSEUDO_MAP_FD << 4) | bpf.R1
    assert int.from_bytes(ld[4:], "little", signed=True) == fd
    assert upper == bytes(8)
    other = [s for i, s in enumerate(slots(program)) if i != 4]
    assert other == [s for i, s in enumerate(slots(EXPECTED_FD7)) if i != 4]


def test_big_endian_hosts_swap_the_register_nibbles() -> None:
    assert bpf.insn(bpf.OP_MOV64_REG, bpf.R2, bpf.R10, order="big") == bytes.fromhex(
        "bf 2a 0000 00000000"
    )
    assert bpf.insn(bpf.OP_ADD64_IMM, bpf.R2, imm=-8, order="big") == bytes.fromhex(
        "07 20 0000 fffffff8"
    )


def test_program_length_must_be_whole_instructions() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        bpf.load_program(bpf.BPF_PROG_TYPE_SCHED_CLS, b"\x95" * 9, "GPL")


def _enum(text: str, name: str) -> list[str]:
    """Member names of a C enum, in order, leaving out aliases (``A = B``)."""
    body = re.search(rf"enum {name} {{(.*?)}};", text, re.S)
    assert body is not None, f"enum {name} not in {UAPI}"
    members = []
    for raw in body.group(1).split(","):
        line = re.sub(r"/\*.*?\*/", "", raw, flags=re.S).strip()
        if line and "=" not in line and not line.startswith("#"):
            members.append(line.split()[0])
    return members


@pytest.mark.skipif(not UAPI.exists(), reason=f"{UAPI} not installed (linux-libc-dev)")
def test_constants_match_the_uapi_header() -> None:
    text = UAPI.read_text()
    mapper = text[text.index("#define __BPF_FUNC_MAPPER(FN)") :]
    mapper = mapper[: mapper.index("\n\n")]
    helpers = re.findall(r"FN\((\w+)", mapper)
    assert helpers.index("map_lookup_elem") == bpf.BPF_FUNC_MAP_LOOKUP_ELEM
    assert helpers.index("skb_cgroup_id") == bpf.BPF_FUNC_SKB_CGROUP_ID

    cmds = _enum(text, "bpf_cmd")
    for member, value in {
        "BPF_MAP_CREATE": bpf.BPF_MAP_CREATE,
        "BPF_MAP_LOOKUP_ELEM": bpf.BPF_MAP_LOOKUP_ELEM,
        "BPF_MAP_UPDATE_ELEM": bpf.BPF_MAP_UPDATE_ELEM,
        "BPF_MAP_DELETE_ELEM": bpf.BPF_MAP_DELETE_ELEM,
        "BPF_MAP_GET_NEXT_KEY": bpf.BPF_MAP_GET_NEXT_KEY,
        "BPF_PROG_LOAD": bpf.BPF_PROG_LOAD,
        "BPF_OBJ_GET_INFO_BY_FD": bpf.BPF_OBJ_GET_INFO_BY_FD,
    }.items():
        assert cmds.index(member) == value, member
    assert _enum(text, "bpf_map_type").index("BPF_MAP_TYPE_HASH") == bpf.BPF_MAP_TYPE_HASH
    prog_types = _enum(text, "bpf_prog_type")
    assert prog_types.index("BPF_PROG_TYPE_SCHED_CLS") == bpf.BPF_PROG_TYPE_SCHED_CLS
    assert re.search(rf"#define BPF_PSEUDO_MAP_FD\s+{bpf.BPF_PSEUDO_MAP_FD}\b", text)
