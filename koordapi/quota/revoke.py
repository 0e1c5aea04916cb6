"""Reclaim of over-used quotas: which quotas have stayed over their runtime long enough, and
which of their pods to evict, as Koordinator v1.8's QuotaOverUsedRevokeController decides it
(pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go).

A quota that borrowed idle quota keeps its pods when the lender's own pods arrive: its runtime
drops below what it uses. Once it has stayed over (used not within runtime,
quotav1.LessThanOrEqual) for longer than ``delayEvictTime``, the controller evicts its least
important preemptible pods until used fits the runtime again, then keeps back those of them
that still fit (``pods_to_revoke``).

Three pieces, each pure (the caller gives the clock, the quotas' used and runtime and their
pods, and evicts):

* ``ElasticQuotaArgs`` / ``parse_elastic_quota_args``: the plugin args the controller reads,
  with Koordinator's JSON names, defaults and validation.
* ``OverUseMonitor`` / ``QuotaRevoker``: one monitor per quota, firing when its quota has been
  over-used for longer than the delay (QuotaOverUsedGroupMonitor.monitor, syncQuota,
  getToMonitorQuotas).
* ``pods_to_revoke``: the pods of one quota to evict (getToRevokePodList), ordered by
  ``more_important`` (the scheduler's MoreImportantPod).

Amounts are integers in the quota code's units (``model.Resources``).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordapi.errors import ModelError
from koordapi.gang.spec import parse_duration, parse_time
from koordapi.pod import spec_priority
from koordapi.quota.model import (
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    Resources,
    add,
    pod_non_preemptible,
    subtract,
)
from koordapi.quota.usage import pod_request

Object = Mapping[str, Any]

# The longest time.Duration (int64 nanoseconds): Go's ParseDuration refuses anything longer.
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9
# Go's zero time.Time (0001-01-01T00:00:00Z): a pod with neither a start nor a creation time.
_ZERO_TIME = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC).timestamp()


# -- the plugin args --------------------------------------------------------------------------


@dataclass(frozen=True)
class ElasticQuotaArgs:
    """The fields of Koordinator's ElasticQuotaArgs the revoke controller reads, with the
    defaults of SetDefaults_ElasticQuotaArgs (durations in seconds)."""

    delay_evict_time: float = 120.0
    revoke_pod_interval: float = 1.0
    monitor_all_quotas: bool = False
    enable_runtime_quota: bool = True

    def __post_init__(self) -> None:
        # ValidateElasticQuotaArgs: neither duration may be negative
        for name, value in (
            ("delayEvictTime", self.delay_evict_time),
            ("revokePodInterval", self.revoke_pod_interval),
        ):
            if value < 0:
                raise ModelError(f"{name}: should be a positive value, got {value}s")

    @property
    def revokes(self) -> bool:
        """Whether Koordinator runs the controller at all (QuotaOverUsedRevokeController.Start:
        only with monitorAllQuotas on and enableRuntimeQuota not turned off)."""
        return self.monitor_all_quotas and self.enable_runtime_quota


def _duration(args: Mapping[str, Any], key: str, default: float) -> float:
    """A metav1.Duration field: a JSON string Go's time.ParseDuration reads; null or absent
    for the default."""
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ModelError(f'{key}: a duration string like "2m" is expected, got {value!r}')
    seconds = parse_duration(value)
    if seconds is None or abs(seconds) > _MAX_DURATION_SECONDS:
        raise ModelError(f"{key}: not a duration: {value!r}")
    if seconds < 0:
        raise ModelError(f"{key}: should be a positive value, got {value!r}")
    return seconds


def _flag(args: Mapping[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ModelError(f"{key}: true or false is expected, got {value!r}")
    return value


def parse_elastic_quota_args(args: Mapping[str, Any]) -> ElasticQuotaArgs:
    """The ElasticQuota plugin's args as a scheduler configuration writes them
    (``delayEvictTime: 2m``, ``revokePodInterval: 1s``, ``monitorAllQuotas``,
    ``enableRuntimeQuota``); Koordinator's other ElasticQuotaArgs fields are accepted and
    ignored. Raises ModelError naming the field for a wrong type, a duration Go does not
    read, or a negative one."""
    given: object = args  # a configuration file may hold anything there
    if not isinstance(given, Mapping):
        raise ModelError(f"ElasticQuotaArgs: an object is expected, got {args!r}")
    return ElasticQuotaArgs(
        delay_evict_time=_duration(args, "delayEvictTime", ElasticQuotaArgs.delay_evict_time),
        revoke_pod_interval=_duration(
            args, "revokePodInterval", ElasticQuotaArgs.revoke_pod_interval
        ),
        monitor_all_quotas=_flag(args, "monitorAllQuotas", ElasticQuotaArgs.monitor_all_quotas),
        enable_runtime_quota=_flag(
            args, "enableRuntimeQuota", ElasticQuotaArgs.enable_runtime_quota
        ),
    )


# -- resource lists as quotav1 handles them -----------------------------------------------------


def less_than_or_equal(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """quotav1.LessThanOrEqual: every resource of ``b`` that ``a`` also has is no larger in
    ``a``; a resource missing on either side is not compared."""
    return all(a[name] <= limit for name, limit in b.items() if name in a)


def mask(amounts: Mapping[str, int], names: Iterable[str]) -> Resources:
    """quotav1.Mask: only the named resources."""
    keep = set(names)
    return {name: amount for name, amount in amounts.items() if name in keep}


# -- which pod matters more ---------------------------------------------------------------------


def pod_priority(pod: Object) -> int:
    """corev1helpers.PodPriority: ``spec.priority``, 0 where unset."""
    return spec_priority(pod) or 0


def pod_start_time(pod: Object) -> float:
    """The scheduler's GetPodStartTime in epoch seconds: ``status.startTime``, else (a pod
    bound but not started) ``metadata.creationTimestamp``; Go's zero time without either."""
    started = parse_time((pod.get("status") or {}).get("startTime"))
    if started is None:
        started = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return _ZERO_TIME if started is None else started


