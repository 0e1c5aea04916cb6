"""Reading the cgroup and procfs files the collectors need, v1 or v2, under an injected root.

``CgroupFS`` answers "what does this cgroup's CPU counter / memory.stat / cpuset / CFS
quota say" with Koordinator's v1 → v2 mapping (cpuacct.usage ↔ cpu.stat usage_usec * 1000,
cpu.cfs_quota_us + cpu.cfs_period_us ↔ cpu.max); files are where ``hierarchy`` says.

Every failure to read one series becomes ``Skip`` with a short reason: ``missing`` (the
cgroup or file does not exist: a container that went away between listing and reading),
``unreadable`` (any other OS error), ``malformed`` (the text does not parse, or a value is
negative). Nothing here writes, and nothing here decides what a missing source means for
the collector as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.cgroupfs.hierarchy import (
    KeptFiles,
    cgroup_file,
    detect_version,
    read_file,
    read_procs,
)

MISSING = "missing"
UNREADABLE = "unreadable"
MALFORMED = "malformed"

UNLIMITED = -1


class Skip(Exception):
    """One series has no sample this pass; ``reason`` is the short key counted in ``skipped``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def read_text(path: Path | str, read: Callable[[str], str] = read_file) -> str:
    """A whole (small) kernel file; a missing or unreadable one is a ``Skip`` with its reason."""
    try:
        text = read(str(path))
    except (FileNotFoundError, NotADirectoryError):
        raise Skip(MISSING, str(path)) from None
    except OSError as err:
        raise Skip(UNREADABLE, f"{path}: {err.strerror or err}") from None
    if "\ufffd" in text:
        raise Skip(MALFORMED, f"{path}: not text")
    return text


def parse_int(text: str, where: str) -> int:
    """A non-negative integer; anything else is ``malformed``."""
    try:
        value = int(text)
    except ValueError:
        raise Skip(MALFORMED, f"{where}: {text.strip()[:40]!r} is not an integer") from None
    if value < 0:
        raise Skip(MALFORMED, f"{where}: negative value {value}")
    return value


def parse_flat_keyed(text: str, where: str) -> dict[str, int]:
    """ "key value" lines (cpu.stat, memory.stat) → {key: value}; one bad line spoils the file.

    Strict on purpose: a truncated or garbled file must not yield a plausible-looking sum
    built from the lines that happened to parse.
    """
    out: dict[str, int] = {}
    try:
        for line in text.split("\n"):
            if line:
                key, value = line.split()
                out[key] = int(value)
    except ValueError:
        raise Skip(MALFORMED, f"{where}: line {line.strip()[:60]!r}") from None
    if out and min(out.values()) < 0:
        bad = next(k for k, v in out.items() if v < 0)
        raise Skip(MALFORMED, f"{where} {bad}: negative value {out[bad]}")
    return out


def parse_keys(text: str, keys: frozenset[str], where: str) -> dict[str, int]:
    """Like ``parse_flat_keyed`` for the lines named in ``keys`` only; those must be sound.

    Each key's line is found with ``str.find`` rather than by splitting every line: a v1
    memory.stat has some 40 lines, read for every cgroup every second, and 5 are wanted.
    """
    out: dict[str, int] = {}
    for key in keys:
        needle = f"{key} "
        at = text.find(needle)
        while at > 0 and text[at - 1] != "\n":  # a longer key ending in this one
            at = text.find(needle, at + 1)
        if at < 0:
            continue
        end = text.find("\n", at)
        value = text[at + len(needle) : None if end < 0 else end]
        try:
            number = int(value)
        except ValueError:
            line = f"{needle}{value}"
            raise Skip(MALFORMED, f"{where}: line {line.strip()[:60]!r}") from None
        if number < 0:
            raise Skip(MALFORMED, f"{where} {key}: negative value {number}")
        out[key] = number
    return out


def require(stats: Mapping[str, int], keys: Iterable[str], where: str) -> list[int]:
    values = []
    for key in keys:
        if key not in stats:
            raise Skip(MALFORMED, f"{where}: no {key!r}")
        values.append(stats[key])
    return values


