"""The NodeSLO spec: Koordinator's defaults, deep-merge, validation, per-class "None" values.

koordlet deep-merges the NodeSLO it is given over ``default_spec()``; a class whose cpuQOS,
memoryQOS, resctrlQOS or networkQOS has ``enable: false`` then uses that feature's "None"
values (everything off) instead of its numbers. The JSON keys are Koordinator's, so a NodeSLO
written for Koordinator means the same here.

Usage::

    spec = NodeSLOSpec.parse(yaml.safe_load(text))      # raises NodeSLOError naming the path
    spec.cpu_qos(QoSClass.BE).group_identity            # -1 when BE cpuQOS is enabled, else 0
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi.errors import ModelError, NodeSLOError
from koordapi.qos import QoSClass
from koordapi.quantity import parse_quantity

CPU_POLICY_GROUP_IDENTITY = "groupIdentity"
CPU_POLICY_CORE_SCHED = "coreSched"
NET_POLICY_TC = "tc"
NET_POLICY_TERWAY = "terway-qos"
SUPPRESS_CPUSET = "cpuset"
SUPPRESS_CFS_QUOTA = "cfsQuota"

# JSON name of each class section, and the class it configures.
CLASS_KEYS = {
    QoSClass.LSR: "lsrClass",
    QoSClass.LS: "lsClass",
    QoSClass.BE: "beClass",
    QoSClass.SYSTEM: "systemClass",
}


def _memory_qos(wmark_ratio: int, scale: int, min_adj: int) -> dict[str, Any]:
    return {
        "enable": False,
        "minLimitPercent": 0,
        "lowLimitPercent": 0,
        "throttlingPercent": 0,
        "wmarkRatio": wmark_ratio,
        "wmarkScalePermill": scale,
        "wmarkMinAdj": min_adj,
        "priorityEnable": 0,
        "priority": 0,
        "oomKillGroup": 0,
    }


def _class(
    gi: int, expeller: bool, min_adj: int, cat_end: int, system: bool = False
) -> dict[str, Any]:
    return {
        "cpuQOS": {"enable": False, "groupIdentity": gi, "schedIdle": 0, "coreExpeller": expeller},
        "memoryQOS": _memory_qos(0, 50, 0) if system else _memory_qos(95, 20, min_adj),
        "resctrlQOS": {
            "enable": False,
            "catRangeStartPercent": 0,
            "catRangeEndPercent": cat_end,
            "mbaPercent": 100,
        },
        "networkQOS": {
            "enable": False,
            "ingressRequest": 0,
            "ingressLimit": 100,
            "egressRequest": 0,
            "egressLimit": 100,
        },
        "blkioQOS": {"enable": False},
    }


def default_spec() -> dict[str, Any]:
    """Koordinator's built-in NodeSLO spec (pkg/util/sloconfig): every class feature off."""
    return {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": SUPPRESS_CPUSET,
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": CPU_POLICY_GROUP_IDENTITY, "netQOSPolicy": NET_POLICY_TC},
            "lsrClass": _class(2, True, -25, 100),
            "lsClass": _class(2, True, -25, 100),
            "beClass": _class(-1, False, 50, 30),
            "systemClass": _class(0, False, 0, 100, system=True),
            "cgroupRoot": {},
        },
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
    }


