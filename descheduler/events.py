"""Kubernetes Events of koord-descheduler: on PodMigrationJobs as they move (Evicting,
EvictComplete, Timeout, ...) as Koordinator's migration controller posts them, and on pods
a dry run would have migrated. Best effort: a failed post is logged, never raised.
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

COMPONENT = "koord-descheduler"
NORMAL, WARNING = "Normal", "Warning"


class EventRecorder:
    def __init__(self, api: KubeApi, *, clock: Callable[[], float] = time.time) -> None:
        self.api = api
        self.clock = clock

    async def post(
        self, obj: Mapping[str, Any], kind: str, reason: str, message: str, action: str = ""
    ) -> None:
        """One Event about ``obj``; a cluster-scoped object's goes to namespace default."""
        meta = obj.get("metadata") or {}
        stamp = datetime.datetime.fromtimestamp(self.clock(), datetime.UTC)
        text = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
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
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": text,
            "lastTimestamp": text,
            "count": 1,
        }
        if action:
            event["action"] = action
        try:
            await self.api.create(Event, event)
        except Exception as err:  # events are best effort
            log.warning("cannot post event %s %s: %s", reason, message, err)
