"""The pod validating webhook (/validate-pod): Koordinator's colocation rules for pods.

Rules, each denial naming the field (and containers) at fault:
* a pod requesting batch-cpu/batch-memory must be ``koordinator.sh/qosClass=BE``;
* on UPDATE the QoS label, the priority class and the ``koordinator.sh/priority`` label are
  immutable;
* BE may not run as koord-prod or without a priority class, LSR only as koord-prod (priority
  class taken raw: the priority-class label, else the ``spec.priority`` range);
* LSR and LSE pods must request a non-zero integer number of CPUs (pod total by Kubernetes'
  PodRequests, pod-level resources included, as upstream: their CPUs are allocated per pod);
* given the ElasticQuota webhooks' tree (``quotas``), a pod may not run in a parent quota and
  its ``quota.scheduling.koordinator.sh/preemptible`` label is fixed (Koordinator's
  pkg/webhook/elasticquota pod_check.go, with its texts).
Pure: one AdmissionRequest in, one AdmissionResponse out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi import keys, qos
from koordapi import pod as pod_model
from koordapi.quota.topology import QuotaTopology
from manager.webhooks import pods
from manager.webhooks.admission import (
    AdmissionRequest,
    AdmissionResponse,
    ObjectError,
    allowed,
    denied,
)

DENIED = 400  # upstream answers field errors with 400 Bad Request
BATCH_RESOURCES = (keys.BATCH_CPU, keys.BATCH_MEMORY)
# QoS class → the raw priority classes it may not be combined with
FORBIDDEN = {
    qos.QoSClass.BE: (qos.NONE_PRIORITY, qos.PROD),
    qos.QoSClass.LSR: (qos.NONE_PRIORITY, qos.MID, qos.BATCH, qos.FREE),
}
PINNED = (qos.QoSClass.LSR, qos.QoSClass.LSE)


def validate_pod(
    request: AdmissionRequest, quotas: QuotaTopology | None = None
) -> AdmissionResponse:
    if request.sub_resource or request.operation not in ("CREATE", "UPDATE"):
        return allowed()  # status, binding, eviction... and deletes carry no QoS change
    if request.object is None:
        return denied(f"request.object: a pod is required on {request.operation}", DENIED)
    if request.operation == "UPDATE" and request.old_object is None:
        return denied("request.oldObject: the old pod is required on UPDATE", DENIED)
    pod = request.object
    try:
        pods.check_resources(pod)
        errors = immutable_fields(request.old_object, pod) if request.old_object else []
        errors += batch_needs_be(pod) + forbidden_combination(pod) + pinned_cpus(pod)
        if quotas is not None:
            errors += quota_checks(quotas, request.old_object, pod)
    except ObjectError as err:
        return denied(f"malformed pod: {err}", DENIED)
    return denied("; ".join(errors), DENIED) if errors else allowed()


def quota_checks(
    quotas: QuotaTopology, old: Mapping[str, Any] | None, pod: Mapping[str, Any]
) -> list[str]:
    """QuotaMetaChecker.ValidatePod: ValidateAddPod on CREATE, ValidateUpdatePod on UPDATE."""
    reason = quotas.validate_update_pod(old, pod) if old else quotas.validate_add_pod(pod)
    return [reason] if reason else []


def _show(value: str) -> str:
    return value or "<none>"


def immutable_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    errors = []
    old_qos, new_qos = pods.qos_raw(old), pods.qos_raw(new)
    if old_qos != new_qos:
        errors.append(
            f"metadata.labels[{keys.LABEL_QOS_CLASS}]: field is immutable "
            f"(was {_show(old_qos)}, now {_show(new_qos)})"
        )
    old_pc, new_pc = pods.priority_class_raw(old), pods.priority_class_raw(new)
    if old_pc != new_pc:
        errors.append(
            "spec.priority: the priority class is immutable "
            f"(was {_show(old_pc.name)}, now {_show(new_pc.name)})"
        )
    old_sub = pods.labels_of(old).get(keys.LABEL_PRIORITY, "")
    new_sub = pods.labels_of(new).get(keys.LABEL_PRIORITY, "")
    if old_sub != new_sub:
        errors.append(
            f"metadata.labels[{keys.LABEL_PRIORITY}]: field is immutable "
            f"(was {_show(old_sub)}, now {_show(new_sub)})"
        )
    return errors


def _users(pod: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
    """``where`` of every container requesting any of ``names``."""
    return [
        where
        for where, container in pods.containers(pod)
        if any(pod_model.container_request(container, n) > 0 for n in names)
    ]


def batch_needs_be(pod: Mapping[str, Any]) -> list[str]:
    if pod_model.pod_requests(pods.spec(pod), BATCH_RESOURCES) == (0, 0):
        return []
    klass = pods.qos_raw(pod)
    if klass is qos.QoSClass.BE:
        return []
    users = ", ".join(_users(pod, BATCH_RESOURCES)) or "spec.overhead"
    return [
        f"metadata.labels[{keys.LABEL_QOS_CLASS}]: must be BE for a pod requesting "
        f"{' or '.join(BATCH_RESOURCES)} ({users}), got {_show(klass)}"
    ]


def forbidden_combination(pod: Mapping[str, Any]) -> list[str]:
    klass = pods.qos_raw(pod)
    priority = pods.priority_class_raw(pod)
    if priority not in FORBIDDEN.get(klass, ()):
        return []
    allowed_names = sorted(pc.name for pc in qos.PRIORITY_CLASSES if pc not in FORBIDDEN[klass])
    return [
        f"{keys.LABEL_QOS_CLASS}={klass} and priority class {_show(priority.name)} cannot be "
        f"used together: a {klass} pod needs priority class {' or '.join(allowed_names)} "
        f"(label {keys.LABEL_PRIORITY_CLASS} or spec.priority in its range)"
    ]


def pinned_cpus(pod: Mapping[str, Any]) -> list[str]:
    klass = pods.qos_raw(pod)
    if klass not in PINNED:
        return []
    total, _ = pod_model.pod_requests(pods.spec(pod))
    if total == 0:
        return [
            f"spec.containers[*].resources.requests.cpu: a {klass} pod must request CPUs "
            "(its CPUs are pinned), none requested"
        ]
    if total % 1000 == 0:
        return []
    shares = ", ".join(
        f"{where}={milli_cpus}m"
        for where, container in pods.containers(pod)
        if (milli_cpus := pod_model.container_request(container, "cpu")) > 0
    )
    return [
        f"spec.containers[*].resources.requests.cpu: a {klass} pod must request an integer "
        f"number of CPUs, requests total {total}m ({shares})"
    ]
