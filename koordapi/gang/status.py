"""A PodGroup's status as Koordinator v1.8's PodGroup controller writes it
(coscheduling/controller/podgroup.go), computed from the gang's member pods.

The controller moves the phase one step per sync: "" -> Pending; Pending -> PreScheduling once
minMember (> 0) members exist (occupiedBy from the first member's owners); from any later phase
it counts the members: none -> Pending; bound < minMember -> Scheduling (scheduleStartTime set
once); else Scheduled, Running once running + succeeded reach minMember; Failed when any member
failed and failed + running + succeeded reach minMember; Finished when succeeded does. Each
patch fires an update that syncs it again, so ``podgroup_status`` steps until nothing changes,
except that, as pgAdded, it never touches a Finished or Failed group nor one whose last
schedule started more than 48 hours after its creation with nothing running (pods probably
garbage-collected).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordapi.gang.spec import creation_order, format_time, gang_id, parse_time, podgroup_id

PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
UNKNOWN = "Unknown"
FINISHED = "Finished"
FAILED = "Failed"

MAX_GC_SECONDS = 48 * 3600.0  # controller maxGCTime
_MAX_STEPS = 8  # "" -> Pending -> PreScheduling -> counted -> settled takes four


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _min_member(podgroup: Mapping[str, Any]) -> int:
    return _int(_mapping(podgroup.get("spec")).get("minMember"))


def occupied_by(pod: Mapping[str, Any]) -> str:
    """fillOccupiedObj: the pod's owners as sorted ``namespace/name``, comma-joined; empty
    where it has none (the PodGroup keeps what it had)."""
    meta = _mapping(pod.get("metadata"))
    namespace = meta.get("namespace") or ""
    owners = meta.get("ownerReferences")
    refs = [
        f"{namespace}/{_mapping(owner).get('name') or ''}"
        for owner in (owners if isinstance(owners, list) else ())
    ]
    return ",".join(sorted(refs))


def sync_wanted(podgroup: Mapping[str, Any]) -> bool:
    """PodGroupController.pgAdded: whether the controller syncs this PodGroup at all."""
    status = _mapping(podgroup.get("status"))
    if status.get("phase") in (FINISHED, FAILED):
        return False
    started = parse_time(status.get("scheduleStartTime"))
    created = parse_time(_mapping(podgroup.get("metadata")).get("creationTimestamp"))
    return not (
        _int(status.get("scheduled")) == _min_member(podgroup)
        and _int(status.get("running")) == 0
        and started is not None
        and started - (created or 0.0) > MAX_GC_SECONDS
    )


def members_of(podgroup: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The PodGroup's gang members among ``pods`` (GetAllPodsFromGang), in creation order."""
    own = podgroup_id(podgroup)
    return creation_order(pod for pod in pods if gang_id(pod) == own)


def _phase_of(pod: Mapping[str, Any]) -> str:
    phase = _mapping(pod.get("status")).get("phase")
    return phase if isinstance(phase, str) else ""


def _bound(pod: Mapping[str, Any]) -> bool:
    return bool(_mapping(pod.get("spec")).get("nodeName"))


def podgroup_status_step(
    podgroup: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: float
) -> dict[str, Any]:
    """One PodGroupController.syncHandler: the status after one sync (a new dict; fields it
    does not set are kept as they were). ``pods`` may hold other pods too; ``now`` is epoch
    seconds for scheduleStartTime."""
    status = dict(_mapping(podgroup.get("status")))
    members = members_of(podgroup, pods)
    minimum = _min_member(podgroup)
    phase = status.get("phase") or ""
    if phase == "":
        status["phase"] = PENDING
        return status
    if phase == PENDING:
        if len(members) >= minimum > 0:
            status["phase"] = PRE_SCHEDULING
            owners = occupied_by(members[0])
            if owners:
                status["occupiedBy"] = owners
        return status
    if not members:
        status["phase"] = PENDING
        return status
    phases = [_phase_of(pod) for pod in members]
    running, succeeded, failed = (phases.count(p) for p in ("Running", "Succeeded", "Failed"))
    scheduled = sum(1 for pod in members if _bound(pod))  # GetBoundPodNumber
    status.update(failed=failed, succeeded=succeeded, running=running, scheduled=scheduled)
    if scheduled < minimum:
        status["phase"] = SCHEDULING
        if parse_time(status.get("scheduleStartTime")) is None:
            status["scheduleStartTime"] = format_time(now)
    else:
        status["phase"] = SCHEDULED
    if succeeded + running >= minimum and status["phase"] == SCHEDULED:
        status["phase"] = RUNNING
    if failed and failed + running + succeeded >= minimum:
        status["phase"] = FAILED
    if succeeded >= minimum:
        status["phase"] = FINISHED
    return status


def podgroup_status(
    podgroup: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], now: float
) -> dict[str, Any]:
    """The status Koordinator's controller settles on for ``podgroup`` given its members:
    syncs repeated while it would sync and the status changes (see the module doc)."""
    pods = list(pods)
    current = dict(podgroup)
    status = dict(_mapping(podgroup.get("status")))
    for _ in range(_MAX_STEPS):
        if not sync_wanted(current):
            break
        after = podgroup_status_step(current, pods, now)
        if after == status:
            break
        status = after
        current = {**current, "status": status}
    return status
