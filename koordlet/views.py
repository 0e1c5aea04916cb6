"""What koordlet shows about itself: the node, its pods with applied values and usage, the
NodeMetric report and metric queries. The HTTP server serves these; ``koordctl`` reads them.

Read-only: applied values are read back from the cgroup files, usage from the metric cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from koordapi.cpuset import format_cpuset
from koordapi.qos import KubeQoS, default_qos_for_kube
from koordlet.executor import Executor
from koordlet.metriccache import MetricCache
from koordlet.nodemetric import build_status
from koordlet.qosmanager.audit import AuditTrail
from koordlet.states.pods import PodStore
from koordlet.states.topology import Topology
from runtimehooks.rules import KernelFeatures

POD_FILES = ("cpu.shares", "cpu.cfs_quota_us", "cpu.idle", "cpuset.cpus", "memory.limit_in_bytes")
CONTAINER_FILES = ("cpu.shares", "cpu.cfs_quota_us", "cpuset.cpus", "memory.limit_in_bytes")
FRESH_SECONDS = 10.0  # usage older than this is not shown as current


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
        executor: Executor,
        topology: Topology,
        kernel: KernelFeatures,
        health: Callable[[], Mapping[str, Any]],
        audit: AuditTrail | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node_name = node_name
        self.store = pods
        self.cache = cache
        self.executor = executor
        self.topology = topology
        self.kernel = kernel
        self.health = health
        self.audit = audit or AuditTrail()
        self.clock = clock

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
        """A pod (by uid, namespace/name or name), its applied values and why they are so."""
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
        }

    def node_metric(self) -> dict[str, Any]:
        return build_status(self.cache, self.store, self.clock())

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
