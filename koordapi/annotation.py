"""Parsers for the JSON and scalar values of Koordinator's pod and node annotations.

Each parser takes the raw string and returns a frozen value, or raises AnnotationError naming
the key and the problem. Results are cached by text (a pod's annotations are parsed once, not
once per hook and per reconcile pass); callers must not modify what they get. Annotations are
user input read by a root daemon: sizes are capped before decoding, numbers are range-checked,
and nothing here turns a value into a path.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from koordapi import keys
from koordapi.cpuset import parse_cpuset
from koordapi.errors import AnnotationError, ModelError
from koordapi.quantity import milli_value, parse_quantity

MAX_ANNOTATION_BYTES = 256 * 1024  # Kubernetes' limit for all annotations of an object


def load_json(key: str, text: str, expected: type = dict) -> Any:
    if len(text) > MAX_ANNOTATION_BYTES:
        raise AnnotationError(key, f"value of {len(text)} bytes exceeds {MAX_ANNOTATION_BYTES}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise AnnotationError(key, f"not valid JSON: {err}") from None
    if not isinstance(data, expected):
        raise AnnotationError(
            key, f"expected a JSON {expected.__name__}, got {type(data).__name__}"
        )
    return data


def _int(key: str, where: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnnotationError(key, f"{where} must be an integer, got {value!r}")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise AnnotationError(key, f"{where}={value} is outside [{lo}, {hi}]")
    return value


def _list(key: str, where: str, value: Any) -> list[Any]:
    """A JSON list (null or absent counts as empty); anything else is an error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnnotationError(key, f"{where} must be a list, got {type(value).__name__}")
    return value


def _resources(key: str, where: str, value: Any) -> dict[str, Decimal]:
    if not isinstance(value, dict):
        raise AnnotationError(key, f"{where} must be an object of quantities")
    out = {}
    for name, quantity in value.items():
        try:
            amount = parse_quantity(quantity)
        except ModelError as err:
            raise AnnotationError(key, f"{where}[{name}]: {err}") from None
        if amount < 0:
            raise AnnotationError(key, f"{where}[{name}] is negative: {quantity!r}")
        out[str(name)] = amount
    return out


def _cpuset(key: str, text: Any) -> str:
    if not isinstance(text, str):
        raise AnnotationError(key, f"cpuset must be a string, got {text!r}")
    try:
        parse_cpuset(text)
    except ModelError as err:
        raise AnnotationError(key, str(err)) from None
    return text


# -- scheduling.koordinator.sh/resource-status ----------------------------------------------


@dataclass(frozen=True)
class NumaNodeResource:
    node: int
    resources: Mapping[str, Decimal]


@dataclass(frozen=True)
class ResourceStatus:
    cpuset: str = ""
    numa_nodes: tuple[NumaNodeResource, ...] = ()


@functools.lru_cache(maxsize=1024)
def parse_resource_status(text: str) -> ResourceStatus:
    key = keys.ANNOTATION_RESOURCE_STATUS
    data = load_json(key, text)
    cpuset = _cpuset(key, data.get("cpuset", ""))
    numa = []
    for i, entry in enumerate(_list(key, "numaNodeResources", data.get("numaNodeResources"))):
        if not isinstance(entry, dict):
            raise AnnotationError(key, f"numaNodeResources[{i}] must be an object")
        node = _int(key, f"numaNodeResources[{i}].node", entry.get("node", 0), 0, 4095)
        numa.append(
            NumaNodeResource(
                node,
                _resources(key, f"numaNodeResources[{i}].resources", entry.get("resources") or {}),
            )
        )
    return ResourceStatus(cpuset, tuple(numa))


# -- node.koordinator.sh/extended-resource-spec ---------------------------------------------


@dataclass(frozen=True)
class ExtendedResources:
    """Requests and limits of one container's extended resources (batch-cpu in milli-cores)."""

    requests: Mapping[str, Decimal] = field(default_factory=dict)
    limits: Mapping[str, Decimal] = field(default_factory=dict)
    has_limits: bool = False  # a "limits" object was given (even empty)


