"""A v1 memory limit and memory.memsw.limit_in_bytes, on a fake tree whose writes follow the
kernel's rule: the limit may not exceed memsw, memsw may not go below the limit (EINVAL; seen
on this host's v1 kernel: 100 MiB/100 MiB, then a 200 MiB limit is refused, as is a 50 MiB
memsw). Values are stored as the kernel shows them: page-aligned, "-1" as the v1 maximum."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from koordlet.executor import CgroupWrite, Executor, Status, writer

CTR = "kubepods/besteffort/podA/c1"
MiB = 1 << 20
PAGE = 4096
V1_MAX = 9223372036854771712
LIMIT, MEMSW = "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"


def kernel_write(path: str, value: str) -> None:
    """writer.write_file with the v1 memory controller's checks for these two files."""
    target = Path(path)
    name = target.name
    number = V1_MAX if int(value) == -1 else min(int(value), V1_MAX) // PAGE * PAGE
    if name in (LIMIT, MEMSW):
        other = target.with_name(MEMSW if name == LIMIT else LIMIT)
        if other.exists():
            held = int(other.read_text())
            if (name == LIMIT and number > held) or (name == MEMSW and number < held):
                raise OSError(errno.EINVAL, "Invalid argument")
    target.write_text(f"{number}\n")


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(writer, "write_file", kernel_write)
    folder = tmp_path / "memory" / CTR
    folder.mkdir(parents=True)
    (tmp_path / "cpu").mkdir()  # a v1 tree
    return folder


def hold(folder: Path, limit: int, memsw: int | None) -> None:
    (folder / LIMIT).write_text(f"{limit}\n")
    if memsw is not None:
        (folder / MEMSW).write_text(f"{memsw}\n")


def values(folder: Path) -> tuple[int, int | None]:
    memsw = folder / MEMSW
    return int((folder / LIMIT).read_text()), (int(memsw.read_text()) if memsw.exists() else None)


def set_limit(folder: Path, value: int) -> Status:
    executor = Executor(folder.parents[4])  # the root above memory/<CTR>
    (result,) = executor.apply([CgroupWrite(CTR, LIMIT, value)])
    return result.status


def test_the_fake_refuses_what_the_kernel_refuses(memory: Path) -> None:
    hold(memory, 100 * MiB, 100 * MiB)
    with pytest.raises(OSError, match="Invalid argument"):
        kernel_write(str(memory / LIMIT), str(200 * MiB))
    with pytest.raises(OSError, match="Invalid argument"):
        kernel_write(str(memory / MEMSW), str(50 * MiB))


def test_a_raise_above_the_runtimes_no_swap_pair_moves_memsw_first(memory: Path) -> None:
    hold(memory, 256 * MiB, 256 * MiB)  # the kubelet's container: memsw == limit
    assert set_limit(memory, 536_870_913) is Status.APPLIED  # not page-aligned
    assert values(memory) == (512 * MiB, 512 * MiB)  # still no swap


def test_a_raise_keeps_the_swap_the_runtime_allowed(memory: Path) -> None:
    swap = 100 * MiB + 3 * PAGE
    hold(memory, 256 * MiB, 256 * MiB + swap)
    assert set_limit(memory, 700 * MiB) is Status.APPLIED
    assert values(memory) == (700 * MiB, 700 * MiB + swap)


def test_a_cut_lowers_memsw_after_the_limit_so_no_swap_appears(memory: Path) -> None:
    hold(memory, 1024 * MiB, 1024 * MiB)
    assert set_limit(memory, 300 * MiB) is Status.APPLIED
    assert values(memory) == (300 * MiB, 300 * MiB)


def test_unlimited_lifts_both(memory: Path) -> None:
    hold(memory, 64 * MiB, 96 * MiB)
    assert set_limit(memory, -1) is Status.APPLIED
    assert values(memory) == (V1_MAX, V1_MAX)


def test_memsw_past_the_v1_maximum_is_unlimited(memory: Path) -> None:
    hold(memory, 1024 * MiB, 1024 * MiB + (1 << 42))  # 4 TiB of swap allowed
    wanted = (1 << 62) - (1 << 40)
    assert set_limit(memory, wanted) is Status.APPLIED
    assert values(memory) == (wanted, V1_MAX)


def test_an_unlimited_memsw_is_left_alone(memory: Path) -> None:
    hold(memory, 256 * MiB, V1_MAX)  # a BE container: no limit from the kubelet, no memsw
    assert set_limit(memory, 512 * MiB) is Status.APPLIED
    assert values(memory) == (512 * MiB, V1_MAX)
    assert set_limit(memory, 128 * MiB) is Status.APPLIED
    assert values(memory) == (128 * MiB, V1_MAX)


def test_without_swap_accounting_only_the_limit_is_written(memory: Path) -> None:
    hold(memory, 256 * MiB, None)  # swapaccount=0: no memsw files
    assert set_limit(memory, 333 * MiB) is Status.APPLIED
    assert values(memory) == (333 * MiB, None)
