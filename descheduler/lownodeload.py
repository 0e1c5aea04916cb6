"""Koordinator's LowNodeLoad descheduler plugin, the round itself: for each node pool,
which nodes are hot and which pods leave them, and why (Victim, HotNode, NodeSnapshot,
PoolResult, BalanceResult; select_pool_nodes, balance_pool, balance). Pure decisions over
plain dataclasses, with no Kubernetes I/O and no clock: callers pass ``now`` (seconds since
the epoch) and get back a ``BalanceResult`` naming the pods to evict and why; evicting them
is the caller's business. The caller's evictor is asked as the round goes (``pod_filter``,
``admit``: Koordinator's Evictor Filter and Evict, without I/O), so that a pod it refuses is
never counted as moving.

    args = LowNodeLoadArgs.from_dict(yaml.safe_load(text))      # descheduler.args
    state = LowNodeLoadState.for_args(args)                     # descheduler.anomaly
    nodes = [node_info(node, metric, pods) for ...]             # descheduler.cluster
    result = balance(args, nodes, state, now, EvictorArgs(),    # keep state between rounds
                     pod_filter=evictor.filter, admit=evictor.admit)  # descheduler.balancer
    for node, victim in result.victims():
        ...                                                     # evict victim.pod

It follows Koordinator v1.8.0's pkg/descheduler/framework/plugins/loadaware/low_node_load.go
and utilization_util.go (the per-pool round: the pool's nodes, the anomalous ones, the
capacity the targets have left, the pods chosen and the eviction reason); usage, thresholds,
classes, order and the pod filters are descheduler.utilization's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from descheduler.anomaly import AnomalyDetector, LowNodeLoadState
from descheduler.args import AnomalyCondition, EvictorArgs, LowNodeLoadArgs, NodePool
from descheduler.cluster import NodeInfo, PodInfo
from descheduler.utilization import (
    PODS,
    Classes,
    NodeLoad,
    Thresholds,
    classify_nodes,
    effective_thresholds,
    eviction_blocker,
    is_overutilized,
    node_load,
    pod_fits_any_node_with_threshold,
    set_node_thresholds,
    sort_nodes_by_usage,
    sort_pods_for_eviction,
    usage_percentages,
)


@dataclass(frozen=True)
class Victim:
    pod: str  # namespace/name
    reason: str  # the eviction reason at the moment it was chosen, with the numbers


@dataclass(frozen=True)
class HotNode:
    """A node found anomalous, with the pods chosen to leave it, in eviction order, and the
    pods the evictor refused (``refused``: each with why; their usage stays on the node)."""

    node: str
    prod: bool  # judged by its prod usage and prod thresholds
    reason: str  # why it is hot, before any of its pods was chosen
    victims: tuple[Victim, ...] = ()
    note: str = ""  # why no pod was chosen, where none was
    refused: tuple[Victim, ...] = ()  # Victim.reason: why the evictor refused the pod


PodFilter = Callable[[PodInfo], str | None]
"""The evictor's Filter (Koordinator's Evictor().Filter, the migration controller's checks):
why a pod may not be migrated, None when it may. Asked when the round sorts out the node's
removable pods and again right before each eviction."""

Admit = Callable[[str, PodInfo, str], str | None]
"""The evictor's Evict for (node, pod, eviction reason): None when the eviction is taken (the
pod's usage then counts as moved), else why it was refused (a per-node, per-namespace or
total limit, say): the pod is skipped and the round goes on with the next."""


@dataclass(frozen=True)
class NodeSnapshot:
    """A node's usage and thresholds as classified (before any pod was chosen)."""

    name: str
    category: str  # low, high, prod-low, prod-high, both-low, or "" (in between)
    usage: Mapping[str, int]
    prod_usage: Mapping[str, int]
    low: Mapping[str, int]
    high: Mapping[str, int]
    prod_low: Mapping[str, int]
    prod_high: Mapping[str, int]
    allocatable: Mapping[str, int] = field(default_factory=dict)  # what percentages are of


@dataclass(frozen=True)
class PoolResult:
    pool: str
    nodes: tuple[NodeSnapshot, ...] = ()
    abnormal_nodes: tuple[str, ...] = ()
    abnormal_prod_nodes: tuple[str, ...] = ()
    hot_nodes: tuple[HotNode, ...] = ()
    note: str = ""  # why the round stopped before choosing pods; "" when it went on

    def category(self, category: str) -> list[str]:
        return [node.name for node in self.nodes if node.category == category]


