"""The runtime quota of every ElasticQuota in a tree, and the admission check a pod of a quota
passes, as Koordinator v1.8's elastic-quota scheduler plugin computes them
(pkg/scheduler/plugins/elasticquota/core).

Three layers, each pure:

* ``redistribute``: one level (Koordinator's ``quotaTree.redistribution``): a parent's total of
  one resource shared among its children: min first, then what is left by shared weight,
  round after round, among the children still wanting more.
* ``QuotaTree``: the whole tree. Requests rise from the leaves to the root, each child's
  counted in its parent only up to the child's max (``getLimitRequestNoLock``); runtimes fall
  from the root's total (the cluster's allocatable less what the system and default quotas
  use) level by level, each quota's runtime becoming the total its children share
  (``GroupQuotaManager.refreshRuntimeNoLock``). Built at once from the quotas and what their
  pods ask for and use; Koordinator keeps the same numbers incrementally, event by event.
* ``QuotaTree.check_pod``: the plugin's PreFilter: used + the pod's request within the
  runtime, a non-preemptible pod's within min, with Koordinator's reason text.

Amounts are integers in the quota code's units (``model.Resources``: cpu in milli-cores, every
other resource in whole units).

Where this differs from Koordinator's incremental bookkeeping, on purpose:

* Min scaling (``EnableMinQuotaScale``, on by default) is applied to all children of a parent
  at once against the parent's current total; Koordinator rescales a quota's min only when
  that quota's runtime is refreshed, so siblings may briefly see each other's older mins.
* The system and default quotas take no share of the root's total: their runtime is their
  max, and what they use is taken off the root's total. (Koordinator's root calculator also
  takes them in as sharing children once their requests change, so their pending requests
  can draw a share besides what they use; this model leaves that out.)
* One tree: Koordinator's default tree (the MultiQuotaTree gate is off by default); quotas
  of another tree id make a QuotaTree of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError
from koordapi.quantity import format_binary
from koordapi.quota.model import (
    DEFAULT_QUOTA,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuota,
    Resources,
    add,
    max_of,
    subtract,
    total,
)

# Koordinator's SystemQuotaGroupMax / DefaultQuotaGroupMax defaults (scheduler config v1:
# math.MaxInt64/5 of cores and of bytes), as the quota code counts them.
UNBOUNDED_MAX: Resources = {"cpu": (2**63 - 1) // 5 * 1000, "memory": (2**63 - 1) // 5}

_SPECIAL = (SYSTEM_QUOTA, DEFAULT_QUOTA)


# -- one level ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    """One child of a parent, in one resource dimension (Koordinator's ``quotaNode``)."""

    name: str
    request: int  # the child's limited request (at most its max)
    min: int  # its (possibly scaled) min: Koordinator's AutoScaleMin
    shared_weight: int
    allow_lent_resource: bool = True
    guaranteed: int = 0  # ElasticQuotaGuaranteeUsage only; a min that is larger wins


def redistribute(total_amount: int, shares: Iterable[Share]) -> dict[str, int]:
    """Each child's runtime out of ``total_amount`` (Koordinator's ``quotaTree.redistribution``
    and ``iterationForRedistribution``).

    A child asking at most its min gets what it asks (its whole min when it does not lend);
    one asking more gets its min, and what is left of the total is shared out among those by
    shared weight, rounded to the nearest unit each round; a child that reaches its request
    keeps only that, and what it gave back is shared again among the rest. The rounding may
    hand out a unit more than the total, as Koordinator's does. Mins are granted even when
    they add up to more than the total."""
    runtime: dict[str, int] = {}
    wanting: list[Share] = []
    left = total_amount
    weight = 0
    for share in shares:
        floor = max(share.min, share.guaranteed)
        if share.request > floor:
            wanting.append(share)
            weight += share.shared_weight
            runtime[share.name] = floor
        elif share.allow_lent_resource:
            runtime[share.name] = share.request
        else:
            runtime[share.name] = floor  # keeps its whole min even unused
        left -= runtime[share.name]
    while left > 0 and wanting and weight > 0:
        still: list[Share] = []
        given_back = 0
        still_weight = 0
        for share in wanting:
            # Go: int64(float64(weight)*float64(left)/float64(total weight) + 0.5)
            runtime[share.name] += int(float(share.shared_weight) * float(left) / weight + 0.5)
            if runtime[share.name] < share.request:
                still.append(share)
                still_weight += share.shared_weight
            else:
                given_back += runtime[share.name] - share.request
                runtime[share.name] = share.request
        left, wanting, weight = given_back, still, still_weight
    return runtime


def scaled_mins(
    total_amounts: Mapping[str, int], mins: Mapping[str, Resources]
) -> dict[str, Resources]:
    """Each child's min once scaled to what its parent has (Koordinator's
    ``ScaleMinQuotaManager.getScaledMinQuota``, every child allowed to scale): in each
    dimension of ``total_amounts`` where the children's mins add up to more than the total,
    each child's min becomes total * its min / the sum, truncated; other dimensions keep
    their min."""
    sums = total(mins.values())
    short = [name for name, amount in total_amounts.items() if amount < sums.get(name, 0)]
    scaled: dict[str, Resources] = {}
    for child, minimum in mins.items():
        new = dict(minimum)
        for name in short:
            amount = total_amounts[name]
            if amount <= 0:
                new[name] = 0
            else:
                new[name] = int(float(amount) * float(minimum.get(name, 0)) / float(sums[name]))
        scaled[child] = new
    return scaled


# -- the tree -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaUsage:
    """What a quota's own pods ask for and use (pods in its children not included): the sums
    of the pods' requests (Koordinator's PodRequests), of all pods and of the assigned ones,
    and the same for the non-preemptible pods among them."""

    request: Resources = field(default_factory=dict)
    used: Resources = field(default_factory=dict)
    non_preemptible_request: Resources = field(default_factory=dict)
    non_preemptible_used: Resources = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaInfo:
    """One quota's numbers as Koordinator's ``QuotaInfo.CalculateInfo`` holds them (and its
    status annotations and metrics show them)."""

    name: str
    parent: str
    is_parent: bool
    allow_lent_resource: bool
    min: Resources
    max: Resources
    shared_weight: Resources
    auto_scale_min: Resources  # min as scaled when the children's mins exceed the total
    # own pods' requests plus the children's limited requests (Koordinator's ChildRequest)
    child_request: Resources
    # child_request, raised to min when the quota does not lend (Koordinator's Request)
    request: Resources
    # request capped by max: what the quota asks of its parent (getLimitRequestNoLock)
    limited_request: Resources
    used: Resources
    non_preemptible_request: Resources
    non_preemptible_used: Resources
    guaranteed: Resources
    # what the quota may use now, in the resources its max names (RefreshRuntime's answer)
    runtime: Resources


def _mask(amounts: Mapping[str, int], names: Iterable[str]) -> Resources:
    """quotav1.Mask: only the named resources."""
    return {name: amounts[name] for name in names if name in amounts}


def _non_negative(amounts: Mapping[str, int]) -> Resources:
    return {name: max(0, amount) for name, amount in amounts.items()}


def _limited(request: Mapping[str, int], maximum: Mapping[str, int]) -> Resources:
    """Koordinator's ``getLimitRequestNoLock``: the request, each resource max names capped
    at max (a resource max does not name is passed on whole)."""
    return {
        name: min(amount, maximum[name]) if name in maximum else amount
        for name, amount in request.items()
    }


class QuotaTree:
    """Every quota's request, used and runtime in one quota tree.

    ``quotas``: the ElasticQuotas of the tree (the root quota, if among them, stands for the
    tree's root; the system and default quotas are kept apart, with Koordinator's unbounded
    max unless given). ``cluster_total``: the allocatable of the tree's nodes. ``usage``: per
    quota name, what its own pods ask for and use; each quota counts only the resources its
    max names, as Koordinator masks a pod's request. ``enable_min_quota_scale``: the plugin's
    EnableMinQuotaScale (default on). ``guarantee_usage``: the ElasticQuotaGuaranteeUsage
    gate (default off): no quota lends, and each keeps at least what it has allocated.

    Raises ModelError naming the quota for a parent that is not in the tree, a cycle of
    parents, or two quotas of one name."""

    def __init__(
        self,
        quotas: Iterable[ElasticQuota],
        cluster_total: Mapping[str, int],
        usage: Mapping[str, QuotaUsage] | None = None,
        *,
        enable_min_quota_scale: bool = True,
        guarantee_usage: bool = False,
    ) -> None:
        usage = usage or {}
        self._quotas: dict[str, ElasticQuota] = {}
        special: dict[str, ElasticQuota] = {}
        for quota in quotas:
            if quota.name == ROOT_QUOTA:
                continue
            target = special if quota.name in _SPECIAL else self._quotas
            if quota.name in target:
                raise ModelError(f"quota {quota.name}: listed twice")
            target[quota.name] = quota
        for name in _SPECIAL:
            if name not in special:
                special[name] = ElasticQuota(name=name, max=dict(UNBOUNDED_MAX))
        self._children: dict[str, list[str]] = {ROOT_QUOTA: []}
        for name in sorted(self._quotas):
            self._children.setdefault(name, [])
        for name in sorted(self._quotas):
            parent = self._quotas[name].parent or ROOT_QUOTA
            if parent != ROOT_QUOTA and parent not in self._quotas:
                raise ModelError(f"quota {name}: parent quota {parent!r} does not exist")
            self._children[parent].append(name)
        order = self._top_down()
        self._infos: dict[str, QuotaInfo] = {}
        self._limit: dict[str, Resources] = {}  # Koordinator's CalculateInfo.Runtime
        self._build(
            order,
            special=special,
            cluster_total=cluster_total,
            usage=usage,
            scale=enable_min_quota_scale,
            guarantee_usage=guarantee_usage,
        )

    @classmethod
    def from_objects(
        cls,
        objects: Iterable[Mapping[str, Any]],
        cluster_total: Mapping[str, int],
        usage: Mapping[str, QuotaUsage] | None = None,
        *,
        enable_min_quota_scale: bool = True,
        guarantee_usage: bool = False,
    ) -> QuotaTree:
        """The tree of ElasticQuota objects as the API server sends them; a malformed amount
        or annotation raises ModelError naming the quota."""
        quotas = []
        for obj in objects:
            try:
                quotas.append(ElasticQuota.from_object(obj))
            except ModelError as exc:
                name = (obj.get("metadata") or {}).get("name")
                raise ModelError(f"quota {name}: {exc}") from exc
        return cls(
            quotas,
            cluster_total,
            usage,
            enable_min_quota_scale=enable_min_quota_scale,
            guarantee_usage=guarantee_usage,
        )

    def _top_down(self) -> list[str]:
        """The quotas, each after its parent; ModelError for a cycle (quotas that never
        reach the root)."""
        order: list[str] = []
        stack = list(reversed(self._children[ROOT_QUOTA]))
        while stack:
            name = stack.pop()
            order.append(name)
            stack.extend(reversed(self._children[name]))
        if len(order) < len(self._quotas):
            # a quota off the root's tree reaches a cycle going up: name the cycle's quotas
            name = sorted(set(self._quotas) - set(order))[0]
            path: list[str] = []
            while name not in path:
                path.append(name)
                name = self._quotas[name].parent
            cycle = path[path.index(name) :]
            raise ModelError(
                f"quota {name}: its parents form a cycle ({' -> '.join([*cycle, name])})"
            )
        return order

    def _build(
        self,
        order: list[str],
        *,
        special: Mapping[str, ElasticQuota],
        cluster_total: Mapping[str, int],
        usage: Mapping[str, QuotaUsage],
        scale: bool,
        guarantee_usage: bool,
    ) -> None:
        none = QuotaUsage()

        def own(name: str, quota: ElasticQuota) -> QuotaUsage:
            # updatePodRequestNoLock / updatePodUsedNoLock: a pod counts in the resources
            # its quota's max names
            mine = usage.get(name, none)
            return QuotaUsage(
                *(
                    _non_negative(_mask(amounts, quota.max))
                    for amounts in (
                        mine.request,
                        mine.used,
                        mine.non_preemptible_request,
                        mine.non_preemptible_used,
                    )
                )
            )

        lends = {
            name: q.allow_lent_resource and not guarantee_usage for name, q in self._quotas.items()
        }
        # bottom-up: requests (each limited by the child's max), used, guaranteed
        child_request: dict[str, Resources] = {}
        request: dict[str, Resources] = {}
        limited: dict[str, Resources] = {}
        used: dict[str, Resources] = {}
        np_request: dict[str, Resources] = {}
        np_used: dict[str, Resources] = {}
        guaranteed: dict[str, Resources] = {}
        for name in reversed(order):
            quota = self._quotas[name]
            mine = own(name, quota)
            kids = self._children[name]
            child_request[name] = add(mine.request, total(limited[k] for k in kids))
            # recursiveUpdateGroupTreeWithDeltaRequest: a quota that does not lend asks at
            # least its min of its parent
            request[name] = (
                child_request[name] if lends[name] else max_of(child_request[name], quota.min)
            )
            limited[name] = _limited(request[name], quota.max)
            used[name] = add(mine.used, total(used[k] for k in kids))
            np_request[name] = add(mine.non_preemptible_request, total(np_request[k] for k in kids))
            np_used[name] = add(mine.non_preemptible_used, total(np_used[k] for k in kids))
            # recursiveUpdateGroupTreeWithDeltaAllocated: allocated is what the quota's own
            # pods use plus what its children hold guaranteed; guaranteed at least min
            if guarantee_usage:
                allocated = add(mine.used, total(guaranteed[k] for k in kids))
                guaranteed[name] = max_of(allocated, quota.min)
            else:
                guaranteed[name] = {}

        # top-down: runtimes. The root shares the cluster less what the system and default
        # quotas use (updateClusterTotalResourceNoLock); each quota then shares its runtime.
        special_usage = {name: own(name, q) for name, q in special.items()}
        root_total = subtract(cluster_total, total(u.used for u in special_usage.values()))
        # each level shares the resources its quota's max names; the root, every resource
        # any quota's max names (updateResourceKeyNoLock)
        keys = {ROOT_QUOTA: sorted({r for q in self._quotas.values() for r in q.max})}
        totals: dict[str, Resources] = {ROOT_QUOTA: root_total}
        scaled: dict[str, Resources] = {}
        for parent in [ROOT_QUOTA, *order]:
            kids = self._children[parent]
            if not kids:
                continue
            names = keys[parent] if parent == ROOT_QUOTA else sorted(self._quotas[parent].max)
            have = totals[parent]
            mins = {k: self._quotas[k].min for k in kids}
            scaled.update(scaled_mins(have, mins) if scale else mins)
            shares: dict[str, Resources] = {k: {} for k in kids}
            for resource in names:
                runtime = redistribute(
                    have.get(resource, 0),
                    (
                        Share(
                            name=k,
                            request=limited[k].get(resource, 0),
                            min=scaled[k].get(resource, 0),
                            shared_weight=self._quotas[k].shared_weight.get(resource, 0),
                            allow_lent_resource=lends[k],
                            guaranteed=guaranteed[k].get(resource, 0),
                        )
                        for k in kids
                    ),
                )
                for k in kids:
                    shares[k][resource] = runtime[k]
            for k in kids:
                totals[k] = shares[k]

        for name in order:
            quota = self._quotas[name]
            self._limit[name] = totals[name]
            self._infos[name] = QuotaInfo(
                name=name,
                parent=quota.parent or ROOT_QUOTA,
                is_parent=quota.is_parent,
                allow_lent_resource=lends[name],
                min=dict(quota.min),
                max=dict(quota.max),
                shared_weight=dict(quota.shared_weight),
                auto_scale_min=dict(scaled[name]),
                child_request=child_request[name],
                request=request[name],
                limited_request=limited[name],
                used=used[name],
                non_preemptible_request=np_request[name],
                non_preemptible_used=np_used[name],
                guaranteed=guaranteed[name],
                runtime=_mask(totals[name], quota.max),
            )
        for name, quota in special.items():
            mine = special_usage[name]
            self._limit[name] = {}  # refreshRuntimeNoLock answers max and sets no runtime
            self._infos[name] = QuotaInfo(
                name=name,
                parent=ROOT_QUOTA,
                is_parent=False,
                allow_lent_resource=True,
                min=dict(quota.min),
                max=dict(quota.max),
                shared_weight=dict(quota.shared_weight),
                auto_scale_min=dict(quota.min),
                child_request=mine.request,
                request=mine.request,
                limited_request=_limited(mine.request, quota.max),
                used=mine.used,
                non_preemptible_request=mine.non_preemptible_request,
                non_preemptible_used=mine.non_preemptible_used,
                guaranteed={},
                runtime=dict(quota.max),
            )
        # the root: Koordinator's root QuotaInfo sums its children's limited requests and
        # everything used below it; its runtime is the total it shares
        top = [*self._children[ROOT_QUOTA], *_SPECIAL]
        self._limit[ROOT_QUOTA] = {}
        self._infos[ROOT_QUOTA] = QuotaInfo(
            name=ROOT_QUOTA,
            parent="",
            is_parent=True,
            allow_lent_resource=False,
            min={},
            max={},
            shared_weight={},
            auto_scale_min={},
            child_request={},
            request=total(self._infos[k].limited_request for k in top),
            limited_request={},
            used=total(self._infos[k].used for k in top),
            non_preemptible_request=total(self._infos[k].non_preemptible_request for k in top),
            non_preemptible_used=total(self._infos[k].non_preemptible_used for k in top),
            guaranteed={},
            runtime=root_total,
        )

    # -- reading ---------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every quota of the tree, the root, system and default quotas included, sorted."""
        return sorted(self._infos)

    def children(self, name: str) -> list[str]:
        """The quotas whose parent is ``name``, sorted (the system and default quotas are
        not listed under the root)."""
        return sorted(self._children.get(name, []))

    def info(self, name: str) -> QuotaInfo:
        """Every number of one quota; ModelError for a quota not in the tree."""
        try:
            return self._infos[name]
        except KeyError:
            raise ModelError(f"quota {name!r} is not in the quota tree") from None

    def runtime(self, name: str) -> Resources:
        return dict(self.info(name).runtime)

    def request(self, name: str) -> Resources:
        return dict(self.info(name).request)

    def used(self, name: str) -> Resources:
        return dict(self.info(name).used)

    def min(self, name: str) -> Resources:
        return dict(self.info(name).min)

    def max(self, name: str) -> Resources:
        return dict(self.info(name).max)

    # -- the admission check ---------------------------------------------------------------

    def check_pod(
        self,
        quota: str,
        pod_request: Mapping[str, int],
        non_preemptible: bool = False,
        *,
        enable_runtime_quota: bool = True,
        enable_check_parent_quota: bool = False,
    ) -> str | None:
        """Why a pod of ``quota`` asking ``pod_request`` may not be scheduled now, or None
        (the elastic-quota plugin's PreFilter, with checkQuotaRecursive when
        ``enable_check_parent_quota``). ``enable_runtime_quota`` false checks against max
        instead of the runtime, as the plugin's EnableRuntimeQuota does.

        A quota's used plus the pod's request (the resources its max names) must fit within
        its runtime, compared only in the resources both name (quotav1.LessThanOrEqual); a
        non-preemptible pod's, with the quota's other non-preemptible pods, within min. The
        system and default quotas have no runtime of their own and refuse nothing unless
        checked against max. An empty quota name is not checked (the plugin skips)."""
        if not quota:
            return None
        info = self._infos.get(quota)
        if info is None:
            return "Could not find the specified ElasticQuota"
        request = _mask(pod_request, info.max)
        limit = self._limit[quota] if enable_runtime_quota else info.max
        exceeded = _exceeded(add(request, info.used), limit)
        if exceeded:
            return (
                f"Insufficient quotas, quotaName: {quota}, runtime: {format_resources(limit)}, "
                f"used: {format_resources(info.used)}, pod's request: {format_resources(request)}, "
                f"exceedDimensions: [{' '.join(exceeded)}]"
            )
        if non_preemptible:
            exceeded = _exceeded(add(request, info.non_preemptible_used), info.min)
            if exceeded:
                return (
                    f"Insufficient non-preemptible quotas, quotaName: {quota}, "
                    f"min: {format_resources(info.min)}, "
                    f"nonPreemptibleUsed: {format_resources(info.non_preemptible_used)}, "
                    f"pod's request: {format_resources(request)}, "
                    f"exceedDimensions: [{' '.join(exceeded)}]"
                )
        if enable_check_parent_quota:
            return self._check_parents(
                info.parent, [info.parent, quota], request, enable_runtime_quota
            )
        return None

    def _check_parents(
        self, name: str, topo: list[str], request: Resources, enable_runtime_quota: bool
    ) -> str | None:
        """Koordinator's checkQuotaRecursive: each ancestor below the root, its used plus the
        pod's request (the pod's resources only) within its runtime."""
        while name and name != ROOT_QUOTA:
            info = self._infos[name]
            limit = self._limit[name] if enable_runtime_quota else info.max
            exceeded = _exceeded(_mask(add(request, info.used), request), limit)
            if exceeded:
                return (
                    f"Insufficient quotas, quotaNameTopo: [{' '.join(topo)}], "
                    f"runtime: {format_resources(limit)}, used: {format_resources(info.used)}, "
                    f"pod's request: {format_resources(request)}, "
                    f"exceedDimensions: [{' '.join(exceeded)}]"
                )
            name = info.parent
            topo = [name, *topo]
        return None


def _exceeded(amounts: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """quotav1.LessThanOrEqual's exceeded dimensions: the resources ``limit`` names that
    ``amounts`` also names and exceeds (sorted; Go lists them in map order)."""
    return sorted(name for name, most in limit.items() if name in amounts and amounts[name] > most)


# -- Koordinator's printResourceList ---------------------------------------------------------

_DECIMAL_SUFFIXES = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))


