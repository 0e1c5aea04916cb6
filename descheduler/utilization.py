"""Node utilization and pod choice for LowNodeLoad: thresholds and usage (NodeLoad), node
classification (Classes), the order nodes and pods are taken in, and which pods may go
(eviction_blocker, pod_fits_node with descheduler.nodefit, pod_fits_any_node_with_threshold).

It follows Koordinator v1.8.0's pkg/descheduler/framework/plugins/loadaware/low_node_load.go
and utilization_util.go (usage, thresholds, classification, node fit),
pkg/descheduler/utils/sorter/pod.go and scorer.go (the order pods and nodes are taken in) and
pkg/descheduler/evictions/evictions.go (the evictor filter's pod protections).

Amounts are as in descheduler.cluster; percentages are floats, as Koordinator's
``Percentage``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from descheduler import nodefit
from descheduler.args import EvictorArgs, LowNodeLoadArgs, NodePool
from descheduler.cluster import NodeInfo, PodInfo
from koordapi import qos

MIN_PERCENTAGE = 0.0
MAX_PERCENTAGE = 100.0
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000  # Kubernetes' scheduling.SystemCriticalPriority
PODS = "pods"


# -- thresholds and usage --------------------------------------------------------------------


@dataclass(frozen=True)
class Thresholds:
    """A pool's four threshold maps as the round uses them, and the resources it looks at."""

    low: Mapping[str, float]
    high: Mapping[str, float]
    prod_low: Mapping[str, float]
    prod_high: Mapping[str, float]
    resource_names: tuple[str, ...]


def effective_thresholds(pool: NodePool) -> Thresholds:
    """newThresholds: every resource any of the four maps names, and memory, is looked at. A
    resource missing from the low map gets 100 % (0 in deviation mode, meaning "the whole
    allocatable") in both the low and the high map, replacing a high value the user gave; one
    missing only from the high map stays missing (0 %). The prod maps are filled alike."""
    names = sorted(
        {
            *pool.low_thresholds,
            *pool.high_thresholds,
            *pool.prod_low_thresholds,
            *pool.prod_high_thresholds,
            "memory",
        }
    )
    fill = MIN_PERCENTAGE if pool.use_deviation_thresholds else MAX_PERCENTAGE
    low, high = dict(pool.low_thresholds), dict(pool.high_thresholds)
    prod_low, prod_high = dict(pool.prod_low_thresholds), dict(pool.prod_high_thresholds)
    for name in names:
        if name not in low:
            low[name] = high[name] = fill
        if name not in prod_low:
            prod_low[name] = prod_high[name] = fill
    return Thresholds(low, high, prod_low, prod_high, tuple(names))


def _milli(name: str, amount: int) -> int:
    return amount if name == "cpu" else amount * 1000


def usage_percentages(allocatable: Mapping[str, int], usage: Mapping[str, int]) -> dict[str, float]:
    """resourceUsagePercentages: 100 * used / allocatable for each resource with a non-zero
    allocatable, in float64 as Go computes it (on milli-values)."""
    return {
        name: 100 * float(_milli(name, used)) / float(_milli(name, allocatable[name]))
        for name, used in usage.items()
        if allocatable.get(name, 0) != 0
    }


def threshold_amount(allocatable: Mapping[str, int], name: str, percent: float) -> int:
    """resourceThreshold: the share of the allocatable a percentage stands for, truncated."""
    return int(percent * 0.01 * float(allocatable.get(name, 0)))


def _normalize(percent: float) -> float:
    return min(MAX_PERCENTAGE, max(MIN_PERCENTAGE, percent))


@dataclass
class NodeLoad:
    """One node during a round: usage, prod usage (pods of the koord-prod class) and the
    threshold amounts, in the units of the amounts. The round lowers a source's usage as it
    picks pods and raises a target's as pods are found to fit there."""

    node: NodeInfo
    usage: dict[str, int]
    prod_usage: dict[str, int]
    prod_pods: tuple[PodInfo, ...]
    low: dict[str, int] = field(default_factory=dict)
    high: dict[str, int] = field(default_factory=dict)
    prod_low: dict[str, int] = field(default_factory=dict)
    prod_high: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.node.name

    def pod_usage(self, pod: PodInfo) -> Mapping[str, int] | None:
        return None if self.node.metric is None else self.node.metric.pod_usage.get(pod.key)

    def current(self, prod: bool) -> tuple[dict[str, int], dict[str, int]]:
        """(usage, high threshold amounts), for prod usage or node usage."""
        return (self.prod_usage, self.prod_high) if prod else (self.usage, self.high)