@functools.lru_cache(maxsize=1024)
def parse_extended_resource_spec(text: str) -> dict[str, ExtendedResources]:
    """Container name → its extended resources."""
    key = keys.ANNOTATION_EXTENDED_RESOURCE_SPEC
    data = load_json(key, text)
    containers = data.get("containers") or {}
    if not isinstance(containers, dict):
        raise AnnotationError(key, "containers must be an object keyed by container name")
    out = {}
    for name, spec in containers.items():
        if not isinstance(spec, dict):
            raise AnnotationError(key, f"containers[{name}] must be an object")
        out[str(name)] = ExtendedResources(
            requests=_resources(key, f"containers[{name}].requests", spec.get("requests") or {}),
            limits=_resources(key, f"containers[{name}].limits", spec.get("limits") or {}),
            has_limits="limits" in spec and spec["limits"] is not None,
        )
    return out


# -- koordinator.sh/cpuQOS -------------------------------------------------------------------


@dataclass(frozen=True)
class PodCPUQOS:
    enable: bool
    group_identity: int | None


@functools.lru_cache(maxsize=1024)
def parse_pod_cpu_qos(text: str) -> PodCPUQOS:
    key = keys.ANNOTATION_CPU_QOS
    data = load_json(key, text)
    enable = data.get("enable", False)
    if not isinstance(enable, bool):
        raise AnnotationError(key, f"enable must be true or false, got {enable!r}")
    gi = data.get("groupIdentity")
    return PodCPUQOS(enable, None if gi is None else _int(key, "groupIdentity", gi, -1, 2))


# -- koordinator.sh/memoryQOS ----------------------------------------------------------------

MEMORY_QOS_FIELDS = {
    # json name: (lo, hi)
    "minLimitPercent": (0, 100),
    "lowLimitPercent": (0, 100),
    "throttlingPercent": (0, 100),
    "wmarkRatio": (0, 100),
    "wmarkScalePermill": (1, 1000),
    "wmarkMinAdj": (-25, 50),
    "pageCacheLimitEnable": (0, 1),
    "pageCacheLimitSync": (0, 1),
    "pageCacheLimitSize": (0, None),
    "priorityEnable": (0, 1),
    "priority": (0, 12),
    "oomKillGroup": (0, 1),
}


@dataclass(frozen=True)
class PodMemoryQOS:
    policy: str  # "default" | "none" | "auto"
    fields: Mapping[str, int]  # the MemoryQOS fields given


@functools.lru_cache(maxsize=1024)
def parse_pod_memory_qos(text: str) -> PodMemoryQOS:
    key = keys.ANNOTATION_MEMORY_QOS
    data = load_json(key, text)
    policy = data.get("policy") or "default"
    if policy not in ("default", "none", "auto"):
        raise AnnotationError(key, f"policy must be default, none or auto, got {policy!r}")
    fields = {}
    for name, (lo, hi) in MEMORY_QOS_FIELDS.items():
        if data.get(name) is not None:
            fields[name] = _int(key, name, data[name], lo, hi)
    return PodMemoryQOS(policy, fields)


# -- node.koordinator.sh/resctrl -------------------------------------------------------------


@dataclass(frozen=True)
class ResctrlConfig:
    """LLC range (percent of the ways) and MBA percent, overall and per cache id."""

    llc_range: tuple[int, int] | None = None
    llc_per_cache: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    mb_percent: int | None = None
    mb_per_cache: Mapping[int, int] = field(default_factory=dict)


