"""resctrl control groups: create a group with its schemata, move tasks, remove it.

The root is a constructor argument (``/sys/fs/resctrl`` on a node, a folder in tests). Group
names come from ``runtimehooks`` and are checked again here: one path component, no dots.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

RESCTRL_ROOT = Path("/sys/fs/resctrl")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,128}\Z")


class ResctrlError(OSError):
    """A resctrl operation failed; the message names the group and the file."""


def parse_schemata(text: str) -> dict[str, dict[int, int]]:
    """Schemata lines by meaning: {"L3": {0: 0x7ff}, "MB": {0: 100}}.

    Cache masks (L2/L3 lines) are hex, other resources decimal; the kernel pads both
    ("L3:0=07ff", "MB:0= 100"), so values compare as numbers, never as text.
    """
    found: dict[str, dict[int, int]] = {}
    for line in text.splitlines():
        resource, sep, domains = line.strip().partition(":")
        if not sep:
            continue
        base = 16 if resource.startswith(("L2", "L3")) else 10
        values = found.setdefault(resource, {})
        for part in domains.split(";"):
            domain, _, number = part.partition("=")
            try:
                values[int(domain)] = int(number.strip(), base)
            except ValueError:
                continue  # an empty part after a trailing ";", or a format we do not know
    return found


def has_line(current: dict[str, dict[int, int]], line: str) -> bool:
    """Whether ``current`` (parsed schemata) already holds every value of ``line``."""
    return all(
        current.get(resource, {}).get(domain) == value
        for resource, values in parse_schemata(line).items()
        for domain, value in values.items()
    )


class Resctrl:
    def __init__(self, root: Path = RESCTRL_ROOT) -> None:
        self.root = root

    @property
    def available(self) -> bool:
        return (self.root / "schemata").exists()

    def cbm_mask(self) -> int:
        return int((self.root / "info" / "L3" / "cbm_mask").read_text().strip(), 16)

    def l3_cache_ids(self) -> tuple[int, ...]:
        """Cache ids from the root schemata's L3 line ("L3:0=fff;1=fff")."""
        for line in (self.root / "schemata").read_text().splitlines():
            if line.strip().startswith("L3:"):
                return tuple(
                    int(part.split("=")[0])
                    for part in line.split(":", 1)[1].split(";")
                    if "=" in part
                )
        return ()

    def schemata(self, name: str = "") -> dict[str, dict[int, int]]:
        """A group's schemata by meaning (the root's for ""); {} when the group is missing."""
        folder = self._group(name) if name else self.root
        try:
            return parse_schemata((folder / "schemata").read_text())
        except OSError:
            return {}

    def _group(self, name: str) -> Path:
        if not _NAME.match(name):
            raise ResctrlError(f"invalid resctrl group name {name!r}")
        return self.root / name

    def ensure_group(self, name: str, schemata: Iterable[str]) -> bool:
        """Create the group if needed and write each schemata line; True if anything changed."""
        group = self._group(name)
        changed = False
        if not group.is_dir():
            try:
                group.mkdir()
            except OSError as err:
                raise ResctrlError(f"cannot create resctrl group {name}: {err.strerror}") from err
            changed = True
        current = self.schemata(name)
        for line in schemata:
            if has_line(current, line):
                continue
            try:
                (group / "schemata").write_text(line + "\n")
            except OSError as err:
                raise ResctrlError(
                    f"resctrl group {name}: schemata {line!r}: {err.strerror}"
                ) from err
            changed = True
        return changed

    def add_tasks(self, name: str, tids: Iterable[int]) -> int:
        """Move threads into the group; returns how many were not there yet."""
        tasks = self._group(name) / "tasks"
        present = set(tasks.read_text().split()) if tasks.exists() else set()
        moved = 0
        for tid in tids:
            if str(tid) in present:
                continue
            try:
                tasks.write_text(f"{tid}\n")
                moved += 1
            except ProcessLookupError:
                continue  # the thread ended meanwhile
            except OSError as err:
                log.warning("resctrl group %s: cannot add task %d: %s", name, tid, err.strerror)
        return moved

    def remove_group(self, name: str) -> bool:
        group = self._group(name)
        if not group.is_dir():
            return False
        try:
            group.rmdir()
        except OSError as err:
            raise ResctrlError(f"cannot remove resctrl group {name}: {err.strerror}") from err
        return True
