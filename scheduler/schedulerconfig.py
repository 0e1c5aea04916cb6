"""koord-scheduler's --config: a KubeSchedulerConfiguration, read for its plugins' args.

Koordinator's koord-scheduler is a whole scheduler configured by a
``kubescheduler.config.k8s.io/v1`` KubeSchedulerConfiguration (its chart's
koord-scheduler-config ConfigMap). Here the scheduling framework is the stock kube-scheduler's
and koord-scheduler is its extender, so of that file only the args of the plugins this
extender implements carry over: LoadAwareSchedulingArgs (scheduler.loadaware),
NodeNUMAResourceArgs (scheduler.cpubind) and DeviceShareArgs (scheduler.deviceshare), each
defaulted as Koordinator's pkg/scheduler/apis/config/v1/defaults.go does. Everything else in
the file (other plugins' args, the plugin sets, percentageOfNodesToScore, leaderElection, ...)
is accepted and listed in ``SchedulerConfig.ignored``, so that start-up can say so in one line.

Several profiles may carry the same plugin's args; the extender has one set, so the first
profile that has them wins and the others are named as ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scheduler import cpubind, deviceshare
from scheduler.extender import ExtenderConfig
from scheduler.loadaware import LoadAwareArgs

API_VERSIONS = ("kubescheduler.config.k8s.io/v1",)
KIND = "KubeSchedulerConfiguration"

LOAD_AWARE = "LoadAwareScheduling"
NODE_NUMA_RESOURCE = "NodeNUMAResource"
DEVICE_SHARE = "DeviceShare"

# the fields of each plugin's args that this extender follows; the others are named as ignored
_TYPE_META = frozenset({"apiVersion", "kind"})
_FOLLOWED: Mapping[str, frozenset[str]] = {
    LOAD_AWARE: frozenset(
        {
            "filterExpiredNodeMetrics",
            "nodeMetricExpirationSeconds",
            "enableScheduleWhenNodeMetricsExpired",
            "resourceWeights",
            "dominantResourceWeight",
            "usageThresholds",
            "estimatedScalingFactors",
            "prodUsageThresholds",
            "prodUsageIncludeSys",
            "scoreAccordingProdUsage",
            "aggregated",
        }
    ),
    NODE_NUMA_RESOURCE: frozenset({"defaultCPUBindPolicy", "numaScoringStrategy"}),
    DEVICE_SHARE: frozenset({"scoringStrategy", "gpuShareUnsupportedModels"}),
}
# the scheduler-level fields that mean something here
_TOP_FOLLOWED = frozenset({"apiVersion", "kind", "profiles"})
DEFAULT_SCHEDULER_NAME = "default-scheduler"  # kube-scheduler's, for a profile without one


class SchedulerConfigError(ValueError):
    """The file is not a KubeSchedulerConfiguration, or a plugin's args do not validate."""


@dataclass(frozen=True)
class SchedulerConfig:
    """What --config gave: the extender's plugin args, and what was accepted to no effect."""

    extender: ExtenderConfig = field(default_factory=ExtenderConfig)
    taken: tuple[str, ...] = ()  # "LoadAwareSchedulingArgs (profile koord-scheduler)", ...
    ignored: tuple[str, ...] = ()  # fields and plugins accepted that change nothing here
    scheduler_name: str = DEFAULT_SCHEDULER_NAME  # the first profile's: the metrics' profile

    def describe(self, path: str) -> str:
        """The one start-up line about the file."""
        taken = ", ".join(self.taken) or "none"
        ignored = ", ".join(self.ignored) or "nothing"
        return f"--config {path}: plugin args taken: {taken}; accepted with no effect: {ignored}"


def read(path: str | Path) -> SchedulerConfig:
    """The file's configuration (YAML or JSON; JSON is YAML). Raises OSError or
    SchedulerConfigError."""
    text = Path(path).read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SchedulerConfigError(f"not YAML or JSON: {err}") from None
    return parse(data)