def more_important(a: Object, b: Object) -> bool:
    """k8s.io/kubernetes/pkg/scheduler/util.MoreImportantPod: the higher priority; at equal
    priority the one that started earlier (two equal pods: neither)."""
    priority_a, priority_b = pod_priority(a), pod_priority(b)
    if priority_a != priority_b:
        return priority_a > priority_b
    return pod_start_time(a) < pod_start_time(b)


def non_preemptible(pod: Object) -> bool:
    """extension.IsPodNonPreemptible: the label ``quota.scheduling.koordinator.sh/preemptible``
    is exactly ``"false"``."""
    return pod_non_preemptible(pod)


# -- the pods to evict --------------------------------------------------------------------------


def _request_names(pod: Object, request: Mapping[str, int]) -> set[str]:
    """quotav1.ResourceNames(PodRequests(pod)): Kubernetes' PodRequests keeps a resource a pod
    lists at zero, which ``pod_request`` leaves out; Mask keeps it in used."""
    spec = pod.get("spec") or {}
    names = set(request)
    listed = [spec.get("overhead"), (spec.get("resources") or {}).get("requests")]
    for section in ("containers", "initContainers"):
        for container in spec.get(section) or ():
            listed.append(((container or {}).get("resources") or {}).get("requests"))
    for amounts in listed:
        if isinstance(amounts, Mapping):
            names.update(str(name) for name in amounts)
    return names