@dataclass(frozen=True)
class BalanceResult:
    pools: tuple[PoolResult, ...] = ()
    dry_run: bool = False  # upstream logs instead of evicting; the choice is the same
    paused: bool = False

    def victims(self) -> list[tuple[str, Victim]]:
        """(node, victim) for every chosen pod, in the order the plugin would evict them. Pools
        without a node selector see every node, so overlapping pools can choose a pod twice
        (upstream would then try to evict it twice)."""
        return [
            (hot.node, victim)
            for pool in self.pools
            for hot in pool.hot_nodes
            for victim in hot.victims
        ]


def eviction_reason(load: NodeLoad, thresholds: Thresholds, *, prod: bool) -> str:
    """overUtilizedEvictionReason: the over-threshold resources that the high map names
    (sorted), with usage and threshold percentages (the configured ones, deviations in
    deviation mode)."""
    usage, high = load.current(prod)
    over = is_overutilized(usage, high)
    percentages = usage_percentages(load.node.allocatable, usage)
    configured = thresholds.prod_high if prod else thresholds.high
    label = "prod" if prod else "node"
    parts = [
        f"{label} {name} usage({percentages.get(name, 0.0):.2f}%)>"
        f"threshold({configured.get(name, 0.0):.2f}%)"
        for name in sorted(thresholds.high)
        if name in over
    ]
    return f"node is overutilized, {', '.join(parts)}"


def available_usage(
    targets: Sequence[NodeLoad], resource_names: Sequence[str], *, prod: bool
) -> dict[str, int]:
    """targetAvailableUsage: what the targets can take before reaching their high thresholds
    (a target already over one counts negative)."""
    available = dict.fromkeys(resource_names, 0)
    for target in targets:
        usage, high = target.current(prod)
        for name in resource_names:
            available[name] += high[name] - usage[name]
    return available


@dataclass
class _Round:
    """The fixed inputs of one pool's round."""

    pool: NodePool
    args: LowNodeLoadArgs
    evictor: EvictorArgs
    thresholds: Thresholds
    state: LowNodeLoadState
    now: float
    pod_filter: PodFilter | None = None
    admit: Admit | None = None

    def filtered(self, pod: PodInfo) -> str | None:
        return None if self.pod_filter is None else self.pod_filter(pod)

    def detector(self, prod: bool) -> AnomalyDetector:
        return self.state.prod_detector if prod else self.state.node_detector

    def may_continue(self, load: NodeLoad, available: Mapping[str, int], prod: bool) -> bool:
        """continueEvictionCond: the node is still over a high threshold (once it is not, its
        detector is reset) and the targets can still take every resource."""
        usage, high = load.current(prod)
        if not is_overutilized(usage, high):
            self.detector(prod).reset(load.name, now=self.now)
            return False
        return all(available[name] > 0 for name in self.thresholds.resource_names)

    def removable(
        self, source: NodeLoad, targets: Sequence[NodeLoad], prod: bool, refused: list[Victim]
    ) -> list[PodInfo]:
        """classifyPods: the pods the filters let go (the evictor's protections, the plugin's
        namespaces and pod selectors, then the evictor's filter, whose refusals go to
        ``refused``) and, with nodeFit, that fit a target (which then keeps their usage,
        whether or not they are chosen later)."""
        result = []
        for pod in source.prod_pods if prod else source.node.pods:
            if eviction_blocker(pod, self.args, self.evictor) is not None:
                continue
            why = self.filtered(pod)
            if why is not None:
                refused.append(Victim(pod.key, why))
                continue
            if self.args.node_fit:
                pod_usage = source.pod_usage(pod)
                if pod_usage is None or not pod_fits_any_node_with_threshold(
                    pod, pod_usage, targets, prod=prod
                ):
                    continue
            result.append(pod)
        return result

    def choose(
        self,
        source: NodeLoad,
        pods: Sequence[PodInfo],
        available: dict[str, int],
        prod: bool,
        refused: list[Victim],
    ) -> list[Victim]:
        """evictPods: take pods in order while the node is over and the targets have room.
        Each pod passes the evictor's filter again and then its Evict (``admit``; not in the
        plugin's own dry run, which evicts nothing and so asks no evictor); a pod refused by
        either is skipped, its usage still on the node. Each chosen pod's usage comes off
        the node and off what the targets can take."""
        victims = []
        for pod in pods:
            if not self.may_continue(source, available, prod):
                break
            reason = eviction_reason(source, self.thresholds, prod=prod)
            why = self.filtered(pod)
            if why is None and self.admit is not None and not self.args.dry_run:
                why = self.admit(source.name, pod, reason)
            if why is not None:
                refused.append(Victim(pod.key, why))
                continue
            victims.append(Victim(pod.key, reason))
            pod_usage = source.pod_usage(pod)
            if pod_usage is None:
                continue  # chosen, but nothing is known to move with it
            for name in available:
                amount = 1 if name == PODS else pod_usage.get(name, 0)
                available[name] -= amount
                source.usage[name] = source.usage.get(name, 0) - amount
                if prod:
                    source.prod_usage[name] = source.prod_usage.get(name, 0) - amount
        return victims

    def balance(
        self,
        sources: Sequence[NodeLoad],
        targets: Sequence[NodeLoad],
        available: dict[str, int],
        prod: bool,
    ) -> list[HotNode]:
        """balancePods for the sources (most used first)."""
        hot = []
        for source in sources:
            reason = eviction_reason(source, self.thresholds, prod=prod)
            if not targets:
                hot.append(HotNode(source.name, prod, reason, note="no target nodes"))
                continue
            refused: list[Victim] = []
            pods = self.removable(source, targets, prod, refused)
            if not pods:
                hot.append(
                    HotNode(
                        source.name, prod, reason, note="no removable pods", refused=tuple(refused)
                    )
                )
                continue
            ordered = sort_pods_for_eviction(source, pods, self.pool.resource_weights, prod=prod)
            filtered = len(refused)
            victims = self.choose(source, ordered, available, prod, refused)
            note = ""
            if not victims:
                refusals = "the evictor refused every pod it reached"
                note = refusals if len(refused) > filtered else "stopped before the first pod"
            hot.append(HotNode(source.name, prod, reason, tuple(victims), note, tuple(refused)))
        return hot


