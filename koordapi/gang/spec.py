"""A gang's identity and spec, read as Koordinator v1.8's coscheduling plugin reads them.

A pod belongs to a gang through the PodGroup label ``pod-group.scheduling.sigs.k8s.io``, the
deprecated lightweight-coscheduling label ``pod-group.scheduling.sigs.k8s.io/name``, or the
annotation ``gang.scheduling.koordinator.sh/name`` (that order, util.GetGangNameByPod). The
gang's id is ``namespace/name`` of the pod's namespace.

Its spec comes from the PodGroup object when the gang has one (Gang.tryInitByPodGroup), else
from the first member whose annotations carry a readable min-available
(Gang.tryInitByPodConfig: later members' annotations are ignored). Koordinator never refuses a
gang for a bad value; it falls back, and so does this module:

* min-available unreadable or absent: that pod does not set the gang up (the next one may);
  0 or negative is taken as it is (every member then passes the gang checks at once).
* total-number unreadable, 0, absent or below min-available: min-available.
* mode other than ``Strict``/``NonStrict``: Strict. match-policy unknown: the plugin default.
* waiting-time unreadable, 0 or negative (a PodGroup's scheduleTimeoutSeconds <= 0): the
  plugin's DefaultTimeout (600 s).
* groups not a JSON list of strings: the gang alone.

No I/O: the caller gives the pods and PodGroups as the API server sends them.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from koordapi.duration import parse_go_duration

# -- Koordinator's names (apis/extension/coscheduling.go, scheduler-plugins v1alpha1) ----------

GROUP = "scheduling.sigs.k8s.io"
VERSION = "v1alpha1"
PLURAL = "podgroups"
KIND = "PodGroup"

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"  # v1alpha1.PodGroupLabel
# Deprecated lightweight-coscheduling labels, still read by v1.8.
LABEL_LIGHTWEIGHT_NAME = "pod-group.scheduling.sigs.k8s.io/name"
LABEL_LIGHTWEIGHT_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"

PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_NAME = f"{PREFIX}/name"
ANNOTATION_MIN_AVAILABLE = f"{PREFIX}/min-available"
ANNOTATION_WAITING_TIME = f"{PREFIX}/waiting-time"
ANNOTATION_TOTAL_NUMBER = f"{PREFIX}/total-number"
ANNOTATION_MODE = f"{PREFIX}/mode"
ANNOTATION_GROUPS = f"{PREFIX}/groups"
ANNOTATION_TIMEOUT = f"{PREFIX}/timeout"
ANNOTATION_MATCH_POLICY = f"{PREFIX}/match-policy"
ANNOTATION_ALIAS_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"
ANNOTATION_BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
# written beside the internal ones by v1.8, to be removed in a later version
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"
MODES = (MODE_STRICT, MODE_NON_STRICT)

MATCH_ONLY_WAITING = "only-waiting"
MATCH_WAITING_AND_RUNNING = "waiting-and-running"
MATCH_ONCE_SATISFIED = "once-satisfied"
MATCH_POLICIES = (MATCH_ONLY_WAITING, MATCH_WAITING_AND_RUNNING, MATCH_ONCE_SATISFIED)

# Gang.GangFrom
FROM_POD_GROUP = "GangFromPodGroupCrd"
FROM_ANNOTATION = "GangFromPodAnnotation"

DEFAULT_TIMEOUT_SECONDS = 600.0  # CoschedulingArgs.DefaultTimeout (config/v1 defaults.go)

_INT32 = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class CoschedulingArgs:
    """The two Coscheduling plugin arguments the gang spec reads, with v1.8's defaults."""

    default_timeout: float = DEFAULT_TIMEOUT_SECONDS
    default_match_policy: str = MATCH_ONCE_SATISFIED


DEFAULT_ARGS = CoschedulingArgs()


@dataclass(frozen=True)
class GangSpec:
    """One gang as Koordinator's Gang holds it once initialised (HasGangInit)."""

    gang_id: str  # namespace/name
    min_member: int  # MinRequiredNumber
    total_member: int  # TotalChildrenNum
    wait_time: float  # seconds a held member waits for the rest (WaitTime)
    mode: str = MODE_STRICT
    match_policy: str = MATCH_ONCE_SATISFIED
    # the gangs bundled with this one, sorted (GangGroup; GangGroupId is their join)
    group: tuple[str, ...] = ()
    source: str = FROM_ANNOTATION
    create_time: float | None = None  # the PodGroup's or the first member's creationTimestamp

    @property
    def group_id(self) -> str:
        """util.GetGangGroupId: the sorted member gang ids joined by commas."""
        return ",".join(self.group)

    @property
    def strict(self) -> bool:
        return self.mode == MODE_STRICT


