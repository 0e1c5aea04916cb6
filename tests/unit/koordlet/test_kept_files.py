"""KeptFiles: cgroup files opened once and re-read with pread, closed when no longer read."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import pytest

from koordlet.cgroupfs.hierarchy import KeptFiles


def test_a_kept_file_is_read_afresh_each_time_on_one_descriptor(tmp_path: Path) -> None:
    usage = tmp_path / "cpuacct.usage"
    usage.write_text("100\n")
    kept = KeptFiles(limit=8)
    assert kept.read(str(usage)) == "100\n"
    with usage.open("r+") as same_inode:  # the kernel regenerates the text: same file
        same_inode.write("250\n")
    assert kept.read(str(usage)) == "250\n"
    assert len(kept) == 1


def test_a_file_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "memory.stat"
    text = "".join(f"key{i} {i}\n" for i in range(20_000))  # over 64 KiB
    big.write_text(text)
    kept = KeptFiles(limit=8)
    assert kept.read(str(big)) == text
    assert kept.read(str(big)) == text  # again, from the kept descriptor


def test_sweep_closes_the_files_not_read_since_the_last_sweep(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("2")
    kept = KeptFiles(limit=8)
    kept.read(str(a))
    kept.read(str(b))
    assert kept.sweep() == 0
    kept.read(str(a))
    assert kept.sweep() == 1  # b, not read this pass (its pod is gone)
    assert len(kept) == 1
    kept.close()
    assert len(kept) == 0


def test_past_the_limit_files_are_read_without_being_kept(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("2")
    kept = KeptFiles(limit=1)
    assert (kept.read(str(a)), kept.read(str(b))) == ("1", "2")
    assert len(kept) == 1


def same(fd: Path, inode: int) -> bool:
    try:
        return fd.stat().st_ino == inode
    except OSError:  # the descriptor that listed the directory, closed since
        return False


def test_a_removed_cgroup_reads_as_missing_and_a_recreated_one_as_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cpu.stat"
    path.write_text("usage_usec 5\n")
    kept = KeptFiles(limit=8)
    kept.read(str(path))
    inode = path.stat().st_ino
    removed = {int(fd.name) for fd in Path("/proc/self/fd").iterdir() if same(fd, inode)}
    real_pread = os.pread

    def cgroupfs_pread(fd: int, size: int, offset: int) -> bytes:
        """What cgroupfs does on a descriptor of a removed cgroup's file."""
        if fd in removed:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))
        return real_pread(fd, size, offset)

    monkeypatch.setattr(os, "pread", cgroupfs_pread)
    path.unlink()
    with pytest.raises(FileNotFoundError):
        kept.read(str(path))
    assert len(kept) == 0

    removed.clear()  # its descriptors are closed: numbers may be given out again
    path.write_text("usage_usec 9\n")  # the same path, a new cgroup
    assert kept.read(str(path)) == "usage_usec 9\n"


def test_the_default_limit_is_read_at_the_first_open_after_start_up_raised_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept = KeptFiles()  # built with the collectors, before koordlet raises RLIMIT_NOFILE
    monkeypatch.setattr(resource, "getrlimit", lambda _: (40_000, 1 << 20))
    assert kept.limit == 10_000  # a quarter of the soft limit in force now
