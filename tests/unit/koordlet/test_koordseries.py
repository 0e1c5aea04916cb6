"""Koordinator's koordlet metrics here: the census of its names (each exported with its type
and label names, or listed as not measured with the reason) and the series built per scrape
(koordlet/koordseries.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from koordapi import keys
from koordapi.annotation import CPUSharedPool
from koordlet.koordseries import NOT_MEASURED, KoordinatorSeries, Sources
from koordlet.metriccache import MetricCache, Sample
from koordlet.metrics import KoordletMetrics
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerResources
from runtimehooks.rules import NodeState, Rules
from tests.unit.koordlet.qosmanager.fakes import known_pod
from tests.unit.koordlet.upstream_metrics import UPSTREAM

NOW = 1_000_000.0
BE_SPEC = {
    "web": {
        "requests": {keys.BATCH_CPU: "1500", keys.BATCH_MEMORY: "1536Mi"},
        "limits": {keys.BATCH_CPU: "2k", keys.BATCH_MEMORY: "2Gi"},
    }
}


def test_the_census_has_koordinators_41_names() -> None:
    assert len(UPSTREAM) == 41
    assert set(NOT_MEASURED) < set(UPSTREAM)  # a reason only for a name Koordinator has


def psi_samples(uid: str, container_id: str | None = None) -> list[Sample]:
    base = {"pod_uid": uid} | ({"container_id": container_id} if container_id else {})
    level = "container" if container_id else "pod"
    out = []
    for resource, degrees in (("cpu", ("some",)), ("mem", ("some", "full"))):
        for precision in ("avg10", "avg60", "avg300"):
            for degree in degrees:
                labels = {
                    **base,
                    "psi_resource_type": resource,
                    "psi_precision": precision,
                    "psi_degree": degree,
                }
                out.append(Sample(f"{level}_psi", labels, NOW, 2.5))
    return out


class World:
    """koordlet's state for one scrape: a BE pod with two containers and what was seen."""

    def __init__(self) -> None:
        self.pod = self.batch_pod(BE_SPEC)
        self.web, self.side = self.pod.containers
        self.cache = MetricCache()
        self.allocatable = {keys.BATCH_CPU: 12_345, keys.BATCH_MEMORY: 7 << 30, "cpu": 8000}
        self.oom_scores = {(self.pod.request.uid, self.web): 1000, ("gone", "c"): 500}
        self.pods: list[KnownPod] = [self.pod]
        self.psi = psi_samples(self.pod.request.uid) + psi_samples(self.pod.request.uid, self.web)
        ids = {"pod_uid": self.pod.request.uid, "container_id": self.web}
        self.cpi = [
            Sample("container_cpi", {**ids, "cpi_field": field}, NOW, value)
            for field, value in (("cycles", 3e9), ("instructions", 2e9), ("cpi", 1.5))
        ]
        pools = (CPUSharedPool(0, 0, "0-2,5"),)
        self.rules = Rules(node=NodeState(ls_pools=pools, be_pools=(CPUSharedPool(0, 0, "7"),)))
        self.metrics = KoordletMetrics("n1")
        self.sources = Sources(
            pods=lambda: self.pods,
            cache=self.cache,
            allocatable=lambda: self.allocatable,
            rules=lambda: self.rules,
            oom_scores=self.oom_scores,
            psi=lambda: self.psi,
            cpi=lambda: self.cpi,
        )
        self.series = KoordinatorSeries(self.metrics, self.sources, clock=lambda: NOW)
        self.metrics.registry.register(self.series)

    @staticmethod
    def batch_pod(spec: object) -> KnownPod:
        containers = {"web": ContainerResources(), "side": ContainerResources()}
        if isinstance(spec, str):  # the annotation's text as is
            notes = {keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: spec}
            return known_pod("batch", qos="BE", containers=containers, annotations=notes)
        return known_pod("batch", qos="BE", containers=containers, batch=spec)  # type: ignore[arg-type]

    def web_labels(self) -> dict[str, str]:
        """Koordinator's pod and container labels of the pod's "web" container."""
        return {
            "pod_uid": self.pod.request.uid,
            "pod_name": "batch",
            "pod_namespace": "default",
            "container_id": self.web,
            "container_name": "web",
        }

    def get(self, name: str, **labels: str) -> float | None:
        value = self.metrics.registry.get_sample_value(name, {"node": "n1", **labels})
        return None if value is None else float(value)

    def names(self) -> dict[str, tuple[str, set[str]]]:
        """Exposed family → (type, label names of its samples)."""
        text = generate_latest(self.metrics.registry).decode()
        out: dict[str, tuple[str, set[str]]] = {}
        for family in text_string_to_metric_families(text):
            labels = {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}
            if family.samples:
                out[family.name] = (family.type, labels)
        return out