def is_metric_expired(update_time: float | None, expiration_seconds: int, now: float) -> bool:
    return update_time is None or (
        expiration_seconds > 0 and now - update_time >= expiration_seconds
    )


def node_load(
    node: NodeInfo, resource_names: Sequence[str], now: float, expiration_seconds: int
) -> NodeLoad | None:
    """getNodeUsage for one node; None when it has no NodeMetric or an expired one (it is then
    left out of the round). Usage is system usage plus every reported pod's usage; prod usage
    the reported usage of the node's koord-prod pods; ``pods`` counts pods, always."""
    metric = node.metric
    if metric is None or is_metric_expired(metric.update_time, expiration_seconds, now):
        return None
    prod_pods = tuple(pod for pod in node.pods if pod.prod)
    prod_keys = {pod.key for pod in prod_pods}
    usage: dict[str, int] = {}
    prod_usage: dict[str, int] = {}
    for name in resource_names:
        usage[name] = metric.system_usage.get(name, 0)
        prod_usage[name] = 0
        for key, pod_usage in metric.pod_usage.items():
            amount = pod_usage.get(name, 0)
            usage[name] += amount
            if key in prod_keys:
                prod_usage[name] += amount
    usage[PODS] = len(node.pods)
    prod_usage[PODS] = len(prod_pods)
    return NodeLoad(node, usage, prod_usage, prod_pods)


def average_usage_percent(loads: Sequence[NodeLoad], prod: bool) -> dict[str, float]:
    """calcAverageResourceUsagePercent: the mean over the pool's nodes of each resource's
    usage percentage (a node with no allocatable of it counts as 0 %)."""
    sums: dict[str, float] = {}
    for load in loads:
        allocatable = load.node.allocatable
        for name, used in (load.prod_usage if prod else load.usage).items():
            total = allocatable.get(name, 0)
            if total == 0:
                continue
            sums[name] = sums.get(name, 0.0) + float(used) / float(total) * 100.0
    return {name: total / float(len(loads)) for name, total in sums.items()}


def set_node_thresholds(
    loads: Sequence[NodeLoad], thresholds: Thresholds, use_deviation: bool
) -> None:
    """getNodeThresholds: fills each load's threshold amounts. In deviation mode the
    percentages are distances from the pool's mean usage (clamped to 0..100), and a low
    percentage of 0 means the whole allocatable for both low and high."""
    average: dict[str, float] = {}
    prod_average: dict[str, float] = {}
    if use_deviation:
        average = average_usage_percent(loads, prod=False)
        prod_average = average_usage_percent(loads, prod=True)
    for load in loads:
        allocatable = load.node.allocatable
        for name in thresholds.resource_names:
            for mean, low_pct, high_pct, low, high in (
                (average, thresholds.low, thresholds.high, load.low, load.high),
                (
                    prod_average,
                    thresholds.prod_low,
                    thresholds.prod_high,
                    load.prod_low,
                    load.prod_high,
                ),
            ):
                low_percent = low_pct.get(name, 0.0)
                high_percent = high_pct.get(name, 0.0)
                if not use_deviation:
                    low[name] = threshold_amount(allocatable, name, low_percent)
                    high[name] = threshold_amount(allocatable, name, high_percent)
                elif low_percent == MIN_PERCENTAGE:
                    low[name] = high[name] = allocatable.get(name, 0)
                else:
                    center = mean.get(name, 0.0)
                    low[name] = threshold_amount(
                        allocatable, name, _normalize(center - low_percent)
                    )
                    high[name] = threshold_amount(
                        allocatable, name, _normalize(center + high_percent)
                    )


