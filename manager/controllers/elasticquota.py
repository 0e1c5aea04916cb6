"""The ElasticQuota status controller: each quota's used, runtime and requests written onto
the quota, as Koordinator v1.8's koord-scheduler does (pkg/scheduler/plugins/elasticquota
controller.go), and exported as metrics.

Here koord-manager's leader writes them, not the scheduler: one writer, leader-elected (the
extender's replicas elect none, and each would otherwise write its own view). The numbers are
counted as the extender counts them (``koordapi.quota.usage.QuotaBook``, fed by the manager's
pod, node and ElasticQuota informers) and computed by ``koordapi.quota.runtime``; they differ
from the extender's only for the pods it has bound and whose Binding the manager has not seen
yet, for a moment.

What is written, as Koordinator's ``updateElasticQuotaStatusIfChanged`` writes it: the
annotations ``quota.scheduling.koordinator.sh/runtime``, ``/request``, ``/child-request``,
``/guaranteed``, ``/allocated``, ``/non-preemptible-request`` and ``/non-preemptible-used``
(each a ResourceList as JSON, Kubernetes quantity strings) and ``status.used``, each only when
its amounts differ from what the object holds (zeros aside: quotav1.RemoveZeros), in one merge
patch of the object (the CRD has no status subresource). A quota whose numbers did not change
is not written.

One pass looks at every quota. Any pod, node or quota event asks for a pass; passes are at
least ``INTERVAL`` apart (Koordinator's status worker runs every second), so an event storm
costs one pass a second, not a patch per event.

The same pass reclaims borrowed quota when ElasticQuotaArgs ask for it (``monitorAllQuotas``
and ``enableRuntimeQuota``, koord-manager's --elastic-quota-args): a quota whose used has stayed
over its runtime for longer than ``delayEvictTime`` has its least important pods evicted
through the Eviction API (disruption budgets apply), as Koordinator's scheduler's
QuotaOverUsedRevokeController picks them (``koordapi.quota.revoke``). Here, not in the
scheduler: the leader-elected writer that already holds every quota's used and runtime.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from koordapi.errors import ModelError
from koordapi.quota.model import (
    ANNOTATION_ALLOCATED,
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_GUARANTEED,
    ANNOTATION_NON_PREEMPTIBLE_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    LABEL_TREE_ID,
    PREFIX,
    Resources,
    parse_resource_list,
    resources,
)
from koordapi.quota.revoke import ElasticQuotaArgs, QuotaRevoker, pods_to_revoke
from koordapi.quota.runtime import (
    QuotaInfo,
    QuotaTree,
    format_resources,
    resource_list,
)
from koordapi.quota.usage import QuotaBook
from koordkube.client import KubeApi
from koordkube.errors import NotFound
from koordkube.eviction import EvictionAPI, EvictionResult
from koordkube.resources import ElasticQuota, object_key
from manager.controllers.events import EventRecorder
from manager.controllers.state import ClusterState
from manager.metrics import ManagerMetrics

log = logging.getLogger(__name__)

NAME = "elasticquota"
KEY = "elasticquotas"  # the one key of the queue: a pass looks at every quota
INTERVAL = 1.0  # seconds between passes at least (Koordinator: wait.Until every second)
USED = "used"
NO_REVOKE = ElasticQuotaArgs()  # Koordinator's defaults: monitorAllQuotas false, no reclaim
REVOKED = "QuotaOverUsedRevoke"  # ours: Koordinator's controller only logs (its name)

Object = Mapping[str, Any]


def summary(info: QuotaInfo) -> dict[str, Resources]:
    """The annotations' amounts of one quota, by annotation (Koordinator's
    QuotaInfoSummary fields that ``updateElasticQuotaStatusIfChanged`` writes). Allocated is
    kept only under the ElasticQuotaGuaranteeUsage gate, off here as by default: empty."""
    return {
        ANNOTATION_RUNTIME: info.runtime,
        ANNOTATION_REQUEST: info.request,
        ANNOTATION_CHILD_REQUEST: info.child_request,
        ANNOTATION_GUARANTEED: info.guaranteed,
        ANNOTATION_ALLOCATED: {},
        ANNOTATION_NON_PREEMPTIBLE_REQUEST: info.non_preemptible_request,
        ANNOTATION_NON_PREEMPTIBLE_USED: info.non_preemptible_used,
    }


def resource_list_json(amounts: Mapping[str, int]) -> str:
    """A ResourceList as Go's json.Marshal writes it: ``{"cpu":"7300m","memory":"37Gi"}``."""
    return json.dumps(resource_list(amounts), separators=(",", ":"))


def _without_zeros(amounts: Mapping[str, int]) -> Resources:
    """quotav1.RemoveZeros."""
    return {name: amount for name, amount in amounts.items() if amount}


