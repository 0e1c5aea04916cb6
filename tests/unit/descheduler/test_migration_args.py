"""MigrationControllerArgs: defaults, validation, and the eviction gates.

Cases marked with an upstream test come from Koordinator v1.8.0's
pkg/descheduler/apis/config/validation/validation_pluginargs_test.go (each upstream case
defaults its args first, as from_dict does); "own" cases add corners.
"""

from __future__ import annotations

from typing import Any

import pytest

from descheduler.args import EvictorArgs
from descheduler.fields import ArgsError
from descheduler.migration.args import (
    ArbitrationArgs,
    Gate,
    MigrationControllerArgs,
    ObjectLimiter,
)
from descheduler.selectors import LabelSelector


def test_defaults() -> None:
    # TestValidateMigrationControllerArgs "default args": defaulted and valid
    args = MigrationControllerArgs.from_dict({})
    assert args.dry_run is False
    assert args.max_concurrent_reconciles == 1
    assert args.max_migrating_per_node == 2
    assert args.max_migrating_globally is None
    assert args.max_migrating_per_namespace is None
    assert args.max_migrating_per_workload is None
    assert args.max_unavailable_per_workload is None
    assert args.skip_check_expected_replicas is False
    assert args.default_job_mode == "ReservationFirst"
    assert args.default_job_ttl == 300.0
    assert args.scheduler_names == ("koord-scheduler",)
    assert args.evict_qps == 10.0
    assert args.evict_burst == 1
    assert args.eviction_policy == "Eviction"
    assert args.object_limiters == {"workload": ObjectLimiter(duration=300.0)}
    assert args.arbitration == ArbitrationArgs(enabled=True, interval=0.5)
    assert args.evictor == EvictorArgs()
    assert args == MigrationControllerArgs()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        # TestValidateMigrationControllerArgs "invalid evictQPS"
        ({"evictQPS": "xxxx"}, "evictQPS: must be greater than 0"),
        # "invalid evictBurst"
        ({"evictQPS": 11, "evictBurst": 0}, "evictBurst: must be greater than 0"),
        # "invalid maxConcurrentReconciles"
        (
            {"maxConcurrentReconciles": -1},
            "maxConcurrentReconciles: should be greater than or equal to 1",
        ),
        # "invalid defaultJobMode"
        (
            {"defaultJobMode": "unsupportedMode"},
            "defaultJobMode: must be ReservationFirst or EvictDirectly, got 'unsupportedMode'",
        ),
        # "invalid defaultJobTTL"
        ({"defaultJobTTL": "-10m"}, "defaultJobTTL: should be positive or zero"),
        # "invalid skipEvictionGates"
        (
            {"skipEvictionGates": ["NoSuchGate"]},
            "skipEvictionGates[0]: unknown eviction gate 'NoSuchGate'",
        ),
        # own
        (
            {"namespaces": {"include": ["a"], "exclude": ["b"]}},
            "namespaces: only one of Include/Exclude namespaces can be set",
        ),
        ({"evictQPS": "1_0"}, "evictQPS: must be greater than 0"),
        ({"evictQPS": " 5"}, "evictQPS: must be greater than 0"),
        ({"evictQPS": -1}, "evictQPS: must be greater than 0"),
        (
            {"evictionPolicy": "Kill"},
            "evictionPolicy: must be one of Eviction, Delete, SoftEviction, got 'Kill'",
        ),
    ],
)
def test_validation_refuses(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        MigrationControllerArgs.from_dict(config)
    assert str(caught.value) == message


def test_validation_reports_every_problem() -> None:
    with pytest.raises(ArgsError) as caught:
        MigrationControllerArgs.from_dict({"evictBurst": 0, "maxMigratingPerNode": -1})
    assert str(caught.value) == (
        "maxMigratingPerNode: should be greater or equal 0, got -1; "
        "evictBurst: must be greater than 0"
    )


@pytest.mark.parametrize(
    "key", ["maxMigratingPerNamespace", "maxMigratingGlobally", "maxMigratingPerNode"]
)
@pytest.mark.parametrize(
    ("value", "valid"),
    # TestValidateMigrationControllerArgs_MaxMigratingPerNamespace, _MaxMigratingGlobally and
    # _MaxMigratingPerNode: 10, 100 and 0 are fine, -1 is not
    [(10, True), (100, True), (0, True), (-1, False)],
)
def test_validation_of_the_migrating_limits(key: str, value: int, valid: bool) -> None:
    if valid:
        MigrationControllerArgs.from_dict({key: value})
        return
    with pytest.raises(ArgsError) as caught:
        MigrationControllerArgs.from_dict({key: value})
    assert str(caught.value) == f"{key}: should be greater or equal 0, got -1"


@pytest.mark.parametrize("key", ["maxMigratingPerWorkload", "maxUnavailablePerWorkload"])
@pytest.mark.parametrize("value", [10, 100, 0, -1, "10%", "0%"])
def test_validation_accepts_any_int_or_percent(key: str, value: int | str) -> None:
    # TestValidateMigrationControllerArgs_MaxMigratingPerWorkload and
    # _MaxUnavailablePerWorkload: "we do not check the valid value" (-1 included)
    args = MigrationControllerArgs.from_dict({key: value})
    attr = (
        "max_migrating_per_workload" if key.startswith("maxM") else "max_unavailable_per_workload"
    )
    assert getattr(args, attr) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("abc", "maxUnavailablePerWorkload: is invalid, err: invalid type: string is not a "
         "percentage: 'abc'"),
        ("5", "maxUnavailablePerWorkload: is invalid, err: invalid type: string is not a "
         "percentage: '5'"),
        ("x%", "maxUnavailablePerWorkload: is invalid, err: invalid value 'x%': not an integer "
         "percentage"),
        (1.5, "maxUnavailablePerWorkload: must be an integer, got 1.5"),
        (True, "maxUnavailablePerWorkload: must be an integer, got True"),
        (2**31, "maxUnavailablePerWorkload: 2147483648 is out of range -2147483648..2147483647"),
    ],
)  # fmt: skip
def test_unparseable_int_or_string_is_refused(value: object, message: str) -> None:
    # own: what GetScaledValueFromIntOrPercent refuses, and what JSON cannot decode
    with pytest.raises(ArgsError) as caught:
        MigrationControllerArgs.from_dict({"maxUnavailablePerWorkload": value})
    assert str(caught.value) == message


