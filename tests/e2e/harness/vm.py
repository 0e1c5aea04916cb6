"""A throwaway cgroup v2 machine for the e2e suite's v2 tier: one command as root in a VM.

QEMU boots Debian's 6.12 kernel (extracted by the set-up script, never installed) with
``cgroup_no_v1=all``, so /sys/fs/cgroup is a pure cgroup v2 tree with every controller, and with
systemd as PID 1, so the systemd cgroup driver and koordlet's unit run for real. The guest's root
is this machine's own filesystem, read-only over 9p under a copy-on-write tmpfs overlay: the
guest sees the repository, .venv and .cache where they are here, and nothing it writes reaches
this machine, except the run folder (shared read-write), where the command's output and exit
status come back. /tmp in the guest is a fresh tmpfs.

The initramfs is built here from busybox-static and five of the kernel's modules (9p and
overlayfs); its /init is ``vm-init.sh`` beside this file.

Where /dev/kvm is hardware virtualisation QEMU uses it. On these machines it is a PVM device
that stock kernels cannot use, so QEMU emulates the CPU (TCG): about 6 s to boot to the command,
10-40 times slower inside. ``TIME_SCALE_ENV`` tells the harness by how much to stretch its
timeouts.

Usage::

    python -m tests.e2e.harness.vm --build-initramfs          # the set-up script does this
    python -m tests.e2e.harness.vm [-c 2] [-m 4G] [-t 1800] -- .venv/bin/pytest tests/e2e

Exit status: the command's; 124 when it ran past the timeout; 125 when the VM ended before it.
"""

from __future__ import annotations

import argparse
import lzma
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.harness import paths, timing

VM_CACHE = paths.CACHE / "vm"
KERNEL_ROOT = VM_CACHE / "kernel"  # the extracted linux-image and linux-headers packages
INITRAMFS = VM_CACHE / "initramfs.cpio"
RUNS = VM_CACHE / "runs"
INIT_SCRIPT = Path(__file__).with_name("vm-init.sh")
BUSYBOX = Path("/bin/busybox")
QEMU = "qemu-system-x86_64"
# Loaded by the initramfs in this order (each after what it depends on).
INITRAMFS_MODULES = ("netfs", "9pnet", "9pnet_virtio", "9p", "overlay")
# Set in the guest's environment: the factor by which the harness stretches its timeouts.
TIME_SCALE_ENV = timing.SCALE_ENV
TCG_TIME_SCALE = 10
GUEST_ENV = "KOORD_E2E_IN_VM"  # "1" in the guest's environment
KVM_TIME_SCALE = 2
TIMEOUT_RC, VM_FAILED_RC = 124, 125
BOOT_ATTEMPTS = 3
# Times the command runs again in a fresh VM after the guest kernel died under it. Software
# emulation now and then crashes the guest kernel (CI, 2026-12-02: "Fatal exception in
# interrupt" 175 s into a tier); that says nothing about the tests, but a second death does.
CRASH_RERUNS = 1
# What the kernel prints first when it dies (the start of its report on the console).
KERNEL_DEATH_MARKS = ("Oops", "BUG:", "general protection fault", "invalid opcode", "Kernel panic")


class VmError(RuntimeError):
    """The VM cannot be built or started here; the message says what is missing."""


@dataclass(frozen=True)
class Kernel:
    version: str
    image: Path
    modules: Path


def find_kernel(root: Path = KERNEL_ROOT) -> Kernel:
    images = sorted((root / "boot").glob("vmlinuz-*"))
    if not images:
        raise VmError(f"no kernel under {root}/boot: {paths.SETUP_HINT}")
    version = images[-1].name.removeprefix("vmlinuz-")
    modules = root / "lib" / "modules" / version
    if not (modules / "modules.dep").exists():
        raise VmError(f"{modules}/modules.dep missing (depmod not run): {paths.SETUP_HINT}")
    return Kernel(version, images[-1], modules)


# -- the initramfs ---------------------------------------------------------------------------


def cpio_newc(entries: list[tuple[str, int, bytes, int]]) -> bytes:
    """A cpio archive in the kernel's "newc" format from (name, mode, data, rdev) entries."""
    out = bytearray()

    def record(ino: int, name: str, mode: int, data: bytes, rdev: int) -> None:
        encoded = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, os.major(rdev), os.minor(rdev)]
        out.extend(b"070701" + "".join(f"{v:08x}" for v in fields).encode())
        out.extend(f"{len(encoded):08x}{0:08x}".encode() + encoded)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))

    for ino, (name, mode, data, rdev) in enumerate(entries, start=1):
        record(ino, name, mode, data, rdev)
    record(0, "TRAILER!!!", 0, b"", 0)
    return bytes(out)


