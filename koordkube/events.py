"""Kubernetes Events posted by a component (core/v1 Event objects), best effort.

One recorder per component: ``post`` builds the Event about an object (a cluster-scoped
object's goes to namespace default), and with ``quiet`` the same (object, type, reason,
message) is posted at most once per that many seconds, so a condition that persists does not
produce an Event per reconcile. A failed post is logged, never raised: an Event must not fail
the work that reported it.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from lightkube.resources.core_v1 import Event

from koordkube.client import KubeApi

log = logging.getLogger(__name__)

NORMAL, WARNING = "Normal", "Warning"
MAX_MESSAGE = 1024  # the API server's limit on an Event's message


class EventRecorder:
    def __init__(
        self,
        api: KubeApi,
        component: str,
        *,
        quiet: float = 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.component, self.quiet, self.clock = api, component, quiet, clock
        self._posted: dict[tuple[str, str, str, str], float] = {}

    async def warn(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        await self.post(obj, WARNING, reason, message)

    async def post(
        self, obj: Mapping[str, Any], kind: str, reason: str, message: str, action: str = ""
    ) -> None:
        meta = obj.get("metadata") or {}
        now = self.clock()
        if self.quiet > 0:
            key = (str(meta.get("uid") or meta.get("name")), kind, reason, message)
            if now - self._posted.get(key, -self.quiet) < self.quiet:
                return
            self._posted[key] = now
        stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event: dict[str, Any] = {
            "metadata": {
                "generateName": f"{meta.get('name', 'object')}.",
                "namespace": str(meta.get("namespace") or "default"),
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": kind,
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if action:
            event["action"] = action
        try:
            await self.api.create(Event, event)
        except Exception as err:  # events are best effort
            log.warning("cannot post event %s %s: %s", reason, message, err)