def test_construction_validates_too() -> None:
    with pytest.raises(ArgsError, match="maxMigratingPerWorkload: is invalid"):
        MigrationControllerArgs(max_migrating_per_workload="ten")


def test_every_field_is_read() -> None:
    args = MigrationControllerArgs.from_dict(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "MigrationControllerArgs",
            "dryRun": True,
            "maxConcurrentReconciles": 4,
            "evictAllBarePods": True,
            "ignorePvcPods": True,
            "priorityThreshold": {"value": 10000},
            "labelSelector": {"matchLabels": {"app": "web"}},
            "namespaces": {"exclude": ["kube-system"]},
            "nodeFit": True,
            "nodeSelector": "pool=a",
            "skipEvictionGates": ["PVC", "NodeFit"],
            "maxMigratingGlobally": 20,
            "maxMigratingPerNode": 3,
            "maxMigratingPerNamespace": 7,
            "maxMigratingPerWorkload": "25%",
            "maxUnavailablePerWorkload": 2,
            "skipCheckExpectedReplicas": True,
            "objectLimiters": {"namespace": {"duration": "10m", "maxMigrating": "5%", "burst": 3}},
            "defaultJobMode": "EvictDirectly",
            "defaultJobTTL": "1h30m",
            "schedulerNames": ["a", "b"],
            "evictQPS": "2.5",
            "evictBurst": 6,
            "evictionPolicy": "Delete",
            "defaultDeleteOptions": {"gracePeriodSeconds": 0},
            "arbitrationArgs": {"enabled": True, "interval": "2s"},
        }
    )
    assert args.dry_run is True
    assert args.max_concurrent_reconciles == 4
    assert args.evictor == EvictorArgs(
        evict_all_bare_pods=True,
        ignore_pvc_pods=True,
        priority_threshold=10000,
        label_selector=LabelSelector({"app": "web"}),
    )
    assert args.namespaces_exclude == ("kube-system",) and args.namespaces_include == ()
    assert (args.node_fit, args.node_selector) == (True, "pool=a")
    assert args.skip_eviction_gates == ("PVC", "NodeFit")
    assert (args.max_migrating_globally, args.max_migrating_per_node) == (20, 3)
    assert args.max_migrating_per_namespace == 7
    assert args.max_migrating_per_workload == "25%"
    assert args.max_unavailable_per_workload == 2
    assert args.skip_check_expected_replicas is True
    assert args.object_limiters == {"namespace": ObjectLimiter(600.0, "5%", 3)}
    assert (args.default_job_mode, args.default_job_ttl) == ("EvictDirectly", 5400.0)
    assert args.scheduler_names == ("a", "b")
    assert (args.evict_qps, args.evict_burst, args.eviction_policy) == (2.5, 6, "Delete")
    assert args.default_delete_options == {"gracePeriodSeconds": 0}
    assert args.arbitration == ArbitrationArgs(enabled=True, interval=2.0)


