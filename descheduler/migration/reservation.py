"""The Reservation a ReservationFirst PodMigrationJob creates for its pod: the job's
spec.reservationOptions filled in (reservation_options), the Reservation object made of it
(reservation_object), its owners (reserve_resource_owners) and whether the job migrates a
pod that is not placed yet (is_migrate_pending_pod). Pure: the controller reads the pod and
the job, passes the clock, and creates what comes back.

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/reservation/util.go
(CreateOrUpdateReservationOptions, appendSkipNodeAffinity, GenerateReserveResourceOwners),
types.go (LabelCreatedBy, DefaultCreator), interpreter.go (CreateReservation) and util/util.go
(IsMigratePendingPod).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_ALLOCATED,
    GROUP,
    KIND,
    LABEL_RESERVATION_ORDER,
    VERSION,
    Reservation,
)

LABEL_CREATED_BY = "app.kubernetes.io/created-by"
DEFAULT_CREATOR = "koord-descheduler"

# the pod's metadata fields a template keeps: the rest (uid, resourceVersion, managedFields,
# ownerReferences, ...) belong to that one pod object, and the reserve pod made from the
# template is not the workload's (koord-manager gives it the Reservation as its owner)
_TEMPLATE_METADATA = ("name", "namespace", "labels", "annotations")

Object = Mapping[str, Any]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def pod_template(pod: Object) -> dict[str, Any]:
    """The pod as a PodTemplateSpec: its metadata's name, namespace, labels and annotations
    (less the reservation-allocated annotation, which says where this pod was placed) and
    its whole spec."""
    meta = _map(pod.get("metadata"))
    metadata = {k: copy.deepcopy(meta[k]) for k in _TEMPLATE_METADATA if k in meta}
    annotations = dict(_map(metadata.get("annotations")))
    annotations.pop(ANNOTATION_RESERVATION_ALLOCATED, None)
    if "annotations" in metadata:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": copy.deepcopy(dict(_map(pod.get("spec"))))}


def reserve_resource_owners(pod: Object) -> list[dict[str, Any]]:
    """GenerateReserveResourceOwners: a pod that kube-scheduler could not place (Pending with
    PodScheduled False) owns the reservation itself (by object); any other pod through its
    controller (the controller owner reference with the pod's namespace); none when it has
    no controller."""
    meta = _map(pod.get("metadata"))
    status = _map(pod.get("status"))
    if status.get("phase") == "Pending":
        for cond in status.get("conditions") or ():
            if _map(cond).get("type") == "PodScheduled" and _map(cond).get("status") == "False":
                return [
                    {
                        "object": {
                            "uid": str(meta.get("uid") or ""),
                            "kind": "Pod",
                            "name": str(meta.get("name") or ""),
                            "namespace": str(meta.get("namespace") or ""),
                        }
                    }
                ]
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            controller = {**copy.deepcopy(dict(ref)), "namespace": str(meta.get("namespace", ""))}
            return [{"controller": controller}]
    return []


def append_skip_node_affinity(pod: Object, template_spec: dict[str, Any]) -> None:
    """appendSkipNodeAffinity: every required node affinity term of the template also asks
    for a node other than the pod's (matchFields metadata.name NotIn [node]); without terms,
    one term asking only that. Nothing for a pod on no node."""
    node = str(_map(pod.get("spec")).get("nodeName") or "")
    if not node:
        return
    affinity = template_spec.setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    skip = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    for term in terms:
        term.setdefault("matchFields", []).append(copy.deepcopy(skip))
    if not terms:
        terms.append({"matchFields": [skip]})


def reservation_options(
    options: Object | None,
    pod: Object,
    *,
    job_uid: str,
    job_ttl: str | None,
    now: float,
    disable_pvc_reservation: bool = False,
) -> dict[str, Any]:
    """CreateOrUpdateReservationOptions: the job's reservationOptions (``options``, None when
    unset) with its template filled in from ``pod``. The Reservation is named after the job's
    uid and owned as reserve_resource_owners says, unless the template says otherwise; it is
    used once (allocateOnce), never on the pod's node (no nodeName, the skip-node affinity),
    labelled created-by koord-descheduler and with the reservation-order ``now`` in
    milliseconds; without a ttl or expires of its own it has the job's ttl (``job_ttl``, the
    job's spec.ttl text, when set and above 0). ``disable_pvc_reservation`` (the
    DisablePVCReservation gate) drops the volumes of PVCs and ephemeral volumes."""
    result = copy.deepcopy(dict(options or {}))
    template = result.get("template")
    if not isinstance(template, dict):
        template = {
            "metadata": {"name": job_uid},
            "spec": {"template": pod_template(pod), "owners": reserve_resource_owners(pod)},
        }
        result["template"] = template
    metadata = template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    if not metadata.get("name"):
        metadata["name"] = job_uid
    if not isinstance(spec.get("template"), dict):
        spec["template"] = pod_template(pod)
    if not spec.get("owners"):
        spec["owners"] = reserve_resource_owners(pod)
    spec["allocateOnce"] = True
    pod_spec = spec["template"].setdefault("spec", {})
    pod_spec.pop("nodeName", None)
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = metadata["labels"] = {}
    labels[LABEL_CREATED_BY] = DEFAULT_CREATOR
    labels[LABEL_RESERVATION_ORDER] = str(int(now * 1000))
    if spec.get("ttl") is None and spec.get("expires") is None and job_ttl:
        spec["ttl"] = job_ttl
    append_skip_node_affinity(pod, pod_spec)
    if disable_pvc_reservation and "volumes" in pod_spec:
        pod_spec["volumes"] = [
            v
            for v in pod_spec["volumes"] or ()
            if "persistentVolumeClaim" not in _map(v) and "ephemeral" not in _map(v)
        ]
    return result


def reservation_object(options: Object) -> dict[str, Any]:
    """CreateReservation: the Reservation made of the options' template (its metadata and
    spec)."""
    template = _map(options.get("template"))
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": copy.deepcopy(dict(_map(template.get("metadata")))),
        "spec": copy.deepcopy(dict(_map(template.get("spec")))),
    }


def reservation_ref(reservation: Object) -> dict[str, Any]:
    """The reservationRef the job keeps for a created Reservation (an ObjectReference)."""
    meta = _map(reservation.get("metadata"))
    return {
        "kind": KIND,
        "apiVersion": f"{GROUP}/{VERSION}",
        "name": str(meta.get("name") or ""),
        "uid": str(meta.get("uid") or ""),
    }


def is_migrate_pending_pod(reservation: Reservation) -> bool:
    """IsMigratePendingPod: an owner names an object alone (no controller, no selector): the
    reservation was made for a pod kube-scheduler could not place, which goes into it
    without an eviction."""
    return any(
        o.object_ref is not None and o.controller is None and o.selector is None
        for o in reservation.owners
    )


def bound_pod(reservation: Reservation) -> Mapping[str, Any] | None:
    """GetBoundPod: the first of status.currentOwners, None before a pod is bound into it."""
    return reservation.current_owners[0] if reservation.current_owners else None
