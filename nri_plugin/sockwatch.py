"""Know the moment the runtime's NRI socket appears, so a plugin reconnects at once.

A runtime that restarts removes its socket and binds a new one; a plugin that only retried on
a timer would leave the containers created in between without its adjustments for up to the
timer's period. ``SocketWatch`` watches the socket's folder with inotify and sets ``created``
when a file of the socket's name is created or moved there. Where inotify cannot watch (no
such folder yet, no inotify instances left) it says why once and the caller's timer is all
there is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from inotify_simple import INotify, flags

log = logging.getLogger(__name__)

_WATCHED = flags.CREATE | flags.MOVED_TO | flags.DELETE_SELF | flags.MOVE_SELF


class SocketWatch:
    """Sets ``created`` when ``path`` is created; ``wait`` until then or a timeout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created = asyncio.Event()
        self._inotify: INotify | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._said: str | None = None

    def start(self) -> bool:
        """Begin watching (again, if the folder was gone); False when inotify cannot."""
        if self._inotify is not None:
            return True
        inotify = INotify(nonblocking=True)
        try:
            inotify.add_watch(str(self.path.parent), _WATCHED)
        except OSError as err:
            inotify.close()
            if self._said != str(err):
                self._said = str(err)
                log.info("cannot watch %s for the NRI socket (%s): retrying on a timer",
                         self.path.parent, err.strerror or err)  # fmt: skip
            return False
        self._said = None
        self._inotify = inotify
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(inotify.fileno(), self._on_events)
        return True

    def _on_events(self) -> None:
        assert self._inotify is not None
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            events = []
        for event in events:
            if event.mask & (flags.DELETE_SELF | flags.MOVE_SELF | flags.IGNORED):
                self.close()  # the folder went away: watch it again once it is back
                return
            if event.name == self.path.name:
                self.created.set()

    async def wait(self, timeout: float) -> None:
        """Until the socket is created (since the last ``created.clear()``) or ``timeout``."""
        self.start()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.created.wait(), timeout)

    def close(self) -> None:
        if self._inotify is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()
        self._inotify = None
