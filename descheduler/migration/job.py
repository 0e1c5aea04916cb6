"""The PodMigrationJob API (scheduling.koordinator.sh/v1alpha1): its phases, modes, reasons and
annotations, a read-only view of one job (PodMigrationJob.from_dict), and the dict of a new
job for a pod (new_pod_migration_job).

It follows Koordinator v1.8.0's apis/scheduling/v1alpha1/pod_migration_job_types.go (field
names, phases, modes, reasons) and pkg/descheduler/controllers/migration/evict.go (what
CreatePodMigrationJob fills in, and the annotations it sets).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.duration import format_go_duration, parse_go_duration

API_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "PodMigrationJob"

# set by the arbitrator on the jobs it lets run; the controller then takes them on
ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
# why and by whom a job was created (the descheduler plugin that asked for the eviction)
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_JOB_CREATED_BY = "koordinator.sh/job-created-by"
# a pod carrying it passes every migration filter and limit (descheduler's evict annotation)
ANNOTATION_EVICT_POD = "descheduler.alpha.kubernetes.io/evict"
# ours: a job a dry run wrote down ("true"): shown, never arbitrated, never carried out
ANNOTATION_DRY_RUN = "koordinator-py.io/dry-run"
STATUS_DRY_RUN = "DryRun"  # status.status (and reason) of such a job

# status.reason values and the reasons of the conditions (PodMigrationJobReason*)
REASON_TIMEOUT = "Timeout"
REASON_FAILED_CREATE_RESERVATION = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED = "ReservationExpired"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
REASON_MISSING_POD = "MissingPod"
REASON_MISSING_RESERVATION = "MissingReservation"
REASON_EVICTING = "Evicting"
REASON_EVICT_COMPLETE = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"
REASON_INVALID_POD_REF = "InvalidPodRef"

# status.conditions[].type (PodMigrationJobCondition*); status.status names the last one written
CONDITION_RESERVATION_CREATED = "ReservationCreated"
CONDITION_RESERVATION_SCHEDULED = "ReservationScheduled"
CONDITION_EVICTION = "Eviction"
CONDITION_POD_SCHEDULED = "PodScheduled"
CONDITION_POD_BOUND_RESERVATION = "PodBoundReservation"
CONDITION_BOUND_POD_READY = "BoundPodReady"
CONDITION_RESERVATION_BOUND = "ReservationBound"

# Kubernetes' server-side dry run: the value of the dryRun query parameter of a create
DRY_RUN_ALL = "All"


class Phase(enum.StrEnum):
    PENDING = "Pending"  # the initial phase (an empty phase reads as Pending)
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"  # timeout, missing pod, forbidden, ...
    ABORTED = "Aborted"  # a user aborted it


class Mode(enum.StrEnum):
    RESERVATION_FIRST = "ReservationFirst"  # reserve room on another node, then evict
    EVICT_DIRECTLY = "EvictDirectly"


class JobError(ValueError):
    """A PodMigrationJob object whose fields do not have the types the API gives them."""


@dataclass(frozen=True)
class PodRef:
    """spec.podRef: the pod to migrate (the parts of an ObjectReference the controller uses)."""

    namespace: str
    name: str
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def valid(self) -> bool:
        """The controller refuses a reference without a namespace or a name."""
        return bool(self.namespace and self.name)


@dataclass(frozen=True)
class PodMigrationJob:
    """A PodMigrationJob as read from its JSON (``from_dict``). Times are seconds since the
    epoch; ``ttl`` is None when spec.ttl is absent; ``mode`` and ``phase`` are "" when unset
    (the controller then takes defaultJobMode, and Pending)."""

    name: str
    uid: str = ""
    created: float | None = None  # metadata.creationTimestamp; None before it is created
    annotations: Mapping[str, str] = field(default_factory=dict)
    paused: bool = False
    ttl: float | None = None
    mode: str = ""
    pod_ref: PodRef | None = None
    delete_options: Mapping[str, Any] | None = None
    # spec.reservationOptions (reservationRef, template, preemptionOptions) as written
    reservation_options: Mapping[str, Any] | None = None
    phase: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    node_name: str = ""

    @property
    def effective_phase(self) -> str:
        return self.phase or Phase.PENDING

    @property
    def passed_arbitration(self) -> bool:
        return self.annotations.get(ANNOTATION_PASSED_ARBITRATION) == "true"

    @property
    def waiting(self) -> bool:
        """Pending and not yet let through by the arbitrator: what arbitration decides on (a
        dry run's job never is)."""
        return (
            self.effective_phase == Phase.PENDING
            and not self.passed_arbitration
            and not self.dry_run
        )

    @property
    def dry_run(self) -> bool:
        """Written down by a dry run (ANNOTATION_DRY_RUN): it only says what would move."""
        return self.annotations.get(ANNOTATION_DRY_RUN) == "true"

    @property
    def migrating(self) -> bool:
        """Counted against the migration limits: Running, or Pending having passed
        arbitration."""
        phase = self.effective_phase
        return phase == Phase.RUNNING or (phase == Phase.PENDING and self.passed_arbitration)

    def effective_mode(self, default_mode: str) -> str:
        return self.mode or default_mode

    @property
    def reservation_ref(self) -> Mapping[str, Any] | None:
        """spec.reservationOptions.reservationRef once it names a Reservation (the one the
        controller created, or the user's), else None."""
        ref = (self.reservation_options or {}).get("reservationRef")
        if isinstance(ref, Mapping) and isinstance(ref.get("name"), str) and ref["name"]:
            return ref
        return None

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> PodMigrationJob:
        """Reads a PodMigrationJob object; JobError for fields of the wrong type (a ttl that
        is not a duration, a podRef that is not an object, ...)."""
        metadata = _object(obj.get("metadata"), "metadata")
        spec = _object(obj.get("spec"), "spec")
        status = _object(obj.get("status"), "status")
        annotations = _object(metadata.get("annotations"), "metadata.annotations")
        ref = spec.get("podRef")
        pod_ref = None
        if ref is not None:
            ref = _object(ref, "spec.podRef")
            pod_ref = PodRef(
                _string(ref.get("namespace"), "spec.podRef.namespace"),
                _string(ref.get("name"), "spec.podRef.name"),
                _string(ref.get("uid"), "spec.podRef.uid"),
            )
        ttl = spec.get("ttl")
        options = spec.get("deleteOptions")
        reservation = spec.get("reservationOptions")
        paused = spec.get("paused", False)
        if not isinstance(paused, bool):
            raise JobError(f"spec.paused: must be true or false, got {paused!r}")
        return cls(
            name=_string(metadata.get("name"), "metadata.name"),
            uid=_string(metadata.get("uid"), "metadata.uid"),
            created=parse_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp"),
            annotations={str(k): str(v) for k, v in annotations.items()},
            paused=paused,
            ttl=None if ttl is None else parse_duration(ttl, "spec.ttl"),
            mode=_string(spec.get("mode"), "spec.mode"),
            pod_ref=pod_ref,
            delete_options=None if options is None else _object(options, "spec.deleteOptions"),
            reservation_options=(
                None if reservation is None else _object(reservation, "spec.reservationOptions")
            ),
            phase=_string(status.get("phase"), "status.phase"),
            status=_string(status.get("status"), "status.status"),
            reason=_string(status.get("reason"), "status.reason"),
            message=_string(status.get("message"), "status.message"),
            node_name=_string(status.get("nodeName"), "status.nodeName"),
        )


def new_pod_migration_job(
    pod: Mapping[str, Any],
    *,
    name: str,
    mode: str,
    ttl: float,
    reason: str = "",
    trigger: str = "",
    delete_options: Mapping[str, Any] | None = None,
    created_by: str = "",
) -> dict[str, Any]:
    """The object CreatePodMigrationJob sends for ``pod`` (its JSON): spec.podRef (namespace,
    name, uid), spec.mode, spec.ttl (a Go duration; omitted when 0), spec.deleteOptions when
    given, status.phase Pending, and the evict-reason, evict-trigger and (when given)
    job-created-by annotations. The job is cluster-scoped: no namespace. ``name`` is the
    caller's (Koordinator uses a random UUID). With MigrationControllerArgs, pass
    ``mode=args.default_job_mode, ttl=args.default_job_ttl,
    delete_options=args.default_delete_options``.

    Dry run: the PodMigrationJob API has no dry-run marker, and Koordinator's dryRun creates
    no job at all (its Evict only logs). Here a dry run writes the job down all the same, so
    that what would move can be listed (``kubectl get pmj``): with ANNOTATION_DRY_RUN "true"
    and status DryRun, which this project's migration controller never arbitrates or carries
    out. Koordinator's controller does not know the annotation and would migrate the pod: do
    not run it beside a dry run of this one.
    """
    metadata = pod.get("metadata") or {}
    annotations = {ANNOTATION_EVICT_REASON: reason, ANNOTATION_EVICT_TRIGGER: trigger}
    if created_by:
        annotations[ANNOTATION_JOB_CREATED_BY] = created_by
    spec: dict[str, Any] = {
        "podRef": {
            "namespace": str(metadata.get("namespace", "")),
            "name": str(metadata.get("name", "")),
        },
        "mode": mode,
    }
    if metadata.get("uid"):
        spec["podRef"]["uid"] = str(metadata["uid"])
    if ttl:
        spec["ttl"] = format_duration(ttl)
    if delete_options is not None:
        spec["deleteOptions"] = dict(delete_options)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "annotations": annotations},
        "spec": spec,
        "status": {"phase": str(Phase.PENDING)},
    }