def initramfs_entries(kernel: Kernel) -> list[tuple[str, int, bytes, int]]:
    directory, regular = stat.S_IFDIR | 0o755, stat.S_IFREG
    entries = [
        (d, directory, b"", 0) for d in ("bin", "dev", "proc", "sys", "host", "rw", "newroot")
    ]
    entries += [("lib", directory, b"", 0), ("lib/modules", directory, b"", 0)]
    # The kernel opens /dev/console for init's standard streams before /init runs.
    entries.append(("dev/console", stat.S_IFCHR | 0o600, b"", os.makedev(5, 1)))
    entries.append(("bin/busybox", regular | 0o755, BUSYBOX.read_bytes(), 0))
    entries.append(("init", regular | 0o755, INIT_SCRIPT.read_bytes(), 0))
    for name in INITRAMFS_MODULES:
        found = list(kernel.modules.rglob(f"{name}.ko*"))
        if len(found) != 1:
            raise VmError(f"module {name} not found once under {kernel.modules}: {found}")
        data = found[0].read_bytes()
        # busybox's insmod hands the kernel the file's bytes, which must not be compressed.
        if found[0].suffix == ".xz":
            data = lzma.decompress(data)
        entries.append((f"lib/modules/{name}.ko", regular | 0o644, data, 0))
    return entries


def build_initramfs(kernel: Kernel, out: Path = INITRAMFS) -> Path:
    if not BUSYBOX.exists():
        raise VmError(f"{BUSYBOX} missing (Debian package busybox-static): {paths.SETUP_HINT}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(cpio_newc(initramfs_entries(kernel)))
    tmp.replace(out)
    return out


# -- running a command -----------------------------------------------------------------------


def accelerator() -> str:
    """kvm where /dev/kvm is hardware virtualisation, else tcg (software emulation).

    A PVM /dev/kvm (kvm_pvm loaded, as on these Firecracker machines) runs only PVM-built guest
    kernels: a stock kernel stops in its decompressor with a KVM emulation failure.
    """
    sysmod = Path("/sys/module")
    hardware = (sysmod / "kvm_intel").is_dir() or (sysmod / "kvm_amd").is_dir()
    if os.access("/dev/kvm", os.R_OK | os.W_OK) and hardware and not (sysmod / "kvm_pvm").is_dir():
        return "kvm"
    return "tcg"


def in_guest() -> bool:
    """Whether this process runs inside the VM (its command, or something that started)."""
    return os.environ.get(GUEST_ENV) == "1"


def missing_prerequisites() -> list[str]:
    """What this machine lacks to run the VM, as short phrases (empty: all there)."""
    missing = []
    if shutil.which(QEMU) is None:
        missing.append(f"{QEMU} (Debian package qemu-system-x86)")
    try:
        find_kernel()
    except VmError as err:
        missing.append(str(err))
    if not INITRAMFS.exists():
        missing.append(f"the initramfs {INITRAMFS}")
    if not Path("/lib/systemd/systemd").exists():
        missing.append("systemd (/lib/systemd/systemd)")
    return missing


@dataclass(frozen=True)
class VmResult:
    rc: int
    boot_seconds: float | None  # until the initramfs handed over to systemd
    total_seconds: float
    output: str = ""  # what the command printed in the last VM (already copied to stdout)


def guest_script(run: Path, command: list[str], cwd: Path, env: dict[str, str]) -> str:
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(env.items()))
    return f"""#!/bin/bash
exec >>{run}/out 2>&1 </dev/null
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
{exports}mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing
echo "koord-vm: $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
# What runs in the guest, every 30 s, for a run that seems stuck (RUN/ps on this machine).
(while sleep 30; do ps -eo pid,etimes,pcpu,args --sort=-pcpu | head -40 >{run}/ps.new
    mv {run}/ps.new {run}/ps; done) &
cd {shlex.quote(str(cwd))} || exit {VM_FAILED_RC}
{shlex.join(command)}
echo $? >{run}/rc
"""