def test_arbitration_args_given_without_enabled_are_disabled() -> None:
    # own: Enabled is a plain bool upstream; defaulting fills only a missing arbitrationArgs
    args = MigrationControllerArgs.from_dict({"arbitrationArgs": {"interval": "1s"}})
    assert args.arbitration == ArbitrationArgs(enabled=False, interval=1.0)
    args = MigrationControllerArgs.from_dict({"arbitrationArgs": {}})
    assert args.arbitration == ArbitrationArgs(enabled=False, interval=0.5)


def test_an_empty_limiter_map_takes_the_default_and_zero_values_are_kept() -> None:
    assert MigrationControllerArgs.from_dict({"objectLimiters": {}}).object_limiters == {
        "workload": ObjectLimiter(duration=300.0)
    }
    args = MigrationControllerArgs.from_dict(
        {"defaultJobTTL": "0s", "maxMigratingPerNode": 0, "schedulerNames": []}
    )
    assert (args.default_job_ttl, args.max_migrating_per_node) == (0.0, 0)
    assert args.scheduler_names == ("koord-scheduler",)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"maxMigratingPerPod": 1}, "args: unknown field(s) maxMigratingPerPod"),
        ({"kind": "LowNodeLoadArgs"},
         "kind: must be MigrationControllerArgs, got 'LowNodeLoadArgs'"),
        ({"objectLimiters": {"node": {}}}, "objectLimiters.node: unknown limiter type (known: "
         "workload, namespace)"),
        ({"objectLimiters": {"workload": {"duration": 5}}}, "objectLimiters.workload.duration: "
         "must be a duration such as 5m0s, got 5"),
        ({"defaultJobTTL": "5 minutes"}, "defaultJobTTL: not a duration: '5 minutes'"),
        ({"dryRun": "yes"}, "dryRun: must be true or false, got 'yes'"),
        ({"nodeSelector": {"a": "b"}}, "nodeSelector: must be a string, got {'a': 'b'}"),
        ({"namespaces": {"only": []}}, "namespaces: unknown field(s) only"),
        ({"skipCheckExpectedReplicas": 1}, "skipCheckExpectedReplicas: must be true or false, "
         "got 1"),
        ({"evictQPS": [1]}, "evictQPS: must be a number or a string, got [1]"),
    ],
)  # fmt: skip
def test_parse_errors_name_the_field(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        MigrationControllerArgs.from_dict(config)
    assert str(caught.value) == message


def test_skipped_gates_loosen_the_evictor() -> None:
    # the gates initFilters derives its evictor arguments from (filter.go)
    evictor = EvictorArgs(
        ignore_pvc_pods=True,
        priority_threshold=100,
        label_selector=LabelSelector({"a": "b"}),
    )
    args = MigrationControllerArgs(evictor=evictor)
    assert args.effective_evictor() == evictor
    gates = tuple(
        str(g)
        for g in (
            Gate.PVC,
            Gate.PRIORITY_THRESHOLD,
            Gate.LABEL_SELECTOR,
            Gate.LOCAL_STORAGE,
            Gate.SYSTEM_CRITICAL,
            Gate.BARE_PODS,
        )
    )
    loose = MigrationControllerArgs(evictor=evictor, skip_eviction_gates=gates)
    assert loose.effective_evictor() == EvictorArgs(
        evict_local_storage_pods=True,
        evict_system_critical_pods=True,
        evict_failed_bare_pods=True,
        evict_all_bare_pods=True,
        ignore_pvc_pods=False,
        priority_threshold=None,
        label_selector=None,
    )
    assert loose.skips(Gate.PVC) and not loose.skips(Gate.NODE_FIT)