def _decimal_si(amount: int) -> str:
    """A whole amount as resource.Quantity prints a DecimalSI value: the largest power-of-1000
    suffix that keeps it whole ("37k", "2M", "1500")."""
    sign, magnitude = ("-", -amount) if amount < 0 else ("", amount)
    if magnitude:
        for suffix, digits in _DECIMAL_SUFFIXES:
            if magnitude % 10**digits == 0:
                return f"{sign}{magnitude // 10**digits}{suffix}"
    return f"{sign}{magnitude}"


def format_amount(name: str, amount: int) -> str:
    """One amount as Koordinator's quota code prints it (``createQuantity`` then
    Quantity.String): cpu from milli-cores ("7300m", "7"), memory in binary form ("37Gi";
    under 1024 bytes Kubernetes prints it decimal), others decimal ("2k")."""
    if name == "cpu":
        return _decimal_si(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if name == "memory" and abs(amount) >= 1024:
        return format_binary(amount) if amount > 0 else "-" + format_binary(-amount)
    return _decimal_si(amount)


def resource_list(amounts: Mapping[str, int]) -> dict[str, str]:
    """A ResourceList as Kubernetes writes it: quantity strings, names sorted (Go marshals a
    map sorted)."""
    return {name: format_amount(name, amounts[name]) for name in sorted(amounts)}


def format_resources(amounts: Mapping[str, int]) -> str:
    """Koordinator's printResourceList: ``name:amount`` sorted and joined by commas,
    ``<empty>`` for none."""
    if not amounts:
        return "<empty>"
    return ",".join(
        sorted(f"{name}:{format_amount(name, amount)}" for name, amount in amounts.items())
    )
