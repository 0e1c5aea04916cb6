"""A private containerd 1.7 with NRI enabled, for tests, the demo and the benchmarks.

Everything the daemon writes lives under one base folder of its own: root, state, the CRI
socket, the NRI socket, the NRI plugin and plugin-config folders, pod logs and containerd's log.
The only shared place containerd insists on is /run/containerd/s/, where its runc shims put
their sockets (hard-coded upstream); they go away with the shims.

Usage::

    with Containerd.create() as ctrd:           # starts it and imports the test images
        cri = CriClient(ctrd.layout.address)
        ...
        ctrd.restart()                           # same root and state, containers survive
    # stopped: sandboxes removed, leftover shims ended, mounts released, folder deleted
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from tests.e2e.harness import images, paths
from tests.e2e.harness.kubelet import KubeletLayout, layout_from_env
from tests.e2e.harness.timing import deadline, go_duration, scaled

log = logging.getLogger(__name__)

K8S_NAMESPACE = "k8s.io"


class ContainerdError(RuntimeError):
    """containerd did not start, stop or answer as expected; the message names its log."""


@dataclass(frozen=True)
class Layout:
    """The private folders and sockets of one containerd instance, all under ``base``."""

    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def address(self) -> Path:
        """The containerd gRPC (and CRI) socket."""
        return self.base / "containerd.sock"

    @property
    def nri_socket(self) -> Path:
        return self.base / "nri" / "nri.sock"

    @property
    def nri_plugin_path(self) -> Path:
        """Pre-installed NRI plugins (``NN-name`` executables) that containerd launches."""
        return self.base / "nri" / "plugins"

    @property
    def nri_plugin_config_path(self) -> Path:
        return self.base / "nri" / "conf.d"

    @property
    def pod_logs(self) -> Path:
        return self.base / "pod-logs"

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def log(self) -> Path:
        return self.base / "containerd.log"

    def folders(self) -> list[Path]:
        return [
            self.root,
            self.state,
            self.nri_plugin_path,
            self.nri_plugin_config_path,
            self.pod_logs,
            self.base / "opt",
            self.base / "cni" / "bin",
            self.base / "cni" / "conf",
        ]


@dataclass(frozen=True)
class Settings:
    """What varies between test runs; the defaults are what the e2e suite uses."""

    snapshotter: str = "overlayfs"
    sandbox_image: str = images.PAUSE.ref
    nri_enabled: bool = True
    nri_disable_connections: bool = False
    # containerd's defaults (5 s, 2 s), stretched on a slow machine (harness/timing.py)
    nri_registration_timeout: str = field(default_factory=lambda: go_duration(5))
    nri_request_timeout: str = field(default_factory=lambda: go_duration(2))
    runc: Path = paths.RUNC
    log_level: str = "info"
    # The kubelet's cgroup driver; with systemd, runc creates containers through systemd.
    layout: KubeletLayout = field(default_factory=layout_from_env)
    # A command that starts containerd in other namespaces (the cluster tier's node: nsenter
    # into the cluster's network and mount namespaces); empty: this process's.
    enter: tuple[str, ...] = ()


def _q(value: object) -> str:
    """A TOML basic string."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def render_config(layout: Layout, settings: Settings) -> str:
    """containerd config (version 2) keeping every path private and NRI enabled.

    ``restrict_oom_score_adj`` is required here: without it runc cannot start any sandbox in
    this environment ("can't get final child's PID from pipe: EOF").
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = {_q(layout.root)}
state = {_q(layout.state)}

[grpc]
  address = {_q(layout.address)}

[debug]
  level = {_q(settings.log_level)}

[plugins."io.containerd.internal.v1.opt"]
  path = {_q(layout.base / "opt")}

[plugins."io.containerd.nri.v1.nri"]
  disable = {str(not settings.nri_enabled).lower()}
  disable_connections = {str(settings.nri_disable_connections).lower()}
  socket_path = {_q(layout.nri_socket)}
  plugin_path = {_q(layout.nri_plugin_path)}
  plugin_config_path = {_q(layout.nri_plugin_config_path)}
  plugin_registration_timeout = {_q(settings.nri_registration_timeout)}
  plugin_request_timeout = {_q(settings.nri_request_timeout)}

[{cri}]
  sandbox_image = {_q(settings.sandbox_image)}
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [{cri}.cni]
    bin_dir = {_q(layout.base / "cni" / "bin")}
    conf_dir = {_q(layout.base / "cni" / "conf")}
  [{cri}.containerd]
    snapshotter = {_q(settings.snapshotter)}
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = {_q(settings.runc)}
        SystemdCgroup = {str(settings.layout.systemd).lower()}
"""


def accepting(path: Path) -> bool:
    """Whether something listens on the Unix socket ``path``."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def mounts_under(base: Path, mountinfo: str | None = None) -> list[Path]:
    """Mount points at or below ``base``, deepest first (the order to unmount them in)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    prefix = str(base).rstrip("/") + "/"
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        # mountinfo escapes spaces and friends as octal (\040)
        point = fields[4].encode().decode("unicode_escape")
        if point == prefix[:-1] or point.startswith(prefix):
            found.append(Path(point))
    return sorted(set(found), key=lambda p: len(p.parts), reverse=True)