@functools.lru_cache(maxsize=1024)
def parse_resctrl(text: str) -> ResctrlConfig:
    key = keys.ANNOTATION_RESCTRL
    data = load_json(key, text)

    def llc_range(where: str, value: Any) -> tuple[int, int]:
        if not (isinstance(value, list) and len(value) == 2):
            raise AnnotationError(key, f"{where} must be [start%, end%]")
        start = _int(key, f"{where}[0]", value[0], 0, 100)
        end = _int(key, f"{where}[1]", value[1], 0, 100)
        if start >= end:
            raise AnnotationError(key, f"{where}: start {start}% must be below end {end}%")
        return start, end

    llc = data.get("llc") or {}
    mb = data.get("mb") or {}
    if not isinstance(llc, dict) or not isinstance(mb, dict):
        raise AnnotationError(key, "llc and mb must be objects")
    result_llc = None
    if isinstance(llc.get("schemata"), dict) and "range" in llc["schemata"]:
        result_llc = llc_range("llc.schemata.range", llc["schemata"]["range"])
    per_cache_llc = {}
    for i, entry in enumerate(_list(key, "llc.schemataPerCache", llc.get("schemataPerCache"))):
        if not isinstance(entry, dict):
            raise AnnotationError(key, f"llc.schemataPerCache[{i}] must be an object")
        cache = _int(key, f"llc.schemataPerCache[{i}].cacheID", entry.get("cacheID", 0), 0, 1023)
        per_cache_llc[cache] = llc_range(f"llc.schemataPerCache[{i}].range", entry.get("range"))
    result_mb = None
    if isinstance(mb.get("schemata"), dict) and "percent" in mb["schemata"]:
        result_mb = _int(key, "mb.schemata.percent", mb["schemata"]["percent"], 1, 100)
    per_cache_mb = {}
    for i, entry in enumerate(_list(key, "mb.schemataPerCache", mb.get("schemataPerCache"))):
        if not isinstance(entry, dict):
            raise AnnotationError(key, f"mb.schemataPerCache[{i}] must be an object")
        cache = _int(key, f"mb.schemataPerCache[{i}].cacheID", entry.get("cacheID", 0), 0, 1023)
        per_cache_mb[cache] = _int(
            key, f"mb.schemataPerCache[{i}].percent", entry.get("percent"), 1, 100
        )
    return ResctrlConfig(result_llc, per_cache_llc, result_mb, per_cache_mb)


# -- scheduling.koordinator.sh/device-allocated ----------------------------------------------


@dataclass(frozen=True)
class DeviceAllocation:
    minor: int | None
    resources: Mapping[str, Decimal]
    pci_id: str = ""  # RDMA: the PF's PCI address
    vf_bus_ids: tuple[str, ...] = ()  # RDMA: allocated VFs


@functools.lru_cache(maxsize=1024)
def parse_device_allocated(text: str) -> dict[str, tuple[DeviceAllocation, ...]]:
    """Device type ("gpu", "rdma", ...) → its allocations."""
    key = keys.ANNOTATION_DEVICE_ALLOCATED
    data = load_json(key, text)
    out = {}
    for dev_type, entries in data.items():
        if not isinstance(entries, list):
            raise AnnotationError(key, f"{dev_type} must be a list")
        allocations = []
        for i, entry in enumerate(entries):
            where = f"{dev_type}[{i}]"
            if not isinstance(entry, dict):
                raise AnnotationError(key, f"{where} must be an object")
            minor = entry.get("minor")
            if minor is not None:
                minor = _int(key, f"{where}.minor", minor, 0, 1 << 20)
            extension = entry.get("extension") or {}
            vfs = (
                _list(key, f"{where}.extension.vfs", extension.get("vfs"))
                if isinstance(extension, dict)
                else []
            )
            bus_ids = tuple(str(vf.get("busID", "")) for vf in vfs if isinstance(vf, dict))
            allocations.append(
                DeviceAllocation(
                    minor,
                    _resources(key, f"{where}.resources", entry.get("resources") or {}),
                    str(entry.get("id", "")),
                    tuple(b for b in bus_ids if b),
                )
            )
        out[str(dev_type)] = tuple(allocations)
    return out


# -- koordinator.sh/oom-score-adj(-spec) -----------------------------------------------------

OOM_SCORE_ADJ_MIN = -1000
OOM_SCORE_ADJ_MAX = 1000


@functools.lru_cache(maxsize=1024)
def parse_oom_score_adj(text: str) -> int:
    key = keys.ANNOTATION_OOM_SCORE_ADJ
    try:
        value = int(text.strip())
    except ValueError:
        raise AnnotationError(key, f"not an integer: {text!r}") from None
    return _int(key, "value", value, OOM_SCORE_ADJ_MIN, OOM_SCORE_ADJ_MAX)


@functools.lru_cache(maxsize=1024)
def parse_oom_score_adj_spec(text: str) -> dict[str, int]:
    key = keys.ANNOTATION_OOM_SCORE_ADJ_SPEC
    data = load_json(key, text)
    return {
        str(name): _int(key, f"[{name}]", value, OOM_SCORE_ADJ_MIN, OOM_SCORE_ADJ_MAX)
        for name, value in data.items()
    }


