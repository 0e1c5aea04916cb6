"""SchedLatencyGuard: suppress best-effort pods harder while latency-sensitive pods wait for CPU.

Not a Koordinator strategy (gate ``BESuppressBySchedLatency``, off by default). It reads the
run-queue latency the SchedLatencyCollector stores per pod (``pod_runq_latency_p99{pod_uid}``,
microseconds over each collector window) and, when an LSE/LSR/LS pod's p99 *stays* above a
threshold, lowers CPUSuppress's ``cpuSuppressThresholdPercent`` for a while through a shared
``SuppressBoost``. Its config is a NodeSLO extension (free-form, so it lives under
``spec.extensions``)::

    extensions:
      schedLatency:
        enable: true
        p99ThresholdMicroseconds: 5000   # a pod breaches above this
        windowSeconds: 30                # ... for this long
        holdSeconds: 60                  # the boost lasts this long after the last breach
        cpuSuppressThresholdPercent: 30  # what CPU suppress uses while boosted

"Stays above" means: the pod's samples in the last ``windowSeconds`` cover at least half of
it (count x the collector interval), the newest is fresh (at most two collector intervals
old), and every one of them (their minimum) is above the threshold. A single slow window is
therefore never enough. Each run with a breach pushes the boost's end to now + holdSeconds;
the audit trail gets an action only when a boost starts (or starts again after it lapsed),
not every second. Stale or missing latency, a malformed config, or a CPU suppress that is not
in effect mean no boost, and the strategy's status says which.

Usage::

    boost = SuppressBoost()
    strategies = [CPUSuppress(executor, boost=boost), SchedLatencyGuard(boost)]
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koordapi.features import FeatureGates
from koordapi.qos import KubeQoS, QoSClass, default_qos_for_kube
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context, is_be, pod_labels
from koordlet.states.pods import KnownPod

NAME = "SchedLatencyGuard"
GATE = "BESuppressBySchedLatency"
CONFIG_PATH = "spec.extensions.schedLatency"
P99_METRIC = "pod_runq_latency_p99"
DEFAULT_SAMPLE_INTERVAL = 10.0  # the SchedLatencyCollector's default (--sched-latency-interval)
GUARDED = frozenset({QoSClass.LSE, QoSClass.LSR, QoSClass.LS})
MAX_WINDOW_SECONDS = 3600
MAX_HOLD_SECONDS = 86400
DEFAULT_SUPPRESS_PERCENT = 65  # the NodeSLO default of cpuSuppressThresholdPercent


class SuppressBoost:
    """A lowered CPU suppress threshold until a deadline; shared by the guard and CPUSuppress.

    Thread-safe: the two strategies run in different worker threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0
        self._threshold_percent = 0
        self._reason = ""

    def activate(self, until: float, threshold_percent: int, reason: str) -> None:
        """Boost until ``until`` (unix time); a later call replaces the end, threshold, reason."""
        with self._lock:
            self._until = until
            self._threshold_percent = threshold_percent
            self._reason = reason

    def clear(self) -> None:
        with self._lock:
            self._until = 0.0

    def current(self, now: float) -> tuple[int, str] | None:
        """(the lowered cpuSuppressThresholdPercent, why) while active, else None."""
        with self._lock:
            if now >= self._until:
                return None
            return self._threshold_percent, self._reason

    def until(self) -> float:
        with self._lock:
            return self._until


@dataclass(frozen=True)
class SchedLatencyConfig:
    enable: bool = False
    p99_threshold_us: int = 5000
    window_seconds: int = 30
    hold_seconds: int = 60
    cpu_suppress_threshold_percent: int = 30


# JSON name -> (attribute, lowest, highest) of the integer fields.
_INT_FIELDS: Mapping[str, tuple[str, int, int]] = {
    "p99ThresholdMicroseconds": ("p99_threshold_us", 1, 10**9),
    "windowSeconds": ("window_seconds", 1, MAX_WINDOW_SECONDS),
    "holdSeconds": ("hold_seconds", 1, MAX_HOLD_SECONDS),
    "cpuSuppressThresholdPercent": ("cpu_suppress_threshold_percent", 0, 100),
}