# -- identity ----------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _strings(meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = meta.get(key)
    return found if isinstance(found, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def pod_key(pod: Mapping[str, Any]) -> str:
    """util.GetId of a pod: ``namespace/name``."""
    meta = _meta(pod)
    return f"{_text(meta.get('namespace'))}/{_text(meta.get('name'))}"


def gang_name(pod: Mapping[str, Any]) -> str:
    """util.GetGangNameByPod: the PodGroup label, then the lightweight label, then the
    annotation; empty when the pod is in no gang."""
    meta = _meta(pod)
    labels = _strings(meta, "labels")
    return (
        _text(labels.get(LABEL_POD_GROUP))
        or _text(labels.get(LABEL_LIGHTWEIGHT_NAME))
        or _text(_strings(meta, "annotations").get(ANNOTATION_NAME))
    )


def gang_id(pod: Mapping[str, Any]) -> str:
    """The id of the pod's gang (``namespace/name``), empty when it is in none."""
    name = gang_name(pod)
    return f"{_text(_meta(pod).get('namespace'))}/{name}" if name else ""


def from_pod_group(pod: Mapping[str, Any]) -> bool:
    """The pod names its gang by the PodGroup label: only a PodGroup object sets the gang up
    (GangCache.onPodAddInternal skips tryInitByPodConfig for such pods)."""
    return bool(_text(_strings(_meta(pod), "labels").get(LABEL_POD_GROUP)))


# -- parsing as Go does ------------------------------------------------------------------------


def parse_int32(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 32): an optional sign and decimal digits within int32;
    None where Go returns an error."""
    if not _INT32.fullmatch(text):
        return None
    number = int(text)
    return number if _INT32_MIN <= number <= _INT32_MAX else None


def parse_duration(text: str) -> float | None:
    """time.ParseDuration in seconds (a sign allowed, a unit required except for "0"); None
    where Go returns an error."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in "+-" else text
    if not body or body != body.strip():
        return None
    try:
        return sign * parse_go_duration(body)
    except ValueError:
        return None


def parse_time(value: Any) -> float | None:
    """A metav1.Time (RFC 3339) in epoch seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def format_time(seconds: float) -> str:
    """A metav1.Time as the API server writes it: RFC 3339 in UTC, whole seconds."""
    moment = datetime.datetime.fromtimestamp(int(seconds), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_groups(text: str) -> tuple[str, ...]:
    """util.StringToGangGroupSlice: the ``groups`` annotation, a JSON list of
    ``namespace/name``; empty when absent or malformed (Koordinator logs and goes on, the gang
    then stands alone). Go would keep a list with a non-string entry, that entry as "" (a gang
    that never exists, so the group never starts); it is read here as malformed instead."""
    if not text:
        return ()
    try:
        listed = json.loads(text)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(listed, list) or not all(isinstance(item, str) for item in listed):
        return ()
    return tuple(listed)


def _total(annotations: Mapping[str, Any], minimum: int) -> int:
    """extension.GetGangTotalNum with tryInit's fallbacks: min-available where the annotation
    is absent, unreadable, 0 or below it."""
    text = _text(annotations.get(ANNOTATION_TOTAL_NUMBER))
    total = parse_int32(text) if text else 0
    if total is None or total == 0 or total < minimum:
        return minimum
    return total


def _mode(annotations: Mapping[str, Any]) -> str:
    mode = _text(annotations.get(ANNOTATION_MODE))
    return mode if mode in MODES else MODE_STRICT


def _match_policy(annotations: Mapping[str, Any], args: CoschedulingArgs) -> str:
    """extension.GetGangMatchPolicy (the alias key where the main one is empty), the plugin's
    default where neither names a known policy."""
    policy = _text(annotations.get(ANNOTATION_MATCH_POLICY)) or _text(
        annotations.get(ANNOTATION_ALIAS_MATCH_POLICY)
    )
    return policy if policy in MATCH_POLICIES else args.default_match_policy


def _group(annotations: Mapping[str, Any], own_id: str) -> tuple[str, ...]:
    listed = parse_groups(_text(annotations.get(ANNOTATION_GROUPS)))
    return tuple(sorted(listed or (own_id,)))  # GetGangGroupId sorts the slice in place


def min_available_of_pod(pod: Mapping[str, Any]) -> int | None:
    """util.GetGangMinNumFromPod: the lightweight label where set, else the annotation; None
    where absent or unreadable (the pod cannot set its gang up)."""
    meta = _meta(pod)
    label = _text(_strings(meta, "labels").get(LABEL_LIGHTWEIGHT_MIN_AVAILABLE))
    if label:
        return parse_int32(label)
    annotations = _strings(meta, "annotations")
    if ANNOTATION_MIN_AVAILABLE not in annotations:
        return None
    return parse_int32(_text(annotations.get(ANNOTATION_MIN_AVAILABLE)))


def spec_from_pod(pod: Mapping[str, Any], args: CoschedulingArgs = DEFAULT_ARGS) -> GangSpec | None:
    """Gang.tryInitByPodConfig: the gang as this member's annotations describe it; None where
    the pod is in no gang or its min-available is absent or unreadable."""
    own_id = gang_id(pod)
    minimum = min_available_of_pod(pod)
    if not own_id or minimum is None:
        return None
    meta = _meta(pod)
    annotations = _strings(meta, "annotations")
    wait_text = _text(annotations.get(ANNOTATION_WAITING_TIME))
    wait = parse_duration(wait_text) if wait_text else 0.0
    if wait is None or wait <= 0:
        wait = args.default_timeout
    return GangSpec(
        gang_id=own_id,
        min_member=minimum,
        total_member=_total(annotations, minimum),
        wait_time=wait,
        mode=_mode(annotations),
        match_policy=_match_policy(annotations, args),
        group=_group(annotations, own_id),
        source=FROM_ANNOTATION,
        create_time=parse_time(meta.get("creationTimestamp")),
    )


def podgroup_id(podgroup: Mapping[str, Any]) -> str:
    meta = _meta(podgroup)
    return f"{_text(meta.get('namespace'))}/{_text(meta.get('name'))}"


def _spec_int(spec: Mapping[str, Any], key: str) -> int | None:
    value = spec.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def spec_from_podgroup(
    podgroup: Mapping[str, Any], args: CoschedulingArgs = DEFAULT_ARGS
) -> GangSpec:
    """Gang.tryInitByPodGroup: spec.minMember, spec.scheduleTimeoutSeconds (util.
    GetWaitTimeDuration: the default where absent or <= 0) and the PodGroup's own gang
    annotations (total-number, mode, match-policy, groups). A minMember of the wrong type
    counts as absent (0), as the API server's schema would refuse it."""
    meta = _meta(podgroup)
    annotations = _strings(meta, "annotations")
    spec = podgroup.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    minimum = _spec_int(spec, "minMember") or 0
    timeout = _spec_int(spec, "scheduleTimeoutSeconds")
    own_id = podgroup_id(podgroup)
    return GangSpec(
        gang_id=own_id,
        min_member=minimum,
        total_member=_total(annotations, minimum),
        wait_time=float(timeout) if timeout is not None and timeout > 0 else args.default_timeout,
        mode=_mode(annotations),
        match_policy=_match_policy(annotations, args),
        group=_group(annotations, own_id),
        source=FROM_POD_GROUP,
        create_time=parse_time(meta.get("creationTimestamp")),
    )


def creation_order(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods in the order the scheduler's informer sees them created: creationTimestamp, then
    namespace/name (a pod without a readable timestamp last)."""

    def key(pod: Mapping[str, Any]) -> tuple[bool, float, str]:
        created = parse_time(_meta(pod).get("creationTimestamp"))
        return (created is None, created or 0.0, pod_key(pod))

    return sorted(pods, key=key)


def resolve_spec(
    own_id: str,
    members: Iterable[Mapping[str, Any]],
    podgroup: Mapping[str, Any] | None = None,
    args: CoschedulingArgs = DEFAULT_ARGS,
) -> GangSpec | None:
    """The spec of gang ``own_id`` as GangCache ends up with it: its PodGroup's where one
    exists; else that of the first member (in creation order) that is not a PodGroup-label
    pod and whose min-available reads; None while the gang is not set up ("gang has not
    init": a PodGroup-label pod whose PodGroup is missing, or no readable min-available)."""
    if podgroup is not None:
        return spec_from_podgroup(podgroup, args)
    for pod in creation_order(members):
        if gang_id(pod) != own_id or from_pod_group(pod):
            continue
        spec = spec_from_pod(pod, args)
        if spec is not None:
            return spec
    return None
