"""MigrationControllerArgs: the migration controller's arguments (limits, job defaults, the
evictor's pod protections, eviction gates to skip), read from the camelCase YAML/JSON users
write, defaulted and validated (ArgsError, naming the field).

It follows Koordinator v1.8.0's pkg/descheduler/apis/config/v1alpha2/types_pluginargs.go
(the fields), v1alpha2/defaults.go (SetDefaults_MigrationControllerArgs) and
config/validation/validation_pluginargs.go (ValidateMigrationControllerArgs). The pod
protections are descheduler.args.EvictorArgs, read from the same object.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from descheduler.args import EvictorArgs, _bool, _int, _strings
from descheduler.fields import ArgsError, check_keys, json_object
from descheduler.migration.int_or_percent import IntOrPercent, percent_value, scaled_value
from descheduler.migration.job import JobError, Mode, parse_duration

ARGS_KIND = "MigrationControllerArgs"

DEFAULT_MAX_CONCURRENT_RECONCILES = 1
DEFAULT_MAX_MIGRATING_PER_NODE = 2
DEFAULT_JOB_MODE = str(Mode.RESERVATION_FIRST)  # Koordinator's default
DEFAULT_JOB_TTL = 300.0  # 5 minutes
DEFAULT_SCHEDULER_NAMES = ("koord-scheduler",)
DEFAULT_EVICT_QPS = 10.0
DEFAULT_EVICT_BURST = 1
DEFAULT_ARBITRATION_INTERVAL = 0.5
DEFAULT_WORKLOAD_LIMITER_DURATION = 300.0

EVICTION_POLICIES = ("Eviction", "Delete", "SoftEviction")  # the evictors Koordinator has
DEFAULT_EVICTION_POLICY = "Eviction"

LIMITER_WORKLOAD = "workload"
LIMITER_NAMESPACE = "namespace"

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class Gate(enum.StrEnum):
    """EvictionGate: a check skipEvictionGates can switch off."""

    MAX_UNAVAILABLE_PER_WORKLOAD = "MaxUnavailablePerWorkload"
    MAX_MIGRATING_PER_WORKLOAD = "MaxMigratingPerWorkload"
    MAX_MIGRATING_PER_NODE = "MaxMigratingPerNode"
    MAX_MIGRATING_PER_NAMESPACE = "MaxMigratingPerNamespace"
    MAX_MIGRATING_GLOBALLY = "MaxMigratingGlobally"
    EXPECTED_REPLICAS = "ExpectedReplicas"
    PVC = "PVC"
    BARE_PODS = "BarePods"
    LOCAL_STORAGE = "LocalStorage"
    SYSTEM_CRITICAL = "SystemCritical"
    PRIORITY_THRESHOLD = "PriorityThreshold"
    LABEL_SELECTOR = "LabelSelector"
    NAMESPACES = "Namespaces"
    NODE_FIT = "NodeFit"


@dataclass(frozen=True)
class ObjectLimiter:
    """MigrationObjectLimiter: at most ``max_migrating`` migrations (None or 0: derived from
    maxMigratingPerWorkload) per object within ``duration`` seconds, bursting to ``burst``."""

    duration: float = 0.0
    max_migrating: IntOrPercent | None = None
    burst: int = 0


@dataclass(frozen=True)
class ArbitrationArgs:
    enabled: bool = True
    interval: float = DEFAULT_ARBITRATION_INTERVAL  # seconds between arbitration rounds


def _default_limiters() -> dict[str, ObjectLimiter]:
    return {LIMITER_WORKLOAD: ObjectLimiter(duration=DEFAULT_WORKLOAD_LIMITER_DURATION)}


@dataclass(frozen=True)
class MigrationControllerArgs:
    """MigrationControllerArgs after defaulting. Construction validates (ArgsError);
    ``from_dict`` reads the YAML/JSON users write. A limit of None or 0 is off; the per-node
    limit defaults to 2, the others to off. Durations are seconds."""

    dry_run: bool = False
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES
    evictor: EvictorArgs = field(default_factory=EvictorArgs)
    namespaces_include: tuple[str, ...] = ()
    namespaces_exclude: tuple[str, ...] = ()
    node_fit: bool = False
    node_selector: str = ""
    skip_eviction_gates: tuple[str, ...] = ()
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = DEFAULT_MAX_MIGRATING_PER_NODE
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: IntOrPercent | None = None
    max_unavailable_per_workload: IntOrPercent | None = None
    skip_check_expected_replicas: bool = False
    object_limiters: Mapping[str, ObjectLimiter] = field(default_factory=_default_limiters)
    default_job_mode: str = DEFAULT_JOB_MODE
    default_job_ttl: float = DEFAULT_JOB_TTL
    scheduler_names: tuple[str, ...] = DEFAULT_SCHEDULER_NAMES
    evict_qps: float = DEFAULT_EVICT_QPS
    evict_burst: int = DEFAULT_EVICT_BURST
    eviction_policy: str = DEFAULT_EVICTION_POLICY
    default_delete_options: Mapping[str, Any] | None = None
    arbitration: ArbitrationArgs = field(default_factory=ArbitrationArgs)

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            raise ArgsError("; ".join(problems))

    def skips(self, gate: Gate) -> bool:
        return gate in self.skip_eviction_gates

    def effective_evictor(self) -> EvictorArgs:
        """The pod protections with the skipped gates taken off, as Koordinator's filter
        derives them (a skipped BarePods gate lets every bare pod go)."""
        evictor = self.evictor
        if self.skips(Gate.LABEL_SELECTOR):
            evictor = replace(evictor, label_selector=None)
        if self.skips(Gate.PRIORITY_THRESHOLD):
            evictor = replace(evictor, priority_threshold=None)
        if self.skips(Gate.LOCAL_STORAGE):
            evictor = replace(evictor, evict_local_storage_pods=True)
        if self.skips(Gate.SYSTEM_CRITICAL):
            evictor = replace(evictor, evict_system_critical_pods=True)
        if self.skips(Gate.PVC):
            evictor = replace(evictor, ignore_pvc_pods=False)
        if self.skips(Gate.BARE_PODS):
            evictor = replace(evictor, evict_failed_bare_pods=True, evict_all_bare_pods=True)
        return evictor

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> MigrationControllerArgs:
        """The args of a MigrationController plugin config (camelCase keys, ``apiVersion``
        and ``kind`` allowed), defaulted as SetDefaults_MigrationControllerArgs does. Raises
        ArgsError naming the field: unknown keys, wrong types, what validation refuses."""
        return _parse(config)


# -- parsing ---------------------------------------------------------------------------------

_KEYS = (
    "apiVersion",
    "kind",
    "dryRun",
    "maxConcurrentReconciles",
    "evictFailedBarePods",
    "evictAllBarePods",
    "evictLocalStoragePods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "priorityThreshold",
    "labelSelector",
    "namespaces",
    "nodeFit",
    "nodeSelector",
    "skipEvictionGates",
    "maxMigratingGlobally",
    "maxMigratingPerNode",
    "maxMigratingPerNamespace",
    "maxMigratingPerWorkload",
    "maxUnavailablePerWorkload",
    "skipCheckExpectedReplicas",
    "objectLimiters",
    "defaultJobMode",
    "defaultJobTTL",
    "schedulerNames",
    "evictQPS",
    "evictBurst",
    "evictionPolicy",
    "defaultDeleteOptions",
    "arbitrationArgs",
)


def _optional_int32(obj: Mapping[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return None if value is None else _int(value, key, _INT32_MIN, _INT32_MAX)


def _int_or_percent(value: Any, where: str) -> IntOrPercent | None:
    """An IntOrString as JSON gives it: an int32, or a string (checked by validation)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return _int(value, where, _INT32_MIN, _INT32_MAX)


