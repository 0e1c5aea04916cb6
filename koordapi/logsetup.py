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
PER_REQUEST_LOGGERS = ("httpx2",)
"""The HTTP client's loggers, which say every request at INFO: a Lease renewal every two
seconds, a NodeMetric report a minute. Shown at debug only."""


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
    Above debug, the HTTP client's per-request lines are left out (PER_REQUEST_LOGGERS).
    """
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    number = level_number(level)
    logging.basicConfig(level=number, handlers=[handler])
    for name in PER_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.NOTSET if number <= logging.DEBUG else logging.WARNING
        )
