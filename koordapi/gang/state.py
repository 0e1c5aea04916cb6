"""Where each gang stands, from the pods and PodGroups the caller gives and the members it
holds, and what Koordinator v1.8 decides from it (core.go, gang.go, ganggroup.go).

The stock kube-scheduler has no Permit for extenders, so the caller holds a gang's members
itself (scheduling gates, reservations) and asks this module when to let them go. A member is

* bound: ``spec.nodeName`` is set (Gang.BoundChildren);
* held: the caller has placed it for the gang and keeps it waiting, since the moment it gives
  (Gang.WaitingForBindChildren, a pod waiting at Permit; its wait started then);
* pending: neither (Gang.PendingChildren).

Koordinator's decisions mirrored:

* admission (PreEnqueue, basicGangRequirementsCheck): every gang of the group exists, is set
  up and has at least min-available members before any member is tried; a gang that is once
  satisfied under the once-satisfied match policy skips the checks.
* readiness (Permit, isGangValidForPermit): every gang of the group has min-available held
  members (held plus bound under waiting-and-running; or is once satisfied under
  once-satisfied): then all the group's held members go together (AllowGangGroup).
* once satisfied (GangGroupInfo.OnceResourceSatisfied): a member of any gang of the group was
  bound; never undone while the group lives, so the caller may also pass the groups it
  remembers.
* expiry (the Permit wait, then Unreserve): a held member waits its gang's waiting-time; when
  it runs out, a Strict gang not once satisfied gives back every held member of its group,
  otherwise only that member goes back to pending.
* rejection (AfterPostFilter): a member that finds no node makes a Strict gang give back the
  held members of its group; a NonStrict gang keeps them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.gang import reasons
from koordapi.gang.spec import (
    ANNOTATION_BIND_GANG_GROUP_ID,
    ANNOTATION_BIND_GANG_MEMBER_COUNT,
    DEFAULT_ARGS,
    DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
    DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
    MATCH_ONCE_SATISFIED,
    MATCH_ONLY_WAITING,
    MATCH_WAITING_AND_RUNNING,
    CoschedulingArgs,
    GangSpec,
    gang_id,
    pod_key,
    podgroup_id,
    resolve_spec,
)


@dataclass(frozen=True)
class GangState:
    """One gang of the cache (Gang): its spec (None while not set up) and its members."""

    gang_id: str
    spec: GangSpec | None
    children: tuple[str, ...] = ()  # every member, namespace/name, sorted
    pending: tuple[str, ...] = ()
    held: Mapping[str, float] = field(default_factory=dict)  # member -> held since
    bound: tuple[str, ...] = ()
    once_satisfied: bool = False  # of its group (GangGroupInfo.OnceResourceSatisfied)

    @property
    def initialized(self) -> bool:
        return self.spec is not None

    @property
    def group(self) -> tuple[str, ...]:
        return self.spec.group if self.spec is not None else (self.gang_id,)

    @property
    def collected(self) -> bool:
        """Enough members exist (the basic check's ``getChildrenNum() >= getGangMinNum()``)."""
        return self.spec is not None and len(self.children) >= self.spec.min_member

    @property
    def skips_gang_checks(self) -> bool:
        """Once satisfied under the once-satisfied policy: members go one by one, as plain
        pods (PreEnqueue, AfterPostFilter and Unreserve all step aside)."""
        return (
            self.spec is not None
            and self.spec.match_policy == MATCH_ONCE_SATISFIED
            and self.once_satisfied
        )

    @property
    def valid_for_permit(self) -> bool:
        """Gang.isGangValidForPermit."""
        spec = self.spec
        if spec is None:
            return False
        if spec.match_policy == MATCH_ONLY_WAITING:
            return len(self.held) >= spec.min_member
        if spec.match_policy == MATCH_WAITING_AND_RUNNING:
            return len(self.held) + len(self.bound) >= spec.min_member
        return len(self.held) >= spec.min_member or self.once_satisfied

    def deadline(self, member: str) -> float | None:
        """When the held ``member``'s wait runs out (held since + the gang's waiting-time)."""
        since = self.held.get(member)
        if since is None or self.spec is None:
            return None
        return since + self.spec.wait_time

    def summary(self) -> dict[str, Any]:
        """GangSummary as koord-scheduler's Coscheduling service serves it (waitTime in
        nanoseconds, as Go encodes a Duration; times in epoch seconds)."""
        spec = self.spec
        return {
            "name": self.gang_id,
            "waitTime": round(spec.wait_time * 1e9) if spec else 0,
            "createTime": spec.create_time if spec else None,
            "mode": spec.mode if spec else "",
            "gangMatchPolicy": spec.match_policy if spec else "",
            "minRequiredNumber": spec.min_member if spec else 0,
            "totalChildrenNum": spec.total_member if spec else 0,
            "gangGroup": list(self.group),
            "children": list(self.children),
            "pendingChildren": list(self.pending),
            "waitingForBindChildren": sorted(self.held),
            "boundChildren": list(self.bound),
            "onceResourceSatisfied": self.once_satisfied,
            "gangFrom": spec.source if spec else "",
            "hasGangInit": spec is not None,
        }


def _node_name(pod: Mapping[str, Any]) -> str:
    spec = pod.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) else ""