def shim_pids(address: Path) -> list[int]:
    """Pids of containerd shims that serve the containerd listening on ``address``."""
    pids = []
    needle = str(address).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        args = cmdline.split(b"\0")
        if args and args[0].endswith(b"containerd-shim-runc-v2") and needle in args:
            pids.append(int(entry.name))
    return pids


def _umount(path: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    mnt_detach = 2
    if libc.umount2(str(path).encode(), mnt_detach) != 0:
        err = ctypes.get_errno()
        log.warning("umount %s failed: %s", path, os.strerror(err))


class Containerd:
    """One private containerd process; see the module docstring for the life cycle."""

    def __init__(self, layout: Layout, settings: Settings | None = None) -> None:
        self.layout = layout
        self.settings = settings or Settings()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @classmethod
    def create(cls, settings: Settings | None = None, parent: Path | None = None) -> Containerd:
        """A containerd in a fresh temporary folder (short path: unix sockets cap at 108 bytes)."""
        base = Path(tempfile.mkdtemp(prefix="koord-e2e-", dir=parent or "/tmp"))
        return cls(Layout(base), settings)

    # -- life cycle ---------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.poll() is None else None

    @property
    def bin_dir(self) -> Path:
        return paths.require(paths.CONTAINERD_BIN_DIR / "containerd", "containerd").parent

    def start(self, timeout: float = 30.0) -> None:
        """Start containerd and wait until its gRPC socket answers; import missing images."""
        if self.pid is not None:
            raise ContainerdError("containerd is already running")
        for folder in self.layout.folders():
            folder.mkdir(parents=True, exist_ok=True)
        self.layout.config.write_text(render_config(self.layout, self.settings))
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        self._log_offset = self.layout.log.stat().st_size if self.layout.log.exists() else 0
        with self.layout.log.open("ab") as logf:
            self._proc = subprocess.Popen(
                [
                    *self.settings.enter,
                    str(self.bin_dir / "containerd"),
                    "--config",
                    str(self.layout.config),
                ],
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self._wait_socket(timeout)
        self._import_images()

    def stop(self, timeout: float = 20.0) -> None:
        """Stop containerd (SIGTERM, then SIGKILL); running containers and shims survive."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(scaled(timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    def log_text(self, since_start: bool = False) -> str:
        """containerd's log (all of it, or only what the current run wrote)."""
        if not self.layout.log.exists():
            return ""
        with self.layout.log.open("rb") as f:
            if since_start:
                f.seek(self._log_offset)
            return f.read().decode(errors="replace")

    def wait_for_log(self, needle: str, count: int = 1, timeout: float = 15.0) -> None:
        """Wait until the current run's log holds ``needle`` at least ``count`` times."""
        end = deadline(timeout)
        while self.log_text(since_start=True).count(needle) < count:
            if time.monotonic() > end:
                raise ContainerdError(
                    f"containerd log has not shown {needle!r} {count} time(s) in "
                    f"{scaled(timeout):g}s:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.02)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _wait_socket(self, timeout: float) -> None:
        end = deadline(timeout)
        while time.monotonic() < end:
            if self._proc is None or self._proc.poll() is not None:
                raise ContainerdError(
                    f"containerd exited during start-up; log {self.layout.log}:\n{self.log_tail()}"
                )
            if accepting(self.layout.address):
                return
            time.sleep(0.05)
        raise ContainerdError(
            f"containerd did not listen within {scaled(timeout):g}s; log {self.layout.log}"
        )

    # -- images -------------------------------------------------------------------------------

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``ctr`` against this containerd in the CRI (k8s.io) namespace."""
        cmd = [
            str(self.bin_dir / "ctr"),
            "--address",
            str(self.layout.address),
            "--namespace",
            K8S_NAMESPACE,
            *args,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(120), check=False)
        if check and out.returncode != 0:
            raise ContainerdError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        return out

    def _import_images(self) -> None:
        present = set(self.ctr("images", "list", "--quiet").stdout.split())
        for spec in images.ALL_IMAGES:
            if spec.ref in present:
                continue
            tarball = paths.require(paths.IMAGES_DIR / spec.filename, f"image {spec.ref}")
            self.ctr("images", "import", "--snapshotter", self.settings.snapshotter, str(tarball))

    # -- teardown -----------------------------------------------------------------------------

    def cleanup(self) -> list[str]:
        """Stop containerd, end its leftover shims, release mounts and delete the folder.

        Returns what could not be cleaned (empty when all went well). The folder is only
        deleted when nothing is mounted below it any more, so a bind mount can never lead the
        deletion into the host's files.
        """
        problems: list[str] = []
        self.stop()
        for pid in shim_pids(self.layout.address):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for point in mounts_under(self.layout.base):
            _umount(point)
        left = mounts_under(self.layout.base)
        if left:
            problems.append(f"mounts left under {self.layout.base}: {left}")
        else:
            shutil.rmtree(self.layout.base, ignore_errors=True)
        if shim_pids(self.layout.address):
            problems.append("containerd shims still running")
        return problems

    def __enter__(self) -> Containerd:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for problem in self.cleanup():
            log.warning("containerd cleanup: %s", problem)