def happen(world: World) -> None:
    """What koordlet's running parts record as things happen (each tested where it is made)."""
    m = world.metrics
    m.record_eviction("default", "batch", "BECPUEvict", NOW)
    m.record_core_sched("group-a", True)
    m.record_predicted_reclaimable("minPredictor", 1250, 3 << 30)
    m.record_priority_reclaimable("koord-prod", (1250, 3 << 30))
    m.record_node_metric("nodeUsage", 1.25, 3 << 30)
    m.record_node_metric("systemUsage", 0.5, 1 << 30)
    m.observe_write("cpu.cfs_quota_us", "applied", 0.00002)
    m.observe_reconcile("pod", "all", "succeeded", 0.001)
    m.hook_duration_ms.labels("n1", "CPUSetAllocator", "PreCreateContainer", "succeeded").observe(
        0.1
    )
    m.observe_kubelet("get", "/pods/", "200", 0.003)
    m.scaled_cfs_burst.labels("n1", "default", "batch", world.web, "web").set(1)
    m.scaled_cfs_quota.labels("n1", "default", "batch", world.web, "web").set(1)
    m.be_suppress_cpu_cores.labels("n1", "cpuset").set(2)
    m.be_suppress_ls_used.labels("n1").set(1)
    for counter in (m.cpu_info_status, m.numa_info_status):
        counter.labels("n1", "succeeded").inc()
    world.cache.append(
        [Sample("node_be", {"be_resource": "cpu", "be_allocation": "usage"}, NOW, 750)]
    )


def test_every_koordinator_name_is_exported_with_its_type_and_labels_or_said_why_not() -> None:
    world = World()
    happen(world)
    # node_used_* are the health collector's (built from the cache on each scrape)
    exported = world.names()
    exported["koordlet_node_used_cpu_cores"] = ("gauge", {"node"})
    exported["koordlet_node_used_memory_bytes"] = ("gauge", {"node"})
    missing, wrong = [], []
    for name, (kind, labels) in UPSTREAM.items():
        if name in NOT_MEASURED:
            assert name not in exported, f"{name} is exported but listed as not measured"
            continue
        if name not in exported:
            missing.append(name)
            continue
        got_kind, got_labels = exported[name]
        # extra labels are allowed (our kubelet histogram keeps `node`), missing ones are not
        if got_kind != kind or not set(labels) <= got_labels:
            wrong.append((name, kind, labels, got_kind, sorted(got_labels)))
    assert missing == []
    assert wrong == []


def test_psi_has_every_average_and_says_whether_the_file_had_a_full_line() -> None:
    world = World()
    uid = world.pod.request.uid
    pod_labels = {"pod_uid": uid, "pod_name": "batch", "pod_namespace": "default"}
    for precision in ("avg10", "avg60", "avg300"):
        cpu = {"psi_resource_type": "cpu", "psi_precision": precision, "psi_degree": "some"}
        assert world.get("koordlet_pod_psi", **pod_labels, **cpu, cpu_full_supported="false") == 2.5
    mem = {"psi_resource_type": "mem", "psi_precision": "avg60", "psi_degree": "full"}
    container = {"container_id": world.web, "container_name": "web"}
    got = world.get(
        "koordlet_container_psi", **pod_labels, **container, **mem, cpu_full_supported="true"
    )
    assert got == 2.5