def is_overutilized(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> dict[str, int]:
    """The resources whose usage is above their threshold, with the usage (empty: none)."""
    return {
        name: usage[name]
        for name, limit in thresholds.items()
        if name in usage and usage[name] > limit
    }


def is_underutilized(usage: Mapping[str, int], thresholds: Mapping[str, int]) -> bool:
    """Every resource at or under its threshold."""
    return all(usage[name] <= limit for name, limit in thresholds.items() if name in usage)


@dataclass
class Classes:
    """classifyNodes: each node lands in at most one class (in input order). A node under
    its low thresholds is low, prod-high (its prod usage is over), or both-low (its prod usage
    under its prod low thresholds); otherwise it is high, or, when between, prod-high or
    prod-low by its prod usage. Unschedulable nodes are never low."""

    low: list[NodeLoad] = field(default_factory=list)
    high: list[NodeLoad] = field(default_factory=list)
    prod_low: list[NodeLoad] = field(default_factory=list)
    prod_high: list[NodeLoad] = field(default_factory=list)
    both_low: list[NodeLoad] = field(default_factory=list)

    def categories(self) -> dict[str, str]:
        """The class of each classified node by name: low, high, prod-low, prod-high or
        both-low."""
        return {
            load.name: label
            for label, members in (
                ("low", self.low),
                ("high", self.high),
                ("prod-low", self.prod_low),
                ("prod-high", self.prod_high),
                ("both-low", self.both_low),
            )
            for load in members
        }


def classify_nodes(loads: Sequence[NodeLoad]) -> Classes:
    classes = Classes()
    for load in loads:
        schedulable = not load.node.unschedulable
        prod_high = bool(is_overutilized(load.prod_usage, load.prod_high))
        prod_low = schedulable and is_underutilized(load.prod_usage, load.prod_low)
        if schedulable and is_underutilized(load.usage, load.low):
            if prod_high:
                classes.prod_high.append(load)
            elif prod_low:
                classes.both_low.append(load)
            else:
                classes.low.append(load)
        elif is_overutilized(load.usage, load.high):
            classes.high.append(load)
        elif prod_high:
            classes.prod_high.append(load)
        elif prod_low:
            classes.prod_low.append(load)
    return classes


# -- ordering --------------------------------------------------------------------------------


def _most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * 1000 // capacity


def node_usage_score(
    usage: Mapping[str, int], allocatable: Mapping[str, int], weights: Mapping[str, int]
) -> int:
    """sorter.ResourceUsageScorer: the weighted mean of each resource's used share in
    thousandths (capped at the allocatable), integer arithmetic."""
    score = weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        score += _most_requested(used, allocatable.get(name, 0)) * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    # Go's integer division truncates toward zero (weights may be negative)
    quotient = abs(score) // abs(weight_sum)
    return quotient if (score < 0) == (weight_sum < 0) else -quotient


def sort_nodes_by_usage(
    loads: Sequence[NodeLoad], weights: Mapping[str, int], *, ascending: bool, prod: bool
) -> list[NodeLoad]:
    """sortNodesByUsage: hot nodes are taken most used first (``ascending=False``)."""

    def score(load: NodeLoad) -> int:
        usage = load.prod_usage if prod else load.usage
        return node_usage_score(usage, load.node.allocatable, weights)

    return sorted(loads, key=score, reverse=not ascending)


def _pod_usage_score(
    usage: Mapping[str, int], excess: Mapping[str, int], weights: Mapping[str, int]
) -> float:
    """sorter.ResourceUsageScorerPod against how far each resource is over its threshold: a
    pod whose usage just covers the excess scores highest (2), bigger ones less (toward 1),
    smaller ones their share of it."""
    score = 0.0
    weight_sum = 0
    for name, used in usage.items():
        weight = weights.get(name, 0)
        capacity = excess.get(name, 0)
        resource_score = 0.0
        if capacity != 0:
            ratio = float(used) / float(capacity)
            resource_score = 1 / ratio + 1 if ratio >= 1 else ratio
        score += resource_score * float(weight)
        weight_sum += weight
    return 0.0 if weight_sum == 0 else score / float(weight_sum)


_PRIORITY_CLASS_ORDER = {
    qos.NONE_PRIORITY.name: 5,
    qos.PROD.name: 4,
    qos.MID.name: 3,
    qos.BATCH.name: 2,
    qos.FREE.name: 1,
}
_KUBE_QOS_ORDER = {qos.KubeQoS.GUARANTEED: 3, qos.KubeQoS.BURSTABLE: 2, qos.KubeQoS.BESTEFFORT: 1}
_QOS_ORDER = {
    qos.QoSClass.NONE: 5,
    qos.QoSClass.SYSTEM: 4,
    qos.QoSClass.LSE: 4,
    qos.QoSClass.LSR: 3,
    qos.QoSClass.LS: 2,
    qos.QoSClass.BE: 1,
}


def sort_pods_for_eviction(
    load: NodeLoad, pods: Sequence[PodInfo], weights: Mapping[str, int], *, prod: bool
) -> list[PodInfo]:
    """sortPodsOnOneOverloadedNode: the order pods leave a hot node. Lowest Koordinator
    priority class first (free, batch, mid, prod, none), then lowest spec.priority, Kubernetes
    QoS (BestEffort first), Koordinator QoS (BE first), deletion cost, eviction cost; then the
    pods whose usage best covers what the node is over its thresholds by (weighted, only the
    resources that are over), pods without usage last; newest first."""
    usage, high = load.current(prod)
    over = is_overutilized(usage, high)
    excess = {name: used - high[name] for name, used in over.items()}
    over_weights = {name: weights.get(name, 0) for name in over}

    def key(pod: PodInfo) -> tuple[int, int, int, int, int, int, int, float, float]:
        pod_usage = load.pod_usage(pod)
        return (
            _PRIORITY_CLASS_ORDER.get(pod.priority_class.name, 5),
            pod.priority or 0,
            _KUBE_QOS_ORDER[pod.kube_qos],
            _QOS_ORDER[pod.qos_class],
            pod.deletion_cost,
            pod.eviction_cost,
            0 if pod_usage is not None else 1,
            0.0 if pod_usage is None else -_pod_usage_score(pod_usage, excess, over_weights),
            math.inf if pod.created is None else -pod.created,  # no timestamp: the oldest
        )

    return sorted(pods, key=key)


# -- which pods may go -----------------------------------------------------------------------


def eviction_blocker(
    pod: PodInfo, args: LowNodeLoadArgs, evictor: EvictorArgs | None = None
) -> str | None:
    """Why ``pod`` may not be evicted, None if it may: the evictor's protections, then the
    plugin's evictableNamespaces and podSelectors. The first reason found is given."""
    evictor = evictor or EvictorArgs()
    if "DaemonSet" in pod.owner_kinds:
        return "pod is a DaemonSet pod"
    if pod.mirror:
        return "pod is a mirror pod"
    if pod.static:
        return "pod is a static pod"
    if pod.terminating:
        return "pod is terminating"
    if not pod.owner_kinds and not evictor.evict_all_bare_pods:
        if not evictor.evict_failed_bare_pods:
            return "pod does not have any ownerRefs"
        if not pod.failed:
            return "pod does not have any ownerRefs and is not in failed phase"
    if not evictor.evict_system_critical_pods:
        if pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY:
            return "pod has system critical priority"
        # upstream checks the threshold only while critical pods are protected
        threshold = evictor.priority_threshold
        if threshold is not None and pod.priority is not None and pod.priority >= threshold:
            return "pod has higher priority than specified priority class threshold"
    if not evictor.evict_local_storage_pods and pod.local_storage:
        return "pod has local storage and evictLocalStoragePods is false"
    if evictor.ignore_pvc_pods and pod.pvc:
        return "pod has a PVC and ignorePvcPods is true"
    if evictor.label_selector is not None and not evictor.label_selector.matches(pod.labels):
        return "pod labels do not match the evictor's labelSelector"
    include, exclude = args.evictable_namespaces_include, args.evictable_namespaces_exclude
    if (include and pod.namespace not in include) or pod.namespace in exclude:
        return "pod namespace is not evictable"
    selectors = [s.selector for s in args.pod_selectors if s.selector is not None]
    if selectors and not any(selector.matches(pod.labels) for selector in selectors):
        return "pod matches none of the podSelectors"
    return None


def node_fit_problems(pod: PodInfo, node: NodeInfo) -> list[str]:
    """NodeFit: why ``pod`` could not be scheduled onto ``node`` (empty: it could). Its
    nodeSelector and required node affinity, the node's NoSchedule and NoExecute taints, its
    requests against what the node's pods leave of its status allocatable, and the node being
    schedulable; all are checked, as upstream collects every error."""
    problems = []
    if not nodefit.match_node_selector(
        pod.node_selector, pod.node_affinity, node.labels, node.name
    ):
        problems.append("pod node selector does not match the node label")
    if not nodefit.tolerates_taints(pod.tolerations, node.taints):
        problems.append("pod does not tolerate taints on the node")
    allocatable = node.allocatable if node.status_allocatable is None else node.status_allocatable
    for name in nodefit.fits_requests(pod.requests, allocatable, node.requested):
        problems.append(f"insufficient {name}")
    if node.unschedulable:
        problems.append("node is not schedulable")
    return problems


def pod_fits_node(pod: PodInfo, node: NodeInfo) -> bool:
    """NodeFit without the reasons (node_fit_problems)."""
    return not node_fit_problems(pod, node)


def pod_fits_any_node_with_threshold(
    pod: PodInfo, pod_usage: Mapping[str, int], targets: Sequence[NodeLoad], *, prod: bool
) -> bool:
    """podFitsAnyNodeWithThreshold: whether some target (in order) fits the pod and stays at
    or under its high thresholds with the pod's usage added. The first that does keeps the
    pod's usage, so later pods see it; one that does not is left as it was."""
    for target in targets:
        if not pod_fits_node(pod, target.node):
            continue
        usage, high = target.current(prod)
        counted = [name for name in high if name in usage]
        if any(usage[name] + pod_usage.get(name, 0) > high[name] for name in counted):
            continue
        for name in counted:
            usage[name] += pod_usage.get(name, 0)
        return True
    return False
