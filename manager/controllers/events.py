"""Kubernetes Events for what an operator must see: invalid configuration, mostly.

The same (object, reason, message) is posted once per ``quiet`` seconds, so a ConfigMap that
stays broken does not produce an event per node and reconcile (koordkube.events: best
effort, a failure is logged and never fails the reconcile that reported it).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from koordkube.client import KubeApi
from koordkube.events import EventRecorder as _Recorder

COMPONENT = "koord-manager"


class EventRecorder(_Recorder):
    def __init__(
        self, api: KubeApi, *, quiet: float = 600.0, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(api, COMPONENT, quiet=quiet, clock=clock)