def test_cpi_is_cycles_and_instructions_as_koordinator_exports_it() -> None:
    world = World()
    labels = world.web_labels()
    assert world.get("koordlet_container_cpi", **labels, cpi_field="cycles") == 3e9
    assert world.get("koordlet_container_cpi", **labels, cpi_field="instructions") == 2e9
    assert world.get("koordlet_container_cpi", **labels, cpi_field="cpi") is None


def test_a_pod_koordlet_no_longer_knows_has_no_series() -> None:
    world = World()
    world.pods = []
    names = world.names()
    for name in (
        "koordlet_pod_psi",
        "koordlet_container_cpi",
        "koordlet_container_resource_requests",
    ):
        assert name not in names
    assert "koordlet_container_oom_score_adj" not in names


def test_batch_requests_and_limits_come_from_the_extended_resource_spec_rounded_up() -> None:
    world = World()
    labels = world.web_labels()
    requests = "koordlet_container_resource_requests"
    limits = "koordlet_container_resource_limits"
    assert world.get(requests, **labels, resource=keys.BATCH_CPU, unit="integer") == 1500
    assert world.get(requests, **labels, resource=keys.BATCH_MEMORY, unit="byte") == 1536 << 20
    assert world.get(limits, **labels, resource=keys.BATCH_CPU, unit="integer") == 2000
    assert world.get(limits, **labels, resource=keys.BATCH_MEMORY, unit="byte") == 2 << 30
    side = {**labels, "container_id": world.side, "container_name": "side"}
    assert world.get(requests, **side, resource=keys.BATCH_CPU, unit="integer") is None


def test_a_fraction_of_a_byte_is_rounded_up_and_a_bad_annotation_gives_nothing() -> None:
    world = World()
    world.pods = [World.batch_pod({"web": {"requests": {keys.BATCH_MEMORY: "1.5"}}})]
    labels = world.web_labels()
    memory = {"resource": keys.BATCH_MEMORY, "unit": "byte"}
    assert world.get("koordlet_container_resource_requests", **labels, **memory) == 2
    world.pods = [World.batch_pod("{")]
    assert "koordlet_container_resource_requests" not in world.names()


def test_node_allocatable_is_the_extended_resources_with_koordinators_units() -> None:
    world = World()
    allocatable = "koordlet_node_resource_allocatable"
    assert world.get(allocatable, resource=keys.BATCH_CPU, unit="integer") == 12_345
    assert world.get(allocatable, resource=keys.BATCH_MEMORY, unit="byte") == 7 << 30
    assert world.get(allocatable, resource="cpu", unit="integer") is None
    assert world.get(allocatable, resource=keys.MID_CPU, unit="integer") is None
    world.allocatable = {keys.BATCH_MEMORY: 10**400, keys.BATCH_CPU: 2}  # a NodeSLO file's 1e400
    assert world.get(allocatable, resource=keys.BATCH_MEMORY, unit="byte") is None
    assert world.get(allocatable, resource=keys.BATCH_CPU, unit="integer") == 2


def test_share_pools_count_their_cpus_and_name_each() -> None:
    world = World()
    assert world.get("koordlet_cpuset_share_pool_cpu_cores") == 4
    assert world.get("koordlet_cpuset_be_share_pool_cpu_cores") == 1
    assert [world.get("koordlet_cpuset_share_pool_info", cpu=str(c)) for c in (0, 2, 3, 5)] == [
        1,
        1,
        None,
        1,
    ]
    assert world.get("koordlet_cpuset_be_share_pool_info", cpu="7") == 1


