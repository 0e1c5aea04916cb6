"""Where cgroup files are, v1 or v2, under a root; reading one whole; a cgroup's pids.

On v1 (and hybrid hosts) every controller has its hierarchy, ``<root>/<subsystem>/<cgroup>``;
on v2 there is one, ``<root>/<cgroup>``. A hybrid host also has a v2 tree at
``<root>/unified``. Cgroup paths are relative to the root ("kubepods/besteffort/pod<uid>");
one that comes from the runtime is not trusted: ``leaves_root`` says whether it climbs out.
"""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

READ_SIZE = 1 << 16


def read_file(path: str | Path) -> str:
    """A whole (small) kernel file with os-level calls: the collectors and the QoS manager read
    thousands of them a second. Raises OSError (FileNotFoundError when absent)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, READ_SIZE)
        if len(data) == READ_SIZE:  # rare: a file larger than one read
            data = _read_rest(fd, data)
    finally:
        os.close(fd)
    return data.decode(errors="replace")


def _read_rest(fd: int, first: bytes) -> bytes:
    chunks = [first]
    while chunk := os.read(fd, READ_SIZE):
        chunks.append(chunk)
    return b"".join(chunks)


class KeptFiles:
    """``read_file`` for files read every pass: each file is opened once and re-read with
    pread at offset 0 (the kernel regenerates a cgroup or procfs file on every read from the
    start), which costs a third of open + read + close here.

    A kept descriptor whose cgroup was removed reads ENODEV: it is closed and the path opened
    afresh, so a removed cgroup reads as missing and a re-created one as itself. ``sweep``
    closes what was not read since the last sweep (the cgroups of pods that are gone). At
    most ``limit`` descriptors are kept (a quarter of the soft RLIMIT_NOFILE by default);
    past that, and when the process is out of descriptors, files are read the plain way.
    Not thread-safe: one per collector.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit  # None: from RLIMIT_NOFILE at the first open, after start-up raised it
        self._fds: dict[str, int] = {}
        self._used: set[str] = set()

    def __len__(self) -> int:
        return len(self._fds)

    @property
    def limit(self) -> int:
        if self._limit is None:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            self._limit = 256 if soft == resource.RLIM_INFINITY else max(0, soft // 4)
        return self._limit

    def read(self, path: str) -> str:
        """The file's whole text, as ``read_file`` gives it. Raises OSError."""
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return self._pread(path, fd)
            except OSError as err:
                self._forget(path)
                if err.errno != errno.ENODEV:  # ENODEV: removed, perhaps re-created: reopen
                    raise
        if len(self._fds) >= self.limit:
            return read_file(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            if err.errno in (errno.EMFILE, errno.ENFILE):
                return read_file(path)
            raise
        self._fds[path] = fd
        try:
            return self._pread(path, fd)
        except OSError:
            self._forget(path)
            raise

    def _pread(self, path: str, fd: int) -> str:
        data = os.pread(fd, READ_SIZE, 0)
        if len(data) == READ_SIZE:  # rare: a file larger than one read
            chunks = [data]
            while chunk := os.pread(fd, READ_SIZE, READ_SIZE * len(chunks)):
                chunks.append(chunk)
            data = b"".join(chunks)
        self._used.add(path)
        return data.decode(errors="replace")

    def _forget(self, path: str) -> None:
        self._used.discard(path)
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def sweep(self) -> int:
        """Close the files not read since the previous sweep; returns how many."""
        stale = self._fds.keys() - self._used  # a set difference: thousands of files a pass
        for path in stale:
            self._forget(path)
        self._used = set()
        return len(stale)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._used.clear()


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one (as Go's runtime does for Koordinator's
    koordlet): kept-open cgroup files need some thousands on a large node. Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError):
            return soft
    return hard


def detect_version(root: Path) -> int:
    """2 for a unified hierarchy at ``root``, else 1 (v1 or hybrid)."""
    return 2 if (root / "cgroup.controllers").exists() else 1


def v2_root(root: Path) -> Path | None:
    """The cgroup v2 hierarchy: ``root`` on a v2 host, ``root/unified`` on a hybrid one."""
    if detect_version(root) == 2:
        return root
    unified = root / "unified"
    return unified if (unified / "cgroup.controllers").exists() else None


def leaves_root(cgroup: str) -> bool:
    """Whether a cgroup path (from the runtime, so not to be trusted) climbs out of the
    hierarchy root: a ".." component. cgroupfs has no symbolic links, so nothing else can."""
    # the substring test first: every write of the executor asks, and almost none has ".."
    return ".." in cgroup and ".." in cgroup.split("/")


def cgroup_file(root: str, version: int, subsystem: str, cgroup: str, name: str) -> str:
    """v1: <root>/<subsystem>/<cgroup>/<name>; v2: <root>/<cgroup>/<name>. ``root`` without a
    trailing slash; a string, not a Path: this runs for every file every pass."""
    rel = cgroup.strip("/")
    if version == 1:
        return f"{root}/{subsystem}/{rel}/{name}" if rel else f"{root}/{subsystem}/{name}"
    return f"{root}/{rel}/{name}" if rel else f"{root}/{name}"


def read_procs(root: str, version: int, cgroup: str) -> list[int]:
    """Pids in ``cgroup``: its cgroup.procs in the cpu hierarchy (v1) or the one tree (v2).

    [] when the cgroup is gone or unreadable (a container that exited between listing and
    reading has no processes left), or when the path leaves the root (no one else's pids)."""
    if leaves_root(cgroup):
        return []
    try:
        text = read_file(cgroup_file(root, version, "cpu", cgroup, "cgroup.procs"))
    except OSError:
        return []
    return [int(p) for p in text.split() if p.isdigit()]
