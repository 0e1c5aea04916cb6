"""A Reservation (``reservations.scheduling.koordinator.sh``, cluster-scoped) read into one
value, and the status Koordinator writes on it.

Mirrors Koordinator v1.8.0's apis/scheduling/v1alpha1/reservation_types.go,
apis/extension/reservation.go and pkg/util/reservation/reservation.go (owner matching,
IsReservationAvailable/Expired, SetReservationAvailable/Expired/Succeeded/Unschedulable, the
expiry check of the reservation controller). Amounts are in the quota code's units (``cpu`` in
milli-cores, every other resource whole), as ``koordapi.quota.model.resources`` reads them.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordapi.duration import parse_go_duration
from koordapi.errors import ModelError
from koordapi.gang.spec import format_time, parse_time
from koordapi.quota.model import Resources, resources
from koordapi.quota.usage import pod_request
from koordapi.selectors import label_selector_matches, validate_label_selector

GROUP = "scheduling.koordinator.sh"
VERSION = "v1alpha1"
PLURAL = "reservations"
KIND = "Reservation"

_PREFIX = "scheduling.koordinator.sh"
# on the reserve pod (pkg/util/reservation): it stands for the Reservation named here
ANNOTATION_RESERVE_POD = f"{_PREFIX}/reserve-pod"
ANNOTATION_RESERVATION_NAME = f"{_PREFIX}/reservation-name"
# on an owner pod (apis/extension/reservation.go): {"name": ..., "uid": ...} of the one it uses
ANNOTATION_RESERVATION_ALLOCATED = f"{_PREFIX}/reservation-allocated"
# on a pod: which reservations it must use ({"name", "reservationSelector", "tolerations"})
ANNOTATION_RESERVATION_AFFINITY = f"{_PREFIX}/reservation-affinity"
# on a pod: "true" ignores every reservation (uses held room, is nobody's owner)
LABEL_RESERVATION_IGNORED = f"{_PREFIX}/reservation-ignored"
# on a Reservation: the smaller non-zero order is used first
LABEL_RESERVATION_ORDER = f"{_PREFIX}/reservation-order"

DEFAULT_TTL = 24 * 3600.0  # the CRD's default ttl, "24h"

CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"

POLICY_ALIGNED = "Aligned"
POLICY_RESTRICTED = "Restricted"


class Phase(enum.StrEnum):
    PENDING = "Pending"
    AVAILABLE = "Available"
    SUCCEEDED = "Succeeded"
    WAITING = "Waiting"
    FAILED = "Failed"


Object = Mapping[str, Any]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True)
class Owner:
    """One ReservationOwner: its set fields are ANDed (MatchObjectRef,
    MatchReservationControllerReference, MatchLabels); a Reservation's owners are ORed."""

    object_ref: Mapping[str, Any] | None = None
    controller: Mapping[str, Any] | None = None
    selector: Mapping[str, Any] | None = None

    def matches(self, pod: Object) -> bool:
        meta = _map(pod.get("metadata"))
        return (
            self._object_matches(pod, meta)
            and self._controller_matches(meta)
            and (
                self.selector is None
                or label_selector_matches(self.selector, _map(meta.get("labels")))
            )
        )

    def _object_matches(self, pod: Object, meta: Mapping[str, Any]) -> bool:
        ref = self.object_ref
        if ref is None:
            return True
        return all(
            not ref.get(field) or ref.get(field) == have
            for field, have in (
                ("uid", meta.get("uid")),
                ("name", meta.get("name")),
                ("namespace", meta.get("namespace")),
                ("apiVersion", pod.get("apiVersion")),
            )
        )

    def _controller_matches(self, meta: Mapping[str, Any]) -> bool:
        ref = self.controller
        if ref is None:
            return True
        if ref.get("namespace") and ref.get("namespace") != meta.get("namespace"):
            return False
        for raw in _list(meta.get("ownerReferences")):
            owner = _map(raw)
            wanted = ref.get("controller")
            if wanted is not None and (
                owner.get("controller") is None or bool(owner.get("controller")) != bool(wanted)
            ):
                continue
            if all(
                not ref.get(field) or ref.get(field) == owner.get(field)
                for field in ("uid", "name", "kind", "apiVersion")
            ):
                return True
        return False