# -- field helpers ---------------------------------------------------------------------------


def parse_time(text: Any, where: str) -> float | None:
    """An RFC 3339 time (metav1.Time) as seconds since the epoch; None when absent."""
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise JobError(f"{where}: must be an RFC 3339 time, got {text!r}")
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise JobError(f"{where}: not an RFC 3339 time: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def parse_duration(text: Any, where: str) -> float:
    """Seconds of a metav1.Duration ("5m0s", "-10m"); JobError otherwise."""
    if not isinstance(text, str):
        raise JobError(f"{where}: must be a duration such as 5m0s, got {text!r}")
    sign = -1.0 if text.startswith("-") else 1.0
    try:
        return sign * parse_go_duration(text[1:] if text[:1] in ("+", "-") else text)
    except ValueError:
        raise JobError(f"{where}: not a duration: {text!r}") from None


def format_duration(seconds: float) -> str:
    """A metav1.Duration's text: Go's form for whole seconds ("5m0s"), else seconds ("1.5s")."""
    if seconds == int(seconds):
        whole = int(seconds)
        return ("-" if whole < 0 else "") + format_go_duration(abs(whole))
    return f"{seconds:g}s"


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise JobError(f"{where}: must be an object, got {value!r}")
    return value


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise JobError(f"{where}: must be a string, got {value!r}")
    return value