def _real_abnormal(
    loads: Sequence[NodeLoad], detector: AnomalyDetector, condition: AnomalyCondition, now: float
) -> list[NodeLoad]:
    """filterRealAbnormalNodes: with a condition of 1 every over-threshold node is anomalous
    at once (no detector kept); otherwise each observation counts in the node's detector."""
    if condition.consecutive_abnormalities == 1:
        return list(loads)
    return [
        load for load in loads if detector.observe(load.name, True, now=now, condition=condition)
    ]


def _snapshot(load: NodeLoad, category: str) -> NodeSnapshot:
    return NodeSnapshot(
        load.name,
        category,
        dict(load.usage),
        dict(load.prod_usage),
        dict(load.low),
        dict(load.high),
        dict(load.prod_low),
        dict(load.prod_high),
        dict(load.node.allocatable),
    )


def select_pool_nodes(
    pool: NodePool, nodes: Sequence[NodeInfo], processed: Iterable[str]
) -> list[NodeInfo]:
    """filterNodes: the nodes the pool's selector picks, less the nodes an earlier pool
    already took as hot ones. Without a selector every node is the pool's, processed or not."""
    if pool.node_selector is None:
        return list(nodes)
    done = set(processed)
    return [n for n in nodes if n.name not in done and pool.node_selector.matches(n.labels)]


