"""slo-controller-config → NodeSLO: defaults, node strategies, keep-previous, validation."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordapi.nodeslo import NodeSLOSpec, default_spec
from manager.errors import ConfigError
from manager.nodeslo import needs_update, node_slo_object
from manager.sloconfig import (
    COLOCATION_CONFIG,
    CPU_BURST_CONFIG,
    HOST_APPLICATION_CONFIG,
    RESOURCE_QOS_CONFIG,
    RESOURCE_THRESHOLD_CONFIG,
    SPEC_FIELDS,
    SYSTEM_CONFIG,
    RenderedNodeSLO,
    parse_slo_config,
    parse_strategy_key,
    render_node_slo,
    validate_slo_configmap,
)

VALUES = Path(__file__).parents[3] / "charts" / "koordinator-py" / "values.yaml"
BANDWIDTH = "node.koordinator.sh/network-bandwidth"
POOL_X = {"matchLabels": {"pool": "x"}}

# The colocation-config path of validate_slo_configmap calls manager.colocation, written in
# parallel with this module. These tests are enabled at integration: they run (and must pass)
# as soon as manager/colocation.py exists; until then pytest -ra lists them with this reason.
needs_colocation = pytest.mark.skipif(
    importlib.util.find_spec("manager.colocation") is None,
    reason="enabled at integration: manager/colocation.py (parse_colocation_config) not yet here",
)


def node(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    name: str = "node-1",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata}


def configmap(**keys: Any) -> dict[str, str]:
    """ConfigMap data from keyword arguments (underscores for dashes), each value as JSON."""
    return {
        k.replace("_", "-"): v if isinstance(v, str) else json.dumps(v) for k, v in keys.items()
    }


def render(data: dict[str, str], n: dict[str, Any] | None = None, **kw: Any) -> RenderedNodeSLO:
    rendered = render_node_slo(data, n or node(), **kw)
    # Whatever we write, koordlet must accept: it parses the spec with koordapi's validator.
    NodeSLOSpec.parse(rendered.spec)
    return rendered


# -- defaults ----------------------------------------------------------------------------------


def test_configmap_without_threshold_key_gives_koordinators_defaults() -> None:
    rendered = render(configmap(cpu_burst_config={"clusterStrategy": {"policy": "auto"}}))
    assert rendered.warnings == []
    assert rendered.spec["resourceUsedThresholdWithBE"] == {
        "enable": False,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }


def test_empty_configmap_renders_every_default_and_no_host_applications() -> None:
    rendered = render({})
    defaults = default_spec()
    assert rendered.spec == {
        "resourceUsedThresholdWithBE": defaults["resourceUsedThresholdWithBE"],
        # Koordinator's manager writes an empty struct; koordlet merges over its defaults.
        "resourceQOSStrategy": {},
        "cpuBurstStrategy": defaults["cpuBurstStrategy"],
        "systemStrategy": {"totalNetworkBandwidth": "0"},
    }
    assert NodeSLOSpec.parse(rendered.spec).raw == defaults
    assert rendered.warnings == []


def test_cluster_strategy_is_overlaid_on_the_default() -> None:
    data = configmap(resource_threshold_config={"clusterStrategy": {"enable": True}})
    assert render(data).spec["resourceUsedThresholdWithBE"] == {
        **default_spec()["resourceUsedThresholdWithBE"],
        "enable": True,
    }


def test_resource_qos_strategy_is_written_as_sparse_as_configured() -> None:
    qos = {"clusterStrategy": {"beClass": {"cpuQOS": {"enable": True}}}}
    spec = render(configmap(resource_qos_config=qos)).spec
    assert spec["resourceQOSStrategy"] == {"beClass": {"cpuQOS": {"enable": True}}}
    assert NodeSLOSpec.parse(spec).raw["resourceQOSStrategy"]["beClass"]["cpuQOS"] == {
        "enable": True,
        "groupIdentity": -1,
        "schedIdle": 0,
        "coreExpeller": False,
    }


# -- nodeStrategies ----------------------------------------------------------------------------

THRESHOLD_DEFAULT = default_spec()["resourceUsedThresholdWithBE"]
BURST_DEFAULT = default_spec()["cpuBurstStrategy"]

# (key, clusterStrategy, node entry fields, NodeSLO of other nodes, NodeSLO of nodes in pool x)
NODE_STRATEGY_CASES = [
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"enable": True, "cpuSuppressThresholdPercent": 60},
        {"cpuSuppressThresholdPercent": 50},
        {**THRESHOLD_DEFAULT, "enable": True, "cpuSuppressThresholdPercent": 60},
        {**THRESHOLD_DEFAULT, "enable": True, "cpuSuppressThresholdPercent": 50},
        id="threshold",
    ),
    pytest.param(
        RESOURCE_QOS_CONFIG,
        {"lsrClass": {"cpuQOS": {"enable": True}}},
        {"beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": 20}}},
        {"lsrClass": {"cpuQOS": {"enable": True}}},
        {
            "lsrClass": {"cpuQOS": {"enable": True}},
            "beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": 20}},
        },
        id="resource-qos",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"policy": "auto"},
        {"policy": "cpuBurstOnly", "cpuBurstPercent": 500},
        {**BURST_DEFAULT, "policy": "auto"},
        {**BURST_DEFAULT, "policy": "cpuBurstOnly", "cpuBurstPercent": 500},
        id="cpu-burst",
    ),
    pytest.param(
        SYSTEM_CONFIG,
        {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150},
        {"watermarkScaleFactor": 200},
        {"totalNetworkBandwidth": "0", "minFreeKbytesFactor": 100, "watermarkScaleFactor": 150},
        {"totalNetworkBandwidth": "0", "minFreeKbytesFactor": 100, "watermarkScaleFactor": 200},
        id="system",
    ),
]


@pytest.mark.parametrize(("key", "cluster", "node_fields", "other", "in_x"), NODE_STRATEGY_CASES)
def test_node_strategy_applies_to_matching_nodes_merged_over_the_cluster_strategy(
    key: str,
    cluster: dict[str, Any],
    node_fields: dict[str, Any],
    other: dict[str, Any],
    in_x: dict[str, Any],
) -> None:
    entry = {"name": "pool-x", "nodeSelector": POOL_X, **node_fields}
    data = {key: json.dumps({"clusterStrategy": cluster, "nodeStrategies": [entry]})}
    spec_field = SPEC_FIELDS[key]
    assert render(data, node({"pool": "x", "zone": "a"})).spec[spec_field] == in_x
    assert render(data, node({"pool": "y"})).spec[spec_field] == other
    assert render(data, node()).spec[spec_field] == other


def test_first_matching_node_strategy_wins() -> None:
    threshold = {
        "clusterStrategy": {"cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {"name": "a", "nodeSelector": POOL_X, "cpuSuppressThresholdPercent": 50},
            {"name": "b", "nodeSelector": {"matchLabels": {"zone": "a"}}, "enable": True},
        ],
    }
    data = configmap(resource_threshold_config=threshold)
    both = render(data, node({"pool": "x", "zone": "a"})).spec["resourceUsedThresholdWithBE"]
    zone = render(data, node({"zone": "a"})).spec["resourceUsedThresholdWithBE"]
    assert (both["cpuSuppressThresholdPercent"], both["enable"]) == (50, False)
    assert (zone["cpuSuppressThresholdPercent"], zone["enable"]) == (60, True)


@pytest.mark.parametrize(
    ("selector", "matches_node"),
    [
        pytest.param(None, False, id="missing-selector-matches-no-node"),
        pytest.param({}, True, id="empty-selector-matches-every-node"),
        pytest.param(
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["x", "z"]}]},
            True,
            id="expression",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]},
            True,
            id="does-not-exist",
        ),
        pytest.param({"matchLabels": {"pool": "y"}}, False, id="other-label"),
    ],
)
def test_node_selector_semantics_follow_go(selector: Any, matches_node: bool) -> None:
    entry: dict[str, Any] = {"name": "e", "policy": "auto"}
    if selector is not None:
        entry["nodeSelector"] = selector
    data = configmap(cpu_burst_config={"nodeStrategies": [entry]})
    policy = render(data, node({"pool": "x"})).spec["cpuBurstStrategy"]["policy"]
    assert policy == ("auto" if matches_node else "none")


# -- a key that fails keeps its previous value -------------------------------------------------

PREVIOUS: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 42},
    "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}},
    "cpuBurstStrategy": {"policy": "cfsQuotaBurstOnly"},
    "systemStrategy": {"totalNetworkBandwidth": "1G", "minFreeKbytesFactor": 80},
    "hostApplications": [{"name": "old-agent", "qos": "LS"}],
}
GOOD: dict[str, Any] = {
    RESOURCE_THRESHOLD_CONFIG: {"clusterStrategy": {"enable": True}},
    RESOURCE_QOS_CONFIG: {"clusterStrategy": {"beClass": {"cpuQOS": {"enable": True}}}},
    CPU_BURST_CONFIG: {"clusterStrategy": {"policy": "auto"}},
    SYSTEM_CONFIG: {"clusterStrategy": {"watermarkScaleFactor": 150}},
    HOST_APPLICATION_CONFIG: {"applications": [{"name": "agent", "qos": "LS"}]},
}
BROKEN_TEXTS = {
    "invalid-json": '{"clusterStrategy": {',
    "wrong-type": '{"clusterStrategy": [1, 2]}',
}


@pytest.mark.parametrize("broken_key", list(SPEC_FIELDS))
@pytest.mark.parametrize("broken", list(BROKEN_TEXTS))
@pytest.mark.parametrize("has_previous", [True, False], ids=["previous", "no-previous"])
def test_a_key_that_fails_keeps_only_its_own_previous_value(
    broken_key: str, broken: str, has_previous: bool
) -> None:
    if broken_key == HOST_APPLICATION_CONFIG and broken == "wrong-type":
        text = '{"applications": {"name": "agent"}}'
    else:
        text = BROKEN_TEXTS[broken]
    data = {key: json.dumps(value) for key, value in GOOD.items()}
    data[broken_key] = text
    previous = copy.deepcopy(PREVIOUS) if has_previous else None
    rendered = render(data, previous=previous)
    fresh = render({k: json.dumps(v) for k, v in GOOD.items()}).spec
    broken_field = SPEC_FIELDS[broken_key]
    expected = PREVIOUS[broken_field] if has_previous else _default_of(broken_key)
    assert rendered.spec.get(broken_field) == expected
    for spec_field in SPEC_FIELDS.values():
        if spec_field != broken_field:
            assert rendered.spec[spec_field] == fresh[spec_field]
    assert len(rendered.warnings) == 1
    warning = rendered.warnings[0]
    assert warning.startswith(f"{broken_key}: ")
    what = "previous" if has_previous else "default"
    assert warning.endswith(f"; keeping the {what} {broken_field}")


def _default_of(key: str) -> Any:
    return {
        RESOURCE_THRESHOLD_CONFIG: default_spec()["resourceUsedThresholdWithBE"],
        RESOURCE_QOS_CONFIG: {},
        CPU_BURST_CONFIG: default_spec()["cpuBurstStrategy"],
        SYSTEM_CONFIG: {"totalNetworkBandwidth": "0"},
        HOST_APPLICATION_CONFIG: None,  # an empty list is left out of the spec
    }[key]


def test_previous_spec_without_the_failed_field_falls_back_to_the_default() -> None:
    data = configmap(cpu_burst_config="not json")
    rendered = render(data, previous={"resourceUsedThresholdWithBE": {"enable": True}})
    assert rendered.spec["cpuBurstStrategy"] == default_spec()["cpuBurstStrategy"]
    assert rendered.spec["resourceUsedThresholdWithBE"]["enable"] is False  # no error: re-rendered
    assert rendered.warnings[0].startswith("cpu-burst-config: invalid JSON: ")


def test_previous_extensions_are_carried_over() -> None:
    previous = {"extensions": {"vendor": {"knob": 1}}}
    assert render({}, previous=previous).spec["extensions"] == {"vendor": {"knob": 1}}
    assert "extensions" not in render({}).spec


# -- bad input ---------------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(RESOURCE_THRESHOLD_CONFIG, "{", "invalid JSON: Expecting", id="invalid-json"),
    pytest.param(RESOURCE_THRESHOLD_CONFIG, "", "is empty", id="empty-text"),
    pytest.param(RESOURCE_THRESHOLD_CONFIG, "[]", "must be a JSON object, got list", id="list"),
    pytest.param(
        CPU_BURST_CONFIG,
        '{"clusterStrategy": {"cpuBurstPercent": NaN}}',
        "NaN is not a number",
        id="nan",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": "on"},
        "clusterStrategy: must be an object, got str",
        id="strategy-not-object",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": {"enable": "true"}},
        "clusterStrategy.enable: must be true or false, got 'true'",
        id="string-for-bool",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": {"cpuSuppressThresholdPercent": 65.5}},
        "clusterStrategy.cpuSuppressThresholdPercent: must be an integer, got 65.5",
        id="float-for-int",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": {"cpuSuppressThresholdPercent": 101}},
        "clusterStrategy.cpuSuppressThresholdPercent: 101 is outside [0, 100]",
        id="percent-out-of-range",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": {"cpuSuppressPolicy": "quota"}},
        "clusterStrategy.cpuSuppressPolicy: must be one of",
        id="bad-enum",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {"clusterStrategy": {"memoryEvictLowerPercent": 75}},
        "clusterStrategy.memoryEvictLowerPercent: 75 must be below memoryEvictThresholdPercent "
        "(70)",
        id="lower-above-default-threshold",
    ),
    pytest.param(
        RESOURCE_THRESHOLD_CONFIG,
        {
            "clusterStrategy": {"memoryEvictLowerPercent": 60},
            "nodeStrategies": [{"nodeSelector": POOL_X, "memoryEvictThresholdPercent": 55}],
        },
        "nodeStrategies[0].memoryEvictLowerPercent: 60 must be below memoryEvictThresholdPercent",
        id="node-threshold-below-cluster-lower",
    ),
    pytest.param(
        RESOURCE_QOS_CONFIG,
        {"clusterStrategy": {"beClass": {"resctrlQOS": {"catRangeEndPercent": 0}}}},
        "clusterStrategy.beClass.resctrlQOS.catRangeStartPercent: 0 must be below",
        id="empty-cat-range",
    ),
    pytest.param(
        RESOURCE_QOS_CONFIG,
        {"clusterStrategy": {"lsClass": {"cpuQOS": {"groupIdentity": 3}}}},
        "clusterStrategy.lsClass.cpuQOS.groupIdentity: 3 is outside [-1, 2]",
        id="qos-out-of-range",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"clusterStrategy": {"cpuBurstPercent": 0}},
        "clusterStrategy.cpuBurstPercent: 0 is outside [1, 10000]",
        id="burst-percent-zero",
    ),
    pytest.param(
        SYSTEM_CONFIG,
        {"clusterStrategy": {"watermarkScaleFactor": 500}},
        "clusterStrategy.watermarkScaleFactor: 500 is outside [1, 400]",
        id="watermark-scale",
    ),
    pytest.param(
        SYSTEM_CONFIG,
        {"clusterStrategy": {"totalNetworkBandwidth": "fast"}},
        "clusterStrategy.totalNetworkBandwidth:",
        id="bad-quantity",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": {"name": "a"}},
        "nodeStrategies: must be a list, got dict",
        id="node-strategies-not-list",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": ["a"]},
        "nodeStrategies[0]: must be an object, got str",
        id="node-entry-not-object",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": [{"name": 7, "nodeSelector": POOL_X}]},
        "nodeStrategies[0].name: must be a string, got 7",
        id="name-not-string",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": 1}}}]},
        "nodeStrategies[0].nodeSelector.matchLabels: must map strings to strings",
        id="selector-label-not-string",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {
            "nodeStrategies": [
                {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]}}
            ]
        },
        "nodeStrategies[0].nodeSelector.matchExpressions[0].operator: 'Equals' is not one of",
        id="selector-bad-operator",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": [{"nodeSelector": "pool=x"}]},
        "nodeStrategies[0].nodeSelector: a label selector must be an object",
        id="selector-string",
    ),
    pytest.param(
        CPU_BURST_CONFIG,
        {"nodeStrategies": [{"nodeSelector": POOL_X, "policy": "always"}]},
        "nodeStrategies[0].policy: must be one of",
        id="node-entry-bad-value",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {"applications": [{"qos": "LS"}]},
        "applications[0].name: required",
        id="app-without-name",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {"applications": [{"name": "a"}, {"name": "a"}]},
        "applications[1].name: 'a' is already used by applications[0]",
        id="app-duplicate-name",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {"applications": [{"name": "a", "qos": "Guaranteed"}]},
        "applications[0].qos: must be one of",
        id="app-bad-qos",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {"applications": [{"name": "a", "priority": "koord-gold"}]},
        "applications[0].priority: must be one of",
        id="app-bad-priority",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {
            "nodeConfigs": [
                {
                    "nodeSelector": POOL_X,
                    "applications": [{"name": "a", "cgroupPath": {"base": "Root"}}],
                }
            ]
        },
        "nodeConfigs[0].applications[0].cgroupPath.base: must be one of",
        id="app-bad-cgroup-base",
    ),
    pytest.param(
        HOST_APPLICATION_CONFIG,
        {"applications": {"name": "a"}},
        "applications: must be a list, got dict",
        id="apps-not-list",
    ),
]


@pytest.mark.parametrize(("key", "value", "message"), BAD_INPUT)
def test_bad_input_raises_config_error_naming_key_and_path(
    key: str, value: Any, message: str
) -> None:
    text = value if isinstance(value, str) else json.dumps(value)
    with pytest.raises(ConfigError) as caught:
        parse_strategy_key(key, text)
    assert str(caught.value).startswith(f"{key}: ")
    assert message in str(caught.value)
    # The webhook reports the same message; rendering keeps the previous value and warns.
    assert validate_slo_configmap({key: text}) == [str(caught.value)]
    assert render({key: text}).warnings[0].startswith(str(caught.value))


def test_only_nodeslo_keys_are_parsed_as_strategies() -> None:
    with pytest.raises(ConfigError, match=r"^colocation-config: not a NodeSLO key"):
        parse_strategy_key(COLOCATION_CONFIG, "{}")


def test_unknown_fields_are_kept_and_reported_not_errors() -> None:
    threshold = {
        "clusterStrategy": {"enable": True, "futureKnob": 1},
        "nodeStrategies": [{"name": "x", "nodeSelector": POOL_X, "otherKnob": "v"}],
        "version": 2,
    }
    data = configmap(resource_threshold_config=threshold)
    config = parse_strategy_key(RESOURCE_THRESHOLD_CONFIG, data[RESOURCE_THRESHOLD_CONFIG])
    assert config.unknown_fields == (
        "version",
        "clusterStrategy.futureKnob",
        "nodeStrategies[0].otherKnob",
    )
    assert parse_slo_config(data).unknown_fields == [
        f"resource-threshold-config: {path}" for path in config.unknown_fields
    ]
    assert validate_slo_configmap(data) == []
    rendered = render(data, node({"pool": "x"}))
    assert rendered.warnings == []
    assert rendered.spec["resourceUsedThresholdWithBE"]["futureKnob"] == 1
    assert rendered.spec["resourceUsedThresholdWithBE"]["otherKnob"] == "v"


def test_null_values_keep_the_default() -> None:
    data = configmap(cpu_burst_config={"clusterStrategy": {"policy": None}, "nodeStrategies": None})
    assert render(data).spec["cpuBurstStrategy"] == default_spec()["cpuBurstStrategy"]


# -- network bandwidth annotation --------------------------------------------------------------

SYSTEM = {
    "clusterStrategy": {"totalNetworkBandwidth": "1G"},
    "nodeStrategies": [{"name": "x", "nodeSelector": POOL_X, "totalNetworkBandwidth": "10G"}],
}


@pytest.mark.parametrize(
    ("labels", "annotation", "expected", "warned"),
    [
        pytest.param({}, None, "1G", False, id="cluster"),
        pytest.param({"pool": "x"}, None, "10G", False, id="node-strategy"),
        pytest.param({}, "25G", "25G", False, id="annotation-over-cluster"),
        pytest.param({"pool": "x"}, "100M", "100M", False, id="annotation-over-node-strategy"),
        pytest.param({}, "lots", "1G", True, id="malformed-annotation-ignored"),
        pytest.param({}, "-1G", "1G", True, id="negative-annotation-ignored"),
    ],
)
def test_network_bandwidth_annotation_overrides_system_config(
    labels: dict[str, str], annotation: str | None, expected: str, warned: bool
) -> None:
    annotations = {BANDWIDTH: annotation} if annotation is not None else {}
    rendered = render(configmap(system_config=SYSTEM), node(labels, annotations))
    assert rendered.spec["systemStrategy"]["totalNetworkBandwidth"] == expected
    assert [w.startswith(f"annotation {BANDWIDTH}: ") for w in rendered.warnings] == (
        [True] if warned else []
    )


def test_network_bandwidth_annotation_applies_without_system_config() -> None:
    rendered = render({}, node(annotations={BANDWIDTH: "5G"}))
    assert rendered.spec["systemStrategy"] == {"totalNetworkBandwidth": "5G"}


# -- host applications -------------------------------------------------------------------------

HOST_APPS: dict[str, Any] = {
    "applications": [
        {
            "name": "nginx",
            "priority": "koord-prod",
            "qos": "LS",
            "cgroupPath": {
                "base": "CgroupRoot",
                "parentDir": "host-latency-sensitive/",
                "relativePath": "nginx/",
            },
        },
    ],
    "nodeConfigs": [
        {
            "name": "x",
            "nodeSelector": POOL_X,
            "applications": [{"name": "batch-agent", "qos": "BE"}],
        },
        {"name": "empty", "nodeSelector": {"matchLabels": {"pool": "bare"}}},
    ],
}


@pytest.mark.parametrize(
    ("labels", "names"),
    [
        pytest.param({}, ["nginx"], id="cluster-list"),
        pytest.param({"pool": "x"}, ["batch-agent"], id="node-list-replaces-cluster-list"),
        pytest.param({"pool": "bare"}, None, id="node-entry-without-apps"),
    ],
)
def test_host_applications_per_node(labels: dict[str, str], names: list[str] | None) -> None:
    spec = render(configmap(host_application_config=HOST_APPS), node(labels)).spec
    if names is None:
        assert "hostApplications" not in spec
    else:
        assert [app["name"] for app in spec["hostApplications"]] == names
    if names == ["nginx"]:
        assert spec["hostApplications"][0] == HOST_APPS["applications"][0]


# -- validate_slo_configmap --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        pytest.param({}, [], id="empty"),
        pytest.param(
            configmap(
                cpu_burst_config={
                    "nodeStrategies": [
                        {"name": "a", "nodeSelector": POOL_X},
                        {"name": "b", "nodeSelector": {"matchLabels": {"zone": "a"}}},
                        {"nodeSelector": {"matchLabels": {"zone": "b"}}},
                        {"nodeSelector": {"matchLabels": {"zone": "c"}}},
                    ]
                }
            ),
            [],
            id="overlapping-selectors-and-unnamed-entries-allowed",
        ),
        pytest.param(
            configmap(
                resource_threshold_config={
                    "nodeStrategies": [
                        {"name": "a", "nodeSelector": POOL_X},
                        {"name": "a", "nodeSelector": {"matchLabels": {"zone": "a"}}},
                    ]
                }
            ),
            [
                "resource-threshold-config: nodeStrategies[1].name: 'a' is already used by "
                "nodeStrategies[0]"
            ],
            id="duplicate-names",
        ),
        pytest.param(
            configmap(
                system_config={"nodeStrategies": [{"name": "a"}, {"name": "b", "nodeSelector": {}}]}
            ),
            [
                "system-config: nodeStrategies[0].nodeSelector: must not be empty (a missing "
                "selector matches no node, an empty one every node)",
                "system-config: nodeStrategies[1].nodeSelector: must not be empty (a missing "
                "selector matches no node, an empty one every node)",
            ],
            id="empty-selectors",
        ),
        pytest.param(
            configmap(
                host_application_config={
                    "nodeConfigs": [
                        {"name": "n", "nodeSelector": POOL_X},
                        {"name": "n", "nodeSelector": POOL_X},
                    ]
                }
            ),
            ["host-application-config: nodeConfigs[1].name: 'n' is already used by nodeConfigs[0]"],
            id="host-app-duplicate-node-configs",
        ),
        pytest.param(
            configmap(
                resource_threshold_config="{",
                resource_qos_config={"clusterStrategy": {"beClass": {"cpuQOS": {"enable": 1}}}},
                cpu_burst_config={"clusterStrategy": {"policy": "auto"}},
            ),
            [
                "resource-threshold-config: invalid JSON: Expecting property name enclosed in "
                "double quotes: line 1 column 2 (char 1)",
                "resource-qos-config: clusterStrategy.beClass.cpuQOS.enable: must be true or "
                "false, got 1",
            ],
            id="every-bad-key-reported",
        ),
        pytest.param(
            {CPU_BURST_CONFIG: "{}", "cpu-normalization-config": "not checked here"},
            [],
            id="other-keys-left-to-their-owners",
        ),
    ],
)
def test_validate_slo_configmap_reports_every_problem_precisely(
    data: dict[str, str], problems: list[str]
) -> None:
    assert validate_slo_configmap(data) == problems


@needs_colocation
def test_validate_reports_a_bad_colocation_config() -> None:
    problems = validate_slo_configmap({COLOCATION_CONFIG: "{", CPU_BURST_CONFIG: "{}"})
    assert len(problems) == 1
    assert problems[0].startswith("colocation-config: ")


@needs_colocation
def test_validate_accepts_the_charts_whole_slo_config() -> None:
    assert validate_slo_configmap(chart_slo_data()) == []


# -- the chart's ConfigMap ---------------------------------------------------------------------


def chart_slo_data() -> dict[str, str]:
    values = yaml.safe_load(VALUES.read_text())
    return {key: json.dumps(value) for key, value in values["sloConfig"]["data"].items()}


def test_charts_default_slo_config_renders_without_warnings() -> None:
    data = chart_slo_data()
    assert COLOCATION_CONFIG in data
    rendered = render(data, node({"kubernetes.io/hostname": "node-1"}))
    assert rendered.warnings == []
    spec = rendered.spec
    assert spec["resourceUsedThresholdWithBE"] == {
        "enable": True,
        "cpuSuppressThresholdPercent": 65,
        "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 70,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    qos = spec["resourceQOSStrategy"]
    assert qos["policies"] == {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"}
    assert qos["beClass"]["cpuQOS"] == {"enable": True, "groupIdentity": -1}
    assert spec["cpuBurstStrategy"]["policy"] == "auto"
    assert spec["systemStrategy"] == {
        "totalNetworkBandwidth": "0",
        "minFreeKbytesFactor": 100,
        "watermarkScaleFactor": 150,
        "memcgReapBackGround": 0,
    }
    assert parse_slo_config(data).unknown_fields == []
    without_colocation = {k: v for k, v in data.items() if k != COLOCATION_CONFIG}
    assert validate_slo_configmap(without_colocation) == []


# -- caching and isolation ---------------------------------------------------------------------


def test_rendered_specs_are_independent_copies() -> None:
    data = configmap(cpu_burst_config={"clusterStrategy": {"policy": "auto"}})
    assert parse_slo_config(data) is parse_slo_config(dict(data))  # parsed once per change
    first = render(data).spec
    first["cpuBurstStrategy"]["policy"] = "none"
    first["resourceUsedThresholdWithBE"]["enable"] = True
    second = render(data).spec
    assert second["cpuBurstStrategy"]["policy"] == "auto"
    assert second["resourceUsedThresholdWithBE"]["enable"] is False


# -- the NodeSLO object ------------------------------------------------------------------------


def test_node_slo_object_is_owned_by_its_node() -> None:
    rendered = render({})
    obj = node_slo_object(node(name="worker-7"), rendered)
    assert obj == {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {
            "name": "worker-7",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "worker-7", "uid": "uid-worker-7"}
            ],
        },
        "spec": rendered.spec,
        "status": {},
    }
    assert obj["spec"] is not rendered.spec


def test_node_slo_object_needs_a_node_name_and_skips_owner_without_uid() -> None:
    rendered = RenderedNodeSLO({})
    assert (
        "ownerReferences" not in node_slo_object({"metadata": {"name": "n"}}, rendered)["metadata"]
    )
    with pytest.raises(ValueError, match=r"metadata\.name"):
        node_slo_object({"metadata": {}}, rendered)


@pytest.mark.parametrize(
    ("existing", "desired", "update"),
    [
        pytest.param(None, {"spec": {}}, True, id="missing"),
        pytest.param({"spec": {"a": 1}}, {"spec": {"a": 1}}, False, id="same-spec"),
        pytest.param(
            {"metadata": {"resourceVersion": "9"}, "spec": {"a": 1}, "status": {}},
            {"metadata": {}, "spec": {"a": 1}},
            False,
            id="metadata-and-status-ignored",
        ),
        pytest.param({"spec": {"a": 1}}, {"spec": {"a": 2}}, True, id="changed-spec"),
        pytest.param({}, {"spec": {}}, False, id="no-spec-equals-empty-spec"),
    ],
)
def test_needs_update_compares_specs(
    existing: dict[str, Any] | None, desired: dict[str, Any], update: bool
) -> None:
    assert needs_update(existing, desired) is update
