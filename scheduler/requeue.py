"""Pending pods tried again when a Reservation stops holding room.

kube-scheduler retries a pod the extender refused on its own cluster events (a pod or node
added, deleted or changed); a Reservation that expires or is deleted is none of those, so a pod
refused for its room could wait until kube-scheduler's periodic flush of unschedulable pods
(five minutes). The view (scheduler.state) collects the pods refused on a node for its
reservations and, once one of them stops holding, hands them here: each pod still unbound gets
the annotation ``ANNOTATION_REQUEUE`` (ours: Koordinator's scheduler moves such pods itself),
an update kube-scheduler answers by trying the pod again (a pod no plugin of its own refused is
retried on any event). The view is changed before the pods are touched, so the retry sees the
room free.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from lightkube.resources.core_v1 import Pod

from koordapi.gang.spec import format_time
from koordkube.client import KubeApi
from koordkube.errors import NotFound
from scheduler.state import InformerClusterView

log = logging.getLogger(__name__)

ANNOTATION_REQUEUE = "scheduling.koordinator.sh/reservation-released"


class Requeuer:
    def __init__(
        self,
        api: KubeApi,
        view: InformerClusterView,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api, self.view, self.clock = api, view, clock
        self.touched = 0  # pods annotated so far (tests and logs)

    async def run(self) -> None:
        while True:
            await self.view.requeue_wanted.wait()
            await self.once()

    async def once(self) -> None:
        """Annotate every pod handed over so far that is still unbound."""
        self.view.requeue_wanted.clear()
        keys, self.view.requeue = sorted(self.view.requeue), set()
        stamp = format_time(self.clock())
        for key in keys:
            namespace, _, name = key.partition("/")
            pod = self.view.pod(namespace, name)
            if pod is None or (pod.get("spec") or {}).get("nodeName"):
                continue
            patch = {"metadata": {"annotations": {ANNOTATION_REQUEUE: stamp}}}
            try:
                await self.api.patch(Pod, name, patch, namespace=namespace)
            except NotFound:
                continue
            except Exception as err:  # kube-scheduler's own events or flush retry it later
                log.warning("pod %s: could not ask for it to be tried again: %s", key, err)
                continue
            self.touched += 1
            log.info("pod %s: a reservation stopped holding room, asked to be tried again", key)