class CgroupFS:
    """Read-only views of cgroup files under ``root`` (v1 with per-subsystem dirs, or v2).

    The version is detected once, like the executor does; pass ``version`` to force it. With
    ``keep_open`` the counters read every pass (``cpu_stat``, ``cpu_usage_ns``,
    ``memory_stat``) stay open between passes (see ``KeptFiles``); the owner calls ``sweep``
    after each pass to close those of cgroups it no longer reads. Then too a cpu.stat whose
    text is the very text of the previous pass is not parsed again: its numbers are those of
    that pass (without a CFS quota, or idle, its counters do not move), and the dict given is
    shared between passes and must not be changed. memory.stat is parsed every time: its text
    is ten times longer, so remembering it costs memory (2.7 MiB at 1,000 pods), and a
    running container's memory.stat changes every second anyway.
    """

    def __init__(
        self,
        root: Path = Path("/sys/fs/cgroup"),
        version: int | None = None,
        *,
        keep_open: bool = False,
    ) -> None:
        self.root = root
        self.version = detect_version(root) if version is None else version
        self._root_text = str(root).rstrip("/")
        self.kept = KeptFiles() if keep_open else None
        self._read = read_file if self.kept is None else self.kept.read
        # cgroup → (its cpu.stat text, the numbers): of the previous pass, and of this one
        self._parsed: dict[str, tuple[str, dict[str, int]]] = {}
        self._parsed_now: dict[str, tuple[str, dict[str, int]]] = {}

    def sweep(self) -> None:
        """Close the kept files not read since the last sweep."""
        if self.kept is not None:
            self.kept.sweep()
            self._parsed, self._parsed_now = self._parsed_now, {}

    def close(self) -> None:
        if self.kept is not None:
            self.kept.close()
            self._parsed, self._parsed_now = {}, {}

    def path(self, subsystem: str, cgroup: str, name: str) -> Path:
        """v1: <root>/<subsystem>/<cgroup>/<name>; v2: <root>/<cgroup>/<name>."""
        return Path(self.file(subsystem, cgroup, name))

    def file(self, subsystem: str, cgroup: str, name: str) -> str:
        """``path`` as a string, built without pathlib (this runs for every file every pass)."""
        return cgroup_file(self._root_text, self.version, subsystem, cgroup, name)

    def cpu_stat(self, cgroup: str) -> dict[str, int]:
        """cpu.stat as numbers (v1: nr_periods, nr_throttled, ...; v2 also usage_usec)."""
        path = self.file("cpu", cgroup, "cpu.stat")
        text = read_text(path, self._read)
        if self.kept is None:
            return parse_flat_keyed(text, path)
        last = self._parsed.pop(cgroup, None)  # the old text goes now, not at the sweep
        numbers = last[1] if last is not None and last[0] == text else parse_flat_keyed(text, path)
        self._parsed_now[cgroup] = (text, numbers)
        return numbers

    def cpu_usage_ns(self, cgroup: str, stat: Mapping[str, int] | None = None) -> int:
        """Cumulative CPU time in ns: cpuacct.usage (v1) or cpu.stat usage_usec * 1000 (v2).

        On v2 a ``stat`` already read this pass is reused instead of reading cpu.stat again.
        """
        if self.version == 1:
            path = self.file("cpuacct", cgroup, "cpuacct.usage")
            return parse_int(read_text(path, self._read).strip(), path)
        stats = self.cpu_stat(cgroup) if stat is None else stat
        (usec,) = require(stats, ["usage_usec"], f"{cgroup}/cpu.stat")
        return usec * 1000

    def memory_stat(self, cgroup: str, keys: frozenset[str] | None = None) -> dict[str, int]:
        """memory.stat as numbers; with ``keys``, only those lines are parsed (a v1
        memory.stat has some 36 lines and is read for every cgroup every second)."""
        path = self.file("memory", cgroup, "memory.stat")
        text = read_text(path, self._read)
        return parse_flat_keyed(text, path) if keys is None else parse_keys(text, keys, path)

    def cpuset(self, cgroup: str) -> frozenset[int] | None:
        """The CPUs the cgroup may use; None on v2 when the cpuset controller is not enabled.

        v2 reads cpuset.cpus.effective: cpuset.cpus is empty there unless set explicitly.
        """
        if self.version == 1:
            path = self.path("cpuset", cgroup, "cpuset.cpus")
        else:
            path = self.path("cpuset", cgroup, "cpuset.cpus.effective")
            if not path.exists() and (self.root / cgroup.strip("/")).is_dir():
                return None
        text = read_text(path)
        try:
            return parse_cpuset(text)
        except ModelError as err:
            raise Skip(MALFORMED, f"{path}: {err}") from None

    def cfs_quota(self, cgroup: str) -> tuple[int, int]:
        """(quota µs, period µs); quota is ``UNLIMITED`` (-1) for "max" / -1."""
        if self.version == 1:
            quota_path = self.path("cpu", cgroup, "cpu.cfs_quota_us")
            period_path = self.path("cpu", cgroup, "cpu.cfs_period_us")
            quota_text = read_text(quota_path).strip()
            period = parse_int(read_text(period_path).strip(), str(period_path))
            quota = UNLIMITED if quota_text == "-1" else parse_int(quota_text, str(quota_path))
            return quota, period
        path = self.path("cpu", cgroup, "cpu.max")
        parts = read_text(path).split()
        if len(parts) != 2:
            raise Skip(MALFORMED, f"{path}: expected 'quota period', got {parts!r}")
        quota = UNLIMITED if parts[0] == "max" else parse_int(parts[0], str(path))
        return quota, parse_int(parts[1], str(path))


PidsOf = Callable[[str], list[int]]  # a cgroup directory (relative to a hierarchy root) → pids


class CgroupProcs:
    """Pids in a cgroup directory: its cgroup.procs in the cpu hierarchy (v1) or unified (v2).

    [] when the cgroup is gone or unreadable: a container that exited between listing and
    reading simply has no processes left to attribute; [] too for a path that leaves the root
    (the runtime's path, not to be trusted: no one else's pids).
    """

    def __init__(self, cgroup_root: Path) -> None:
        self.root = cgroup_root
        self._root_text = str(cgroup_root).rstrip("/")
        self._version: int | None = None  # detected on first use, not at build

    def __call__(self, cgroup_dir: str) -> list[int]:
        if self._version is None:
            self._version = detect_version(self.root)
        return read_procs(self._root_text, self._version, cgroup_dir)