def _owner(raw: Any, where: str) -> Owner:
    if not isinstance(raw, Mapping) or not raw:
        raise ModelError(f"{where}: an owner needs object, controller or labelSelector")
    selector = raw.get("labelSelector")
    if selector is not None:
        validate_label_selector(selector, f"{where}.labelSelector")
    return Owner(
        object_ref=_map(raw.get("object")) if raw.get("object") is not None else None,
        controller=_map(raw.get("controller")) if raw.get("controller") is not None else None,
        selector=_map(selector) if selector is not None else None,
    )


def _duration(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        return parse_go_duration(str(value))
    except ValueError as exc:
        raise ModelError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Reservation:
    name: str
    uid: str
    created: float | None
    labels: Mapping[str, str]
    template: Mapping[str, Any]
    owners: tuple[Owner, ...]
    ttl: float | None  # None: not set; 0: never expires
    expires: float | None
    allocate_once: bool
    allocate_policy: str  # "" (deprecated, read as Aligned), Aligned or Restricted
    unschedulable: bool
    taints: tuple[Mapping[str, Any], ...]
    phase: str
    node_name: str
    allocatable: Resources
    allocated: Resources
    current_owners: tuple[Mapping[str, Any], ...]
    conditions: tuple[Mapping[str, Any], ...]
    resource_version: str = ""

    @classmethod
    def from_dict(cls, obj: Object) -> Reservation:
        """Raises ModelError for what Koordinator's ValidateReservation refuses (no template,
        no owners, no expiration spec once defaulted) and for malformed fields."""
        meta, spec, status = (_map(obj.get(k)) for k in ("metadata", "spec", "status"))
        name = str(meta.get("name") or "")
        where = f"Reservation {name or '?'}"
        template = spec.get("template")
        if not isinstance(template, Mapping):
            raise ModelError(f"{where}: the reservation misses the template spec")
        owners_raw = _list(spec.get("owners"))
        if not owners_raw:
            raise ModelError(f"{where}: the reservation misses the owner spec")
        owners = tuple(_owner(o, f"{where}: spec.owners[{i}]") for i, o in enumerate(owners_raw))
        ttl = _duration(spec.get("ttl"), f"{where}: spec.ttl")
        expires = parse_time(spec.get("expires"))
        if spec.get("expires") is not None and expires is None:
            raise ModelError(f"{where}: spec.expires is not an RFC 3339 time")
        if ttl is None and expires is None:
            ttl = DEFAULT_TTL  # the CRD defaults ttl; an object from elsewhere may lack it
        policy = str(spec.get("allocatePolicy") or "")
        if policy not in ("", POLICY_ALIGNED, POLICY_RESTRICTED):
            raise ModelError(
                f"{where}: spec.allocatePolicy {policy!r} is not Aligned or Restricted"
            )
        try:
            allocatable = resources(_map(status.get("allocatable")))
            allocated = resources(_map(status.get("allocated")))
        except ModelError as exc:
            raise ModelError(f"{where}: status: {exc}") from None
        once = spec.get("allocateOnce")
        return cls(
            name=name,
            uid=str(meta.get("uid") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            labels={str(k): str(v) for k, v in _map(meta.get("labels")).items()},
            template=template,
            owners=owners,
            ttl=ttl,
            expires=expires,
            allocate_once=True if once is None else bool(once),
            allocate_policy=policy,
            unschedulable=bool(spec.get("unschedulable")),
            taints=tuple(t for t in _list(spec.get("taints")) if isinstance(t, Mapping)),
            phase=str(status.get("phase") or Phase.PENDING),
            node_name=str(status.get("nodeName") or ""),
            allocatable=allocatable,
            allocated=allocated,
            current_owners=tuple(
                o for o in _list(status.get("currentOwners")) if isinstance(o, Mapping)
            ),
            conditions=tuple(c for c in _list(status.get("conditions")) if isinstance(c, Mapping)),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    # -- where it stands (IsReservation*) ---------------------------------------------------

    @property
    def available(self) -> bool:
        return bool(self.node_name) and self.phase == Phase.AVAILABLE

    @property
    def active(self) -> bool:
        """Placed and holding room (Available, or Waiting for pre-allocation)."""
        return bool(self.node_name) and self.phase in (Phase.AVAILABLE, Phase.WAITING)

    @property
    def pending(self) -> bool:
        return self.phase == Phase.PENDING

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.SUCCEEDED, Phase.FAILED)

    def condition(self, kind: str, reason: str = "") -> Mapping[str, Any] | None:
        for cond in self.conditions:
            if cond.get("type") == kind and (not reason or cond.get("reason") == reason):
                return cond
        return None

    @property
    def expired(self) -> bool:
        """Failed with Ready False for Expired (IsReservationExpired)."""
        cond = self.condition(CONDITION_READY)
        return (
            self.phase == Phase.FAILED
            and cond is not None
            and cond.get("status") == "False"
            and cond.get("reason") == REASON_EXPIRED
        )

    @property
    def scheduled(self) -> bool:
        cond = self.condition(CONDITION_SCHEDULED, REASON_SCHEDULED)
        return bool(self.node_name) and cond is not None and cond.get("status") == "True"

    @property
    def unschedulable_message(self) -> str | None:
        """The Scheduled condition's message while it says Unschedulable, else None."""
        cond = self.condition(CONDITION_SCHEDULED, REASON_UNSCHEDULABLE)
        if cond is None or cond.get("status") == "True":
            return None
        return str(cond.get("message") or "")

    @property
    def order(self) -> int:
        """The reservation-order label; 0 (no preference) when absent or malformed."""
        try:
            return int(self.labels.get(LABEL_RESERVATION_ORDER, "0"))
        except ValueError:
            return 0

    def expiry(self) -> float | None:
        """When it expires (epoch seconds), None if never (isReservationNeedExpiration): the
        earlier of ``expires`` and creation + ``ttl``; a ttl of 0 disables expiry, ``expires``
        included, as Koordinator returns false for it before looking at ``expires``."""
        if self.ttl == 0:
            return None
        ends = [self.expires] if self.expires is not None else []
        if self.ttl is not None and self.created is not None:
            ends.append(self.created + self.ttl)
        return min(ends) if ends else None

    def due_to_expire(self, now: float) -> bool:
        if self.finished:
            return False
        when = self.expiry()
        return when is not None and now > when

    def requests(self) -> Resources:
        """ReservationRequests: status.allocatable once Available, else the template's
        PodRequests; ModelError for a malformed amount in the template."""
        if self.available:
            return dict(self.allocatable)
        return pod_request({"spec": _map(self.template.get("spec"))})

    def is_owner(self, pod: Object) -> bool:
        """MatchReservationOwners: any owner matches the pod."""
        return any(owner.matches(pod) for owner in self.owners)


# -- the pod side ----------------------------------------------------------------------------


def is_reserve_pod(pod: Object) -> bool:
    return _map(_map(pod.get("metadata")).get("annotations")).get(ANNOTATION_RESERVE_POD) == "true"


def reserve_pod_reservation(pod: Object) -> str:
    """The name of the Reservation a reserve pod stands for ("" for any other pod)."""
    if not is_reserve_pod(pod):
        return ""
    annotations = _map(_map(pod.get("metadata")).get("annotations"))
    return str(annotations.get(ANNOTATION_RESERVATION_NAME) or "")


def allocated_to(pod: Object) -> tuple[str, str] | None:
    """(name, uid) of the reservation the pod was placed in (its reservation-allocated
    annotation), None if none or unreadable."""
    text = _map(_map(pod.get("metadata")).get("annotations")).get(ANNOTATION_RESERVATION_ALLOCATED)
    if not text:
        return None
    try:
        raw = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(raw, Mapping):
        return None
    return str(raw.get("name") or ""), str(raw.get("uid") or "")


def allocated_annotation(reservation: Reservation) -> str:
    """SetReservationAllocated's value."""
    return json.dumps({"name": reservation.name, "uid": reservation.uid}, separators=(",", ":"))


def ignores_reservations(pod: Object) -> bool:
    labels = _map(_map(pod.get("metadata")).get("labels"))
    return labels.get(LABEL_RESERVATION_IGNORED) == "true"


@dataclass(frozen=True)
class Affinity:
    """A pod's reservation-affinity annotation: it may use only the reservations that match
    (by name, or by the reservations' labels) and must tolerate their taints."""

    name: str = ""
    selector: Mapping[str, str] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def matches(self, reservation: Reservation) -> bool:
        if self.name and self.name != reservation.name:
            return False
        return self.selector is None or all(
            reservation.labels.get(k) == v for k, v in self.selector.items()
        )


def reservation_affinity(pod: Object) -> Affinity | None:
    """The pod's reservation affinity, None without the annotation; ModelError if malformed
    (Koordinator refuses the pod in PreFilter then)."""
    annotations = _map(_map(pod.get("metadata")).get("annotations"))
    if ANNOTATION_RESERVATION_AFFINITY not in annotations:
        return None
    text = annotations[ANNOTATION_RESERVATION_AFFINITY]
    try:
        raw = json.loads(text) if text else {}
    except (TypeError, ValueError):
        raise ModelError(f"annotation {ANNOTATION_RESERVATION_AFFINITY}: not JSON") from None
    if not isinstance(raw, Mapping):
        raise ModelError(f"annotation {ANNOTATION_RESERVATION_AFFINITY}: not an object")
    selector = raw.get("reservationSelector")
    return Affinity(
        name=str(raw.get("name") or ""),
        selector={str(k): str(v) for k, v in _map(selector).items()} if selector else None,
        tolerations=tuple(t for t in _list(raw.get("tolerations")) if isinstance(t, Mapping)),
    )


# -- status as Koordinator writes it ----------------------------------------------------------


def _condition(
    kind: str, status: str, reason: str, now: float, message: str = ""
) -> dict[str, Any]:
    stamp = format_time(now)
    cond: dict[str, Any] = {
        "type": kind,
        "status": status,
        "reason": reason,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }
    if message:
        cond["message"] = message
    return cond


def available_status(node_name: str, allocatable: Mapping[str, Any], now: float) -> dict[str, Any]:
    """SetReservationAvailable: placed on ``node_name`` holding ``allocatable`` (a
    ResourceList as written), conditions Scheduled and Ready True."""
    return {
        "phase": str(Phase.AVAILABLE),
        "nodeName": node_name,
        "allocatable": dict(allocatable),
        "conditions": [
            _condition(CONDITION_SCHEDULED, "True", REASON_SCHEDULED, now),
            _condition(CONDITION_READY, "True", REASON_AVAILABLE, now),
        ],
    }


def _replace(
    conditions: Sequence[Mapping[str, Any]], new: Mapping[str, Any], keep_transition: bool
) -> list[dict[str, Any]]:
    out = [dict(c) for c in conditions if c.get("type") != new.get("type")]
    old = next((c for c in conditions if c.get("type") == new.get("type")), None)
    merged = dict(new)
    if keep_transition and old is not None and old.get("lastTransitionTime"):
        merged["lastTransitionTime"] = old["lastTransitionTime"]
    out.append(merged)
    return out


def expired_status(reservation: Reservation, now: float) -> dict[str, Any]:
    """SetReservationExpired: Failed, Ready False for Expired (a Ready that was already
    False keeps its transition time)."""
    old = reservation.condition(CONDITION_READY)
    was_ready = old is not None and old.get("status") == "True"
    cond = _condition(CONDITION_READY, "False", REASON_EXPIRED, now)
    conditions = _replace(reservation.conditions, cond, keep_transition=not was_ready)
    return {"phase": str(Phase.FAILED), "conditions": conditions}


def succeeded_conditions(reservation: Reservation, now: float) -> list[dict[str, Any]]:
    """SetReservationSucceeded's conditions: Ready False for Succeeded (an existing Ready
    keeps its transition time: Koordinator updates it in place)."""
    cond = _condition(CONDITION_READY, "False", REASON_SUCCEEDED, now)
    return _replace(reservation.conditions, cond, keep_transition=True)


def unschedulable_conditions(
    reservation: Reservation, message: str, now: float
) -> list[dict[str, Any]]:
    """SetReservationUnschedulable: Scheduled False for Unschedulable with kube-scheduler's
    message (a Scheduled that is True is left as it is)."""
    old = reservation.condition(CONDITION_SCHEDULED)
    if old is not None and old.get("status") == "True":
        return [dict(c) for c in reservation.conditions]
    cond = _condition(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, now, message)
    return _replace(reservation.conditions, cond, keep_transition=old is not None)
