"""The Device report of a cluster-mode koordlet (Koordinator's
``statesinformer/impl/states_device_linux.go``), behind the Accelerators feature gate.

Every interval it reads the node's inventory (``koordlet.collectors.devices``, in a worker
thread) and keeps the cluster-scoped Device named after the node equal to it: created when
missing (owned by the Node), replaced when the devices (in any order), their health or
conditions, or the GPU labels changed, left alone otherwise (no write). A condition keeps its
``lastTransitionTime`` while its status stays the same. RDMA NICs are part of the report only
with the RDMADevices gate too (in Koordinator they come from the RDMA collector, which that gate
turns on). Conflicts and 429/5xx are retried with the read-modify-write helper; any other
failure is logged once per kind and tried again at the next interval.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from koordapi.device import build_device, carry_transition_times, gpu_labels, same_report
from koordkube.client import KubeApi, Outcome, update_with_retry
from koordkube.errors import NotFound
from koordkube.resources import Device, Object
from koordlet.collectors.devices import DeviceInventory
from koordlet.threads import in_thread

log = logging.getLogger(__name__)

REPORT_SECONDS = 30.0

BuildDevice = Callable[[str, str], Object]
"""(node name, node uid) → the desired Device; runs in a worker thread."""


def inventory_builder(inventory: DeviceInventory) -> BuildDevice:
    """The Device of what ``inventory`` reads now (GPU labels only when there are GPUs)."""

    def build(node_name: str, node_uid: str) -> Object:
        found = inventory.read()
        labels = gpu_labels(found.model, found.driver_version) if found.gpus else None
        return build_device(node_name, node_uid, found.gpus, found.nics, labels)

    return build


def rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class DeviceReporter:
    def __init__(
        self,
        api: KubeApi,
        node_name: str,
        build: BuildDevice,
        *,
        node_uid: Callable[[], str] = str,
        interval: float = REPORT_SECONDS,
        now: Callable[[], str] = rfc3339_now,
    ) -> None:
        self.api, self.node_name, self.build = api, node_name, build
        self.node_uid = node_uid
        self.interval = interval
        self.now = now
        self.writes = 0
        self.last_error: str | None = None
        self._logged: set[str] = set()

    async def report_once(self) -> Outcome | None:
        """Build the Device and write it if it changed; None (logged) when that failed."""
        try:
            desired = await in_thread(self.build, self.node_name, self.node_uid())
            outcome = await self._write(desired)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            kind = type(err).__name__
            self.last_error = f"Device {self.node_name} not written: {err!r}"
            if kind not in self._logged:
                self._logged.add(kind)
                log.warning("%s; retrying at the next interval", self.last_error)
            return None
        if self._logged:
            log.info("Device %s written again", self.node_name)
        self._logged.clear()
        self.last_error = None
        if outcome != "unchanged":
            self.writes += 1
        return outcome

    async def _write(self, desired: Object) -> Outcome:
        try:
            await self.api.get(Device, self.node_name)
        except NotFound:
            await self.api.create(Device, carry_transition_times({}, desired, self.now()))
            log.info("created Device %s", self.node_name)
            return "created"
        changed = False

        def mutate(current: Object) -> Object | None:
            nonlocal changed
            changed = not same_report(current, desired)
            if not changed:
                return None
            updated: dict[str, Any] = copy.deepcopy(current)
            stamped = carry_transition_times(current, desired, self.now())
            updated["spec"] = {**(current.get("spec") or {}), **stamped["spec"]}
            meta = updated.setdefault("metadata", {})
            want = desired.get("metadata") or {}
            for key in ("labels", "annotations"):
                if want.get(key):
                    meta[key] = dict(want[key])
                else:
                    meta.pop(key, None)
            if not meta.get("ownerReferences") and want.get("ownerReferences"):
                meta["ownerReferences"] = want["ownerReferences"]
            return updated

        await update_with_retry(
            lambda: self.api.get(Device, self.node_name),
            mutate,
            lambda obj: self.api.replace(Device, obj),
            what=f"update Device {self.node_name}",
        )
        return "updated" if changed else "unchanged"

    async def run(self) -> None:
        while True:
            await self.report_once()
            await asyncio.sleep(self.interval)
