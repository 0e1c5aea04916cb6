"""The checks arbitration runs on a waiting job's pod: the ones that forbid the migration for
good (forbidden_reason: the evictor's protections, namespaces, the maximum eviction cost, a
workload too small to lose a pod) and the limits that only make it wait (wait_reason: jobs
migrating globally, per node, per namespace, per workload, and the workload's unavailable
pods). Each returns a reason a user can read, or None when the pod passes.

It follows Koordinator v1.8.0's pkg/descheduler/controllers/migration/arbitrator/filter.go
(filterMaxMigratingGlobally, filterMaxMigratingPerNode, filterMaxMigratingPerNamespace,
filterMaxMigratingOrUnavailablePerWorkload, filterExpectedReplicas, the eviction gates) and
migration/util/util.go (FilterPodWithMaxEvictionCost).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from descheduler.args import LowNodeLoadArgs
from descheduler.migration.args import Gate, MigrationControllerArgs
from descheduler.migration.int_or_percent import max_migrating, max_unavailable
from descheduler.migration.job import PodMigrationJob
from descheduler.migration.view import ClusterView, PodView
from descheduler.utilization import eviction_blocker

MAX_EVICTION_COST = 2**31 - 1  # a pod with this eviction cost is never migrated

# LowNodeLoad's own namespace and pod-selector checks switched off: only the evictor's
# protections of eviction_blocker apply; the migration namespaces are checked here
_NO_PLUGIN_CHECKS = LowNodeLoadArgs(node_pools=())


@dataclass(frozen=True)
class Migrating:
    """A job counted against the limits, with its pod when the view has it."""

    job: PodMigrationJob
    pod: PodView | None


@dataclass(frozen=True)
class Hold:
    """A limit holding a pod back: the limit (named as its eviction gate) and why."""

    limit: str
    message: str


def _same_pod(job: PodMigrationJob, pod: PodView) -> bool:
    """The job migrates ``pod``: the same uid when both have one, else the same name."""
    ref = job.pod_ref
    if ref is None:
        return False
    if ref.uid and pod.uid:
        return ref.uid == pod.uid
    return ref.key == pod.key


def workload_limits(args: MigrationControllerArgs, expected: int) -> tuple[int, int]:
    """(maxMigrating, maxUnavailable) of a workload expecting ``expected`` replicas."""
    return (
        max_migrating(expected, args.max_migrating_per_workload),
        max_unavailable(expected, args.max_unavailable_per_workload),
    )


# -- checks that fail the job ----------------------------------------------------------------


def forbidden_reason(pod: PodView, args: MigrationControllerArgs, view: ClusterView) -> str | None:
    """Why ``pod`` may never be migrated under ``args`` (the job then fails), or None."""
    if pod.evict_annotation:
        return None
    if not args.skips(Gate.NAMESPACES):
        include, exclude = args.namespaces_include, args.namespaces_exclude
        if (include and pod.namespace not in include) or pod.namespace in exclude:
            return f"namespace {pod.namespace} is not one whose pods may be migrated"
    if pod.info.eviction_cost == MAX_EVICTION_COST:
        return f"pod has the maximum eviction cost ({MAX_EVICTION_COST})"
    blocker = eviction_blocker(pod.info, _NO_PLUGIN_CHECKS, args.effective_evictor())
    if blocker is not None:
        return blocker
    if args.skips(Gate.EXPECTED_REPLICAS) or args.skip_check_expected_replicas:
        return None
    return expected_replicas_reason(pod, args, view)


def expected_replicas_reason(
    pod: PodView, args: MigrationControllerArgs, view: ClusterView
) -> str | None:
    """filterExpectedReplicas: a workload of one replica, or one whose every replica may be
    migrating or unavailable at once, never loses a pod (a workload not found expects 0)."""
    if pod.owner is None:
        return None
    expected = view.workload(pod.owner.uid).expected_replicas
    most_migrating, most_unavailable = workload_limits(args, expected)
    if expected == 1:
        return f"workload {pod.owner.describe()} expects 1 replica, its only one"
    if expected in (most_migrating, most_unavailable):
        return (
            f"workload {pod.owner.describe()} expects {expected} replica(s), as many as "
            f"maxMigrating {most_migrating} or maxUnavailable {most_unavailable} would let go"
        )
    return None


# -- limits that make the job wait -----------------------------------------------------------


def _globally(
    pod: PodView, args: MigrationControllerArgs, migrating: Sequence[Migrating]
) -> Hold | None:
    limit = args.max_migrating_globally
    if args.skips(Gate.MAX_MIGRATING_GLOBALLY) or not limit or limit <= 0:
        return None
    count = sum(1 for m in migrating if m.job.pod_ref is not None and not _same_pod(m.job, pod))
    if count >= limit:
        return Hold(Gate.MAX_MIGRATING_GLOBALLY, f"{count} pod(s) migrating, the limit is {limit}")
    return None


def _per_node(
    pod: PodView, args: MigrationControllerArgs, migrating: Sequence[Migrating]
) -> Hold | None:
    limit = args.max_migrating_per_node
    if args.skips(Gate.MAX_MIGRATING_PER_NODE) or not pod.node_name or not limit or limit <= 0:
        return None
    # pods, not jobs: a pod with two migrating jobs counts once
    on_node = {
        m.pod.key
        for m in migrating
        if m.pod is not None and m.pod.node_name == pod.node_name and not _same_pod(m.job, pod)
    }
    if len(on_node) >= limit:
        return Hold(
            Gate.MAX_MIGRATING_PER_NODE,
            f"{len(on_node)} pod(s) migrating on node {pod.node_name}, the limit is {limit}",
        )
    return None


def _per_namespace(
    pod: PodView, args: MigrationControllerArgs, migrating: Sequence[Migrating]
) -> Hold | None:
    limit = args.max_migrating_per_namespace
    if args.skips(Gate.MAX_MIGRATING_PER_NAMESPACE) or not limit or limit <= 0:
        return None
    count = sum(
        1
        for m in migrating
        if m.job.pod_ref is not None
        and m.job.pod_ref.namespace == pod.namespace
        and not _same_pod(m.job, pod)
    )
    if count >= limit:
        return Hold(
            Gate.MAX_MIGRATING_PER_NAMESPACE,
            f"{count} pod(s) migrating in namespace {pod.namespace}, the limit is {limit}",
        )
    return None


def _per_workload(
    pod: PodView, args: MigrationControllerArgs, view: ClusterView, migrating: Sequence[Migrating]
) -> Hold | None:
    skip_migrating = args.skips(Gate.MAX_MIGRATING_PER_WORKLOAD)
    skip_unavailable = args.skips(Gate.MAX_UNAVAILABLE_PER_WORKLOAD)
    owner = pod.owner
    if owner is None or (skip_migrating and skip_unavailable):
        return None
    workload = view.workload(owner.uid)
    most_migrating, most_unavailable = workload_limits(args, workload.expected_replicas)
    siblings = {
        m.pod.key
        for m in migrating
        if m.pod is not None
        and not _same_pod(m.job, pod)
        and m.pod.owner is not None
        and m.pod.owner.uid == owner.uid
    }
    if not skip_migrating and siblings and len(siblings) >= most_migrating:
        return Hold(
            Gate.MAX_MIGRATING_PER_WORKLOAD,
            f"{len(siblings)} pod(s) of workload {owner.describe()} migrating, the limit is "
            f"{most_migrating}",
        )
    if skip_unavailable:
        return None
    unavailable = workload.unavailable_pods | siblings
    if len(unavailable) >= most_unavailable:
        return Hold(
            Gate.MAX_UNAVAILABLE_PER_WORKLOAD,
            f'The workload {owner.describe()} of Pod "{pod.key}" has {len(unavailable)} '
            f"unavailable Pods that exceed MaxUnavailablePerWorkload {most_unavailable}",
        )
    return None


def wait_reason(
    pod: PodView,
    args: MigrationControllerArgs,
    view: ClusterView,
    migrating: Sequence[Migrating],
) -> Hold | None:
    """Why ``pod`` must wait for some of the ``migrating`` jobs to finish, or None."""
    if pod.evict_annotation:
        return None
    return (
        _globally(pod, args, migrating)
        or _per_node(pod, args, migrating)
        or _per_namespace(pod, args, migrating)
        or _per_workload(pod, args, view, migrating)
    )