def qemu_command(
    kernel: Kernel, run: Path, cpus: int, memory: str, accel: str, *, cwd: Path = paths.REPO_ROOT
) -> list[str]:
    append = " ".join(
        [
            "console=ttyS0 quiet loglevel=4 panic=-1",
            "cgroup_no_v1=all psi=1",  # a pure v2 tree; PSI on
            f"koord.run={run} koord.modules={kernel.modules} koord.cwd={cwd}",
        ]
    )
    # Single-threaded TCG: with one host thread per vCPU (thread=multi, about 1.25x faster
    # here) QEMU 7.2 now and then runs stale code after the kernel live-patches a static key
    # (an int3 oops in __alloc_pages or sched_clock_cpu, seen twice in a tier's 30 minutes).
    tcg = ["-accel", "tcg,thread=single,tb-size=1024"] if accel == "tcg" else ["-accel", "kvm"]
    return [
        QEMU,
        *tcg,
        *(["-cpu", "host"] if accel == "kvm" else []),
        "-smp", str(cpus), "-m", memory,
        "-display", "none", "-monitor", "none", "-no-reboot",
        "-serial", f"file:{run}/console.log",
        "-kernel", str(kernel.image), "-initrd", str(INITRAMFS), "-append", append,
        "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
        "-fsdev", f"local,id=run,path={run},security_model=none",
        "-device", "virtio-9p-pci,fsdev=run,mount_tag=run",
    ]  # fmt: skip


def _follow(path: Path, done: threading.Event, prefix: str) -> None:
    """Copy what the guest writes to ``path`` to this process's stdout until ``done``, each
    whole line after ``prefix`` (several VMs may share the stdout)."""
    pending = b""
    with path.open("rb") as f:
        while True:
            # read after looking at done: what was written before done was set is read before
            # returning (looking after an empty read could miss a last write in between)
            finished = done.is_set()
            chunk = f.read(65536)
            if chunk:
                *lines, pending = (pending + chunk).split(b"\n")
                if lines:
                    head = prefix.encode()
                    sys.stdout.buffer.write(b"".join(head + line + b"\n" for line in lines))
                    sys.stdout.buffer.flush()
            elif finished:
                if pending:
                    sys.stdout.buffer.write(prefix.encode() + pending + b"\n")
                    sys.stdout.buffer.flush()
                return
            else:
                time.sleep(0.2)


