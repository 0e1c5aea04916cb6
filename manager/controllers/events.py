"""Kubernetes Events for what an operator must see: invalid configuration, mostly.

The same (object, reason, message) is posted once per ``quiet`` seconds, so a ConfigMap that
stays broken does not produce an event per node and reconcile. Posting is best effort: a
failure is logged and never fails the reconcile that reported it.
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

COMPONENT = "koord-manager"


class EventRecorder:
    def __init__(
        self, api: KubeApi, *, quiet: float = 600.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.api = api
        self.quiet = quiet
        self.clock = clock
        self._posted: dict[tuple[str, str, str, str], float] = {}

    async def warn(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        await self.post(obj, "Warning", reason, message)

    async def post(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        key = (str(meta.get("uid") or meta.get("name")), kind, reason, message)
        now = self.clock()
        if now - self._posted.get(key, -self.quiet) < self.quiet:
            return
        self._posted[key] = now
        stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
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
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self.api.create(Event, event)
        except Exception as err:  # events are best effort
            log.warning("cannot post event %s %s: %s", reason, message, err)
