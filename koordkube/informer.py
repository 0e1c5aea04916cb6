"""List+watch caches of one kind, client-go's reflector and indexer in small.

An ``Informer`` LISTs, remembers the list's resourceVersion and WATCHes from there (with
bookmarks), applying each event to a dict keyed by ``object_key``. A 410 Expired watch
(``errors.Gone``) means the server no longer has the events since that version: it LISTs again
and reports the difference (objects that vanished meanwhile come out as DELETED). A watch the
server ends normally is reopened at once from the last version seen; any other failure is
retried after a capped, jittered exponential backoff. Handlers run after the cache changed, in
the informer's task: they should only enqueue keys (``koordkube.workqueue``), never block or
call the API.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
from collections.abc import Callable

from lightkube.core import resource as lkres

from koordkube import errors
from koordkube.client import Backoff, KubeApi, Sleep
from koordkube.resources import Object, object_key, with_type_meta

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED, BOOKMARK = "ADDED", "MODIFIED", "DELETED", "BOOKMARK"
RESYNC = "RESYNC"
"""The event periodic resync sends for every cached object (client-go's Sync delta)."""

EventHandler = Callable[[str, Object], None]
"""Called with (ADDED | MODIFIED | DELETED | RESYNC, object). Objects are the cache's own
dicts: read them, or deep-copy before changing them."""

# client-go's reflector: 800 ms doubling to 30 s, plus up to 100 % jitter.
WATCH_BACKOFF = Backoff(initial=0.8, factor=2.0, cap=30.0, jitter=1.0)


class Informer:
    """Keep an up-to-date cache of one kind and tell handlers about changes::

    nodes = Informer(api, Node)
    nodes.add_handler(lambda event, node: queue.add(object_key(node)))
    task = asyncio.create_task(nodes.run())
    await nodes.wait_synced()
    node = nodes.get("node-1")
    """

    def __init__(
        self,
        api: KubeApi,
        res: type[lkres.Resource],
        *,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
        resync_period: float | None = None,
        watch_timeout: float = 300.0,
        backoff: Backoff = WATCH_BACKOFF,
        rand: Callable[[], float] = random.random,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.api, self.res = api, res
        self.namespace, self.labels, self.fields = namespace, labels, fields
        self.resync_period = resync_period
        self.watch_timeout = watch_timeout
        self.backoff, self._rand, self._sleep = backoff, rand, sleep
        self.synced = asyncio.Event()
        """Set once the first LIST is in the cache; stays set across re-lists."""
        self.resource_version = ""
        """The newest resourceVersion seen (list, event or bookmark): where a watch resumes."""
        self.lists = 0
        """LISTs done so far, for tests and debugging: 1 + the re-lists after 410."""
        self._cache: dict[str, Object] = {}
        self._handlers: list[EventHandler] = []
        self._failures = 0  # consecutive failed LIST/WATCH attempts, for the backoff

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def get(self, key: str) -> Object | None:
        """Return the cached object for ``name`` or ``namespace/name``."""
        return self._cache.get(key)

    def list(self) -> builtins.list[Object]:
        return [*self._cache.values()]

    def keys(self) -> builtins.list[str]:
        return [*self._cache]

    def __len__(self) -> int:
        return len(self._cache)

    async def wait_synced(self) -> None:
        await self.synced.wait()

    async def run(self) -> None:
        """List and watch until cancelled."""
        resync = asyncio.create_task(self._resync()) if self.resync_period else None
        listed = False
        try:
            while True:
                try:
                    if not listed:
                        await self._list()
                        listed = True
                    await self._watch()
                except errors.Gone as exc:
                    log.info("re-listing %s: %s", self.res.__name__, exc)
                    listed = False
                except Exception as exc:  # any other failure, a bug included: retried later
                    delay = self.backoff.delay(self._failures, self._rand)
                    self._failures += 1
                    log.warning(
                        "%s %s failed (%s), retrying in %.1fs",
                        "watching" if listed else "listing",
                        self.res.__name__,
                        exc,
                        delay,
                    )
                    await self._sleep(delay)
        finally:
            if resync is not None:
                resync.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await resync

    async def _list(self) -> None:
        result = await self.api.list(
            self.res, namespace=self.namespace, labels=self.labels, fields=self.fields
        )
        self.lists += 1
        self._failures = 0
        old, self._cache = self._cache, {object_key(obj): obj for obj in result.items}
        self.resource_version = result.resource_version
        for key, obj in self._cache.items():
            before = old.get(key)
            if before is None:
                self._notify(ADDED, obj)
            elif _version(before) != _version(obj):
                self._notify(MODIFIED, obj)
        for key in old.keys() - self._cache.keys():
            self._notify(DELETED, old[key])
        self.synced.set()

    async def _watch(self) -> None:
        """Apply one watch connection's events until the server ends it."""
        # client-go spreads watch lifetimes over [timeout, 2*timeout) so clients do not
        # reconnect in step.
        timeout = int(self.watch_timeout * (1 + self._rand())) or 1
        events = self.api.watch(
            self.res,
            namespace=self.namespace,
            labels=self.labels,
            fields=self.fields,
            resource_version=self.resource_version,
            timeout_seconds=timeout,
        )
        async with contextlib.aclosing(events):
            async for kind, obj in events:
                self._failures = 0  # the connection works again
                self._apply(kind, obj)

    def _apply(self, kind: str, obj: Object) -> None:
        version = _version(obj)
        if kind == BOOKMARK:
            self.resource_version = version or self.resource_version
            return
        if kind not in (ADDED, MODIFIED, DELETED):
            log.warning("ignoring %s watch event of type %r", self.res.__name__, kind)
            return
        obj = with_type_meta(self.res, obj)
        key = object_key(obj)
        if kind == DELETED:
            self._cache.pop(key, None)
        else:
            self._cache[key] = obj
        self.resource_version = version or self.resource_version
        self._notify(kind, obj)

    async def _resync(self) -> None:
        assert self.resync_period is not None
        while True:
            await asyncio.sleep(self.resync_period)
            for obj in list(self._cache.values()):
                self._notify(RESYNC, obj)

    def _notify(self, kind: str, obj: Object) -> None:
        for handler in self._handlers:
            try:
                handler(kind, obj)
            except Exception:
                # One broken handler must not stop the cache or the other handlers.
                log.exception(
                    "%s handler failed on %s %s", self.res.__name__, kind, object_key(obj)
                )


def _version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")