def gang_states(
    pods: Iterable[Mapping[str, Any]],
    podgroups: Iterable[Mapping[str, Any]] = (),
    held: Mapping[str, float] | None = None,
    once_satisfied: Collection[str] = (),
    args: CoschedulingArgs = DEFAULT_ARGS,
) -> dict[str, GangState]:
    """Every gang the pods and PodGroups make, by id (GangCache.gangItems).

    ``held``: the members the caller holds for their gang, each with the time it started
    holding it (a held pod that is bound counts as bound). ``once_satisfied``: group ids the
    caller remembers as once satisfied (a group whose bound members have all gone stays so in
    Koordinator); any bound member of a set-up gang makes its group so as well.
    """
    held = held or {}
    members: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        own = gang_id(pod)
        if own:
            members.setdefault(own, []).append(pod)
    by_id = {podgroup_id(pg): pg for pg in podgroups}
    specs = {
        own: resolve_spec(own, members.get(own, ()), by_id.get(own), args)
        for own in sorted({*members, *by_id})
    }
    satisfied = set(once_satisfied)
    for own, spec in specs.items():
        if spec is not None and any(_node_name(pod) for pod in members.get(own, ())):
            satisfied.add(spec.group_id)
    states = {}
    for own, spec in specs.items():
        children, pending, bound = [], [], []
        holding: dict[str, float] = {}
        for pod in members.get(own, ()):
            key = pod_key(pod)
            children.append(key)
            if _node_name(pod):
                bound.append(key)
            elif key in held:
                holding[key] = held[key]
            else:
                pending.append(key)
        states[own] = GangState(
            gang_id=own,
            spec=spec,
            children=tuple(sorted(children)),
            pending=tuple(sorted(pending)),
            held=dict(sorted(holding.items())),
            bound=tuple(sorted(bound)),
            once_satisfied=spec is not None and spec.group_id in satisfied,
        )
    return states


# -- decisions ---------------------------------------------------------------------------------


def admission_reason(pod: Mapping[str, Any], states: Mapping[str, GangState]) -> str:
    """PodGroupManager.PreEnqueue without its representative-pod bookkeeping: why ``pod`` may
    not be tried yet, empty when it may (or is in no gang)."""
    own = gang_id(pod)
    if not own:
        return ""
    key = pod_key(pod)
    state = states.get(own)
    if state is None:
        return reasons.gang_not_found(own, key)
    if state.spec is None:
        return reasons.gang_not_init(own, key)
    if state.skips_gang_checks:
        return ""
    missing, not_init, short = [], [], False
    for member in state.group:
        other = states.get(member)
        if other is None:
            missing.append(member)
        elif other.spec is None:
            not_init.append(member)
        elif not other.collected:
            short = True
    if missing or not_init or short:
        return reasons.basic_check_failed(state.group, missing, not_init, short, gang=own, pod=key)
    return ""


def group_ready(own: str, states: Mapping[str, GangState]) -> bool:
    """Permit's allGangGroupAssumed for a member of gang ``own``: every gang of its group
    exists and is valid for Permit."""
    state = states.get(own)
    if state is None or state.spec is None:
        return False
    for member in state.group:
        other = states.get(member)
        if other is None or not other.valid_for_permit:
            return False
    return True


def held_in_group(own: str, states: Mapping[str, GangState]) -> tuple[str, ...]:
    """The held members of every gang of ``own``'s group (what AllowGangGroup lets go and
    rejectGangGroupById gives back)."""
    state = states.get(own)
    if state is None:
        return ()
    found: set[str] = set()
    for member in state.group:
        other = states.get(member)
        if other is not None:
            found.update(other.held)
    return tuple(sorted(found))


@dataclass(frozen=True)
class Verdict:
    """What the caller does with a gang group now.

    ``ready``: every gang of the group may go (members not held yet go one by one, as the
    group's gangs are valid for Permit). ``allow``: held members to let go to binding,
    together. ``give_back``: held members to release (back to pending; their places are free
    for others). ``deadline``: when the earliest remaining hold runs out (the time to look
    again), None when nothing is held.
    ``reason``: why the group's members still wait, empty when allowed.
    """

    ready: bool = False
    allow: tuple[str, ...] = ()
    give_back: tuple[str, ...] = ()
    deadline: float | None = None
    reason: str = ""