def parse_config(raw: Mapping[str, Any]) -> SchedLatencyConfig | str:
    """The guard's config from a merged NodeSLO spec, or why it is malformed (naming the field).

    An absent section is the defaults (disabled). Unknown keys are errors: a misspelt field
    would otherwise silently keep its default.
    """
    extensions = raw.get("extensions")
    if extensions is None:
        return SchedLatencyConfig()
    if not isinstance(extensions, Mapping):
        return f"spec.extensions must be an object, got {type(extensions).__name__}"
    section = extensions.get("schedLatency")
    if section is None:
        return SchedLatencyConfig()
    if not isinstance(section, Mapping):
        return f"{CONFIG_PATH} must be an object, got {type(section).__name__}"
    values: dict[str, Any] = {}
    for key, value in section.items():
        where = f"{CONFIG_PATH}.{key}"
        if value is None:
            continue  # null keeps the default, as everywhere in the NodeSLO
        if key == "enable":
            if not isinstance(value, bool):
                return f"{where} must be true or false, got {value!r}"
            values["enable"] = value
            continue
        field = _INT_FIELDS.get(key)
        if field is None:
            known = ", ".join(["enable", *_INT_FIELDS])
            return f"{where} is not a known field (known: {known})"
        attr, lo, hi = field
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{where} must be an integer, got {value!r}"
        if not lo <= value <= hi:
            return f"{where} {value} is outside [{lo}, {hi}]"
        values[attr] = value
    return SchedLatencyConfig(**values)


def guarded_class(known: KnownPod) -> QoSClass | None:
    """The pod's class when it is LSE, LSR or LS (the Kubernetes QoS standing in for a pod
    without the label, as the SchedLatencyCollector reports it); None for BE and the rest."""
    if is_be(known):
        return None
    pod = known.request
    qos = pod.qos if pod.qos.value else default_qos_for_kube(pod.kube_qos)
    return qos if qos in GUARDED else None


@dataclass(frozen=True)
class Breach:
    """One pod whose run-queue p99 stayed above the threshold over the window."""

    known: KnownPod
    qos: QoSClass
    count: int
    lowest_us: float
    last_us: float

    def explain(self, config: SchedLatencyConfig) -> str:
        return (
            f"{self.qos.value} pod {self.known.request.key} run-queue p99"
            f" {_ms(self.last_us)} > {_ms(config.p99_threshold_us)}"
            f" for {config.window_seconds} s ({self.count} samples, lowest {_ms(self.lowest_us)})"
        )


def _ms(micros: float) -> str:
    return f"{micros / 1000:.1f} ms"


