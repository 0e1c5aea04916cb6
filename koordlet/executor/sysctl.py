"""Node-wide kernel settings: the files under /proc/sys, /sys/kernel/mm and the scheduler's
feature list that the QoS manager's SystemConfig keeps (it decides, this writes).

A setting is read first and written only when the file holds another value. Errors come back
as ``SettingError`` with the kernel's words, so the caller can name them in its status.
"""

from __future__ import annotations

from pathlib import Path


class SettingError(Exception):
    """The file cannot be read or written (or this kernel does not have it)."""


def read_setting(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError as err:
        raise SettingError(f"not on this kernel: {path}") from err
    except OSError as err:
        raise SettingError(f"cannot read {path}: {err.strerror}") from err


def write_int(path: Path, value: int) -> bool:
    """``value`` into ``path`` unless it holds it already; True when written."""
    current = read_setting(path).strip()
    if current.lstrip("-").isdigit() and int(current) == value:
        return False
    write_token(path, str(value))
    return True


def write_token(path: Path, token: str) -> None:
    """One token (a number, or a sched feature's NAME / NO_NAME) written as the kernel takes
    it, with a newline."""
    try:
        path.write_text(f"{token}\n")
    except OSError as err:
        raise SettingError(f"cannot write {token} to {path}: {err.strerror}") from err
