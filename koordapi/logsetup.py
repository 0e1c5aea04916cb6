"""One logging set-up for the four commands: koordlet, koord-manager, koord-scheduler, koordctl.

Here because koordapi is the one package all of them may import; it needs only the standard
library and ``koordapi.settings``.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

from koordapi.settings import flag

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class LogOptions:
    """The logging flags every daemon takes, a settings table (``koordapi.settings``)."""

    log_level: str = field(default="info", metadata=flag("log-level", choices=LEVELS, ours=True))


def level_number(level: str | int) -> int:
    """ "debug" → logging.DEBUG; an int stays; an unknown name is INFO."""
    if isinstance(level, int):
        return level
    number = getattr(logging, level.upper(), logging.INFO)
    return number if isinstance(number, int) else logging.INFO


def configure(level: str | int = "info", *, handler: logging.Handler | None = None) -> None:
    """Log from ``level`` on, in the one format, to stderr or to ``handler``.

    As ``logging.basicConfig``: nothing changes when the root logger has a handler already.
    """
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level_number(level), handlers=[handler])
