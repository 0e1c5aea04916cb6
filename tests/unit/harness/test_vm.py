"""The VM runner's pieces that need no VM: the initramfs archive, the guest script, QEMU's
command line (tests/e2e/harness/vm.py). The VM itself runs in the v2 tiers."""

from __future__ import annotations

import lzma
import os
import stat
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.e2e.harness import vm
from tests.e2e.harness.koordlet import probes_off_in_vm


def read_newc(data: bytes) -> list[tuple[str, int, bytes, int]]:
    """(name, mode, data, rdev) of each entry, as the kernel's initramfs unpacker reads it."""
    entries: list[tuple[str, int, bytes, int]] = []
    at = 0
    while True:
        assert data[at : at + 6] == b"070701", at
        fields = [int(data[at + 6 + 8 * i : at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, rmajor, rminor, namesize = (
            fields[1],
            fields[6],
            fields[9],
            fields[10],
            fields[11],
        )
        at += 110
        name = data[at : at + namesize - 1].decode()
        at += namesize
        at += -at % 4
        body = data[at : at + size]
        at += size
        at += -at % 4
        if name == "TRAILER!!!":
            assert at == len(data)
            return entries
        entries.append((name, mode, body, os.makedev(rmajor, rminor)))


def test_the_archive_is_newc_with_4_byte_alignment() -> None:
    entries = [
        ("bin", stat.S_IFDIR | 0o755, b"", 0),
        ("init", stat.S_IFREG | 0o755, b"#!/bin/sh\n", 0),  # 10 bytes: padded to 12
        ("dev/console", stat.S_IFCHR | 0o600, b"", os.makedev(5, 1)),
        ("odd-name-of-7", stat.S_IFREG | 0o644, b"x" * 5, 0),
    ]
    assert read_newc(vm.cpio_newc(entries)) == entries


def fake_kernel(root: Path, compressed: bool) -> vm.Kernel:
    version = "6.12.0-test"
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"vmlinuz-{version}").write_bytes(b"kernel")
    modules = root / "lib" / "modules" / version
    for name in vm.INITRAMFS_MODULES:
        folder = modules / "kernel" / name
        folder.mkdir(parents=True)
        body = f"module {name}".encode()
        if compressed:
            (folder / f"{name}.ko.xz").write_bytes(lzma.compress(body, format=lzma.FORMAT_XZ))
        else:
            (folder / f"{name}.ko").write_bytes(body)
    (modules / "modules.dep").write_text("")
    return vm.find_kernel(root)


@pytest.mark.parametrize("compressed", [True, False], ids=["ko.xz", "ko"])
def test_the_initramfs_holds_init_busybox_and_the_modules_uncompressed(
    tmp_path: Path, compressed: bool
) -> None:
    if not vm.BUSYBOX.exists():
        pytest.skip(f"{vm.BUSYBOX} missing (busybox-static)")
    kernel = fake_kernel(tmp_path, compressed)
    assert kernel.version == "6.12.0-test"
    found = {name: (mode, body) for name, mode, body, _ in vm.initramfs_entries(kernel)}
    assert found["init"][1] == vm.INIT_SCRIPT.read_bytes()
    assert stat.S_ISCHR(found["dev/console"][0])
    for name in vm.INITRAMFS_MODULES:
        assert found[f"lib/modules/{name}.ko"][1] == f"module {name}".encode()


def test_a_kernel_tree_without_modules_dep_is_refused(tmp_path: Path) -> None:
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.12.0-x").write_bytes(b"")
    with pytest.raises(vm.VmError, match="depmod not run"):
        vm.find_kernel(tmp_path)


def test_the_guest_script_exports_the_environment_and_records_the_status(tmp_path: Path) -> None:
    script = vm.guest_script(tmp_path, ["pytest", "-k", "a b"], Path("/repo"), {"X": "1 2"})
    assert "export X='1 2'\n" in script
    assert "\npytest -k 'a b'\n" in script
    assert f"echo $? >{tmp_path}/rc" in script
    assert "cd /repo ||" in script


def test_qemu_gets_a_v2_only_kernel_and_a_read_only_root(tmp_path: Path) -> None:
    kernel = vm.Kernel("6.12.0-x", tmp_path / "vmlinuz", tmp_path / "modules")
    args = vm.qemu_command(kernel, tmp_path / "run", 2, "4G", "tcg")
    append = args[args.index("-append") + 1]
    assert "cgroup_no_v1=all" in append and "psi=1" in append
    assert f"koord.run={tmp_path / 'run'}" in append
    root = next(a for a in args if a.startswith("local,id=hostroot"))
    assert "path=/," in root and "readonly=on" in root
    assert args[args.index("-accel") + 1].startswith("tcg,thread=single")


def test_the_probes_are_off_in_the_vm_unless_a_test_is_about_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(vm.GUEST_ENV, raising=False)
    assert probes_off_in_vm(("--x", "1")) == ("--x", "1")  # here: as asked
    monkeypatch.setenv(vm.GUEST_ENV, "1")
    assert probes_off_in_vm(()) == ("--feature-gates", "SchedLatencyCollector=false")
    assert probes_off_in_vm(("--feature-gates", "PSICollector=true")) == (
        "--feature-gates",
        "PSICollector=true,SchedLatencyCollector=false",
    )
    assert probes_off_in_vm(("--feature-gates=A=true",)) == (
        "--feature-gates=A=true,SchedLatencyCollector=false",
    )
    assert probes_off_in_vm(("--sched-latency-interval", "1s")) == (
        "--sched-latency-interval",
        "1s",
    )


def test_the_guests_output_is_copied_line_by_line_after_the_prefix(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_bytes(b"first\nsecond ha")
    done = threading.Event()
    follower = threading.Thread(target=vm._follow, args=(out, done, "[v2] "))
    follower.start()
    with out.open("ab") as f:
        f.write(b"lf\nno newline at the end")
    done.set()
    follower.join(10)
    assert capfd.readouterr().out == "[v2] first\n[v2] second half\n[v2] no newline at the end\n"


OOPS = """[  175.7] BUG: unable to handle page fault for address: 0000000000901880
[  175.7] RIP: 0010:__alloc_pages+0x1b/0x2c0
[  175.7] Kernel panic - not syncing: Fatal exception in interrupt
"""


def fake_vm(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, boots: Sequence[tuple[bool, str, int | None]]
) -> list[Path]:
    """vm.run with its QEMU replaced: each boot in turn (guest came up, console text, the
    command's exit status or None when it never finished); the run folders it was given."""
    kernel = vm.Kernel("6.12", tmp_path / "vmlinuz", tmp_path / "modules")
    monkeypatch.setattr(vm, "missing_prerequisites", list)
    monkeypatch.setattr(vm, "find_kernel", lambda: kernel)
    monkeypatch.setattr(vm, "RUNS", tmp_path / "runs")
    seen: list[Path] = []

    def boot(
        args: list[str], run_dir: Path, timeout: float
    ) -> tuple[subprocess.CompletedProcess[bytes], float | None]:
        up, console, rc = boots[len(seen)]
        seen.append(run_dir)
        (run_dir / "console.log").write_text(console)
        with (run_dir / "out").open("a") as out:
            out.write(f"boot {len(seen)}\n")
        if rc is not None:
            (run_dir / "rc").write_text(f"{rc}\n")
        return subprocess.CompletedProcess(args, 0, b"", b""), 5.0 if up else None

    monkeypatch.setattr(vm, "_boot", boot)
    return seen


class DoneRightAfterAWrite:
    """A done event set, by the guest's last write, between the follower's read that found
    nothing and its look at the event: the window a busy machine opened once in CI."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def is_set(self) -> bool:
        with self.out.open("a") as f:
            f.write("last words\n")
        self.is_set = lambda: True  # type: ignore[method-assign]
        return True


def test_the_follower_copies_what_was_written_just_before_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_text("")
    vm._follow(out, DoneRightAfterAWrite(out), "[v2] ")  # type: ignore[arg-type]
    assert capsys.readouterr().out == "[v2] last words\n"


def test_a_kernel_death_under_the_command_runs_it_once_more_and_keeps_the_console(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = fake_vm(monkeypatch, tmp_path, [(True, OOPS, None), (True, "", 0)])
    result = vm.run(["true"], prefix="[v2] ")
    out = capsys.readouterr().out
    assert result.rc == 0
    assert len(seen) == 2
    assert "[v2] koord-vm:   [  175.7] BUG: unable to handle page fault" in out
    assert "the command runs again from the start in a fresh VM" in out
    # the second VM's output follows, the first's is not copied twice
    assert out.count("[v2] boot 1\n") == 1 and out.count("[v2] boot 2\n") == 1
    assert (seen[0] / "console-crash-1.log").read_text() == OOPS  # kept for a look
    assert result.output == "boot 2\n"  # the command's output in the VM that finished it


def test_a_second_kernel_death_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = fake_vm(monkeypatch, tmp_path, [(True, OOPS, None), (True, OOPS, None)])
    assert vm.run(["true"]).rc == vm.VM_FAILED_RC
    assert len(seen) == 2
    assert "Fatal exception in interrupt" in capsys.readouterr().err


def test_a_vm_that_ends_without_a_kernel_death_is_not_run_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # e.g. the command powered the guest off: a fault of the command, not of the emulator
    seen = fake_vm(monkeypatch, tmp_path, [(True, "reboot: Power down\n", None), (True, "", 0)])
    assert vm.run(["true"]).rc == vm.VM_FAILED_RC
    assert len(seen) == 1


def test_a_boot_that_dies_is_tried_again_up_to_the_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    boots = [(False, OOPS, None)] * vm.BOOT_ATTEMPTS + [(True, "", 0)]
    seen = fake_vm(monkeypatch, tmp_path, boots)
    assert vm.run(["true"]).rc == vm.VM_FAILED_RC
    assert len(seen) == vm.BOOT_ATTEMPTS


def test_the_kernels_report_starts_at_its_first_line() -> None:
    console = "systemd[1]: Started.\n" + OOPS + "rest\n"
    death = vm.kernel_death(console, lines=2)
    assert death == OOPS.splitlines()[:2]
    assert vm.kernel_death("systemd[1]: Started.\nreboot: Power down\n") == []
