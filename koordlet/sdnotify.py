"""systemd's notification protocol: one datagram per message to $NOTIFY_SOCKET.

With ``Type=notify`` systemd holds the unit in "activating" until READY=1 arrives; with
``WatchdogSec=`` it restarts the service when WATCHDOG=1 stops arriving. Outside systemd
(no NOTIFY_SOCKET) every call is a no-op, so koordlet runs the same everywhere.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


def notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (e.g. "READY=1\\nSTATUS=...") to systemd; False when not under it."""
    env = os.environ if environ is None else environ
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as err:
        log.warning("cannot notify systemd at %s: %s", env.get("NOTIFY_SOCKET"), err)
        return False
    return True


def watchdog_interval(environ: Mapping[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when not asked for."""
    env = os.environ if environ is None else environ
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None  # meant for another process (e.g. our parent's)
    try:
        usec = int(env.get("WATCHDOG_USEC", "0"))
    except ValueError:
        return None
    return usec / 2e6 if usec > 0 else None