# -- koordinator.sh/networkQOS ---------------------------------------------------------------


@dataclass(frozen=True)
class PodNetworkQOS:
    ingress_limit_bps: int | None  # bits per second
    egress_limit_bps: int | None


@functools.lru_cache(maxsize=1024)
def parse_pod_network_qos(text: str) -> PodNetworkQOS:
    key = keys.ANNOTATION_NETWORK_QOS
    data = load_json(key, text)

    def limit(name: str) -> int | None:
        if data.get(name) in (None, ""):
            return None
        amount = _resources(key, name, {name: data[name]})[name]
        return int(amount)

    return PodNetworkQOS(limit("ingressLimit"), limit("egressLimit"))


# -- node annotations ------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def parse_cpu_normalization_ratio(text: str) -> float:
    key = keys.ANNOTATION_CPU_NORMALIZATION_RATIO
    try:
        ratio = float(text)
    except ValueError:
        raise AnnotationError(key, f"not a number: {text!r}") from None
    if ratio != -1 and not (0 < ratio < 100):
        raise AnnotationError(key, f"ratio {ratio} must be -1 (disabled) or in (0, 100)")
    return ratio


@dataclass(frozen=True)
class NodeReservation:
    resources: Mapping[str, Decimal] = field(default_factory=dict)
    reserved_cpus: str = ""
    apply_policy: str = ""

    @property
    def cpu_milli(self) -> int:
        """The CPU kept from pods, in milli-cores, rounded up, as Koordinator's
        GetNodeReservationResources counts it: ``reservedCPUs`` (whole CPUs) wins over
        ``resources.cpu``."""
        if self.reserved_cpus:
            return len(parse_cpuset(self.reserved_cpus)) * 1000  # validated by the parser
        cpu = self.resources.get("cpu")
        return milli_value(cpu) if cpu is not None else 0


@functools.lru_cache(maxsize=1024)
def parse_node_reservation(text: str) -> NodeReservation:
    key = keys.ANNOTATION_NODE_RESERVATION
    data = load_json(key, text)
    return NodeReservation(
        _resources(key, "resources", data.get("resources") or {}),
        _cpuset(key, data.get("reservedCPUs", "")),
        str(data.get("applyPolicy", "")),
    )


@dataclass(frozen=True)
class SystemQOSResource:
    cpuset: str = ""
    cpuset_exclusive: bool = True


@functools.lru_cache(maxsize=1024)
def parse_system_qos_resource(text: str) -> SystemQOSResource:
    key = keys.ANNOTATION_SYSTEM_QOS_RESOURCE
    data = load_json(key, text)
    exclusive = data.get("cpusetExclusive", True)
    if not isinstance(exclusive, bool):
        raise AnnotationError(key, "cpusetExclusive must be true or false")
    return SystemQOSResource(_cpuset(key, data.get("cpuset", "")), exclusive)


@dataclass(frozen=True)
class CPUSharedPool:
    socket: int
    node: int
    cpuset: str


def parse_cpu_shared_pools(
    text: str, key: str = keys.ANNOTATION_CPU_SHARED_POOLS
) -> tuple[CPUSharedPool, ...]:
    data = load_json(key, text, list)
    pools = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise AnnotationError(key, f"[{i}] must be an object")
        pools.append(
            CPUSharedPool(
                _int(key, f"[{i}].socket", entry.get("socket", 0), 0, 4095),
                _int(key, f"[{i}].node", entry.get("node", 0), 0, 4095),
                _cpuset(key, entry.get("cpuset", "")),
            )
        )
    return tuple(pools)


@dataclass(frozen=True)
class KubeletCPUManagerPolicy:
    policy: str = "none"  # "none" | "static"
    reserved_cpus: str = ""


@functools.lru_cache(maxsize=1024)
def parse_kubelet_cpu_manager_policy(text: str) -> KubeletCPUManagerPolicy:
    key = keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY
    data = load_json(key, text)
    policy = data.get("policy") or "none"
    if policy not in ("none", "static"):
        raise AnnotationError(key, f"policy must be none or static, got {policy!r}")
    return KubeletCPUManagerPolicy(policy, _cpuset(key, data.get("reservedCPUs", "")))
