"""slo-controller-config content that is accepted but changes nothing: named with why, refused
keys at error level, logged once per ConfigMap change and counted; unset or default says
nothing; a refused key changes nothing the manager computes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from koordapi import keys, unsupported
from manager.colocation import parse_colocation_config, strategy_for_node
from manager.metrics import ManagerMetrics
from manager.noderesource.calculator import calculate
from manager.sloconfig import render_node_slo
from manager.unsupported import (
    COLOCATION_EXTENSION,
    MEMORY_COLLECT,
    REFUSED_KEYS,
    UNKNOWN_FIELD,
    UNKNOWN_KEY,
    Finding,
    SLOConfigAudit,
    find_unsupported,
)
from manager.webhooks import configmap_validating
from tests.unit.koordkube.fakes import run
from tests.unit.manager.test_controllers import edit_config, node_status, running, seeded, until
from tests.unit.manager.test_noderesource import NOW, hp_pods, make_metric, make_node

VALUES = Path(__file__).parents[3] / "charts" / "koordinator-py" / "values.yaml"
CPU_NORMALIZATION = "cpu-normalization-config"
AMPLIFICATION = "resource-amplification-config"
# Koordinator's CPUNormalizationCfg and ResourceAmplificationCfg, as its docs write them.
NORMALIZATION_ON = {
    "enable": True,
    "ratioModel": {
        "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz": {
            "baseRatio": 1.29,
            "hyperThreadEnabledRatio": 0.82,
            "turboEnabledRatio": 1.52,
            "hyperThreadTurboEnabledRatio": 1.0,
        }
    },
}
AMPLIFICATION_ON = {"enable": True, "resourceAmplificationRatio": {"cpu": 1.37}}


def data(**values: Any) -> dict[str, str]:
    """ConfigMap data from keyword arguments (underscores for dashes), each value as JSON."""
    return {k.replace("_", "-"): json.dumps(v) for k, v in values.items()}


def test_koordinators_and_this_charts_default_configmaps_say_nothing() -> None:
    # Koordinator v1.8's chart (templates/slo-controller-config.yaml)
    koordinator = data(
        colocation_config={"enable": True}, resource_threshold_config={"clusterStrategy": {}}
    )
    assert find_unsupported(koordinator) == []
    chart = yaml.safe_load(VALUES.read_text())["sloConfig"]["data"]
    assert find_unsupported({k: json.dumps(v) for k, v in chart.items()}) == []
    assert find_unsupported({}) == []


@pytest.mark.parametrize(
    ("key", "value", "enabled"),
    [
        pytest.param(CPU_NORMALIZATION, NORMALIZATION_ON, "enable is true", id="normalization"),
        pytest.param(AMPLIFICATION, AMPLIFICATION_ON, "enable is true", id="amplification"),
        pytest.param(
            AMPLIFICATION,
            {
                "enable": False,
                "nodeConfigs": [
                    {"name": "a", "nodeSelector": {}, "enable": False},
                    {"name": "b", "nodeSelector": {}, "enable": True},
                ],
            },
            "nodeConfigs[1].enable is true",
            id="amplification-on-one-node-pool",
        ),
        pytest.param(
            CPU_NORMALIZATION,
            {"enable": True, "nodeConfigs": [{"nodeSelector": {}, "enable": True}]},
            "enable, nodeConfigs[0].enable are true",
            id="normalization-on-twice",
        ),
    ],
)
def test_an_enabled_normalization_or_amplification_key_is_refused_naming_the_key(
    key: str, value: dict[str, Any], enabled: str
) -> None:
    found = find_unsupported({key: json.dumps(value)})

    assert found == [Finding(key, "", f"{REFUSED_KEYS[key]}; ignored although {enabled}", True)]
    assert str(found[0]).startswith(f"{key}: ")


def test_a_refused_key_that_is_not_json_is_still_named() -> None:
    (found,) = find_unsupported({AMPLIFICATION: "{enable: true"})
    assert (found.key, found.refused) == (AMPLIFICATION, True)
    assert "not a JSON object" in found.why


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(
            {"enable": False, **{k: v for k, v in NORMALIZATION_ON.items() if k != "enable"}}
        ),
        pytest.param({}),
        pytest.param({"nodeConfigs": [{"nodeSelector": {}, "enable": False}]}),
    ],
)
def test_a_disabled_normalization_or_amplification_key_says_nothing(value: dict[str, Any]) -> None:
    assert find_unsupported({CPU_NORMALIZATION: json.dumps(value)}) == []
    assert find_unsupported({AMPLIFICATION: json.dumps(value)}) == []


def test_refused_keys_are_left_out_of_the_nodeslo_and_the_batch_resources() -> None:
    base = data(colocation_config={"enable": True})
    refused = {**base, **data(cpu_normalization_config=NORMALIZATION_ON)}
    refused |= data(resource_amplification_config=AMPLIFICATION_ON)
    node = make_node()
    assert render_node_slo(refused, node).spec == render_node_slo(base, node).spec

    def batch(config: dict[str, str]) -> dict[str, Any]:
        strategy = strategy_for_node(parse_colocation_config(config["colocation-config"]), node)
        result = calculate(node, make_metric(), hp_pods(), strategy, NOW)
        return dict(result.quantities)

    assert batch(refused) == batch(base)
    assert batch(base)[keys.BATCH_CPU] == "37000"  # Koordinator's acceptance case, unchanged


def test_colocation_fields_nothing_reads_are_named_by_path() -> None:
    colocation = {
        "enable": True,
        "metricMemoryCollectPolicy": "usageWithPageCache",
        "extensions": {"thirdParty": {"ratio": 0.37}},
        "cpuReclaimThresholdPrecent": 61,  # misspelt
        "nodeConfigs": [
            {"name": "a", "nodeSelector": {}, "metricMemoryCollectPolicy": "usageWithoutPageCache"},
            {"name": "b", "nodeSelector": {}, "metricMemoryCollectPolicy": "usageWithHotPageCache"},
        ],
    }

    found = find_unsupported(data(colocation_config=colocation))

    assert [(f.path, f.why) for f in found] == [
        ("metricMemoryCollectPolicy", MEMORY_COLLECT),
        ("extensions.thirdParty", COLOCATION_EXTENSION),
        ("nodeConfigs[1].metricMemoryCollectPolicy", MEMORY_COLLECT),
        ("cpuReclaimThresholdPrecent", UNKNOWN_FIELD),
    ]
    assert {f.key for f in found} == {"colocation-config"} and not any(f.refused for f in found)


def test_nodeslo_fields_koordlet_does_not_use_are_named_at_their_configmap_paths() -> None:
    qos = {
        "clusterStrategy": {"beClass": {"blkioQOS": {"enable": True}, "cpuQOS": {"enable": True}}},
        "nodeStrategies": [
            {
                "name": "pool-x",
                "nodeSelector": {"matchLabels": {"pool": "x"}},
                "lsClass": {"networkQOS": {"enable": True, "ingressRequest": 37}},
                "lsClas": {},  # misspelt
            }
        ],
    }
    apps = {"applications": [{"name": "nginx", "qos": "LS"}]}

    found = find_unsupported(data(resource_qos_config=qos, host_application_config=apps))

    assert [str(f) for f in found] == [
        f"resource-qos-config: clusterStrategy.beClass.blkioQOS.enable: {unsupported.BLKIO}",
        "resource-qos-config: nodeStrategies[0].lsClass.networkQOS.ingressRequest: "
        + unsupported.INGRESS,
        f"resource-qos-config: nodeStrategies[0].lsClas: {UNKNOWN_FIELD}",
        f"host-application-config: applications: {unsupported.HOST_APPLICATIONS}",
    ]


def test_unknown_keys_are_named_and_unparsable_keys_left_to_the_nodeslo_controller() -> None:
    found = find_unsupported({"colocation-cfg": "{}", "resource-qos-config": "{broken"})
    assert found == [Finding("colocation-cfg", "", UNKNOWN_KEY)]


# -- once per change, counted ----------------------------------------------------------------


def sample(metrics: ManagerMetrics, name: str, key: str) -> float:
    value = metrics.registry.get_sample_value(name, {"key": key})
    return 0.0 if value is None else value


REPORTS = "koord_manager_slo_config_unsupported_reports_total"
NOW_FIELDS = "koord_manager_slo_config_unsupported_fields"


def test_the_audit_logs_once_per_change_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    metrics = ManagerMetrics()
    audit = SLOConfigAudit(metrics)
    config = data(
        resource_amplification_config=AMPLIFICATION_ON,
        resource_qos_config={"clusterStrategy": {"beClass": {"blkioQOS": {"enable": True}}}},
    )

    with caplog.at_level(logging.WARNING, logger="manager.unsupported"):
        assert audit.note(config) is not None
        assert audit.note(dict(config)) is None  # a resync or an unrelated update
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records == [
        (
            logging.ERROR,
            f"slo-controller-config {AMPLIFICATION}: refused, "
            f"{REFUSED_KEYS[AMPLIFICATION]}; ignored although enable is true",
        ),
        (
            logging.WARNING,
            "slo-controller-config resource-qos-config: clusterStrategy.beClass.blkioQOS.enable "
            f"is set but not used here: {unsupported.BLKIO}",
        ),
    ]
    assert sample(metrics, REPORTS, AMPLIFICATION) == 1
    assert sample(metrics, REPORTS, "resource-qos-config") == 1
    assert sample(metrics, NOW_FIELDS, AMPLIFICATION) == 1

    # amplification turned off: nothing more about it, the blkio field is said again
    caplog.clear()
    config |= data(resource_amplification_config={"enable": False})
    with caplog.at_level(logging.WARNING, logger="manager.unsupported"):
        found = audit.note(config)
    assert found is not None and [f.key for f in found] == ["resource-qos-config"]
    assert len(caplog.records) == 1
    assert sample(metrics, REPORTS, AMPLIFICATION) == 1
    assert sample(metrics, REPORTS, "resource-qos-config") == 2
    assert sample(metrics, NOW_FIELDS, AMPLIFICATION) == 0

    # the ConfigMap deleted: every gauge back to 0, the counters stay
    assert audit.note(None) == []
    assert sample(metrics, NOW_FIELDS, "resource-qos-config") == 0
    assert sample(metrics, REPORTS, "resource-qos-config") == 2


def test_a_configmap_without_unsupported_content_logs_and_counts_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = ManagerMetrics()
    quiet = data(
        colocation_config={"enable": True, "metricMemoryCollectPolicy": "usageWithoutPageCache"},
        cpu_normalization_config={"enable": False},
        resource_qos_config={"clusterStrategy": {"beClass": {"blkioQOS": {"enable": False}}}},
    )
    with caplog.at_level(logging.WARNING, logger="manager.unsupported"):
        assert SLOConfigAudit(metrics).note(quiet) == []
    assert caplog.records == []
    assert f"{REPORTS}{{" not in generate_latest(metrics.registry).decode()  # no series at all


# -- admission warnings ----------------------------------------------------------------------


def test_the_webhook_allows_the_configmap_with_a_warning_per_finding() -> None:
    config = data(
        colocation_config={"enable": True},
        cpu_normalization_config=NORMALIZATION_ON,
        resource_qos_config={"clusterStrategy": {"systemClass": {"cpuQOS": {"enable": True}}}},
    )

    warnings = configmap_validating.slo_advice(config)

    assert warnings == [
        f"refused: {CPU_NORMALIZATION}: {REFUSED_KEYS[CPU_NORMALIZATION]}; ignored although "
        "enable is true",
        "not used here: resource-qos-config: clusterStrategy.systemClass.cpuQOS.enable: "
        + unsupported.SYSTEM_CPU,
    ]
    assert configmap_validating.slo_advice(data(colocation_config={"enable": True})) == []


# -- the running manager -------------------------------------------------------------------


def test_the_running_manager_reports_a_refused_key_and_still_publishes_batch() -> None:
    api = seeded(**{AMPLIFICATION: AMPLIFICATION_ON})

    async def scenario() -> None:
        async with running(api, leader_elect=False) as manager:
            metrics = manager.metrics
            await until(lambda: keys.BATCH_CPU in node_status(api).get("allocatable", {}))
            await until(lambda: sample(metrics, REPORTS, AMPLIFICATION) == 1)
            assert node_status(api)["allocatable"][keys.BATCH_CPU] == "37k"  # not amplified
            assert keys.ANNOTATION_NODE_RAW_ALLOCATABLE not in (
                (api.get("Node", "node-1") or {}).get("metadata", {}).get("annotations", {})
            )
            await edit_config(api, data(colocation_config={"enable": True}))
            await until(lambda: sample(metrics, NOW_FIELDS, AMPLIFICATION) == 0)
            assert sample(metrics, REPORTS, AMPLIFICATION) == 1

    run(scenario())