# The values a disabled feature stands for.
NONE_CPU_QOS = {"groupIdentity": 0, "schedIdle": 0, "coreExpeller": False}
NONE_MEMORY_QOS = {k: v for k, v in _memory_qos(0, 50, 0).items() if k != "enable"}
NONE_RESCTRL_QOS = {"catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100}
NONE_NETWORK_QOS = {"ingressRequest": 0, "ingressLimit": 0, "egressRequest": 0, "egressLimit": 0}


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` over ``base``: objects merge by key, others replace; null keeps base."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# -- validation ------------------------------------------------------------------------------

Check = Callable[[str, Any], None]


def _bool(path: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise NodeSLOError(path, f"must be true or false, got {value!r}")


def _int(lo: int | None = None, hi: int | None = None) -> Check:
    def check(path: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise NodeSLOError(path, f"must be an integer, got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise NodeSLOError(path, f"{value} is outside [{lo}, {hi}]")

    return check


def _enum(*choices: str) -> Check:
    def check(path: str, value: Any) -> None:
        if value not in choices:
            raise NodeSLOError(
                path, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
            )

    return check


def _quantity(path: str, value: Any) -> None:
    try:
        amount = parse_quantity(value)
    except ModelError as err:
        raise NodeSLOError(path, str(err)) from None
    if amount < 0:
        raise NodeSLOError(path, f"must not be negative, got {value!r}")


def _int_or_quantity(path: str, value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool):
        _int(0, 100)(path, value)  # an int is a percent of the total bandwidth
    else:
        _quantity(path, value)


def _any(path: str, value: Any) -> None:
    return None


PERCENT = _int(0, 100)
_RESOURCE_QOS: dict[str, Any] = {
    "cpuQOS": {
        "enable": _bool,
        "groupIdentity": _int(-1, 2),
        "schedIdle": _int(0, 1),
        "coreExpeller": _bool,
    },
    "memoryQOS": {
        "enable": _bool,
        "minLimitPercent": PERCENT,
        "lowLimitPercent": PERCENT,
        "throttlingPercent": PERCENT,
        "wmarkRatio": PERCENT,
        "wmarkScalePermill": _int(1, 1000),
        "wmarkMinAdj": _int(-25, 50),
        "pageCacheLimitEnable": _int(0, 1),
        "pageCacheLimitSync": _int(0, 1),
        "pageCacheLimitSize": _int(0),
        "priorityEnable": _int(0, 1),
        "priority": _int(0, 12),
        "oomKillGroup": _int(0, 1),
    },
    "resctrlQOS": {
        "enable": _bool,
        "catRangeStartPercent": PERCENT,
        "catRangeEndPercent": PERCENT,
        "mbaPercent": PERCENT,
    },
    "networkQOS": {
        "enable": _bool,
        "ingressRequest": _int_or_quantity,
        "ingressLimit": _int_or_quantity,
        "egressRequest": _int_or_quantity,
        "egressLimit": _int_or_quantity,
    },
    "blkioQOS": {"enable": _bool, "blocks": _any},
}
SCHEMA: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {
        "enable": _bool,
        "cpuSuppressThresholdPercent": PERCENT,
        "cpuSuppressMinPercent": PERCENT,
        "cpuSuppressPolicy": _enum(SUPPRESS_CPUSET, SUPPRESS_CFS_QUOTA, ""),
        "memoryEvictThresholdPercent": PERCENT,
        "memoryEvictLowerPercent": PERCENT,
        "memoryAllocatableEvictThresholdPercent": _int(0, 1000),
        "memoryAllocatableEvictLowerPercent": _int(0, 1000),
        "cpuEvictBESatisfactionUpperPercent": PERCENT,
        "cpuEvictBESatisfactionLowerPercent": PERCENT,
        "cpuEvictBEUsageThresholdPercent": PERCENT,
        "cpuEvictTimeWindowSeconds": _int(0),
        "cpuEvictThresholdPercent": PERCENT,
        "cpuEvictLowerPercent": PERCENT,
        "cpuAllocatableEvictThresholdPercent": _int(0, 1000),
        "cpuAllocatableEvictLowerPercent": _int(0, 1000),
        "cpuEvictPolicy": _enum("evictByRealLimit", "evictByAllocatable", ""),
        "evictEnabledPriorityThreshold": _int(0),
        "allocatableEvictPriorityThreshold": _int(0, 7999),
    },
    "resourceQOSStrategy": {
        "policies": {
            "cpuPolicy": _enum(CPU_POLICY_GROUP_IDENTITY, CPU_POLICY_CORE_SCHED, ""),
            "netQOSPolicy": _enum(NET_POLICY_TC, NET_POLICY_TERWAY, ""),
        },
        "lsrClass": _RESOURCE_QOS,
        "lsClass": _RESOURCE_QOS,
        "beClass": _RESOURCE_QOS,
        "systemClass": _RESOURCE_QOS,
        "cgroupRoot": _RESOURCE_QOS,
    },
    "cpuBurstStrategy": {
        "policy": _enum("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto"),
        "cpuBurstPercent": _int(0),
        "cfsQuotaBurstPercent": _int(100),
        "cfsQuotaBurstPeriodSeconds": _int(-1),
        "sharePoolThresholdPercent": PERCENT,
    },
    "systemStrategy": {
        "minFreeKbytesFactor": _int(0),
        "watermarkScaleFactor": _int(0),
        "memcgReapBackGround": _int(0, 1),
        "schedGroupIdentityEnabled": _int(0, 1),
        "schedIdleSaverWmark": _int(0),
        "schedFeatures": _any,
        "pageCacheLimitEnabled": _int(0, 1),
        "totalNetworkBandwidth": _quantity,
    },
    "extensions": _any,
    "hostApplications": _any,
}


def validate(
    spec: Mapping[str, Any], schema: Mapping[str, Any] = SCHEMA, path: str = "spec"
) -> list[str]:
    """Raise NodeSLOError for the first malformed known field; return unknown keys (ignored)."""
    unknown = []
    for key, value in spec.items():
        where = f"{path}.{key}"
        rule = schema.get(key)
        if rule is None:
            unknown.append(where)
        elif isinstance(rule, Mapping):
            if value is None:
                continue  # null keeps the default section, as deep_merge does
            if not isinstance(value, Mapping):
                raise NodeSLOError(where, f"must be an object, got {type(value).__name__}")
            unknown += validate(value, rule, where)
        elif value is not None:
            rule(where, value)
    return unknown


# -- the typed view --------------------------------------------------------------------------


@dataclass(frozen=True)
class CPUQOS:
    enable: bool
    group_identity: int
    sched_idle: int
    core_expeller: bool


@dataclass(frozen=True)
class ResctrlQOS:
    enable: bool
    cat_range_start_percent: int
    cat_range_end_percent: int
    mba_percent: int


@dataclass(frozen=True)
class MemoryQOS:
    enable: bool
    values: Mapping[str, int]  # Koordinator's JSON names: minLimitPercent, wmarkRatio, ...

    def get(self, name: str) -> int:
        return int(self.values.get(name, 0))


@dataclass(frozen=True)
class NodeSLOSpec:
    """The merged spec; ``raw`` is the JSON-shaped dict, the methods give per-class views."""

    raw: Mapping[str, Any] = field(default_factory=default_spec)
    unknown_keys: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: Mapping[str, Any] | None) -> NodeSLOSpec:
        """Validate ``spec`` (a NodeSLO ``.spec``) and merge it over the defaults."""
        spec = spec or {}
        if not isinstance(spec, Mapping):
            raise NodeSLOError("spec", f"must be an object, got {type(spec).__name__}")
        unknown = validate(spec)
        merged = deep_merge(default_spec(), spec)
        validate(merged)
        return cls(merged, tuple(unknown))

    def _section(self, *path: str) -> Mapping[str, Any]:
        node: Any = self.raw
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node if isinstance(node, Mapping) else {}

    @property
    def cpu_policy(self) -> str:
        return (
            self._section("resourceQOSStrategy", "policies").get("cpuPolicy")
            or CPU_POLICY_GROUP_IDENTITY
        )

    @property
    def net_qos_policy(self) -> str:
        return self._section("resourceQOSStrategy", "policies").get("netQOSPolicy") or NET_POLICY_TC

    def class_section(self, qos: QoSClass, feature: str) -> Mapping[str, Any]:
        """The class's raw config of ``feature`` ("cpuQOS", ...); LSE reads LSR's."""
        if qos is QoSClass.LSE:
            qos = QoSClass.LSR
        key = CLASS_KEYS.get(qos)
        return self._section("resourceQOSStrategy", key, feature) if key else {}

    def cpu_qos(self, qos: QoSClass) -> CPUQOS:
        section = self.class_section(qos, "cpuQOS")
        enabled = bool(section.get("enable", False))
        values = section if enabled else NONE_CPU_QOS
        return CPUQOS(
            enabled,
            int(values.get("groupIdentity", 0)),
            int(values.get("schedIdle", 0)),
            bool(values.get("coreExpeller", False)),
        )

    def memory_qos(self, qos: QoSClass) -> MemoryQOS:
        section = self.class_section(qos, "memoryQOS")
        enabled = bool(section.get("enable", False))
        values = {k: v for k, v in section.items() if k != "enable"} if enabled else NONE_MEMORY_QOS
        return MemoryQOS(enabled, values)

    def resctrl_qos(self, qos: QoSClass) -> ResctrlQOS:
        section = self.class_section(qos, "resctrlQOS")
        enabled = bool(section.get("enable", False))
        values = section if enabled else NONE_RESCTRL_QOS
        return ResctrlQOS(
            enabled,
            int(values.get("catRangeStartPercent", 0)),
            int(values.get("catRangeEndPercent", 100)),
            int(values.get("mbaPercent", 100)),
        )

    def network_qos(self, qos: QoSClass) -> Mapping[str, Any]:
        section = self.class_section(qos, "networkQOS")
        return section if section.get("enable") else {"enable": False, **NONE_NETWORK_QOS}

    @property
    def threshold(self) -> Mapping[str, Any]:
        return self._section("resourceUsedThresholdWithBE")

    @property
    def cpu_burst(self) -> Mapping[str, Any]:
        return self._section("cpuBurstStrategy")

    @property
    def system(self) -> Mapping[str, Any]:
        return self._section("systemStrategy")

    def batch_cfs_quota_enabled(self) -> bool:
        """False when BE quota is left to the besteffort dir (threshold on, policy cfsQuota)."""
        threshold = self.threshold
        return not (
            threshold.get("enable") is True
            and threshold.get("cpuSuppressPolicy") == SUPPRESS_CFS_QUOTA
        )
