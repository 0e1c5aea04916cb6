"""The ElasticQuota webhooks (Koordinator v1.8 pkg/webhook/elasticquota): the quota tree
checked on each write, and the defaults a new quota gets.

* ``validate_quota`` (/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota, CREATE, UPDATE,
  DELETE): ElasticQuotaValidatingHandler, through ``QuotaTopology.validate_add`` /
  ``validate_update`` / ``validate_delete``; a refusal is Koordinator's text with code 400
  (its ``admission.Errored(http.StatusBadRequest, err)``).
* ``mutate_quota`` (/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota, CREATE):
  ElasticQuotaMutatingHandler, ``QuotaTopology.fill_defaults`` answered as a JSON patch.

The tree is a ``QuotaTree``: one ``QuotaTopology`` fed by the manager's ElasticQuota informer
(``on_event``: what any replica admitted, unchecked, as quota_handler.go's OnQuotaAdd/Update/
Delete) and by what this replica admits (the checks record it, so the next request sees it
before the watch brings it back). The pods a check asks about (a quota turned parent, a quota
deleted) come from the manager's pod cache, never from the API server.

Until the informer has listed (or at all, where the cluster has no ElasticQuota CRD) the tree
is not known. Koordinator answers from whatever its tree holds then: an empty tree refuses
every update and delete ("not found quota"). Here the validating webhook allows with a
warning and records nothing (the informer's list brings the quota), as the chart's default
failurePolicy Ignore would for a webhook not reachable; the mutating one fills what it can
and allows unchanged, with a warning, where the parent is not known yet.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordapi import quantity
from koordapi.errors import ModelError
from koordapi.quota.model import ANNOTATION_SHARED_WEIGHT
from koordapi.quota.topology import PodIndex, QuotaTopology
from manager.webhooks.admission import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    denied,
    json_patch,
    patched,
)

log = logging.getLogger(__name__)

VALIDATE_PATH = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
MUTATE_PATH = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
GROUP = "scheduling.sigs.k8s.io"
KIND = "ElasticQuota"
DENIED = 400  # Koordinator: admission.Errored(http.StatusBadRequest, err)
NOT_LISTED = "koord-manager has not listed the ElasticQuotas yet: the quota tree was not checked"

# The informer's event names (koordkube.informer), spelt here so this module stays pure.
_DELETED = "DELETED"

SharedWeightRecorder = Callable[[str, str, float], None]
"""(quota name, resource, amount): koord_manager_webhook_quota_shared_weight's sample."""


class QuotaTree:
    """The webhooks' quota tree: a ``QuotaTopology``, whether the informer feeding it has
    listed, and the pods the manager caches.

    ``synced`` and ``pods`` are read on each request (the informer's ``synced`` event and
    the pod informer's ``list``)."""

    def __init__(
        self,
        topology: QuotaTopology,
        *,
        synced: Callable[[], bool],
        pods: Callable[[], Iterable[Mapping[str, Any]]],
        on_shared_weight: SharedWeightRecorder | None = None,
    ) -> None:
        self.topology = topology
        self.synced = synced
        self.pods = pods
        self.on_shared_weight = on_shared_weight
        # The informer hands the new object only; OnQuotaUpdate needs the old one too.
        self._seen: dict[str, Mapping[str, Any]] = {}
        # why each quota left out is: said once per reason, not on every resync or write
        self._left_out: dict[str, str] = {}

    def pod_index(self) -> PodIndex:
        return PodIndex(self.pods)  # walked only if a check asks

    def on_event(self, event: str, quota: Mapping[str, Any]) -> None:
        """An informer event (ADDED, MODIFIED, RESYNC, DELETED): recorded unchecked, as
        OnQuotaAdd/OnQuotaUpdate/OnQuotaDelete. A quota whose min or max does not parse (the
        CRD's schema refuses them, so only without it) is logged, once, and left out (an
        update of it: its last good version stays)."""
        meta = quota.get("metadata") or {}
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        if event == _DELETED:
            self._seen.pop(key, None)
            self._left_out.pop(key, None)
            self.topology.on_delete(quota)
            return
        before = self._seen.get(key)
        try:
            if before is None:
                self.topology.on_add(quota)
            else:
                self.topology.on_update(before, quota)
        except ModelError as err:
            if self._left_out.get(key) != str(err):
                log.warning("ElasticQuota %s left out of the webhook's quota tree: %s", key, err)
            self._left_out[key] = str(err)
            return
        self._left_out.pop(key, None)
        self._seen[key] = quota


