"""The cluster tier's Kubernetes: one binary built from the Kubernetes Go modules (kubebin/),
and CoreDNS from its own module (kubebin/coredns/).

The build is slow (tens of minutes on 2 cores, cold), so its result is kept outside the clone,
in a folder keyed by what decides it: the two modules' go.mod, go.sum and main.go and the Go
version.
A clean clone on the same machine (CI) finds it there; Go's own module and build caches
(~/go/pkg/mod, ~/.cache/go-build) make a rebuild after a change to main.go a matter of the
link. A lock keeps two builds from running at once. Nothing built is ever committed.

The same folder holds the image the chart's own kube-scheduler Deployment runs
(registry.k8s.io/kube-scheduler:<version>): no registry answers here, so it is made from this
binary, one layer with it as /usr/local/bin/kube-scheduler, and imported into containerd.

Usage::

    python -m tests.cluster.kubebuild     # builds if needed; prints the binary's path
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.e2e.harness import images, paths

SOURCE = paths.REPO_ROOT / "kubebin"
CACHE_ENV = "KOORD_KUBE_CACHE"
DEFAULT_CACHE = Path("/var/cache/koordinator-py/kube")
# The release kubebin/go.mod requires; every component reports it (the version ldflags).
VERSION = "v1.37.2"
BINARY = "kube"
# Each binary and the module it is built from.
MODULES = {BINARY: SOURCE, "coredns": SOURCE / "coredns"}
SCHEDULER_IMAGE = f"registry.k8s.io/kube-scheduler:{VERSION}"
SCHEDULER_IMAGE_FILE = "kube-scheduler-image.tar"


class BuildError(RuntimeError):
    """Go is missing or the build failed; the message has the build's last lines."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV, DEFAULT_CACHE))


def go() -> str:
    found = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if Path(p).exists()), None
    )
    if found is None:
        raise BuildError("no Go toolchain (go) on PATH: the cluster tier builds Kubernetes with it")
    return found


def build_key() -> str:
    """What the binaries are built from: the modules' files and the Go version."""
    digest = hashlib.sha256()
    for module in MODULES.values():
        for name in ("go.mod", "go.sum", "main.go"):
            path = module / name
            digest.update(str(path.relative_to(SOURCE)).encode() + b"\0" + path.read_bytes())
    version = subprocess.run([go(), "version"], capture_output=True, text=True, check=True)
    digest.update(version.stdout.encode())
    return f"{VERSION}-{digest.hexdigest()[:16]}"


def folder() -> Path:
    return cache_root() / build_key()


def ldflags() -> str:
    major, minor = VERSION.removeprefix("v").split(".")[:2]
    base = "k8s.io/component-base/version"
    return " ".join(
        [
            "-s -w",
            f"-X {base}.gitVersion={VERSION}",
            f"-X {base}.gitMajor={major}",
            f"-X {base}.gitMinor={minor}",
            f"-X {base}.gitTreeState=clean",
            f"-X {base}.buildDate=1970-01-01T00:00:00Z",
        ]
    )


def ensure(say: Callable[[str], None] = print) -> Path:
    """The kube binary (coredns beside it), built first if this machine has none for the
    current sources."""
    target = folder()
    binary = target / BINARY
    if all((target / name).exists() for name in MODULES):
        return binary
    target.mkdir(parents=True, exist_ok=True)
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build of the same sources: wait for it
        for name, module in MODULES.items():
            if not (target / name).exists():
                _build(module, target / name, say)
    return binary


def _build(module: Path, binary: Path, say: Callable[[str], None]) -> None:
    say(
        f"kubebuild: building {binary.name} from the Go modules ({module}) into {binary.parent} "
        "(about 10 min for Kubernetes the first time on 2 cores; Go's caches make later "
        "builds quick)"
    )
    start = time.monotonic()
    partial = binary.with_name(f"{binary.name}.partial")
    command = [go(), "build", "-trimpath", "-ldflags", ldflags(), "-o", str(partial), "."]
    # Go's caches live under HOME (~/.cache/go-build, ~/go/pkg/mod): a CI environment without
    # HOME still finds the machine's.
    env = {"HOME": str(Path.home()), **os.environ, "CGO_ENABLED": "0"}
    done = subprocess.run(command, cwd=module, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise BuildError(f"go build in {module} failed (exit {done.returncode}):\n{tail}")
    partial.rename(binary)
    say(f"kubebuild: built {binary} in {time.monotonic() - start:.0f} s")


def scheduler_image(binary: Path) -> Path:
    """The kube-scheduler image archive (built once per binary)."""
    archive = binary.parent / SCHEDULER_IMAGE_FILE
    if archive.exists():
        return archive
    layer = binary.parent / "kube-scheduler-layer.tar"
    with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("usr", "usr/local", "usr/local/bin", "tmp"):
            entry = tarfile.TarInfo(name)
            entry.type = tarfile.DIRTYPE
            entry.mode = 0o1777 if name == "tmp" else 0o755
            tar.addfile(entry)
        entry = tar.gettarinfo(str(binary), "usr/local/bin/kube-scheduler")
        entry.uid = entry.gid = 0
        entry.uname = entry.gname = "root"
        entry.mtime = 0
        entry.mode = 0o755
        with binary.open("rb") as data:
            tar.addfile(entry, data)
    spec = images.ImageSpec(
        SCHEDULER_IMAGE, SCHEDULER_IMAGE_FILE, ("/usr/local/bin/kube-scheduler",)
    )
    partial = archive.with_suffix(".partial")
    partial.write_bytes(images.image_archive(spec, layer.read_bytes(), path="/usr/local/bin"))
    layer.unlink()
    partial.rename(archive)
    return archive


def main() -> int:
    try:
        print(ensure(say=lambda line: print(line, file=sys.stderr, flush=True)))
    except BuildError as err:
        print(f"kubebuild: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
