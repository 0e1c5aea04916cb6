"""Kubernetes Events of koord-descheduler: on PodMigrationJobs as they move (Evicting,
EvictComplete, Timeout, ...) as Koordinator's migration controller posts them, and on pods
a dry run would have migrated. Each is posted (koordkube.events, best effort)."""

from __future__ import annotations

import time
from collections.abc import Callable

from koordkube.client import KubeApi
from koordkube.events import NORMAL, WARNING
from koordkube.events import EventRecorder as _Recorder

__all__ = ["COMPONENT", "NORMAL", "WARNING", "EventRecorder"]

COMPONENT = "koord-descheduler"


class EventRecorder(_Recorder):
    def __init__(self, api: KubeApi, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(api, COMPONENT, clock=clock)
