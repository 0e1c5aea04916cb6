"""Where cgroup files are, v1 or v2, under a root; reading one whole; a cgroup's pids.

On v1 (and hybrid hosts) every controller has its hierarchy, ``<root>/<subsystem>/<cgroup>``;
on v2 there is one, ``<root>/<cgroup>``. A hybrid host also has a v2 tree at
``<root>/unified``. Cgroup paths are relative to the root ("kubepods/besteffort/pod<uid>");
one that comes from the runtime is not trusted: ``leaves_root`` says whether it climbs out.
"""

from __future__ import annotations

import os
from pathlib import Path

READ_SIZE = 1 << 16


def read_file(path: str | Path) -> str:
    """A whole (small) kernel file with os-level calls: the collectors and the QoS manager read
    thousands of them a second. Raises OSError (FileNotFoundError when absent)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, READ_SIZE)
        if len(data) == READ_SIZE:  # rare: a file larger than one read
            chunks = [data]
            while chunk := os.read(fd, READ_SIZE):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode(errors="replace")


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
