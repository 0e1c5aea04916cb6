"""Pods, profiles and AdmissionReviews for the webhook tests, as plain JSON-like dicts."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from koordapi import keys
from manager.webhooks.admission import AdmissionRequest, AdmissionResponse, parse_review

NAMESPACE = "team-a"

# The PriorityClasses the Helm chart installs (values are the class minimums).
PRIORITY_CLASSES: dict[str, dict[str, Any]] = {
    name: {
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    for name, value in (
        ("koord-prod", 9000),
        ("koord-mid", 7000),
        ("koord-batch", 5000),
        ("koord-free", 3000),
    )
}


def container(
    name: str = "main",
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = dict(requests)
    if limits is not None:
        resources["limits"] = dict(limits)
    return {"name": name, "image": "busybox", "resources": resources, **extra}


def pod(
    *containers: dict[str, Any],
    name: str = "web",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    body = {"containers": list(containers) or [container()], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}


def qos_pod(qos: str, *containers: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    labels = {keys.LABEL_QOS_CLASS: qos, **kwargs.pop("labels", {})}
    return pod(*containers, labels=labels, **kwargs)


def profile(name: str, **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations_", None)
    metadata: dict[str, Any] = {"name": name}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": metadata,
        "spec": spec,
    }


def review(
    obj: dict[str, Any] | None,
    operation: str = "CREATE",
    *,
    kind: str = "Pod",
    group: str = "",
    old: dict[str, Any] | None = None,
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
    namespace: str = NAMESPACE,
    sub_resource: str = "",
) -> dict[str, Any]:
    resource = {"Pod": "pods", "ConfigMap": "configmaps"}.get(kind, kind.lower() + "s")
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource},
        "requestKind": {"group": group, "version": "v1", "kind": kind},
        "name": (obj or old or {}).get("metadata", {}).get("name", ""),
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def request(
    obj: dict[str, Any] | None, operation: str = "CREATE", **kwargs: Any
) -> AdmissionRequest:
    """The AdmissionRequest the server would decode from ``review(...)`` (JSON round trip)."""
    return parse_review(json.dumps(review(obj, operation, **kwargs)))


def applied(original: dict[str, Any], response: AdmissionResponse) -> dict[str, Any]:
    """``original`` with the response's patch applied by an independent implementation."""
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(original), response.patch or [])
    return result


def decode_patch(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON Patch in an AdmissionReview answer (base64 on the wire)."""
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(answer["response"]["patch"]))
    return ops


def resources(obj: dict[str, Any], index: int = 0, field: str = "containers") -> dict[str, Any]:
    res: dict[str, Any] = obj["spec"][field][index]["resources"]
    return res