def _string(value: Any, where: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ArgsError(f"{where}: must be a string, got {value!r}")
    return value


def _seconds(value: Any, where: str, default: float) -> float:
    if value is None:
        return default
    try:
        return parse_duration(value, where)
    except JobError as err:
        raise ArgsError(str(err)) from None


def _qps(value: Any) -> float:
    """Float64OrString's FloatValue: a number, or a string parsed as one (0 when it is not,
    which validation then refuses)."""
    if value is None:
        return DEFAULT_EVICT_QPS
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ArgsError(f"evictQPS: must be a number or a string, got {value!r}")
    if isinstance(value, str):
        # Go's ParseFloat takes no spaces and no digit separators, where Python's float does
        if value.strip() != value or "_" in value:
            return 0.0
        try:
            return float(value)
        except ValueError:
            return 0.0
    return float(value)


def _limiters(value: Any) -> dict[str, ObjectLimiter]:
    limiters = {}
    for kind, raw in json_object(value, "objectLimiters").items():
        where = f"objectLimiters.{kind}"
        if kind not in (LIMITER_WORKLOAD, LIMITER_NAMESPACE):
            raise ArgsError(
                f"{where}: unknown limiter type (known: {LIMITER_WORKLOAD}, {LIMITER_NAMESPACE})"
            )
        obj = json_object(raw, where)
        check_keys(obj, ("duration", "maxMigrating", "burst"), where)
        burst = obj.get("burst")
        limiters[str(kind)] = ObjectLimiter(
            duration=_seconds(obj.get("duration"), f"{where}.duration", 0.0),
            max_migrating=_int_or_percent(obj.get("maxMigrating"), f"{where}.maxMigrating"),
            burst=0 if burst is None else _int(burst, f"{where}.burst", -(2**63), 2**63 - 1),
        )
    # defaulting replaces an empty map only
    return limiters or _default_limiters()


def _arbitration(value: Any) -> ArbitrationArgs:
    if value is None:
        return ArbitrationArgs()
    obj = json_object(value, "arbitrationArgs")
    check_keys(obj, ("enabled", "interval"), "arbitrationArgs")
    # enabled is a plain bool upstream: once arbitrationArgs is given, a missing one is false
    return ArbitrationArgs(
        enabled=_bool(obj.get("enabled"), "arbitrationArgs.enabled", default=False),
        interval=_seconds(
            obj.get("interval"), "arbitrationArgs.interval", DEFAULT_ARBITRATION_INTERVAL
        ),
    )


def _parse(config: Mapping[str, Any]) -> MigrationControllerArgs:
    obj = json_object(config, "")
    check_keys(obj, _KEYS, "")
    if obj.get("kind") not in (None, ARGS_KIND):
        raise ArgsError(f"kind: must be {ARGS_KIND}, got {obj.get('kind')!r}")
    namespaces = json_object(obj.get("namespaces"), "namespaces")
    check_keys(namespaces, ("include", "exclude"), "namespaces")
    options = obj.get("defaultDeleteOptions")
    reconciles = _optional_int32(obj, "maxConcurrentReconciles")
    per_node = _optional_int32(obj, "maxMigratingPerNode")
    burst = _optional_int32(obj, "evictBurst")
    schedulers = _strings(obj.get("schedulerNames"), "schedulerNames")
    skip_check = obj.get("skipCheckExpectedReplicas")
    return MigrationControllerArgs(
        dry_run=_bool(obj.get("dryRun"), "dryRun", default=False),
        max_concurrent_reconciles=DEFAULT_MAX_CONCURRENT_RECONCILES
        if reconciles is None
        else reconciles,
        evictor=EvictorArgs.from_dict(obj),
        namespaces_include=_strings(namespaces.get("include"), "namespaces.include"),
        namespaces_exclude=_strings(namespaces.get("exclude"), "namespaces.exclude"),
        node_fit=_bool(obj.get("nodeFit"), "nodeFit", default=False),
        node_selector=_string(obj.get("nodeSelector"), "nodeSelector"),
        skip_eviction_gates=_strings(obj.get("skipEvictionGates"), "skipEvictionGates"),
        max_migrating_globally=_optional_int32(obj, "maxMigratingGlobally"),
        max_migrating_per_node=DEFAULT_MAX_MIGRATING_PER_NODE if per_node is None else per_node,
        max_migrating_per_namespace=_optional_int32(obj, "maxMigratingPerNamespace"),
        max_migrating_per_workload=_int_or_percent(
            obj.get("maxMigratingPerWorkload"), "maxMigratingPerWorkload"
        ),
        max_unavailable_per_workload=_int_or_percent(
            obj.get("maxUnavailablePerWorkload"), "maxUnavailablePerWorkload"
        ),
        skip_check_expected_replicas=_bool(skip_check, "skipCheckExpectedReplicas", default=False),
        object_limiters=_limiters(obj.get("objectLimiters")),
        default_job_mode=_string(obj.get("defaultJobMode"), "defaultJobMode", DEFAULT_JOB_MODE)
        or DEFAULT_JOB_MODE,
        default_job_ttl=_seconds(obj.get("defaultJobTTL"), "defaultJobTTL", DEFAULT_JOB_TTL),
        scheduler_names=schedulers or DEFAULT_SCHEDULER_NAMES,
        evict_qps=_qps(obj.get("evictQPS")),
        evict_burst=DEFAULT_EVICT_BURST if burst is None else burst,
        eviction_policy=_string(
            obj.get("evictionPolicy"), "evictionPolicy", DEFAULT_EVICTION_POLICY
        )
        or DEFAULT_EVICTION_POLICY,
        default_delete_options=None
        if options is None
        else dict(json_object(options, "defaultDeleteOptions")),
        arbitration=_arbitration(obj.get("arbitrationArgs")),
    )


# -- validation ------------------------------------------------------------------------------


def _problems(args: MigrationControllerArgs) -> list[str]:
    """ValidateMigrationControllerArgs, field by field, in its order."""
    problems = []
    known = {str(gate) for gate in Gate}
    for i, gate in enumerate(args.skip_eviction_gates):
        if gate not in known:
            problems.append(f"skipEvictionGates[{i}]: unknown eviction gate {gate!r}")
    for key, limit in (
        ("maxMigratingGlobally", args.max_migrating_globally),
        ("maxMigratingPerNamespace", args.max_migrating_per_namespace),
        ("maxMigratingPerNode", args.max_migrating_per_node),
    ):
        if limit is not None and limit < 0:
            problems.append(f"{key}: should be greater or equal 0, got {limit}")
    for key, value in (
        ("maxMigratingPerWorkload", args.max_migrating_per_workload),
        ("maxUnavailablePerWorkload", args.max_unavailable_per_workload),
    ):
        if value is not None:
            try:
                scaled_value(value, 100, round_up=True)
            except ValueError as err:
                problems.append(f"{key}: is invalid, err: {err}")
    for kind, limiter in args.object_limiters.items():
        if limiter.max_migrating is not None:
            try:
                percent_value(limiter.max_migrating)
            except ValueError as err:
                problems.append(f"objectLimiters.{kind}.maxMigrating: is invalid, err: {err}")
    if not args.evict_qps > 0:
        problems.append("evictQPS: must be greater than 0")
    if args.evict_burst <= 0:
        problems.append("evictBurst: must be greater than 0")
    if args.namespaces_include and args.namespaces_exclude:
        problems.append("namespaces: only one of Include/Exclude namespaces can be set")
    if args.max_concurrent_reconciles < 1:
        problems.append("maxConcurrentReconciles: should be greater than or equal to 1")
    if args.default_job_mode not in (Mode.RESERVATION_FIRST, Mode.EVICT_DIRECTLY):
        problems.append(
            f"defaultJobMode: must be {Mode.RESERVATION_FIRST} or {Mode.EVICT_DIRECTLY}, "
            f"got {args.default_job_mode!r}"
        )
    if args.default_job_ttl < 0:
        problems.append("defaultJobTTL: should be positive or zero")
    # not in ValidateMigrationControllerArgs, but Koordinator fails to start on them
    if args.eviction_policy not in EVICTION_POLICIES:
        problems.append(
            f"evictionPolicy: must be one of {', '.join(EVICTION_POLICIES)}, "
            f"got {args.eviction_policy!r}"
        )
    return problems