def _written(text: str | None) -> Resources | None:
    """An annotation's amounts as the object holds them; None when they cannot be read (then
    overwritten: Koordinator gives up on that quota's status instead)."""
    if not text:
        return {}
    try:
        return parse_resource_list(text)
    except ModelError:
        return None


def status_patch(obj: Object, info: QuotaInfo) -> tuple[dict[str, Any] | None, list[str]]:
    """The merge patch that brings ``obj``'s status annotations and ``status.used`` to
    ``info``'s numbers, or None when they hold them already (Koordinator's
    ``updateElasticQuotaStatusIfChanged``), with one line per change for the log ("runtime
    changed from cpu:2 to cpu:2100m")."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    patch: dict[str, Any] = {}
    changes: list[str] = []

    def changed(key: str, before: Resources | None, after: Resources) -> bool:
        if before is not None and _without_zeros(before) == _without_zeros(after):
            return False
        shown = "unreadable" if before is None else format_resources(before)
        changes.append(f"{key} changed from {shown} to {format_resources(after)}")
        return True

    for key, amounts in summary(info).items():
        if changed(key.removeprefix(PREFIX + "/"), _written(annotations.get(key)), amounts):
            patch.setdefault("metadata", {}).setdefault("annotations", {})[key] = (
                resource_list_json(amounts)
            )
    raw_used = (obj.get("status") or {}).get(USED)
    held = raw_used if isinstance(raw_used, dict) else {}
    try:
        used_before: Resources | None = resources(held) if held == (raw_used or {}) else None
    except ModelError:
        used_before = None
    if changed(USED, used_before, info.used):
        written: dict[str, str | None] = dict(resource_list(info.used))
        for gone in sorted(set(held) - set(info.used)):
            written[gone] = None  # a merge patch deletes a key set to null
        patch["status"] = {USED: written}
    return (patch or None), changes


# Koordinator's getResourceFieldAndQuotaLabels: the field label of each list, the
# annotations' names less the prefix, then used, min, max and sharedWeight.
def metric_fields(info: QuotaInfo) -> dict[str, Resources]:
    fields = {key.removeprefix(PREFIX + "/"): amounts for key, amounts in summary(info).items()}
    fields.update(
        {USED: info.used, "min": info.min, "max": info.max, "sharedWeight": info.shared_weight}
    )
    return fields


class ElasticQuotaStatusController:
    """Writes every ElasticQuota's status from the quota tree (leader only: a reconciler of
    ``manager.app``, one key, ``KEY``)."""

    NAME = NAME

    def __init__(
        self,
        api: KubeApi,
        state: ClusterState,
        metrics: ManagerMetrics,
        *,
        nudge: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = INTERVAL,
        revoke: ElasticQuotaArgs = NO_REVOKE,
        events: EventRecorder | None = None,
    ) -> None:
        """``nudge``: asks for a pass (queues ``KEY``); called on every event the counting
        takes in. ``revoke``: the ElasticQuotaArgs deciding reclaim; ``events``: where an
        evicted pod is told why."""
        self.api, self.state, self.metrics = api, state, metrics
        self.nudge, self.clock, self.interval = nudge, clock, interval
        self.revoker = QuotaRevoker(revoke, now=clock) if revoke.revokes else None
        self.revoke_interval = revoke.revoke_pod_interval
        self._last_revoke: float | None = None
        self.evictions = EvictionAPI(api)
        self.events = events
        self.book = QuotaBook()
        self._last: float | None = None  # when the last pass started
        self._series: set[tuple[str, ...]] = set()  # label values of the series set
        self._skipped: dict[str, str] = {}  # quotas whose status is not written: why (logged)
        state.nodes.add_handler(self._on_node)
        state.pods.add_handler(self._on_pod)
        state.elastic_quotas.add_handler(self._on_quota)

    # -- events: counted at once, written by the next pass -----------------------------------

    def _on_node(self, event: str, node: dict[str, Any]) -> None:
        self.book.on_node(event, node)
        self.nudge()

    def _on_pod(self, event: str, pod: dict[str, Any]) -> None:
        self.book.on_pod(event, pod, object_key(pod))
        self.nudge()

    def _on_quota(self, event: str, quota: dict[str, Any]) -> None:
        self.book.on_quota(event, quota)
        self.nudge()

    # -- the pass ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        """One pass over every quota, unless the last one was less than ``interval`` ago: the
        seconds to wait then (the events meanwhile are taken in by that pass). Another key
        (the manager queues every node's name in each controller's queue) asks for a pass."""
        if key != KEY:
            self.nudge()
            return None
        if not self.state.elastic_quotas.synced.is_set():
            return self.interval  # a partial list of quotas would write wrong numbers
        now = self.clock()
        if self._last is not None and 0 <= now - self._last < self.interval:
            return self._last + self.interval - now
        self._last = now
        return await self.sync()

    async def sync(self) -> float | None:
        """Write the status of every quota whose numbers changed, set the metrics and
        reclaim; raises after the pass if a write failed (the key comes back, rate-limited).
        The seconds after which an over-used quota is due for reclaim, without an event."""
        tree = self.book.tree()  # None: the book logged why, once
        failed: list[str] = []
        series: set[tuple[str, ...]] = set()
        usage: dict[str, tuple[Resources, Resources]] = {}
        objects = self.state.elastic_quotas.list()
        for obj in objects:
            meta = obj.get("metadata") or {}
            name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
            try:
                info = self._info(tree, name)
            except ModelError as err:
                if self._skipped.get(name) != str(err):
                    log.warning("ElasticQuota %s/%s: status not written: %s", namespace, name, err)
                self._skipped[name] = str(err)
                continue
            self._skipped.pop(name, None)
            usage[name] = (info.used, info.runtime)
            series |= self._record(info, str((meta.get("labels") or {}).get(LABEL_TREE_ID) or ""))
            patch, changes = status_patch(obj, info)
            if patch is None:
                self.metrics.reconciles.labels(NAME, "unchanged").inc()
                continue
            try:
                await self.api.patch(ElasticQuota, name, patch, namespace=namespace)
            except NotFound:
                continue  # deleted meanwhile: its DELETED event takes it out
            except Exception as err:  # the others are still written; the key comes back
                log.warning("ElasticQuota %s/%s: status not written: %s", namespace, name, err)
                failed.append(name)
                continue
            self.metrics.reconciles.labels(NAME, "updated").inc()
            # up to a line a second per quota: debug, as Koordinator logs it at V(5)
            log.debug("ElasticQuota %s/%s: %s", namespace, name, ", ".join(changes))
        listed = {str((o.get("metadata") or {}).get("name") or "") for o in objects}
        for gone in set(self._skipped) - listed:
            del self._skipped[gone]
        for labels in self._series - series:
            self.metrics.elastic_quota_status.remove(*labels)
        self._series = series
        due = await self._revoke(usage) if tree is not None else None
        if failed:
            raise RuntimeError(f"ElasticQuota status not written: {', '.join(failed)}")
        return due

    async def _revoke(self, usage: Mapping[str, tuple[Resources, Resources]]) -> float | None:
        """Koordinator's revokePodDueToQuotaOverUsed, every revokePodInterval at most: evict
        the pods the over-used quotas give back; the seconds until the next check is due
        (an over-used quota's delay running out, or the interval), None when none is over."""
        if self.revoker is None:
            return None
        now = self.clock()
        if self._last_revoke is not None and now - self._last_revoke < self.revoke_interval:
            return self._last_revoke + self.revoke_interval - now
        self._last_revoke = now
        for name in self.revoker.due(usage, now):
            used, runtime = usage[name]
            for pod in pods_to_revoke(self.book.assigned_pods(name), used, runtime):
                await self._evict(pod, name, used, runtime)
        after = self.revoker.next_check(now)
        # a monitor fires only past its delay: come back one interval after it runs out
        return None if after is None else after - now + self.revoke_interval

    async def _evict(self, pod: Object, quota: str, used: Resources, runtime: Resources) -> None:
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        message = (
            f"ElasticQuota {quota} uses {format_resources(used)}, over its runtime "
            f"{format_resources(runtime)} (its lent quota was claimed back): pod evicted"
        )
        result, detail = await self.evictions.evict_async(namespace, name, str(meta.get("uid")))
        if result != EvictionResult.STARTED:
            log.warning("pod %s/%s of quota %s not revoked: %s %s", namespace, name, quota,
                        result, detail)  # fmt: skip
            return
        self.metrics.reconciles.labels(NAME, "revoked").inc()
        log.info("pod %s/%s revoked: %s", namespace, name, message)
        if self.events is not None:
            await self.events.warn({"apiVersion": "v1", "kind": "Pod", **pod}, REVOKED, message)

    def _info(self, tree: QuotaTree | None, name: str) -> QuotaInfo:
        """The quota's numbers; ModelError saying why there are none (a quota that cannot be
        read, a tree that cannot be built)."""
        if name in self.book.rejected:
            raise ModelError(self.book.rejected[name])
        if tree is None:
            raise ModelError(f"the quota tree cannot be built: {self.book.broken}")
        return tree.info(name)

    def _record(self, info: QuotaInfo, tree: str) -> set[tuple[str, ...]]:
        """Koordinator's syncElasticQuotaMetrics: one series per field and resource, cpu in
        milli-cores and the rest in whole units, as the quota code counts them."""
        series: set[tuple[str, ...]] = set()
        is_parent = "true" if info.is_parent else "false"
        for field, amounts in metric_fields(info).items():
            for resource, amount in amounts.items():
                labels = (info.name, resource, tree, is_parent, info.parent, field)
                self.metrics.elastic_quota_status.labels(*labels).set(amount)
                series.add(labels)
        return series