def balance_pool(
    pool: NodePool,
    args: LowNodeLoadArgs,
    nodes: Sequence[NodeInfo],
    state: LowNodeLoadState,
    now: float,
    *,
    evictor: EvictorArgs | None = None,
    processed: set[str] | None = None,
    pod_filter: PodFilter | None = None,
    admit: Admit | None = None,
) -> PoolResult:
    """processOneNodePool: one pool's round. Updates ``state`` (anomaly detectors) and
    ``processed`` (the pool's over-threshold nodes, which later pools then skip).
    ``pod_filter`` and ``admit`` are the evictor's Filter and Evict (None: every pod passes)."""
    processed = set() if processed is None else processed
    members = select_pool_nodes(pool, nodes, processed)
    if not members:
        return PoolResult(pool.name, note="no nodes to process")
    thresholds = effective_thresholds(pool)
    names = thresholds.resource_names
    expiration = args.node_metric_expiration_seconds
    loads = [
        load for load in (node_load(n, names, now, expiration) for n in members) if load is not None
    ]
    set_node_thresholds(loads, thresholds, pool.use_deviation_thresholds)
    classes = classify_nodes(loads)
    categories = classes.categories()
    snapshots = tuple(_snapshot(load, categories.get(load.name, "")) for load in loads)

    def stop(
        note: str, abnormal: Sequence[NodeLoad] = (), prod: Sequence[NodeLoad] = ()
    ) -> PoolResult:
        return PoolResult(
            pool.name,
            snapshots,
            tuple(load.name for load in abnormal),
            tuple(load.name for load in prod),
            note=note,
        )

    if not classes.high and not classes.prod_high:
        return stop("all nodes are under target utilization")
    condition = pool.anomaly_condition
    abnormal = _real_abnormal(classes.high, state.node_detector, condition, now)
    abnormal_prod = _real_abnormal(classes.prod_high, state.prod_detector, condition, now)
    if not abnormal and not abnormal_prod:
        return stop("none of the nodes is anomalous yet")
    if not classes.low and not classes.prod_low and not classes.both_low:
        return stop("no node is underutilized", abnormal, abnormal_prod)
    for load in classes.low + classes.both_low:
        state.node_detector.reset(load.name, now=now)
    for load in classes.prod_low:
        state.prod_detector.reset(load.name, now=now)
    # prod-low nodes (between the node thresholds, prod usage low) count as underutilized too
    low_count = len(classes.low) + len(classes.prod_low) + len(classes.both_low)
    if low_count <= args.number_of_nodes:
        return stop(
            f"{low_count} underutilized node(s), not more than numberOfNodes "
            f"{args.number_of_nodes}",
            abnormal,
            abnormal_prod,
        )
    if low_count == len(members):  # kept as upstream; a hot node is never counted low
        return stop("all nodes are underutilized", abnormal, abnormal_prod)

    weights = pool.resource_weights
    abnormal = sort_nodes_by_usage(abnormal, weights, ascending=False, prod=False)
    abnormal_prod = sort_nodes_by_usage(abnormal_prod, weights, ascending=False, prod=True)
    run = _Round(pool, args, evictor or EvictorArgs(), thresholds, state, now, pod_filter, admit)
    hot = _evict_from_sources(run, classes, abnormal, abnormal_prod)
    # tryMarkNodesAsNormal: one normal observation for each anomalous node after the round
    for load in abnormal:
        state.node_detector.observe(load.name, False, now=now)
    for load in abnormal_prod:
        state.prod_detector.observe(load.name, False, now=now)
    processed.update(load.name for load in classes.high)
    return PoolResult(
        pool.name,
        snapshots,
        tuple(load.name for load in abnormal),
        tuple(load.name for load in abnormal_prod),
        tuple(hot),
    )


def _evict_from_sources(
    run: _Round, classes: Classes, abnormal: Sequence[NodeLoad], abnormal_prod: Sequence[NodeLoad]
) -> list[HotNode]:
    """evictPodsFromSourceNodes: node-level hot nodes move pods to low and both-low nodes;
    then prod-hot nodes to prod-low and both-low nodes, which can take no more than what the
    node-level moves left of them."""
    names = run.thresholds.resource_names
    low_room = available_usage(classes.low, names, prod=False)
    prod_low_room = available_usage(classes.prod_low, names, prod=True)
    both_room = available_usage(classes.both_low, names, prod=False)
    both_prod_room = available_usage(classes.both_low, names, prod=True)
    node_room = {name: low_room[name] + both_room[name] for name in names}
    hot = run.balance(abnormal, classes.low + classes.both_low, node_room, prod=False)
    # what the node-level moves took of the both-low nodes is no longer theirs to give
    for name in names:
        both_room[name] = min(both_room[name], node_room[name])
    prod_room = {
        name: prod_low_room[name] + min(both_prod_room[name], both_room[name]) for name in names
    }
    hot += run.balance(abnormal_prod, classes.prod_low + classes.both_low, prod_room, prod=True)
    return hot


def balance(
    args: LowNodeLoadArgs,
    nodes: Sequence[NodeInfo],
    state: LowNodeLoadState,
    now: float,
    evictor: EvictorArgs | None = None,
    *,
    pod_filter: PodFilter | None = None,
    admit: Admit | None = None,
) -> BalanceResult:
    """The plugin's Balance: every pool in order (the default pool first). Nothing when
    paused. ``state`` carries the anomaly detectors from one round to the next;
    ``pod_filter`` and ``admit`` are the evictor's Filter and Evict (see their types)."""
    if args.paused:
        return BalanceResult(dry_run=args.dry_run, paused=True)
    processed: set[str] = set()
    results = []
    for pool in args.node_pools:
        result = balance_pool(
            pool, args, nodes, state, now,
            evictor=evictor, processed=processed, pod_filter=pod_filter, admit=admit,
        )  # fmt: skip
        results.append(result)
    return BalanceResult(tuple(results), dry_run=args.dry_run)
