"""The gang controller: a gang's members leave their scheduling gate together, when all fit.

Koordinator's Coscheduling holds each member at Permit until min-available members of every
gang of its group have a node, then lets them bind together. The stock kube-scheduler has no
Permit for extenders, so here the pod mutating webhook gives every gang member the scheduling
gate ``koordapi.gang.gate.GATE`` (kube-scheduler does not even try a gated pod), and this
controller (leader only) removes the gates of a group's members once

* the group passes Koordinator's basic check (every gang of the group exists, is set up and
  has min-available members: ``koordapi.gang.admission_reason``), and
* a packing of its gated members onto the cluster's free room (``koordapi.gang.fit``) holds
  min-available of every gang of the group (``group_ready``, what Permit asks).

The packing takes the room of the bound pods and of the members let go earlier and not yet
bound (for their gang's waiting-time: then the room is given back and a warning posted), so
two gangs that each fit alone but not together are never both let go: the older one goes, the
other waits whole. A member that waits gets a ``FailedScheduling`` Event with Koordinator's
text, as its scheduler would write it. A gang once satisfied under the once-satisfied policy
lets later members go one by one, as plain pods.

The same pass writes each PodGroup's status as Koordinator's PodGroup controller does
(``koordapi.gang.podgroup_status``; the CRD has no status subresource: a merge patch).
Passes are at least ``INTERVAL`` apart, as the quota status controller's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from koordapi.gang import (
    CoschedulingArgs,
    admission_reason,
    gang_id,
    gang_states,
    group_ready,
    podgroup_status,
    reasons,
)
from koordapi.gang.fit import copy_rooms, node_rooms, place
from koordapi.gang.gate import gated, release_patch
from koordapi.gang.spec import DEFAULT_ARGS, creation_order, pod_key
from koordapi.gang.state import GangState
from koordapi.quota.model import Resources
from koordkube.client import KubeApi
from koordkube.errors import Conflict, Invalid, NotFound
from koordkube.informer import DELETED
from koordkube.resources import PodGroup
from manager.controllers.events import EventRecorder
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics

log = logging.getLogger(__name__)

NAME = "gang"
KEY = "gangs"  # the one key of the queue: a pass looks at every gang
INTERVAL = 1.0
REASON = "FailedScheduling"  # what kube-scheduler (and Koordinator's) writes for a waiting pod

Object = Mapping[str, Any]


def _live(pod: Object) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return not meta.get("deletionTimestamp") and status.get("phase") not in ("Succeeded", "Failed")


def _bound(pod: Object) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _group_of(pod: Object, states: Mapping[str, GangState]) -> str:
    own = gang_id(pod)
    state = states.get(own)
    return state.spec.group_id if state is not None and state.spec is not None else own


def _wait(states: Mapping[str, GangState], own: str) -> float:
    """The gang's waiting-time (Koordinator's Permit wait), 0 for a gang not set up."""
    state = states.get(own)
    return state.spec.wait_time if state is not None and state.spec is not None else 0.0


class GangController:
    """Lets gang members go together and writes PodGroup status (leader only: a reconciler of
    ``manager.app``, one key, ``KEY``)."""

    NAME = NAME

    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        events: EventRecorder,
        metrics: ManagerMetrics,
        *,
        nudge: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
        interval: float = INTERVAL,
        args: CoschedulingArgs = DEFAULT_ARGS,
    ) -> None:
        """``clock``: epoch seconds (PodGroup times are written from it)."""
        self.api, self.state, self.events, self.metrics = api, state, events, metrics
        self.nudge, self.clock, self.interval, self.args = nudge, clock, interval, args
        self._last: float | None = None
        # let go, not bound yet: since when, and until when its room is kept
        self._released: dict[str, tuple[float, float]] = {}
        self._satisfied: set[str] = set()  # gang groups once satisfied (never undone)
        self._told: dict[str, str] = {}  # member -> the last reason posted on it
        self._requests: dict[tuple[str, str], Resources] = {}  # by pod uid and version
        self._expired: set[str] = set()  # let go, not bound within the waiting-time (logged)
        self._gated: set[str] = set()  # pods carrying the gate, kept from the pod events
        state.pods.add_handler(self._on_pod)
        state.nodes.add_handler(self._on_event)
        state.pod_groups.add_handler(self._on_event)

    def _busy(self) -> bool:
        """Whether a pass has anything to do: a gated pod, a member let go and not bound yet,
        or a PodGroup whose status follows its members."""
        return bool(self._gated or self._released or self.state.pod_groups.keys())

    def _on_pod(self, event: str, pod: dict[str, Any]) -> None:
        key = pod_key(pod)
        if event != DELETED and gated(pod):
            self._gated.add(key)
        else:
            self._gated.discard(key)
        self._on_event(event, pod)

    def _on_event(self, event: str, obj: dict[str, Any]) -> None:
        # without a gang waiting, a pod or node event costs no pass (a busy cluster's churn)
        if self._busy():
            self.nudge()

    async def reconcile(self, key: str) -> float | None:
        """One pass, unless the last was less than ``interval`` ago (the seconds to wait)."""
        if key != KEY:
            self.nudge()
            return None
        now = self.clock()
        if self._last is not None and 0 <= now - self._last < self.interval:
            return self._last + self.interval - now
        self._last = now
        return await self.sync(now)

    async def sync(self, now: float) -> float | None:
        """Let go the groups that fit, tell the others why, write PodGroup status; the seconds
        until a released member's room runs out (a pass is due then), None when none."""
        if not self._busy():
            return None  # no gang waits: nothing to count
        pods = [p for p in self.state.pods.list() if _live(p)]
        podgroups = self.state.pod_groups.list() if self.state.pod_groups.synced.is_set() else []
        pods_of_gangs = [p for p in pods if gang_id(p)]  # the gangs' states need no others
        states = gang_states(
            pods_of_gangs, podgroups, once_satisfied=self._satisfied, args=self.args
        )
        self._satisfied |= {
            s.spec.group_id for s in states.values() if s.spec is not None and s.once_satisfied
        }
        if len(self._requests) > 2 * len(pods):  # old versions and gone pods: start over
            self._requests.clear()
        # a pod on its way out still holds its room, as kube-scheduler counts it until it is gone
        rooms = node_rooms(self.state.nodes.list(), self.state.pods.list(), self._requests)
        self._keep_released_room(pods_of_gangs, states, rooms, now)
        waiting: dict[str, list[Object]] = {}
        for pod in creation_order(p for p in pods if gated(p) and not _bound(p)):
            waiting.setdefault(_group_of(pod, states), []).append(pod)
        for group, members in waiting.items():
            if not group:  # gated, but no gang names it any more: nothing holds it back
                await self._release(members, "(none)", states, now)
                continue
            if admission_reason(members[0], states):
                for pod in members:  # each in its own name, as PreEnqueue tells each
                    await self._tell([pod], admission_reason(pod, states))
                continue
            trial = copy_rooms(rooms)
            placement = place([(pod_key(p), p) for p in members], trial)
            held = dict.fromkeys(placement.nodes, now)
            trial_states = gang_states(
                pods_of_gangs, podgroups, held=held, once_satisfied=self._satisfied, args=self.args
            )
            if group_ready(gang_id(members[0]), trial_states):
                rooms = trial
                let_go = [p for p in members if pod_key(p) in held]
                await self._release(let_go, group, trial_states, now)
                await self._tell_unplaced(members, placement.unplaced)
                continue
            await self._tell(members, self._why_not(group, members, placement, trial_states))
        still = {pod_key(p) for members in waiting.values() for p in members}
        self._told = {key: text for key, text in self._told.items() if key in still}
        await self._write_podgroups(podgroups, pods, now)
        ends = [until for _, until in self._released.values() if until > now]
        return min(ends) - now if ends else None

    def _keep_released_room(
        self, pods: Sequence[Object], states: Mapping[str, GangState], rooms: Any, now: float
    ) -> None:
        """Members let go and not bound yet keep their room for their gang's waiting-time
        (a restarted leader counts it from its first pass)."""
        pending: list[tuple[str, Object]] = []
        seen: set[str] = set()
        for pod in creation_order(pods):
            own = gang_id(pod)
            if not own or gated(pod) or _bound(pod):
                continue
            key = pod_key(pod)
            seen.add(key)
            since, until = self._released.setdefault(key, (now, now + _wait(states, own)))
            if now < until:
                pending.append((key, pod))
            elif key not in self._expired:
                self._expired.add(key)
                log.warning(
                    "gang %s: %s was let go %.0fs ago and is still not bound; its room is no "
                    "longer kept for it",
                    own,
                    key,
                    now - since,
                )
        for key in set(self._released) - seen:
            del self._released[key]
        self._expired &= seen
        place(pending, rooms)

    def _why_not(
        self,
        group: str,
        members: Sequence[Object],
        placement: Any,
        states: Mapping[str, GangState],
    ) -> str:
        """The message of a group that waits: the first member that finds no node, in
        Koordinator's words (summaryAndRecordFailedMessage); else the Permit wait's."""
        for pod in members:
            key = pod_key(pod)
            if key in placement.unplaced:
                name = key.partition("/")[2]
                return reasons.group_rejected(
                    group, name, placement.unplaced[key], len(placement.nodes)
                )
        own = gang_id(members[0])
        state = states.get(own)
        gangs = state.group if state is not None else (own,)
        short = [g for g in gangs if g not in states or not states[g].valid_for_permit]
        return reasons.waiting_for_group(gangs, short, own)

    async def _release(
        self,
        members: Sequence[Object],
        group: str,
        states: Mapping[str, GangState],
        now: float,
    ) -> None:
        let_go = []
        for pod in members:
            meta = pod.get("metadata") or {}
            name, namespace = str(meta.get("name")), str(meta.get("namespace"))
            try:
                await self.api.patch(
                    Pod, name, release_patch(pod), namespace=namespace, patch_type=PatchType.JSON
                )
            except (NotFound, Conflict, Invalid):
                continue  # gone, or changed meanwhile: the next pass sees it anew
            except Exception as err:  # the others still go; this one on the next pass
                log.warning(
                    "gang group %s: cannot remove the gate of %s/%s: %s",
                    group,
                    namespace,
                    name,
                    err,
                )
                continue
            key = pod_key(pod)
            self._released[key] = (now, now + _wait(states, gang_id(pod)))
            self._told.pop(key, None)
            let_go.append(name)
        if let_go:
            self.metrics.reconciles.labels(NAME, "released").inc(len(let_go))
            log.info("gang group %s: let go %s", group, ", ".join(let_go))

    async def _tell_unplaced(self, members: Sequence[Object], unplaced: Mapping[str, str]) -> None:
        for pod in members:
            if pod_key(pod) in unplaced:
                await self._tell([pod], unplaced[pod_key(pod)])

    async def _tell(self, members: Sequence[Object], message: str) -> None:
        """A FailedScheduling Event on each member whose reason changed."""
        for pod in members:
            key = pod_key(pod)
            if self._told.get(key) == message:
                continue
            self._told[key] = message
            await self.events.warn({"apiVersion": "v1", "kind": "Pod", **pod}, REASON, message)

    async def _write_podgroups(
        self, podgroups: Sequence[Object], pods: Sequence[Object], now: float
    ) -> None:
        for podgroup in podgroups:
            meta = podgroup.get("metadata") or {}
            status = podgroup_status(podgroup, pods, now)
            if status == (podgroup.get("status") or {}):
                continue
            name, namespace = str(meta.get("name")), str(meta.get("namespace"))
            try:
                await self.api.patch(PodGroup, name, {"status": status}, namespace=namespace)
            except NotFound:
                continue
            except Exception as err:  # the next pass writes it
                log.warning("PodGroup %s/%s: status not written: %s", namespace, name, err)
                continue
            self.metrics.reconciles.labels(NAME, "podgroup-status").inc()