def parse(data: Any) -> SchedulerConfig:
    """See the module docstring."""
    if not isinstance(data, Mapping):
        raise SchedulerConfigError(f"must be a {KIND} object")
    if data.get("kind") != KIND or data.get("apiVersion") not in API_VERSIONS:
        raise SchedulerConfigError(
            f"must be kind {KIND} of apiVersion {', '.join(API_VERSIONS)}, got kind "
            f"{data.get('kind')!r} of {data.get('apiVersion')!r}"
        )
    ignored = [key for key in data if key not in _TOP_FOLLOWED]
    profiles = data.get("profiles") or []
    if not isinstance(profiles, list):
        raise SchedulerConfigError("profiles must be a list")
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}  # plugin → (profile, args)
    names = []
    for profile in profiles:
        if not isinstance(profile, Mapping):
            raise SchedulerConfigError("each profile must be an object")
        name = str(profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME)
        names.append(name)
        if profile.get("plugins"):
            ignored.append(f"profile {name} plugins (kube-scheduler's own configuration decides)")
        for entry in profile.get("pluginConfig") or []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                raise SchedulerConfigError(f"profile {name}: a pluginConfig entry needs a name")
            plugin, args = entry["name"], entry.get("args") or {}
            if not isinstance(args, Mapping):
                raise SchedulerConfigError(f"profile {name}: {plugin} args must be an object")
            if plugin not in _FOLLOWED:
                ignored.append(f"{plugin} args (no such plugin in the extender)")
            elif plugin in found:
                ignored.append(
                    f"{plugin} args of profile {name} (profile {found[plugin][0]}'s win)"
                )
            else:
                found[plugin] = (name, args)
    extender = ExtenderConfig()
    taken = []
    for plugin, (profile, args) in found.items():
        try:
            extender = _apply(extender, plugin, args)
        except (ValueError, TypeError) as err:
            raise SchedulerConfigError(f"profile {profile}: {plugin} args: {err}") from None
        taken.append(f"{plugin}Args (profile {profile})")
        extra = sorted(set(args) - _FOLLOWED[plugin] - _TYPE_META)
        ignored += [f"{plugin}Args.{key}" for key in extra]
    return SchedulerConfig(
        extender=extender,
        taken=tuple(taken),
        ignored=tuple(ignored),
        scheduler_name=names[0] if names else DEFAULT_SCHEDULER_NAME,
    )


def _apply(config: ExtenderConfig, plugin: str, args: Mapping[str, Any]) -> ExtenderConfig:
    if plugin == LOAD_AWARE:
        return _replace(config, loadaware=LoadAwareArgs.from_koordinator(args))
    if plugin == NODE_NUMA_RESOURCE:
        return _replace(config, cpubind=cpu_bind_args(args))
    return _replace(config, deviceshare=device_share_args(args))


def _replace(config: ExtenderConfig, **changes: Any) -> ExtenderConfig:
    values = {
        "loadaware": config.loadaware,
        "cpubind": config.cpubind,
        "deviceshare": config.deviceshare,
        **changes,
    }
    return ExtenderConfig(**values)


def _strategy_type(args: Mapping[str, Any], key: str) -> tuple[str | None, Any]:
    """(type, resources) of a ScoringStrategy field; (None, None) when it is absent."""
    strategy = args.get(key)
    if strategy is None:
        return None, None
    if not isinstance(strategy, Mapping):
        raise ValueError(f"{key} must be an object")
    kind = strategy.get("type")
    if kind not in (cpubind.LEAST_ALLOCATED, cpubind.MOST_ALLOCATED):
        raise ValueError(f"{key}.type must be LeastAllocated or MostAllocated, got {kind!r}")
    return str(kind), strategy.get("resources")


def cpu_bind_args(args: Mapping[str, Any]) -> cpubind.CPUBindArgs:
    """NodeNUMAResourceArgs: defaultCPUBindPolicy (default FullPCPUs) and the type of
    numaScoringStrategy (default LeastAllocated), which is the NUMA allocate strategy of a
    node without the label."""
    base = cpubind.CPUBindArgs()
    policy = args.get("defaultCPUBindPolicy") or base.default_policy.value
    try:
        default_policy = cpubind.CPUBindPolicy(policy)
    except ValueError:
        choices = ", ".join(p.value for p in cpubind.CPUBindPolicy)
        raise ValueError(f"defaultCPUBindPolicy must be one of {choices}, got {policy!r}") from None
    numa, _ = _strategy_type(args, "numaScoringStrategy")
    return cpubind.CPUBindArgs(
        default_policy=default_policy, numa_allocate_strategy=numa or base.numa_allocate_strategy
    )


def device_share_args(args: Mapping[str, Any]) -> deviceshare.DeviceShareArgs:
    """DeviceShareArgs: scoringStrategy (default LeastAllocated over Koordinator's four
    resources, weight 1 each) and gpuShareUnsupportedModels ({vendor, model} pairs)."""
    kind, resources = _strategy_type(args, "scoringStrategy")
    weights: dict[str, int] = dict(deviceshare.DEFAULT_WEIGHTS)
    if kind is not None and resources is not None:
        if not isinstance(resources, list):
            raise ValueError("scoringStrategy.resources must be a list")
        weights = {}
        for item in resources:
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise ValueError("each scoringStrategy resource needs a name")
            weight = item.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int) or weight <= 0:
                raise ValueError(f"weight of {item['name']} must be a positive integer")
            weights[item["name"]] = weight
    models = args.get("gpuShareUnsupportedModels") or []
    if not isinstance(models, list):
        raise ValueError("gpuShareUnsupportedModels must be a list")
    pairs = set()
    for model in models:
        if not isinstance(model, Mapping):
            raise ValueError("each gpuShareUnsupportedModels entry must be {vendor, model}")
        pairs.add((str(model.get("vendor") or ""), str(model.get("model") or "")))
    return deviceshare.DeviceShareArgs(
        strategy=deviceshare.ScoringStrategy(kind or deviceshare.ScoringStrategy.LEAST_ALLOCATED),
        weights=weights,
        unsupported_models=frozenset(pairs),
    )
