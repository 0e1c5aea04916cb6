"""koord-manager's admission audit: every decision that mutates or denies, one line each.

Each such decision becomes a ``koordapi.audit.Action`` logged as koordlet logs its QoS actions,
led by "admission"::

    admission strategy=mutate-pod kind=mutated target=Pod/team-a/web value=[{"op":...}] \
reason='ClusterColocationProfile colocation-batch' operation='CREATE' user='admin' \
groups='system:authenticated' request='705ab4f5-...'

strategy is the webhook, kind the decision ("mutated" or "denied"), target the object
(``Kind/namespace/name``; a pod created with generateName and no name yet shows as
``web-7d9f-*``), value the JSON Patch (compact JSON) or the denial's HTTP code, reason the
profiles that decided or the denial's message (the rules name the field at fault), then who
asked (the AdmissionReview's userInfo) and the review's uid, which the API server's own audit
log carries too. A dry-run request adds ``dry_run='true'``. Decisions that allow without a
change are counted, not logged.

Every decision is counted in ``koord_manager_webhook_decisions_total`` (ours; its labels are
Koordinator's webhook metric labels plus ``decision``). ``routes()`` serves the recent decisions
about one pod at ``GET /explain/pods/{namespace}/{name}`` on the metrics server (read-only),
for ``koordctl explain pod --manager``. The trail is this replica's, in memory: the last
``capacity`` decisions since it started.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from koordapi.audit import DEFAULT_CAPACITY, Action, AuditTrail
from manager.metrics import ManagerMetrics
from manager.webhooks.admission import AdmissionRequest, AdmissionResponse

log = logging.getLogger(__name__)

PREFIX = "admission"
# the inputs appended to the line: who asked, and the review to find in the API server's log
LOGGED_INPUTS = ("operation", "user", "groups", "request", "dry_run")
EXPLAIN_PATH = "/explain/pods/{namespace}/{name}"
MUTATED, DENIED, ALLOWED = "mutated", "denied", "allowed"


def _meta(review: AdmissionRequest) -> dict[str, Any]:
    meta = (review.object or review.old_object or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _text(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) else ""


def decision_of(response: AdmissionResponse) -> str:
    if not response.allowed:
        return DENIED
    return MUTATED if response.patch else ALLOWED


# Koordinator's plugin_name of each route's work: its pod handlers run ClusterColocationProfile
# (and ExtendedResourceSpec, done in the same pass here), its ConfigMap handler SLOConfig.
PLUGIN_NAMES = {
    "/mutate-pod": "ClusterColocationProfile",
    "/validate-pod": "ClusterColocationProfile",
    "/validate-configmap": "SLOConfig",
    # pkg/webhook/elasticquota: QuotaMetaChecker.Name()
    "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota": "QuotaMetaChecker",
    "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota": "QuotaMetaChecker",
}


def webhook_labels(route: str) -> tuple[str, str]:
    """("mutate", "pod") for /mutate-pod: Koordinator's webhook_type and object_type
    ("elasticquota" for its long ElasticQuota paths, as its metrics.ElasticQuota)."""
    webhook_type, _, object_type = route.strip("/").partition("-")
    if object_type.endswith("-elasticquota"):
        object_type = "elasticquota"
    return webhook_type, object_type


class AdmissionAudit:
    """The trail and the counter; ``decide`` is called once per answered AdmissionReview."""

    def __init__(
        self,
        metrics: ManagerMetrics | None = None,
        *,
        capacity: int = DEFAULT_CAPACITY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.clock = clock
        self.trail = AuditTrail(capacity, prefix=PREFIX, logger=log, logged_inputs=LOGGED_INPUTS)

    def decide(
        self,
        route: str,
        review: AdmissionRequest,
        response: AdmissionResponse,
        namespace: str,
        seconds: float | None = None,
    ) -> None:
        """Count the decision; record it when it mutates or denies. ``namespace``: the
        request's, else the object's; ``seconds``: how long the webhook's work took (None:
        none was done, a subresource or another kind), Koordinator's duration histogram."""
        decision = decision_of(response)
        if self.metrics is not None:
            webhook_type, object_type = webhook_labels(route)
            self.metrics.webhook_decisions.labels(
                webhook_type, object_type, review.operation, decision
            ).inc()
            if seconds is not None and route in PLUGIN_NAMES:
                self.metrics.webhook_duration_milliseconds.labels(
                    webhook_type,
                    object_type,
                    review.operation,
                    PLUGIN_NAMES[route],
                    "rejected" if decision == DENIED else "allowed",
                ).observe(seconds * 1000)
        if decision == ALLOWED:
            return
        self.trail.record(self.action(route, review, response, namespace, decision))

    def action(
        self,
        route: str,
        review: AdmissionRequest,
        response: AdmissionResponse,
        namespace: str,
        decision: str,
    ) -> Action:
        meta = _meta(review)
        name = review.name or _text(meta, "name")
        generate_name = "" if name else _text(meta, "generateName")
        shown = name or (f"{generate_name}*" if generate_name else "")
        target = f"{review.kind}/{namespace}/{shown}" if namespace else f"{review.kind}/{shown}"
        user = review.user_info
        inputs: dict[str, float | str] = {
            "operation": review.operation,
            "user": user.username,
            "groups": ",".join(user.groups),
            "request": review.uid,
            "objectKind": review.kind,
            "namespace": namespace,
            "name": name,
            "generateName": generate_name,
        }
        if review.dry_run:
            inputs["dry_run"] = "true"
        if decision == MUTATED:
            value = json.dumps(response.patch, separators=(",", ":"), sort_keys=True)
            reason = response.decided_by or "the webhook's defaults"
        else:
            value, reason = str(response.code), response.message
        return Action(
            self.clock(),
            route.strip("/"),
            decision,
            target,
            value,
            reason,
            pod_uid=_text(meta, "uid"),
            inputs=inputs,
        )

    def for_pod(self, namespace: str, name: str, uid: str = "") -> list[dict[str, Any]]:
        """The recorded decisions about pod ``namespace/name`` (or ``uid``), oldest first, as
        JSON. A pod created with generateName had no name when it was mutated: a decision on
        ``namespace`` whose generateName starts ``name`` is included, marked
        ``byGenerateName`` (a sibling of the same owner may share the prefix)."""

        def about(action: Action) -> bool:
            got = action.inputs
            if got.get("objectKind") != "Pod":
                return False
            if uid and action.pod_uid == uid:
                return True
            if got.get("namespace") != namespace:
                return False
            prefix = str(got.get("generateName", ""))
            return got.get("name") == name or bool(prefix and name.startswith(prefix))

        return [
            a.as_dict() | {"byGenerateName": not a.inputs.get("name")}
            for a in self.trail.matching(about)
        ]

    def routes(self) -> list[web.RouteDef]:
        """``GET /explain/pods/{namespace}/{name}[?uid=UID]``, read-only."""

        async def explain_pod(request: web.Request) -> web.Response:
            namespace, name = request.match_info["namespace"], request.match_info["name"]
            actions = self.for_pod(namespace, name, request.query.get("uid", ""))
            return web.json_response(
                {
                    "component": "koord-manager",
                    "pod": f"{namespace}/{name}",
                    "capacity": self.trail.capacity,
                    "actions": actions,
                }
            )

        return [web.get(EXPLAIN_PATH, explain_pod)]
