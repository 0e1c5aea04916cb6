"""Koordinator's koordlet series that are built from koordlet's state on each scrape, and the
census of the ones not exported here.

Koordinator's koordlet (pkg/koordlet/metrics) sets these gauges as it goes; here they are read
from what koordlet already holds when Prometheus asks, so nothing is stored twice and a gone
pod's series goes with it: the last pass of the PSI and CPI collectors, the node's allocatable
(the Node's status, or the NodeSLO file's node section), the pods' extended-resource-spec
annotations, the metric cache (BE usage), the share pools of the current rules and the
oom_score_adj koordlet gave each container. Names, types, label names and units are
Koordinator's; the metrics updated where things happen are in koordlet/metrics.py.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from koordapi import keys
from koordapi.annotation import parse_extended_resource_spec
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.metriccache import MetricCache, Sample
from koordlet.metrics import KoordletMetrics
from koordlet.states.pods import KnownPod
from runtimehooks.rules import Rules

log = logging.getLogger(__name__)

# Koordinator's koordlet series that are not exported here, and why: everything else of
# pkg/koordlet/metrics is (tests/unit/koordlet/test_koordseries.py holds upstream's list).
NOT_MEASURED = {
    "koordlet_collect_node_local_storage_info_status": (
        "no local-storage collector: the node's disks and LVM volume groups are not read"
    ),
    "koordlet_container_core_sched_cookie": (
        "the kernel's cookie value is never read back (PR_SCHED_CORE_GET); the group a "
        "container's cookie belongs to is in koordctl explain"
    ),
    "koordlet_host_application_resource_usage": (
        "NodeSLO hostApplications are not collected: no host-application cgroups are read"
    ),
    "koordlet_node_predicted_resource_peak": (
        "the peak predictor reports what its peaks leave (prodReclaimableMetric, "
        "koordlet_node_predicted_resource_reclaimable), not the peaks; Koordinator v1.8 declares "
        "this gauge and never sets it either"
    ),
    "koordlet_resctrl_llc_occupancy": (
        "resctrl monitoring groups (mon_data) are not read: resctrl is only written (L3 CAT, MBA)"
    ),
    "koordlet_resctrl_memory_bandwidth": (
        "resctrl monitoring groups (mon_data) are not read: resctrl is only written (L3 CAT, MBA)"
    ),
    "koordlet_node_metric_numa_node_usage": "the NodeMetric report has no per-NUMA usage",
    "koordlet_node_metric_numa_system_usage": "the NodeMetric report has no per-NUMA usage",
}

# Extended resources Koordinator reports for the node and its containers, with the unit label
# it gives them (an integer of milli-cores for cpu, bytes for memory).
EXTENDED = {
    keys.BATCH_CPU: "integer",
    keys.BATCH_MEMORY: "byte",
    keys.MID_CPU: "integer",
    keys.MID_MEMORY: "byte",
}
CPI_FIELDS = ("cycles", "instructions")  # Koordinator's; our "cpi" ratio is not among them
BE_USED_FRESH_SECONDS = 10.0
INT64_MAX = 2**63 - 1

POD_LABELS = ["pod_uid", "pod_name", "pod_namespace"]


@dataclass(frozen=True)
class Sources:
    """Where the series come from; a collector that is off is None."""

    pods: Callable[[], Iterable[KnownPod]]
    cache: MetricCache
    allocatable: Callable[[], Mapping[str, int]]
    rules: Callable[[], Rules]
    oom_scores: Mapping[tuple[str, str], int]
    psi: Callable[[], list[Sample]] | None = None
    cpi: Callable[[], list[Sample]] | None = None


class KoordinatorSeries:
    """A registry collector; see the module docstring."""

    def __init__(
        self, metrics: KoordletMetrics, sources: Sources, clock: Callable[[], float] = time.time
    ) -> None:
        self.metrics = metrics
        self.node = metrics.node
        self.sources = sources
        self.clock = clock
        self.failures = 0  # parts left out of a scrape (logged once per distinct error)
        self._last_error = ""

    def describe(self) -> list[Metric]:
        return []  # built per scrape; nothing to register up front

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        self.metrics.expire_eviction_details(now)
        pods = {known.request.uid: known for known in self.sources.pods()}
        parts: list[Callable[[], Iterable[Metric]]] = [
            lambda: self._psi(pods),
            lambda: [self._cpi(pods)],
            lambda: [self._node_allocatable()],
            lambda: self._container_resources(pods.values()),
            lambda: [self._be_used(now)],
            self._share_pools,
            lambda: [self._oom_scores(pods)],
        ]
        for part in parts:
            # One part that trips over what it reads loses its families for this scrape, never
            # the whole /metrics answer (a 500 there would hide every other series).
            try:
                built = list(part())
            except Exception as err:
                self._failed(err)
                continue
            yield from built

    def _failed(self, err: Exception) -> None:
        text = f"{type(err).__name__}: {err}"
        if text != self._last_error:
            log.warning("a Koordinator series could not be built for this scrape: %s", text)
            self._last_error = text
        self.failures += 1

    # -- per pod and container ----------------------------------------------------------------

    def _names(self, pods: Mapping[str, KnownPod], labels: Mapping[str, str]) -> list[str] | None:
        """[pod_uid, pod_name, pod_namespace] (+ [container_id, container_name]) of a
        sample's pod (and container); None when koordlet no longer knows it."""
        known = pods.get(labels.get("pod_uid", ""))
        if known is None:
            return None
        pod = known.request
        out = [pod.uid, pod.name, pod.namespace]
        container_id = labels.get("container_id")
        if container_id is not None:
            container = known.containers.get(container_id)
            if container is None:
                return None
            out += [container_id, container.name]
        return out

    def _psi(self, pods: Mapping[str, KnownPod]) -> Iterator[Metric]:
        extra = ["psi_resource_type", "psi_precision", "psi_degree", "cpu_full_supported"]
        families = {
            "container": GaugeMetricFamily(
                "koordlet_container_psi",
                "Container psi collected by koordlet",
                labels=["node", *POD_LABELS, "container_id", "container_name", *extra],
            ),
            "pod": GaugeMetricFamily(
                "koordlet_pod_psi",
                "Pod psi collected by koordlet",
                labels=["node", *POD_LABELS, *extra],
            ),
        }
        samples = self.sources.psi() if self.sources.psi is not None else []

        # Koordinator's cpu_full_supported: whether that pressure file has a "full" line
        def file_of(s: Sample) -> tuple[str, str | None, str, str]:
            return (s.name, s.labels.get("container_id"), s.labels["pod_uid"],
                    s.labels["psi_resource_type"])  # fmt: skip

        full = {file_of(s) for s in samples if s.labels["psi_degree"] == "full"}
        for sample in samples:
            names = self._names(pods, sample.labels)
            if names is None:
                continue
            labels = sample.labels
            resource = labels["psi_resource_type"]
            families[sample.name.removesuffix("_psi")].add_metric(
                [
                    self.node,
                    *names,
                    resource,
                    labels["psi_precision"],
                    labels["psi_degree"],
                    "true" if file_of(sample) in full else "false",
                ],
                sample.value,
            )
        yield from families.values()

    def _cpi(self, pods: Mapping[str, KnownPod]) -> Metric:
        family = GaugeMetricFamily(
            "koordlet_container_cpi",
            "Container cpi collected by koordlet",
            labels=["node", *POD_LABELS, "container_id", "container_name", "cpi_field"],
        )
        for sample in self.sources.cpi() if self.sources.cpi is not None else []:
            field = sample.labels.get("cpi_field")
            names = self._names(pods, sample.labels)
            if field in CPI_FIELDS and names is not None:
                family.add_metric([self.node, *names, field], sample.value)
        return family

    def _container_resources(self, pods: Iterable[KnownPod]) -> Iterator[Metric]:
        labels = ["node", "resource", "unit", *POD_LABELS, "container_id", "container_name"]
        requests = GaugeMetricFamily(
            "koordlet_container_resource_requests",
            "the container requests of resources updated by koordinator",
            labels=labels,
        )
        limits = GaugeMetricFamily(
            "koordlet_container_resource_limits",
            "the container limits of resources updated by koordinator",
            labels=labels,
        )
        for known in pods:
            pod = known.request
            text = pod.annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
            if not text:
                continue
            try:
                specs = parse_extended_resource_spec(text)
            except ModelError:
                continue  # the BE collector counts it as malformed-annotation
            for container_id, container in known.containers.items():
                spec = specs.get(container.name)
                if spec is None or container.sandbox:
                    continue
                for family, amounts in ((requests, spec.requests), (limits, spec.limits)):
                    for resource, unit in EXTENDED.items():
                        # an amount past int64 is no quantity Kubernetes would hold (the
                        # BatchResource hook fails on it and counts that): no sample
                        if resource in amounts and amounts[resource] <= INT64_MAX:
                            family.add_metric(
                                [self.node, resource, unit, pod.uid, pod.name, pod.namespace,
                                 container_id, container.name],
                                float(math.ceil(amounts[resource])),
                            )  # fmt: skip
        yield from (requests, limits)

    def _oom_scores(self, pods: Mapping[str, KnownPod]) -> Metric:
        family = GaugeMetricFamily(
            "koordlet_container_oom_score_adj",
            "the oom_score_adj value set for the container",
            labels=["node", "pod_name", "pod_namespace", "pod_uid", "container_name"],
        )
        # the reconciler forgets gone containers; one that went since its last pass is skipped
        for (uid, container_id), value in list(self.sources.oom_scores.items()):
            names = self._names(pods, {"pod_uid": uid, "container_id": container_id})
            if names is None:
                continue
            family.add_metric([self.node, names[1], names[2], uid, names[4]], float(value))
        return family

    # -- node -----------------------------------------------------------------------------------

    def _node_allocatable(self) -> Metric:
        family = GaugeMetricFamily(
            "koordlet_node_resource_allocatable",
            "the node allocatable of resources updated by koordinator",
            labels=["node", "resource", "unit"],
        )
        allocatable = self.sources.allocatable()
        for resource, unit in EXTENDED.items():
            if resource in allocatable and allocatable[resource] <= INT64_MAX:
                family.add_metric([self.node, resource, unit], float(allocatable[resource]))
        return family

    def _be_used(self, now: float) -> Metric:
        family = GaugeMetricFamily(
            "koordlet_be_suppress_be_used_cpu_cores",
            "Number of cpu cores used by BE.",
            labels=["node"],
        )
        usage = {"be_resource": "cpu", "be_allocation": "usage"}  # milli-cores (collectors/be)
        milli = self.sources.cache.last("node_be", usage, now, BE_USED_FRESH_SECONDS)
        if milli is not None:
            family.add_metric([self.node], milli / 1000)
        return family

    def _share_pools(self) -> Iterator[Metric]:
        node = self.sources.rules().node
        for prefix, kind, pools in (
            ("cpuset_share_pool", "share", node.ls_pools),
            ("cpuset_be_share_pool", "be share", node.be_pools),
        ):
            cpus = sorted(frozenset[int]().union(*(parse_cpuset(p.cpuset) for p in pools)))
            cores = GaugeMetricFamily(
                f"koordlet_{prefix}_cpu_cores", f"Number of {kind} pool cores", labels=["node"]
            )
            cores.add_metric([self.node], float(len(cpus)))
            info = GaugeMetricFamily(
                f"koordlet_{prefix}_info",
                f"Whether the CPU is in the {kind} pool (1 = in pool)",
                labels=["node", "cpu"],
            )
            for cpu in cpus:
                info.add_metric([self.node, str(cpu)], 1.0)
            yield from (cores, info)
