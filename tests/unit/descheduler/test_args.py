"""LowNodeLoad's arguments: their defaults, their validation and the evictor's.

Most cases re-express Koordinator v1.8.0's own tests with their numbers:
pkg/descheduler/apis/config/v1alpha2/defaults_test.go and config/validation/
validation_loadaware_test.go. Cases marked "own" add numbers and corners of our own.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from descheduler.args import (
    DEFAULT_POOL_NAME,
    AnomalyCondition,
    EvictorArgs,
    LowNodeLoadArgs,
    NodePool,
)
from descheduler.fields import ArgsError

# -- arguments: defaults (defaults_test.go) -------------------------------------------------


def test_defaults_of_an_empty_config() -> None:
    args = LowNodeLoadArgs.from_dict({})
    assert (args.paused, args.dry_run, args.node_fit) == (False, False, True)
    assert args.number_of_nodes == 0
    assert args.node_metric_expiration_seconds == 180
    assert args.detector_cache_timeout == 300.0
    [pool] = args.node_pools
    assert pool.name == DEFAULT_POOL_NAME
    assert pool.node_selector is None
    assert pool.resource_weights == {"cpu": 1, "memory": 1}
    assert pool.anomaly_condition == AnomalyCondition(5, 3, 60.0)
    assert pool.low_thresholds == {} and pool.high_thresholds == {}


def test_defaults_keep_node_fit_false() -> None:
    args = LowNodeLoadArgs.from_dict({"nodeFit": False})
    assert args.node_fit is False
    assert args.node_pools[0].resource_weights == {"cpu": 1, "memory": 1}


def test_defaults_keep_a_given_detector_cache_timeout() -> None:
    assert LowNodeLoadArgs.from_dict({"detectorCacheTimeout": "10m"}).detector_cache_timeout == 600


def test_defaults_fill_a_zero_consecutive_abnormalities() -> None:
    args = LowNodeLoadArgs.from_dict(
        {
            "anomalyCondition": {
                "timeout": "10s",
                "consecutiveAbnormalities": 0,
                "consecutiveNormalities": 3,
            }
        }
    )
    assert args.node_pools[0].anomaly_condition == AnomalyCondition(5, 3, 10.0)


def test_defaults_weigh_every_threshold_resource() -> None:
    args = LowNodeLoadArgs.from_dict(
        {
            "lowThresholds": {"cpu": 30, "memory": 30, "pods": 10},
            "resourceWeights": {"cpu": 10, "memory": 5},
        }
    )
    assert args.node_pools[0].resource_weights == {"cpu": 10, "memory": 5, "pods": 1}


def test_defaults_replace_non_positive_weights_of_default_resources_only() -> None:
    # own: a weight of 0 or less for cpu/memory/threshold resources is defaulted, others kept
    args = LowNodeLoadArgs.from_dict(
        {
            "highThresholds": {"cpu": 80, "example.com/foo": 50},
            "resourceWeights": {"cpu": 0, "memory": -2, "example.com/bar": -3},
        }
    )
    assert args.node_pools[0].resource_weights == {
        "cpu": 1,
        "memory": 1,
        "example.com/foo": 1,
        "example.com/bar": -3,
    }


def test_node_pools_inherit_every_field_from_the_top_level() -> None:
    config: dict[str, Any] = {
        "highThresholds": {"cpu": 80, "memory": 80},
        "lowThresholds": {"cpu": 20, "memory": 20},
        "prodHighThresholds": {"cpu": 90},
        "prodLowThresholds": {"cpu": 10},
        "resourceWeights": {"cpu": 2},
        "anomalyCondition": {
            "timeout": "2m",
            "consecutiveAbnormalities": 10,
            "consecutiveNormalities": 5,
        },
        "nodePools": [{"name": "test-pool"}],
    }
    # upstream's defaulting test never validates: a prod high of 90 above the node's 80 is
    # refused, for the default pool and for the pool that inherits it
    with pytest.raises(ArgsError) as caught:
        LowNodeLoadArgs.from_dict(config)
    assert str(caught.value) == (
        "prodHighThresholds.cpu: must be less than or equal to highThresholds; "
        "nodePools[0].prodHighThresholds.cpu: must be less than or equal to highThresholds"
    )
    config["prodHighThresholds"] = {"cpu": 75}
    args = LowNodeLoadArgs.from_dict(config)
    default, pool = args.node_pools
    assert default.name == DEFAULT_POOL_NAME and pool.name == "test-pool"
    assert pool.high_thresholds == {"cpu": 80, "memory": 80}
    assert pool.low_thresholds == {"cpu": 20, "memory": 20}
    assert pool.prod_high_thresholds == {"cpu": 75}
    assert pool.prod_low_thresholds == {"cpu": 10}
    assert pool.resource_weights == {"cpu": 2, "memory": 1}
    assert pool.anomaly_condition == AnomalyCondition(10, 5, 120.0)


def test_node_pools_keep_their_own_thresholds() -> None:
    args = LowNodeLoadArgs.from_dict(
        {
            "highThresholds": {"cpu": 80},
            "lowThresholds": {"cpu": 20},
            "nodePools": [{"name": "pool-1"}, {"name": "pool-2", "highThresholds": {"cpu": 70}}],
        }
    )
    _, first, second = args.node_pools
    assert first.high_thresholds == {"cpu": 80} and first.low_thresholds == {"cpu": 20}
    assert second.high_thresholds == {"cpu": 70} and second.low_thresholds == {"cpu": 20}
    assert first.resource_weights == second.resource_weights == {"cpu": 1, "memory": 1}


def test_node_pool_anomaly_zeros_come_from_the_top_level() -> None:
    args = LowNodeLoadArgs.from_dict(
        {
            "anomalyCondition": {
                "timeout": "2m",
                "consecutiveAbnormalities": 10,
                "consecutiveNormalities": 5,
            },
            "nodePools": [
                {
                    "name": "test-pool",
                    "anomalyCondition": {
                        "timeout": "1m",
                        "consecutiveAbnormalities": 0,
                        "consecutiveNormalities": 0,
                    },
                }
            ],
        }
    )
    assert args.node_pools[1].anomaly_condition == AnomalyCondition(10, 5, 60.0)


def test_node_pools_keep_their_own_anomaly_condition_and_weights_default() -> None:
    args = LowNodeLoadArgs.from_dict(
        {
            "highThresholds": {"cpu": 80},
            "lowThresholds": {"cpu": 20},
            "nodePools": [
                {
                    "name": "custom-pool",
                    "highThresholds": {"cpu": 70},
                    "lowThresholds": {"cpu": 30},
                    "anomalyCondition": {
                        "consecutiveAbnormalities": 3,
                        "consecutiveNormalities": 2,
                    },
                }
            ],
        }
    )
    pool = args.node_pools[1]
    assert (pool.high_thresholds, pool.low_thresholds) == ({"cpu": 70}, {"cpu": 30})
    assert pool.anomaly_condition == AnomalyCondition(3, 2, 60.0)
    assert pool.resource_weights == {"cpu": 1, "memory": 1}


def test_an_empty_object_is_not_inherited() -> None:
    # own: only an absent field is inherited (a Go nil map); {} stays empty
    args = LowNodeLoadArgs.from_dict(
        {"highThresholds": {"cpu": 80}, "nodePools": [{"name": "p", "highThresholds": {}}]}
    )
    assert args.node_pools[1].high_thresholds == {}


def test_deviation_mode_is_not_inherited() -> None:
    # own: a pool's useDeviationThresholds is a plain bool upstream, never defaulted
    args = LowNodeLoadArgs.from_dict({"useDeviationThresholds": True, "nodePools": [{"name": "p"}]})
    assert args.node_pools[0].use_deviation_thresholds is True
    assert args.node_pools[1].use_deviation_thresholds is False


def test_top_level_anomaly_defaulting_is_an_else_if_chain() -> None:
    # own: with both counts 0 only abnormalities is filled, and validation then refuses
    with pytest.raises(
        ArgsError, match=r"^anomalyCondition.consecutiveNormalities: must be greater than 0$"
    ):
        LowNodeLoadArgs.from_dict({"anomalyCondition": {}})
    args = LowNodeLoadArgs.from_dict({"anomalyCondition": {"consecutiveAbnormalities": 2}})
    assert args.node_pools[0].anomaly_condition == AnomalyCondition(2, 3, 60.0)


def test_the_whole_config_in_yaml_form() -> None:
    # own: every field a user writes, camelCase
    args = LowNodeLoadArgs.from_dict(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "LowNodeLoadArgs",
            "paused": False,
            "dryRun": True,
            "numberOfNodes": 2,
            "nodeMetricExpirationSeconds": 300,
            "evictableNamespaces": {"exclude": ["kube-system"]},
            "nodeSelector": {"matchLabels": {"pool": "a"}},
            "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
            "nodeFit": True,
            "useDeviationThresholds": False,
            "lowThresholds": {"cpu": 33.3, "memory": 45},
            "highThresholds": {"cpu": 66.6, "memory": 75},
            "anomalyCondition": {
                "consecutiveAbnormalities": 2,
                "consecutiveNormalities": 1,
                "timeout": "90s",
            },
            "detectorCacheTimeout": "1h",
        }
    )
    assert args.dry_run and args.number_of_nodes == 2
    assert args.node_metric_expiration_seconds == 300
    assert args.evictable_namespaces_exclude == ("kube-system",)
    assert args.pod_selectors[0].name == "web"
    pool = args.node_pools[0]
    assert pool.node_selector is not None and pool.node_selector.matches({"pool": "a"})
    assert pool.low_thresholds == {"cpu": 33.3, "memory": 45.0}
    assert pool.anomaly_condition == AnomalyCondition(2, 1, 90.0)
    assert args.detector_cache_timeout == 3600


# -- arguments: validation (validation_loadaware_test.go) -----------------------------------


@pytest.mark.parametrize(
    ("number", "ok"), [(10, True), (5, True), (0, True), (-1, False), (-5, False)]
)
def test_number_of_nodes(number: int, ok: bool) -> None:
    if ok:
        assert LowNodeLoadArgs.from_dict({"numberOfNodes": number}).number_of_nodes == number
    else:
        with pytest.raises(ArgsError, match="numberOfNodes: must be greater than or equal to 0"):
            LowNodeLoadArgs.from_dict({"numberOfNodes": number})


@pytest.mark.parametrize(
    ("include", "exclude", "ok"),
    [
        (["namespace1"], [], True),
        ([], ["namespace1"], True),
        (["namespace1", "namespace2"], [], True),
        (["namespace1"], ["namespace2"], False),
        (["namespace1", "namespace11"], ["namespace2"], False),
        (["namespace1"], ["namespace2", "namespace22"], False),
    ],
)
def test_evictable_namespaces(include: list[str], exclude: list[str], ok: bool) -> None:
    config = {"evictableNamespaces": {"include": include, "exclude": exclude}}
    if ok:
        LowNodeLoadArgs.from_dict(config)
    else:
        with pytest.raises(ArgsError, match="only one of Include/Exclude namespaces can be set"):
            LowNodeLoadArgs.from_dict(config)


@pytest.mark.parametrize(
    ("high", "low", "condition", "ok"),
    [
        (100, 90, None, True),
        (0, 0, None, True),
        (0, -1, None, False),
        (100, -10, None, False),
        (-10, -100, None, False),
        (100, 50, (5, 3), True),
        (100, 50, (0, 3), False),
        (100, 50, (5, 0), False),
        (120, 50, None, True),  # thresholds above 100 are not checked, as upstream
        (120, 120, None, True),
        (50.5, 50.25, None, True),  # own: fractions
        (50.25, 50.5, None, False),
    ],
)
def test_node_pool_thresholds(
    high: float, low: float, condition: tuple[int, int] | None, ok: bool
) -> None:
    abnormal, normal = condition or (5, 3)
    pool = NodePool(
        name="p",
        high_thresholds={"cpu": high},
        low_thresholds={"cpu": low},
        anomaly_condition=AnomalyCondition(abnormal, normal),
    )
    if ok:
        LowNodeLoadArgs(node_pools=(pool,))
    else:
        with pytest.raises(ArgsError, match=r"nodePools\[0\]\."):
            LowNodeLoadArgs(node_pools=(pool,))


def test_prod_thresholds_are_checked_against_node_and_prod_high() -> None:
    # own: prodHigh above high, prodLow above prodHigh; every problem is named at once
    with pytest.raises(ArgsError) as caught:
        LowNodeLoadArgs.from_dict(
            {
                "highThresholds": {"cpu": 60},
                "prodHighThresholds": {"cpu": 70},
                "prodLowThresholds": {"cpu": 75},
                "nodePools": [{"name": "b", "lowThresholds": {"memory": -0.5}}],
            }
        )
    message = str(caught.value)
    assert "prodHighThresholds.cpu: must be less than or equal to highThresholds" in message
    assert (
        "prodLowThresholds.cpu: low percentage must be less than or equal to prodHighThresholds"
        in message
    )
    assert (
        "nodePools[0].lowThresholds.memory: percentage must be greater than or equal to 0"
        in message
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"lowThresholds": {"cpu": "30"}}, "lowThresholds.cpu: must be a number, got '30'"),
        ({"highThresholds": {"cpu": True}}, "highThresholds.cpu: must be a number, got True"),
        ({"highThresholds": {"cpu": math.nan}}, "highThresholds.cpu: must be finite"),
        ({"highThreshold": {"cpu": 30}}, "args: unknown field(s) highThreshold"),
        ({"numberOfNodes": 1.5}, "numberOfNodes: must be an integer, got 1.5"),
        ({"numberOfNodes": 2**31}, "numberOfNodes: 2147483648 is out of range"),
        ({"nodeFit": "yes"}, "nodeFit: must be true or false, got 'yes'"),
        (
            {"nodeMetricExpirationSeconds": 0},
            "nodeMetricExpirationSeconds: should be a positive value",
        ),
        ({"detectorCacheTimeout": "5 minutes"}, "detectorCacheTimeout: not a duration"),
        (
            {"anomalyCondition": {"consecutiveAbnormalities": -1}},
            "consecutiveAbnormalities: -1 is out of range",
        ),
        ({"kind": "LoadAwareSchedulingArgs"}, "kind: must be LowNodeLoadArgs"),
        ({"nodePools": {"name": "a"}}, "nodePools: must be a list"),
        (
            {"nodePools": [{"name": "a", "lowThreshold": {}}]},
            "nodePools[0]: unknown field(s) lowThreshold",
        ),
        (
            {
                "nodeSelector": {
                    "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]
                }
            },
            "matchExpressions[0].operator: 'Gt' is not a valid label selector operator",
        ),
        (
            {
                "podSelectors": [
                    {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}
                ]
            },
            "podSelectors[0].selector.matchExpressions[0].values: must be non-empty for In",
        ),
        ({"resourceWeights": {"cpu": 1.5}}, "resourceWeights.cpu: must be an integer"),
        (
            {"evictableNamespaces": {"include": "default"}},
            "evictableNamespaces.include: must be a list",
        ),
    ],
)
def test_bad_values_are_named(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        LowNodeLoadArgs.from_dict(config)
    assert message in str(caught.value)


def test_evictor_args() -> None:
    evictor = EvictorArgs.from_dict(
        {
            "evictLocalStoragePods": True,
            "priorityThreshold": {"value": 10000},
            "labelSelector": {"matchLabels": {"app": "web"}},
            "maxMigratingPerNode": 2,  # the migration controller's, not read here
        }
    )
    assert evictor.evict_local_storage_pods and not evictor.evict_system_critical_pods
    assert evictor.priority_threshold == 10000
    assert evictor.label_selector is not None and evictor.label_selector.matches({"app": "web"})
    with pytest.raises(ArgsError, match="only one of name and value"):
        EvictorArgs.from_dict({"priorityThreshold": {"name": "high", "value": 1}})
    with pytest.raises(ArgsError, match=r"give priorityThreshold\.value"):
        EvictorArgs.from_dict({"priorityThreshold": {"name": "high"}})
    with pytest.raises(ArgsError, match="ignorePvcPods: must be true or false"):
        EvictorArgs.from_dict({"ignorePvcPods": 1})