def validate_quota(request: AdmissionRequest, tree: QuotaTree) -> AdmissionResponse:
    """ElasticQuotaValidatingHandler.Handle and QuotaMetaChecker.ValidateQuota. A dry run is
    checked against a copy of the tree, so that nothing it admits is recorded (ours:
    Koordinator records it)."""
    operation = request.operation
    if operation not in ("CREATE", "UPDATE", "DELETE"):
        return allowed()
    quota = request.old_object if operation == "DELETE" else request.object
    if quota is None:
        field = "oldObject" if operation == "DELETE" else "object"
        return denied(f"request.{field}: the ElasticQuota is required on {operation}", DENIED)
    if operation == "UPDATE" and request.old_object is None:
        return denied("request.oldObject: the old ElasticQuota is required on UPDATE", DENIED)
    if not tree.synced():
        return allowed(NOT_LISTED)
    topology = copy.deepcopy(tree.topology) if request.dry_run else tree.topology
    try:
        if operation == "CREATE":
            reason = topology.validate_add(quota)
        elif operation == "UPDATE":
            reason = topology.validate_update(request.old_object, quota, tree.pod_index())
        else:
            reason = topology.validate_delete(quota, tree.pod_index())
    except ModelError as err:  # a malformed quantity the self check did not reach
        reason = str(err)
    return denied(reason, DENIED) if reason else allowed()


def mutate_quota(request: AdmissionRequest, tree: QuotaTree) -> AdmissionResponse:
    """ElasticQuotaMutatingHandler.Handle and QuotaMetaChecker.AdmitQuota: on CREATE, the
    parent label, the parent's tree id and the shared-weight annotation filled in
    (fillQuotaDefaultInformation); a refusal (an unknown parent, a shared weight that does not
    parse) is Koordinator's text with code 400. Before the informer has listed, a parent not
    known yet is not a refusal: the quota is allowed unchanged, with a warning."""
    if request.operation != "CREATE":
        return allowed()
    quota = request.object
    if quota is None:
        return denied("request.object: the ElasticQuota is required on CREATE", DENIED)
    try:
        filled = tree.topology.fill_defaults(quota)
    except ModelError as err:
        if not tree.synced():
            return allowed(f"{NOT_LISTED}: {err}")
        return denied(str(err), DENIED)
    if tree.on_shared_weight is not None:
        _record_shared_weight(quota, filled, tree.on_shared_weight)
    return patched(json_patch(quota, filled))


def _record_shared_weight(
    quota: Mapping[str, Any], filled: Mapping[str, Any], record: SharedWeightRecorder
) -> None:
    """metrics.RecordQuotaSharedWeight, where Koordinator calls it: a shared weight filled in
    as max, each resource's amount as ``Quantity.Value`` (rounded up to a whole unit: cores,
    bytes)."""
    meta = quota.get("metadata") or {}
    if (meta.get("annotations") or {}).get(ANNOTATION_SHARED_WEIGHT):
        return  # given: Koordinator records nothing, even where it drops or adds keys
    if ANNOTATION_SHARED_WEIGHT not in ((filled.get("metadata") or {}).get("annotations") or {}):
        return  # the root quota: nothing filled
    name = str(meta.get("name") or "")
    for resource, amount in ((quota.get("spec") or {}).get("max") or {}).items():
        try:
            record(name, str(resource), float(quantity.value(amount)))
        except ModelError:
            continue  # the validating webhook refuses it