def test_be_usage_is_in_cores_and_only_while_fresh() -> None:
    world = World()
    usage = {"be_resource": "cpu", "be_allocation": "usage"}
    world.cache.append([Sample("node_be", usage, NOW - 30, 900)])
    assert world.get("koordlet_be_suppress_be_used_cpu_cores") is None  # 30 s old
    world.cache.append([Sample("node_be", usage, NOW - 1, 1250)])
    assert world.get("koordlet_be_suppress_be_used_cpu_cores") == 1.25


def test_oom_score_adj_of_known_containers() -> None:
    world = World()
    labels = {
        "pod_uid": world.pod.request.uid,
        "pod_name": "batch",
        "pod_namespace": "default",
        "container_name": "web",
    }
    assert world.get("koordlet_container_oom_score_adj", **labels) == 1000
    families = world.metrics.registry.collect()
    samples = [
        s for f in families if f.name == "koordlet_container_oom_score_adj" for s in f.samples
    ]
    assert [s.labels["pod_uid"] for s in samples] == [world.pod.request.uid]  # not ("gone", "c")


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("nodeUsage", "koordlet_node_metric_node_usage"),
        ("systemUsage", "koordlet_node_metric_system_usage"),
    ],
)
def test_the_reported_usage_is_in_cores_and_bytes(key: str, name: str) -> None:
    metrics = KoordletMetrics("n1")
    metrics.record_node_metric(key, 2.375, 5 << 30)
    get = metrics.registry.get_sample_value
    assert get(name, {"node": "n1", "resource": "cpu", "unit": "core"}) == 2.375
    assert get(name, {"node": "n1", "resource": "memory", "unit": "byte"}) == 5 << 30


def test_a_write_is_timed_in_seconds_and_in_koordinators_milliseconds() -> None:
    metrics = KoordletMetrics("n1")
    metrics.observe_write("cpu.shares", "applied", 0.00003)  # 30 us: Koordinator's 0.04 bucket
    get = metrics.registry.get_sample_value
    ms = {"type": "cpu.shares", "status": "applied"}
    assert get("koordlet_resource_update_duration_milliseconds_bucket", {**ms, "le": "0.01"}) == 0
    assert get("koordlet_resource_update_duration_milliseconds_bucket", {**ms, "le": "0.04"}) == 1
    assert get("koordlet_resource_update_duration_milliseconds_sum", ms) == pytest.approx(0.03)
    seconds = {"node": "n1", "resource": "cpu.shares", "status": "applied"}
    assert get("koordlet_resource_update_duration_seconds_sum", seconds) == pytest.approx(3e-5)
    assert get("koordlet_resource_updates_total", seconds) == 1


def test_a_limit_past_int64_gives_no_sample_and_the_scrape_still_answers() -> None:
    # the quantity the fault e2e test feeds (tests/e2e/test_faults.py): 1e400 bytes
    world = World()
    limits = {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "1e400"}
    world.pods = [World.batch_pod({"web": {"requests": {keys.BATCH_CPU: "500"}, "limits": limits}})]
    labels = world.web_labels()
    name = "koordlet_container_resource_limits"
    assert world.get(name, **labels, resource=keys.BATCH_CPU, unit="integer") == 1000
    assert world.get(name, **labels, resource=keys.BATCH_MEMORY, unit="byte") is None


def test_a_part_that_fails_loses_only_its_own_families(caplog: pytest.LogCaptureFixture) -> None:
    world = World()

    def broken() -> list[Sample]:
        raise OverflowError("int too large to convert to float")

    world.metrics.registry.unregister(world.series)
    world.series = KoordinatorSeries(world.metrics, replace(world.sources, psi=broken))
    world.metrics.registry.register(world.series)
    names = world.names()  # generate_latest would raise if the collector did
    assert "koordlet_pod_psi" not in names
    assert "koordlet_node_resource_allocatable" in names
    assert world.series.failures == 1
    world.names()
    assert world.series.failures == 2
    warnings = [r for r in caplog.records if "could not be built" in r.getMessage()]
    assert len(warnings) == 1  # the same error is logged once