def _boot(
    qemu_args: list[str], run_dir: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[bytes] | None, float | None]:
    """One boot; (QEMU's result or None on timeout, seconds until the guest was up)."""
    for name in ("up", "rc", "console.log"):
        (run_dir / name).unlink(missing_ok=True)
    start_wall = time.time()
    try:
        qemu = subprocess.run(
            qemu_args,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        qemu = None
    up = run_dir / "up"
    return qemu, (up.stat().st_mtime - start_wall if up.exists() else None)


def kernel_death(console: str, lines: int = 40) -> list[str]:
    """The guest kernel's report of its death, from the first line of it (empty: none)."""
    text = console.splitlines()
    for at, line in enumerate(text):
        if any(mark in line for mark in KERNEL_DEATH_MARKS):
            return text[at : at + lines]
    return []


def _boot_following(
    qemu_args: list[str], run_dir: Path, timeout: float, prefix: str
) -> tuple[subprocess.CompletedProcess[bytes] | None, float | None]:
    """_boot, with what the guest's command prints copied to stdout meanwhile."""
    out = run_dir / "out"
    out.write_bytes(b"")
    done = threading.Event()
    follower = threading.Thread(target=_follow, args=(out, done, prefix), daemon=True)
    follower.start()
    try:
        return _boot(qemu_args, run_dir, timeout)
    finally:
        done.set()
        follower.join()


def run(
    command: list[str],
    *,
    cwd: Path = paths.REPO_ROOT,
    cpus: int = 2,
    memory: str = "4G",
    timeout: float = 1800,
    env: dict[str, str] | None = None,
    keep: bool = False,
    prefix: str = "",
) -> VmResult:
    """Run ``command`` as root in a fresh VM, its output copied to stdout; see the module doc.

    A kernel that dies before the initramfs hands over is booted again, up to BOOT_ATTEMPTS
    times in all: a failed boot says nothing about the command (seen under multi-threaded TCG:
    an oops in sched_clock_cpu at 1.7 s). A kernel that dies under the command is reported and
    the command runs again from the start in a fresh VM, CRASH_RERUNS times at most, within the
    same ``timeout``; the dead VM's console stays in the run folder, which is then kept.
    """
    missing = missing_prerequisites()
    if missing:
        raise VmError(f"cannot run the VM: {'; '.join(missing)}")
    kernel = find_kernel()
    accel = accelerator()
    scale = TCG_TIME_SCALE if accel == "tcg" else KVM_TIME_SCALE
    RUNS.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=RUNS))
    # The guest's service starts with a clean environment; the import path travels with it.
    inherited = {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}
    guest_env = {**inherited, TIME_SCALE_ENV: str(scale), GUEST_ENV: "1", **(env or {})}
    (run_dir / "guest.sh").write_text(guest_script(run_dir, command, cwd, guest_env))
    args = qemu_command(kernel, run_dir, cpus, memory, accel, cwd=cwd)
    start = time.monotonic()
    failed_boots = crashes = 0
    while True:
        print(
            f"{prefix}koord-vm: booting {kernel.image.name} ({accel}, {cpus} CPUs, {memory})",
            flush=True,
        )
        qemu, boot = _boot_following(args, run_dir, timeout - (time.monotonic() - start), prefix)
        if qemu is None or (run_dir / "rc").exists():
            break
        console = (run_dir / "console.log").read_bytes().decode(errors="replace")
        death = kernel_death(console)
        if boot is None and failed_boots < BOOT_ATTEMPTS - 1:
            failed_boots += 1
            died = next(iter(death), "").strip()
            print(f"{prefix}koord-vm: the kernel died while booting ({died}); again", flush=True)
            continue
        if boot is None or not death or crashes == CRASH_RERUNS:
            break
        crashes += 1
        kept = run_dir / f"console-crash-{crashes}.log"
        kept.write_text(console)
        report = "".join(f"{prefix}koord-vm:   {line}\n" for line in death)
        print(
            f"{prefix}koord-vm: the guest kernel died under the command (console in {kept}):\n"
            f"{report}{prefix}koord-vm: the command runs again from the start in a fresh VM",
            flush=True,
        )
    total = time.monotonic() - start
    rc_file = run_dir / "rc"
    if rc_file.exists() and rc_file.read_text().strip().lstrip("-").isdigit():
        rc = int(rc_file.read_text())
    elif qemu is None:
        print(f"{prefix}koord-vm: timed out after {timeout:.0f} s", file=sys.stderr)
        rc = TIMEOUT_RC
    else:
        rc = VM_FAILED_RC
        print(f"{prefix}koord-vm: the VM ended before the command did", file=sys.stderr)
        if qemu.stderr:
            print(qemu.stderr.decode(errors="replace")[-2000:], file=sys.stderr)
        console = (run_dir / "console.log").read_bytes().decode(errors="replace")
        print("\n".join(kernel_death(console) or console.splitlines()[-30:]), file=sys.stderr)
    boot_text = "?" if boot is None else f"{boot:.1f}"
    print(f"{prefix}koord-vm: boot {boot_text} s, total {total:.1f} s, exit {rc}", flush=True)
    out = run_dir / "out"
    output = out.read_bytes().decode(errors="replace") if out.exists() else ""
    if keep or crashes or rc == VM_FAILED_RC:
        print(f"{prefix}koord-vm: run folder kept: {run_dir}", flush=True)
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    return VmResult(rc, boot, total, output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.e2e.harness.vm", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument("--build-initramfs", action="store_true", help="build it and exit")
    parser.add_argument("-c", "--cpus", type=int, default=2)
    parser.add_argument("-m", "--memory", default="4G")
    parser.add_argument("-t", "--timeout", type=float, default=1800, help="seconds")
    parser.add_argument("-e", "--env", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--keep", action="store_true", help="keep the run folder")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args(argv)
    try:
        if args.build_initramfs:
            print(f"vm: initramfs {build_initramfs(find_kernel())}")
            return 0
        if not args.command:
            parser.error("no command")
        env = dict(item.split("=", 1) for item in args.env)
        return run(
            args.command,
            cwd=Path.cwd(),
            cpus=args.cpus,
            memory=args.memory,
            timeout=args.timeout,
            env=env,
            keep=args.keep,
        ).rc
    except VmError as err:
        print(f"vm: {err}", file=sys.stderr)
        return VM_FAILED_RC


if __name__ == "__main__":
    sys.exit(main())