class SchedLatencyGuard:
    """See the module docstring."""

    name = NAME

    def __init__(
        self,
        boost: SuppressBoost,
        *,
        interval: float = 1.0,
        sample_interval: float = DEFAULT_SAMPLE_INTERVAL,
    ) -> None:
        self.boost = boost
        self.interval = interval
        self.sample_interval = sample_interval  # how often the collector stores a window

    def enabled(self, gates: FeatureGates) -> bool:
        return gates.enabled(GATE)

    def run(self, ctx: Context) -> None:
        config = parse_config(ctx.rules.slo.raw)
        if isinstance(config, str):
            self.boost.clear()
            ctx.status(NAME, f"no action: bad config: {config}")
            return
        if not config.enable:
            self.boost.clear()
            ctx.status(NAME, f"off: {CONFIG_PATH}.enable is not true")
            return
        suppress_off = _suppress_off(ctx)
        if suppress_off:
            self.boost.clear()
            ctx.status(NAME, f"no action: CPU suppress is not in effect ({suppress_off})")
            return
        pods = [(k, q) for k in ctx.pods if (q := guarded_class(k)) is not None]
        if not pods:
            ctx.status(NAME, "no action: no LSE/LSR/LS pods")
            return
        breaches: list[Breach] = []
        fresh = 0
        for known, qos in pods:
            found = self._check(ctx, config, known, qos)
            if found is None:
                continue  # stale or missing: no verdict for this pod
            fresh += 1
            if isinstance(found, Breach):
                breaches.append(found)
        if fresh == 0:
            ctx.status(NAME, self._no_data(ctx, len(pods)) + self._holding(ctx))
            return
        if not breaches:
            ctx.status(NAME, self._quiet(config, fresh, len(pods)) + self._holding(ctx))
            return
        self._boost(ctx, config, breaches)

    # -- per pod ------------------------------------------------------------------------------

    def _check(
        self, ctx: Context, config: SchedLatencyConfig, known: KnownPod, qos: QoSClass
    ) -> Breach | bool | None:
        """A Breach; False when the pod's data is fresh but below (or not covering) the
        window; None when it is stale or missing."""
        labels = pod_labels(known)
        agg = ctx.window(P99_METRIC, config.window_seconds, labels)
        if agg is None or ctx.now - agg.last_ts > 2 * self.sample_interval:
            return None
        threshold = config.p99_threshold_us
        if agg.count * self.sample_interval < config.window_seconds / 2:
            return False  # not enough windows to say "stays above"
        if agg.last <= threshold or agg.p50 <= threshold:
            return False  # both are samples: not every sample is above
        lowest = self._lowest(ctx, labels, ctx.now - config.window_seconds, agg.last_ts, threshold)
        if lowest is None or lowest <= threshold:
            return False
        return Breach(known, qos, agg.count, lowest, agg.last)

    @staticmethod
    def _lowest(
        ctx: Context, labels: Mapping[str, str], start: float, end: float, threshold: float
    ) -> float | None:
        """The smallest sample in [start, end], read newest first through the metric cache's
        aggregates (each step ends just before the previous newest sample); stops early at
        the first sample at or below ``threshold``."""
        lowest: float | None = None
        while end >= start:
            agg = ctx.cache.aggregate(P99_METRIC, labels, start, end)
            if agg is None:
                break
            lowest = agg.last if lowest is None else min(lowest, agg.last)
            if lowest <= threshold or agg.count == 1:
                break
            end = math.nextafter(agg.last_ts, -math.inf)
        return lowest

    # -- outcomes -----------------------------------------------------------------------------

    def _boost(self, ctx: Context, config: SchedLatencyConfig, breaches: list[Breach]) -> None:
        slo_percent = int(
            ctx.rules.slo.threshold.get("cpuSuppressThresholdPercent", DEFAULT_SUPPRESS_PERCENT)
        )
        boosted = config.cpu_suppress_threshold_percent
        breaches.sort(key=lambda b: (-b.lowest_us, b.known.request.key))
        worst = breaches[0]
        why = worst.explain(config)
        if len(breaches) > 1:
            why += f" (and {len(breaches) - 1} more pods)"
        if slo_percent <= boosted:
            ctx.status(
                NAME,
                f"no action: {why}, but cpuSuppressThresholdPercent {slo_percent}% is already"
                f" at or below {boosted}%",
            )
            return
        lapsed = self.boost.current(ctx.now) is None
        self.boost.activate(ctx.now + config.hold_seconds, boosted, why)
        reason = (
            f"{why}: BE CPU suppress threshold {slo_percent}% -> {boosted}%"
            f" for {config.hold_seconds} s"
        )
        if lapsed:
            ctx.record(
                Action(
                    ctx.now,
                    NAME,
                    "boost",
                    ctx.qos_dirs[KubeQoS.BESTEFFORT],
                    str(boosted),
                    reason,
                    scope=QoSClass.BE.value,
                    inputs={
                        "pod": worst.known.request.key,
                        "pod_uid": worst.known.request.uid,
                        "p99_us": worst.last_us,
                        "lowest_p99_us": worst.lowest_us,
                        "samples": worst.count,
                        "threshold_us": config.p99_threshold_us,
                        "window_seconds": config.window_seconds,
                        "hold_seconds": config.hold_seconds,
                        "slo_threshold_percent": slo_percent,
                        "boost_threshold_percent": boosted,
                        "breaching_pods": len(breaches),
                    },
                )
            )
        ctx.status(NAME, f"boosting: {reason}")

    def _no_data(self, ctx: Context, pods: int) -> str:
        if not ctx.cache.series(P99_METRIC):
            return (
                f"no action: no {P99_METRIC} samples at all (is the SchedLatencyCollector running?)"
            )
        return (
            f"no action: run-queue latency of all {pods} LSE/LSR/LS pods is stale or missing"
            f" (no sample in the last {2 * self.sample_interval:g} s)"
        )

    @staticmethod
    def _quiet(config: SchedLatencyConfig, fresh: int, pods: int) -> str:
        return (
            f"watching {fresh} of {pods} LSE/LSR/LS pods: no run-queue p99 above"
            f" {_ms(config.p99_threshold_us)} for {config.window_seconds} s"
        )

    def _holding(self, ctx: Context) -> str:
        """A note on a boost still holding after its last breach; "" when none."""
        active = self.boost.current(ctx.now)
        if active is None:
            return ""
        # No countdown: the status is logged whenever its text changes.
        return f"; boost to {active[0]}% still holding after: {active[1]}"


def _suppress_off(ctx: Context) -> str:
    """Why CPUSuppress would not apply a lowered threshold now; "" when it would."""
    gates = ctx.rules.gates
    if not gates.enabled("BECPUSuppress"):
        return "gate BECPUSuppress is off"
    if gates.enabled("BECPUManager"):
        return "BECPUManager owns BE cpusets"
    if not ctx.rules.slo.threshold.get("enable"):
        return "resourceUsedThresholdWithBE.enable is false"
    return ""
