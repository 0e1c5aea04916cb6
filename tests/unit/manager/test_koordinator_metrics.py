"""koord-manager's Koordinator series: the census of Koordinator's names (each exported with
its type and label names, or listed as not measured with why, in the code and in
docs/manager.md), and the series as the controllers and webhooks record them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from koordapi import keys
from koordkube.gometrics import GoCounter
from manager.metrics import KOORDINATOR_NOT_MEASURED, ManagerMetrics
from manager.webhooks.admission import AdmissionResponse, parse_review
from manager.webhooks.audit import AdmissionAudit
from tests.unit.koordkube.fakes import run
from tests.unit.manager.test_controllers import running, seeded, until
from tests.unit.manager.webhooks import builders

DOCS = Path(__file__).resolve().parents[3] / "docs" / "manager.md"
STATUS = ("status", "reason")
# Every metric of Koordinator v1.8.0's koord-manager, as its Go code declares it (type and
# label names): pkg/slo-controller/metrics/common.go and node_resource.go (subsystem
# slo_controller), pkg/webhook/metrics/webhook_duration.go and elasticquota.go (subsystem
# koord_manager_webhook). Go counters have no _total suffix, and neither have ours.
UPSTREAM: dict[str, tuple[str, tuple[str, ...]]] = {
    "slo_controller_node_resource_reconcile_count": ("counter", STATUS),
    "slo_controller_nodemetric_reconcile_count": ("counter", STATUS),
    "slo_controller_nodemetric_spec_parse_count": ("counter", STATUS),
    "slo_controller_nodeslo_reconcile_count": ("counter", STATUS),
    "slo_controller_nodeslo_spec_parse_count": ("counter", STATUS),
    "slo_controller_node_resource_run_plugin_status": ("counter", ("plugin", *STATUS)),
    "slo_controller_node_extended_resource_allocatable_internal": (
        "gauge",
        ("node", "resource", "unit"),
    ),
    "koord_manager_webhook_webhook_duration_milliseconds": (
        "histogram",
        ("webhook_type", "object_type", "operation", "plugin_name", "status"),
    ),
    "koord_manager_webhook_quota_shared_weight": ("gauge", ("elasticquota_name", "resource_name")),
}


def registered(metrics: ManagerMetrics) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each metric's family name, type and label names, as registered."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            out[str(value._name)] = (str(value._type), tuple(value._labelnames))
        elif isinstance(value, GoCounter):
            out[value.name] = ("counter", value.labelnames)
    return out


def test_the_census_has_koordinators_9_names() -> None:
    assert len(UPSTREAM) == 9
    assert set(KOORDINATOR_NOT_MEASURED) < set(UPSTREAM)


def test_every_koordinator_name_is_exported_with_its_type_and_labels_or_said_why_not() -> None:
    exported = registered(ManagerMetrics())
    for name, declared in UPSTREAM.items():
        if name in KOORDINATOR_NOT_MEASURED:
            assert name not in exported, f"{name} is exported but listed as not measured"
        else:
            assert exported.get(name) == declared, name


def docs_census() -> dict[str, str]:
    """docs/manager.md's table under "Koordinator's metric names": name → its second cell."""
    text = DOCS.read_text()
    section = text.split("## Koordinator's metric names", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| ([^|]+) \|", section, flags=re.MULTILINE)
    return {name: cell.strip() for name, cell in rows}


def test_the_docs_census_says_what_the_code_does() -> None:
    census = docs_census()
    assert set(census) == set(UPSTREAM)
    for name, cell in census.items():
        if name in KOORDINATOR_NOT_MEASURED:
            assert cell.startswith("not measured"), name
        else:
            assert cell.startswith("exported"), name


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(metrics: ManagerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """/metrics' samples by the names written (prometheus_client's parser would add _total to
    a counter's samples)."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in metrics.exposition().decode().splitlines():
        found = SAMPLE.match(line)
        if found:
            name, labels, number = found.groups()
            out[(name, frozenset(LABEL.findall(labels or "")))] = float(number)
    return out


def value(metrics: ManagerMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, frozenset(labels.items())))


def test_the_controllers_record_koordinators_series() -> None:
    api = seeded(
        {"enable": True},
        **{"cpu-burst-config": {"clusterStrategy": {"policy": "cpuBurstOnly"}}},
    )
    # an invalid resource-qos-config: its parse fails, the others succeed
    config: Any = api.get("ConfigMap", "slo-controller-config", "koordinator-system")
    config["data"]["resource-qos-config"] = "{not json"
    api.seed(config)
    got: dict[str, Any] = {}

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            m = manager.metrics
            await until(
                lambda: (
                    value(
                        m,
                        "slo_controller_nodeslo_reconcile_count",
                        status="succeeded",
                        reason="createNodeSLO",
                    )
                    == 1.0
                )
            )
            await until(
                lambda: (
                    value(
                        m,
                        "slo_controller_nodemetric_reconcile_count",
                        status="succeeded",
                        reason="updateNodeMetric",
                    )
                    == 1.0
                )
            )
            await until(
                lambda: (
                    value(
                        m,
                        "slo_controller_node_resource_reconcile_count",
                        status="succeeded",
                        reason="updateNodeStatus",
                    )
                    == 1.0
                )
            )
            got["before"] = samples(m)
            api.remove("Node", "node-1")
            await until(
                lambda: (
                    value(
                        m,
                        "slo_controller_nodeslo_reconcile_count",
                        status="succeeded",
                        reason="deleteNodeSLO",
                    )
                    == 1.0
                )
            )
            await until(
                lambda: (
                    (
                        value(
                            m,
                            "slo_controller_node_resource_reconcile_count",
                            status="failed",
                            reason="reconcileNodeNotFound",
                        )
                        or 0
                    )
                    >= 1
                )
            )
            got["after"] = samples(m)

    run(scenario())
    before, after = got["before"], got["after"]

    def at(where: dict[Any, float], name: str, **labels: str) -> float | None:
        return where.get((name, frozenset(labels.items())))

    parse = "slo_controller_nodeslo_spec_parse_count"
    assert (at(before, parse, status="failed", reason="getResourceQOSSpec") or 0) >= 1
    assert (at(before, parse, status="succeeded", reason="getCPUBurstConfigSpec") or 0) >= 1
    assert at(before, parse, status="failed", reason="getCPUBurstConfigSpec") is None
    plugins = "slo_controller_node_resource_run_plugin_status"
    for plugin in ("BatchResource", "MidResource"):
        assert (
            at(before, plugins, plugin=plugin, status="succeeded", reason="ResourceCalculate") or 0
        ) >= 1
    allocatable = "slo_controller_node_extended_resource_allocatable_internal"
    # the base case's 37000 milli-cores and 98Gi (test_controllers), in cores and bytes
    assert at(before, allocatable, node="node-1", resource=keys.BATCH_CPU, unit="integer") == 37.0
    assert at(before, allocatable, node="node-1", resource=keys.BATCH_MEMORY, unit="byte") == float(
        98 * 2**30
    )
    # the node gone: its series go with it
    assert not any(name == allocatable for name, _ in after)


def test_each_webhook_call_is_timed_in_koordinators_histogram() -> None:
    metrics = ManagerMetrics()
    audit = AdmissionAudit(metrics, clock=lambda: 1700000000.0)
    review = parse_review(json.dumps(builders.review(builders.pod())))
    audit.decide("/validate-pod", review, AdmissionResponse(False, 400, "no"), "team-a", 0.0375)
    audit.decide("/mutate-pod", review, AdmissionResponse(True), "team-a", 0.0021)
    audit.decide("/mutate-pod", review, AdmissionResponse(True), "team-a")  # subresource: untimed
    name = "koord_manager_webhook_webhook_duration_milliseconds"
    common = {
        "object_type": "pod",
        "operation": "CREATE",
        "plugin_name": "ClusterColocationProfile",
    }
    rejected = {**common, "webhook_type": "validate", "status": "rejected"}
    allowed = {**common, "webhook_type": "mutate", "status": "allowed"}
    assert value(metrics, f"{name}_count", **rejected) == 1.0
    assert abs((value(metrics, f"{name}_sum", **rejected) or 0) - 37.5) < 1e-9  # milliseconds
    assert value(metrics, f"{name}_count", **allowed) == 1.0
    # Koordinator's buckets: 0.001 ms doubling 20 times; 2.1 ms lies above 2.048
    assert value(metrics, f"{name}_bucket", **allowed, le="2.048") == 0.0
    assert value(metrics, f"{name}_bucket", **allowed, le="4.096") == 1.0


def test_koordinators_counters_start_from_the_first_event() -> None:
    # the series appear once something happened (no zero samples invented up front)
    assert not [n for n, _ in samples(ManagerMetrics()) if n.startswith("slo_controller_")]
