"""What koordlet shows about itself: the node, its pods with applied values and usage, the
NodeMetric report, metric queries and run-queue latency (``inspect``). The HTTP server serves
these; ``koordctl`` reads them.

Read-only: applied values are read back from the cgroup files (``executor``: any
``koordlet.cgroupfs.resources.CgroupReader``; the daemon passes its executor, which is one),
usage from the metric cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from koordapi.cpuset import format_cpuset
from koordapi.qos import KubeQoS, default_qos_for_kube
from koordlet.cgroupfs.resources import CgroupReader
from koordlet.inspect import histogram
from koordlet.inspect.schedlat import GATE as SCHED_LATENCY_GATE
from koordlet.inspect.schedlat import NAME as SCHED_LATENCY
from koordlet.inspect.schedlat import PodLatency, SchedLatencyState
from koordlet.metriccache import MetricCache
from koordlet.nodemetric import Reclaimable, build_status
from koordlet.nri.conflicts import ConflictTracker
from koordlet.qosmanager.audit import AuditTrail
from koordlet.states.pods import PodStore
from koordlet.states.topology import Topology
from runtimehooks.rules import KernelFeatures

POD_FILES = ("cpu.shares", "cpu.cfs_quota_us", "cpu.idle", "cpuset.cpus", "memory.limit_in_bytes")
CONTAINER_FILES = ("cpu.shares", "cpu.cfs_quota_us", "cpuset.cpus", "memory.limit_in_bytes")
FRESH_SECONDS = 10.0  # usage older than this is not shown as current
# PSI and CPI come every 10 s and 60 s (+ a 10 s counting window) by default: three intervals
PSI_FRESH_SECONDS = 30.0
CPI_FRESH_SECONDS = 210.0
PSI_CPU_SOME = {"psi_resource_type": "cpu", "psi_precision": "avg10", "psi_degree": "some"}
GATE_OFF = (
    f"the {SCHED_LATENCY_GATE} feature gate is off "
    f"(--feature-gates={SCHED_LATENCY_GATE}=true turns it on)"
)


def _plain(value: object) -> object:
    if isinstance(value, frozenset):
        return format_cpuset(value)
    return value


class KoordletViews:
    def __init__(
        self,
        *,
        node_name: str,
        pods: PodStore,
        cache: MetricCache,
        executor: CgroupReader,
        topology: Topology,
        kernel: KernelFeatures,
        health: Callable[[], Mapping[str, Any]],
        audit: AuditTrail | None = None,
        schedlat: Callable[[], SchedLatencyState] | None = None,
        clock: Callable[[], float] = time.time,
        conflicts: ConflictTracker | None = None,
    ) -> None:
        """``schedlat`` gives the run-queue latency collector's state; None: the gate is off.
        Whether the collector could start is in ``health()`` under its name. ``conflicts``:
        the NRI conflicts recorded per pod (explain shows them)."""
        self.node_name = node_name
        self.store = pods
        self.cache = cache
        self.executor = executor
        self.topology = topology
        self.kernel = kernel
        self.health = health
        self.audit = audit or AuditTrail()
        self.schedlat = schedlat
        self.clock = clock
        self.conflicts = conflicts
        # the peak predictor's prodReclaimable (set by the daemon; None: not reported)
        self.reclaimable: Reclaimable | None = None

    def _last(self, name: str, labels: Mapping[str, str]) -> float | None:
        return self.cache.last(name, labels, self.clock(), FRESH_SECONDS)

    def _applied(self, cgroup: str, files: tuple[str, ...]) -> dict[str, object]:
        return {f: _plain(self.executor.read(cgroup, f)) for f in files if cgroup}

    def node(self) -> dict[str, Any]:
        return {
            "name": self.node_name,
            "cpus": len(self.topology.cpus),
            "memory_bytes": self.topology.memory_bytes,
            "usage": {
                "cpu": self._last("node_cpu_usage", {}),
                "memory": self._last("node_memory_usage", {}),
            },
            "system_usage": {
                "cpu": self._last("sys_cpu_usage", {}),
                "memory": self._last("sys_memory_usage", {}),
            },
            "kernel": {
                **asdict(self.kernel),
                "group_identity": self.kernel.group_identity_mechanism,
            },
            "collectors": dict(self.health()),
        }

    def pods(self) -> list[dict[str, Any]]:
        out = []
        for known in self.store:
            pod = known.request
            labels = {"pod_uid": pod.uid}
            containers = [
                {
                    "id": c.id,
                    "name": c.name,
                    "applied": self._applied(c.cgroup_dir, CONTAINER_FILES),
                    "usage": {
                        "cpu": self._last("container_cpu_usage", {**labels, "container_id": c.id}),
                        "memory": self._last(
                            "container_memory_usage", {**labels, "container_id": c.id}
                        ),
                    },
                }
                for c in known.containers.values()
            ]
            out.append(
                {
                    "uid": pod.uid,
                    "name": pod.name,
                    "namespace": pod.namespace,
                    "qos": pod.qos.value or "none",
                    "kube_qos": pod.kube_qos.value,
                    "cgroup": pod.cgroup_dir,
                    "applied": self._applied(pod.cgroup_dir, POD_FILES),
                    "usage": {
                        "cpu": self._last("pod_cpu_usage", labels),
                        "memory": self._last("pod_memory_usage", labels),
                    },
                    "containers": containers,
                }
            )
        return out

    def explain(self, pod: str) -> dict[str, Any] | None:
        """A pod (by uid, namespace/name or name), its applied values and why they are so, and
        the values of its containers another NRI plugin or the kubelet changed (conflicts)."""
        found = next(
            (p for p in self.pods() if pod in (p["uid"], f"{p['namespace']}/{p['name']}")), None
        ) or next((p for p in self.pods() if p["name"] == pod), None)
        if found is None:
            return None
        qos = found["qos"]
        if qos == "none":  # no class label: the strategies treat it by its Kubernetes QoS
            qos = default_qos_for_kube(KubeQoS(found["kube_qos"])).value
        actions = self.audit.for_pod(found["uid"], qos)
        statuses = self.audit.statuses()
        return {
            **found,
            "actions": [a.as_dict() for a in actions],
            "strategies": {name: asdict(status) for name, status in sorted(statuses.items())},
            "conflicts": [] if self.conflicts is None else self.conflicts.for_pod(found["uid"]),
        }

    # -- run-queue latency ----------------------------------------------------------------------

    def inspect(self, pod: str | None = None) -> dict[str, Any] | None:
        """Run-queue latency of every pod, class and the node over the latest window; with
        ``pod`` (uid, namespace/name or name) that pod's row, histograms and containers, or
        None when the collector runs and knows no such pod. While the collector is off, the
        answer is ``available: false`` with the reason, pod or not."""
        reason = self._schedlat_off()
        if reason or self.schedlat is None:
            return {
                "available": False,
                "reason": reason,
                "window_seconds": 0.0,
                "pods": [],
                "classes": {},
                "node": _latency(None),
            }
        state = self.schedlat()
        if pod is not None:
            found = _find(state, pod)
            return None if found is None else self._pod_detail(state, found)
        cpi = self._pod_cpi()
        return {
            "available": True,
            "reason": "",
            "ts": state.ts,
            "window_seconds": state.window_seconds,
            "pods": [self._pod_row(p, cpi) for p in state.pods.values()],
            "classes": {qos: _latency(hist) for qos, hist in sorted(state.classes.items())},
            "node": _latency(state.node),
        }

    def _schedlat_off(self) -> str:
        if self.schedlat is None:
            return GATE_OFF
        health = self.health().get(SCHED_LATENCY) or {}
        return str(health.get("unavailable") or "")

    def _pod_row(self, pod: PodLatency, cpi: Mapping[str, float]) -> dict[str, Any]:
        labels = {"pod_uid": pod.uid}
        now = self.clock()
        return {
            "uid": pod.uid,
            "name": pod.name,
            "namespace": pod.namespace,
            "qos": pod.qos,
            "runq_p50_us": histogram.percentile(pod.window, 0.5),
            "runq_p99_us": histogram.percentile(pod.window, 0.99),
            "waits": histogram.count(pod.window),
            "cpu_cores": self._last("pod_cpu_usage", labels),
            "throttled": self._last("pod_cpu_throttled", labels),
            "psi_cpu_some_avg10": self.cache.last(
                "pod_psi", {**labels, **PSI_CPU_SOME}, now, PSI_FRESH_SECONDS
            ),
            "cpi": cpi.get(pod.uid),
        }

    def _pod_cpi(self) -> dict[str, float]:
        """Each pod's CPI: its containers' fresh cycles over their instructions."""
        now = self.clock()
        sums: dict[str, dict[str, float]] = {}
        for name, labels in self.cache.series("container_cpi"):
            field = labels.get("cpi_field")
            if field not in ("cycles", "instructions"):
                continue
            value = self.cache.last(name, labels, now, CPI_FRESH_SECONDS)
            if value is not None:
                per_pod = sums.setdefault(labels.get("pod_uid", ""), {})
                per_pod[field] = per_pod.get(field, 0.0) + value
        return {
            uid: s["cycles"] / s["instructions"]
            for uid, s in sums.items()
            if s.get("instructions") and "cycles" in s
        }

    def _pod_detail(self, state: SchedLatencyState, pod: PodLatency) -> dict[str, Any]:
        return {
            "available": True,
            "reason": "",
            "ts": state.ts,
            "window_seconds": state.window_seconds,
            **self._pod_row(pod, self._pod_cpi()),
            "histogram": {"window": _slots(pod.window), "total": _slots(pod.total)},
            "containers": [
                {"name": name, **_latency(hist)} for name, hist in sorted(pod.containers.items())
            ],
        }

    def node_metric(self) -> dict[str, Any]:
        return build_status(self.cache, self.store, self.clock(), reclaimable=self.reclaimable)

    def query(
        self, metric: str, window_seconds: float, agg: str, labels: Mapping[str, str]
    ) -> list[dict[str, Any]]:
        now = self.clock()
        results = []
        for name, series_labels in self.cache.series(metric):
            if any(series_labels.get(k) != v for k, v in labels.items()):
                continue
            aggregate = self.cache.aggregate(name, series_labels, now - window_seconds, now)
            if aggregate is not None:
                results.append(
                    {
                        "metric": name,
                        "labels": series_labels,
                        agg: aggregate.get(agg),
                        "count": aggregate.count,
                    }
                )
        return results


def _find(state: SchedLatencyState, pod: str) -> PodLatency | None:
    """By uid or namespace/name first, then by name alone."""
    pods = list(state.pods.values())
    return next((p for p in pods if pod in (p.uid, f"{p.namespace}/{p.name}")), None) or next(
        (p for p in pods if p.name == pod), None
    )


def _latency(hist: Mapping[int, int] | None) -> dict[str, Any]:
    hist = hist or {}
    return {
        "p50_us": histogram.percentile(hist, 0.5),
        "p99_us": histogram.percentile(hist, 0.99),
        "waits": histogram.count(hist),
    }


def _slots(hist: Mapping[int, int]) -> list[dict[str, Any]]:
    """Every slot from the lowest to the highest with waits (empty ones between included)."""
    used = [s for s, n in hist.items() if n > 0]
    if not used:
        return []
    out = []
    for slot in range(min(used), max(used) + 1):
        low, high = histogram.slot_bounds(slot)
        out.append({"slot": slot, "low_us": low, "high_us": high, "count": hist.get(slot, 0)})
    return out
