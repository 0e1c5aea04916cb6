"""The reserve pod: how the stock kube-scheduler places a Reservation.

Koordinator's scheduler places a Reservation as a reserve pod that exists only in its own
cache (reservationutil.NewReservePod). Here kube-scheduler decides, so the reserve pod is a
real Pod, created by koord-manager in the template's namespace (``default`` when it has none)
and named after the Reservation's uid as Koordinator names it. The extender binds every pod:
for a reserve pod it does not create a Binding but marks the Reservation Available on the node
kube-scheduler chose, then deletes the pod (kube-scheduler drops an assumed pod that is
deleted). So the pod never reaches a kubelet.

It is the template made safe to exist for a few seconds: the same requests, node selection,
affinity, tolerations, topology spread, host ports, priority class and scheduler; no volumes
(a PersistentVolumeClaim would be bound to the reserve pod's node, as Koordinator's
DisablePVCReservation avoids), no service account token, and owned by the Reservation as
controller, so that no
ReplicaSet or Job adopts it and the garbage collector removes it with the Reservation.
``spec.nodeName`` becomes a required node affinity to that node, as Koordinator turns it into
its reservation-node annotation. Its preemption policy is its priority class's: the
Priority admission plugin refuses a pod that sets one of its own, so a reserve pod preempts
lower-priority pods as the template's pod would (kube-scheduler's DefaultPreemption).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVE_POD,
    GROUP,
    KIND,
    VERSION,
)

DEFAULT_SCHEDULER = "default-scheduler"
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: the pod is never bound
_CONTAINER_KEYS = ("name", "image", "resources", "ports")
_SPEC_KEYS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priorityClassName",
    "runtimeClassName",
    "overhead",
    "hostNetwork",
    "resources",
)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _containers(raw: Any) -> list[dict[str, Any]]:
    out = []
    for i, container in enumerate(raw if isinstance(raw, list) else []):
        c = _map(container)
        kept = {k: c[k] for k in _CONTAINER_KEYS if k in c}
        kept.setdefault("name", f"reserve-{i}")
        kept["image"] = kept.get("image") or PLACEHOLDER_IMAGE
        out.append(kept)
    return out


def _pin_to_node(affinity: Mapping[str, Any], node: str) -> dict[str, Any]:
    """``affinity`` with every required node selector term also asking for ``node`` by name
    (one term asking only that when there were none)."""
    pin = {"key": "metadata.name", "operator": "In", "values": [node]}
    node_affinity = dict(_map(affinity.get("nodeAffinity")))
    required = dict(_map(node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")))
    terms = [dict(_map(t)) for t in required.get("nodeSelectorTerms") or []]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), pin]
    required["nodeSelectorTerms"] = terms or [{"matchFields": [pin]}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = required
    return {**affinity, "nodeAffinity": node_affinity}


def reserve_pod_name(reservation: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a Reservation's reserve pod (GetReservePodNamespacedName)."""
    meta = _map(reservation.get("metadata"))
    template_meta = _map(_map(_map(reservation.get("spec")).get("template")).get("metadata"))
    return str(template_meta.get("namespace") or "default"), str(meta.get("uid") or "")


def reserve_pod(reservation: Mapping[str, Any]) -> dict[str, Any]:
    """The Pod to create for a pending Reservation (a Kubernetes JSON object)."""
    meta = _map(reservation.get("metadata"))
    template = _map(_map(reservation.get("spec")).get("template"))
    template_meta, template_spec = _map(template.get("metadata")), _map(template.get("spec"))
    namespace, name = reserve_pod_name(reservation)
    labels = {**_map(template_meta.get("labels")), **_map(meta.get("labels"))}
    annotations = {
        **_map(template_meta.get("annotations")),
        **_map(meta.get("annotations")),
        ANNOTATION_RESERVE_POD: "true",
        ANNOTATION_RESERVATION_NAME: str(meta.get("name") or ""),
    }
    spec: dict[str, Any] = {k: template_spec[k] for k in _SPEC_KEYS if k in template_spec}
    spec["containers"] = _containers(template_spec.get("containers")) or [
        {"name": "reserve", "image": PLACEHOLDER_IMAGE}
    ]
    if template_spec.get("initContainers"):
        spec["initContainers"] = _containers(template_spec.get("initContainers"))
    if template_spec.get("nodeName"):
        spec["affinity"] = _pin_to_node(_map(spec.get("affinity")), str(template_spec["nodeName"]))
    spec.update(
        schedulerName=str(template_spec.get("schedulerName") or DEFAULT_SCHEDULER),
        automountServiceAccountToken=False,
        terminationGracePeriodSeconds=0,
        restartPolicy="Never",
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KIND,
                    "name": str(meta.get("name") or ""),
                    "uid": str(meta.get("uid") or ""),
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": spec,
    }