def pods_to_revoke(
    pods: Sequence[Object], used: Mapping[str, int], runtime: Mapping[str, int]
) -> list[Object]:
    """Koordinator's getToRevokePodList: the pods of an over-used quota to evict.

    ``pods`` are the quota's assigned pods (GetPodThatIsAssigned: bound, not finished),
    ``used`` and ``runtime`` the quota's. From the least important pod up
    (``more_important``), preemptible pods are taken until used fits the runtime; if it never
    does, all taken are returned, least important first. Otherwise they are given back from
    the most important taken one down, each kept where used with it still fits; those that do
    not fit are returned, most important first.

    The resource arithmetic is quotav1's, quirks included: taking a pod masks used to the
    resources that pod requests (a resource it does not ask for is no longer checked), and a
    pod that does not fit when given back is subtracted without that mask. A pod whose
    request does not read is skipped: it is not counted in used either.
    """
    entries: list[tuple[Object, Resources, set[str]]] = []
    for pod in pods:
        try:
            request = pod_request(pod)
        except (ModelError, TypeError, AttributeError):
            continue
        entries.append((pod, request, _request_names(pod, request)))
    # least important first: sort.Slice by !MoreImportantPod (ties keep the given order here;
    # Go's unstable sort leaves them in any order)
    entries.sort(key=lambda entry: (pod_priority(entry[0]), -pod_start_time(entry[0])))

    left: Resources = dict(used)
    taken: list[tuple[Object, Resources, set[str]]] = []
    for entry in entries:
        if less_than_or_equal(left, runtime):
            break
        if non_preemptible(entry[0]):
            continue
        left = mask(subtract(left, entry[1]), entry[2])
        taken.append(entry)
    if not less_than_or_equal(left, runtime):
        return [pod for pod, _, _ in taken]

    revoked: list[Object] = []
    for pod, request, names in reversed(taken):
        left = mask(add(left, request), names)
        if not less_than_or_equal(left, runtime):
            left = subtract(left, request)
            revoked.append(pod)
    return revoked


# -- when a quota has been over-used long enough ----------------------------------------------


@dataclass
class OverUseMonitor:
    """One quota's QuotaOverUsedGroupMonitor: when its used was last within its runtime, and
    whether it was over at the last check."""

    delay: float
    """delayEvictTime in seconds."""
    last_under_used: float
    """Koordinator's lastUnderUsedTime: the caller's clock when the monitor was made, then at
    each check that found the quota within its runtime or fired."""
    over_used: bool = False

    def check(self, used: Mapping[str, int], runtime: Mapping[str, int], now: float) -> bool:
        """QuotaOverUsedGroupMonitor.monitor at time ``now``: whether the quota has been over
        its runtime for longer (strictly) than the delay; firing restarts the count."""
        self.over_used = not less_than_or_equal(used, runtime)
        if not self.over_used:
            self.last_under_used = now
            return False
        if now - self.last_under_used > self.delay:
            self.last_under_used = now
            return True
        return False

    def fires_after(self) -> float | None:
        """The time after which a check fires while the quota stays over; None when the last
        check found it within its runtime."""
        return self.last_under_used + self.delay if self.over_used else None


class QuotaRevoker:
    """QuotaOverUsedRevokeController's monitors, one per quota (not thread-safe: one loop
    calls it). ``now`` is the caller's clock, read where a call gives no time of its own."""

    def __init__(self, args: ElasticQuotaArgs, now: Callable[[], float] = time.monotonic) -> None:
        self.args = args
        self.clock = now
        self.monitors: dict[str, OverUseMonitor] = {}

    def due(
        self,
        quotas: Mapping[str, tuple[Mapping[str, int], Mapping[str, int]]],
        now: float | None = None,
    ) -> list[str]:
        """The quotas to reclaim from now, sorted: ``quotas`` maps every quota's name to its
        (used, runtime). Mirrors syncQuota (a monitor for each new quota, starting now; gone
        quotas' monitors dropped; the system and root quotas never watched) and
        getToMonitorQuotas (every monitor checked, those that fire returned)."""
        at = self.clock() if now is None else now
        watched = {name for name in quotas if name not in (SYSTEM_QUOTA, ROOT_QUOTA)}
        for name in list(self.monitors):
            if name not in watched:
                del self.monitors[name]
        for name in watched:
            if name not in self.monitors:
                self.monitors[name] = OverUseMonitor(self.args.delay_evict_time, at)
        return sorted(name for name in watched if self.monitors[name].check(*quotas[name], now=at))

    def next_check(self, now: float | None = None) -> float | None:
        """The earliest time after which a quota over-used at the last ``due`` fires if it
        stays over (never before ``now``): a check strictly later than it reclaims. None when
        no quota was over-used."""
        at = self.clock() if now is None else now
        times = [
            fires
            for monitor in self.monitors.values()
            if (fires := monitor.fires_after()) is not None
        ]
        return max(min(times), at) if times else None
