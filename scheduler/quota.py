"""ElasticQuota admission in the extender's filter: a pod of a quota passes only while the
quota's used plus the pod's request fits the quota's runtime, as Koordinator's elastic-quota
plugin decides in its PreFilter (pkg/scheduler/plugins/elasticquota).

``QuotaAdmission`` is a ``koordapi.quota.usage.QuotaBook`` (the quotas, every pod's request
and use counted in its quota, the cluster's allocatable, kept from informer events; the same
counting koord-manager writes each quota's status from) with the decision on top. The runtime
arithmetic is ``koordapi.quota.runtime``; the tree is rebuilt only when something changed
since the last decision.

The stock kube-scheduler runs the extender after its own filters, so a pod over its quota is
refused on every node it was offered, as unresolvable: kube-scheduler's preemption would evict
pods of other quotas on a node for nothing (Koordinator's reclaim preempts within the quota
tree's order instead). kube-scheduler's FailedScheduling event carries the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordapi.errors import ModelError
from koordapi.quota.model import DEFAULT_QUOTA, pod_non_preemptible
from koordapi.quota.topology import quota_of_pod
from koordapi.quota.usage import QuotaBook, pod_request

__all__ = ["QuotaAdmission", "pod_request"]

Object = Mapping[str, Any]


class QuotaAdmission(QuotaBook):
    """The quota decision of the extender's filter, fed by informer events (not thread-safe:
    one event loop calls it)."""

    def reason(self, pod: Object) -> str | None:
        """Why the pod may not be scheduled now under its quota, else None (no quotas, the
        default quota, or room within the runtime)."""
        if not self.quotas:
            return None
        tree = self.tree()
        if tree is None:
            return None
        quota = quota_of_pod(pod, self.topology)
        if quota == DEFAULT_QUOTA:
            return None
        try:
            request = pod_request(pod)
        except (ModelError, TypeError, AttributeError):
            return None  # the other filters say what is wrong with the pod
        return tree.check_pod(quota, request, pod_non_preemptible(pod))