def _name_of(key: str) -> str:
    return key.partition("/")[2]


def decide(own: str, states: Mapping[str, GangState], now: float) -> Verdict:
    """The group of gang ``own`` at time ``now`` (epoch seconds, the caller's clock).

    Expiry first (the holds that ran out were released at their deadline in Koordinator,
    before anything counted them): a Strict gang not once satisfied gives back its whole
    group's held members (Unreserve, rejectGangGroupById), any other gives back the expired
    member alone. Then, if every gang of the group is valid for Permit, all held members of
    the group are allowed (Permit, AllowGangGroup). Otherwise they wait, with a reason.
    """
    state = states.get(own)
    if state is None or state.spec is None:
        missing = state is None
        return Verdict(reason=(reasons.gang_not_found if missing else reasons.gang_not_init)(own))
    expired: list[tuple[float, str, GangState]] = []
    for member in state.group:
        other = states.get(member)
        if other is None:
            continue
        for key in other.held:
            deadline = other.deadline(key)
            if deadline is not None and now >= deadline:
                expired.append((deadline, key, other))
    if expired:
        give_back: set[str] = set()
        reason = ""
        for _, key, other in sorted(expired, key=lambda item: (item[0], item[1])):
            assert other.spec is not None  # deadline() is None without a spec
            if other.spec.strict and not other.skips_gang_checks:
                give_back.update(held_in_group(other.gang_id, states))
                reason = reason or reasons.rejected_in_unreserve(other.gang_id, _name_of(key))
            else:
                give_back.add(key)
                reason = reason or reasons.permit_timeout(other.spec.wait_time)
        return Verdict(give_back=tuple(sorted(give_back)), reason=reason)
    held = held_in_group(own, states)
    if group_ready(own, states):
        return Verdict(ready=True, allow=held)
    short = [
        member
        for member in state.group
        if member not in states or not states[member].valid_for_permit
    ]
    deadlines = [
        d
        for member in state.group
        if member in states
        for key in states[member].held
        if (d := states[member].deadline(key)) is not None
    ]
    return Verdict(
        deadline=min(deadlines, default=None),
        reason=reasons.waiting_for_group(state.group, short, own),
    )


def reject_unschedulable(own: str, states: Mapping[str, GangState]) -> Verdict:
    """AfterPostFilter for a member of gang ``own`` that found no node: a Strict gang not
    once satisfied gives back the held members of its group; otherwise nothing changes."""
    state = states.get(own)
    if state is None or state.spec is None or state.skips_gang_checks or not state.spec.strict:
        return Verdict()
    return Verdict(give_back=held_in_group(own, states), reason=reasons.rejected_unschedulable(own))


def waiting_reason(pod: Mapping[str, Any], states: Mapping[str, GangState], now: float) -> str:
    """Why a pending or held member ``pod`` is not running yet, for events and koordctl:
    the admission reason, else the group's wait; empty when nothing holds it back."""
    reason = admission_reason(pod, states)
    if reason:
        return reason
    own = gang_id(pod)
    state = states.get(own)
    if not own or state is None or state.skips_gang_checks:
        return ""
    verdict = decide(own, states, now)
    if verdict.ready:
        return ""
    if verdict.give_back:
        return verdict.reason
    short = [m for m in state.group if m not in states or not states[m].valid_for_permit]
    return reasons.waiting_for_group(state.group, short, own, pod_key(pod))


def bind_annotations(
    pod: Mapping[str, Any], states: Mapping[str, GangState], allowed: Collection[str]
) -> dict[str, str | None]:
    """Coscheduling.PreBind (GetGangBindingInfo): the annotations a member let go with
    ``allowed`` (the group's held members allowed together, ``Verdict.allow``) carries to
    binding: the group id and how many bind together, under the internal and the deprecated
    keys. None values remove the keys (a merge patch's null), as Koordinator deletes them
    for a member that binds alone or outside the allowed set."""
    keys = (
        ANNOTATION_BIND_GANG_GROUP_ID,
        ANNOTATION_BIND_GANG_MEMBER_COUNT,
        DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
        DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
    )
    state = states.get(gang_id(pod))
    if state is None or state.spec is None or len(allowed) <= 1 or pod_key(pod) not in allowed:
        return dict.fromkeys(keys)
    group_id, count = state.spec.group_id, str(len(allowed))
    return dict(zip(keys, (group_id, count, group_id, count), strict=True))
