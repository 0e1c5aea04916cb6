"""Per-process kernel state: oom_score_adj of a container's processes."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

PROC_ROOT = Path("/proc")


def set_oom_score_adj(pids: Iterable[int], value: int, proc_root: Path = PROC_ROOT) -> int:
    """Write ``value`` for each pid whose oom_score_adj differs; returns how many changed."""
    if not -1000 <= value <= 1000:
        raise ValueError(f"oom_score_adj {value} is outside [-1000, 1000]")
    changed = 0
    for pid in pids:
        path = proc_root / str(int(pid)) / "oom_score_adj"
        try:
            if int(path.read_text().strip()) == value:
                continue
            path.write_text(f"{value}\n")
            changed += 1
        except (FileNotFoundError, ProcessLookupError):
            continue  # the process ended meanwhile
        except (OSError, ValueError) as err:
            log.warning("pid %s: cannot set oom_score_adj %d: %s", pid, value, err)
    return changed
