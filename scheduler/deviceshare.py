"""GPU sharing (Koordinator's DeviceShare, pkg/scheduler/plugins/deviceshare): what a pod asks
of a node's GPUs, which nodes can give it, how well, and which GPUs it gets.

    request = gpu_request(pod)                   # None: no GPU resources; str: invalid
    gpus = node_gpus(device, pods_on_node)       # None: the node has no Device object
    reason = filter_gpus(request, gpus, node)    # None: fits; else (reason, unresolvable)
    score = score_gpus(request, gpus, args)      # 0..100 before normalisation
    chosen = allocate(request, gpus, args)       # [GPUAllocation], or a reason
    annotation = device_allocated(chosen)        # scheduling.koordinator.sh/device-allocated

Requests are read as Koordinator reads them: the pod's effective requests of
``nvidia.com/gpu`` (whole cards: 100 core + 100 memory ratio each), ``koordinator.sh/gpu``
(core and memory ratio, 100 a card), ``gpu-core``, ``gpu-memory``, ``gpu-memory-ratio`` and
``gpu.shared``, validated by Koordinator's combination table (``gpu-core`` alone is not a
request; percentages over 100 must be whole cards) and split over the cards they span. A node's
GPUs are its Device's entries (an unhealthy GPU offers nothing) minus what the
``device-allocated`` annotations of the active pods on it hold.

Not modelled: other vendors (AMD, Hygon, Huawei NPU), RDMA and FPGA allocation, device hints,
joint allocation, GPU partitions and shared-resource templates, reservations, NUMA alignment
with the pod's CPUs, and pods that arrive with a device-allocated annotation already.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi import annotation, keys
from koordapi.device import TYPE_GPU
from koordapi.errors import ModelError
from koordapi.pod import pod_requests
from koordapi.quantity import format_binary, value

# -- reasons ---------------------------------------------------------------------------------

REASON_INSUFFICIENT_GPU = "Insufficient gpu devices"  # Koordinator: "Insufficient %s devices"
REASON_INSUFFICIENT_TOPOLOGY_GPU = "Insufficient GPU Devices"  # its topology-aware allocator
# Koordinator's node labels of a node's GPU vendor and model (apis/extension/device_share.go),
# matched against DeviceShareArgs.gpuShareUnsupportedModels
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
REASON_ISOLATION_PROVIDER = "GPUIsolationProviderHAMICore not found on the node"

MAX_NODE_SCORE = 100
FULL = 100  # one card in core and memory-ratio units

# the resources a GPU request may name, as Koordinator's DeviceResourceNames (NVIDIA/koord only)
GPU_RESOURCES = (
    keys.NVIDIA_GPU,
    keys.GPU,
    keys.GPU_SHARED,
    keys.GPU_CORE,
    keys.GPU_MEMORY,
    keys.GPU_MEMORY_RATIO,
)


class ScoringStrategy(enum.StrEnum):
    LEAST_ALLOCATED = "LeastAllocated"  # spread: prefer the emptiest node and card
    MOST_ALLOCATED = "MostAllocated"  # binpack: prefer the fullest


# Koordinator's DeviceShareArgs default: LeastAllocated over these resources, each weight 1
DEFAULT_WEIGHTS: Mapping[str, int] = {
    keys.GPU_MEMORY_RATIO: 1,
    keys.GPU_MEMORY: 1,
    keys.RDMA: 1,
    keys.FPGA: 1,
}


@dataclass(frozen=True)
class DeviceShareArgs:
    strategy: ScoringStrategy = ScoringStrategy.LEAST_ALLOCATED
    weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # (vendor, model) of GPUs that cannot be shared: a pod asking for less than a whole card
    # is filtered out of a node whose gpu-vendor and gpu-model labels name one
    unsupported_models: frozenset[tuple[str, str]] = frozenset()


# -- the pod's request ------------------------------------------------------------------------

# the valid combinations (Koordinator's ValidDeviceResourceCombinations, NVIDIA and koord GPUs)
_WHOLE = "whole"
_PERCENTAGE = "percentage"
_SHARED = "shared"
_COMBINATIONS: Mapping[frozenset[str], str] = {
    frozenset({keys.NVIDIA_GPU}): _WHOLE,
    frozenset({keys.GPU}): _WHOLE,
    frozenset({keys.GPU_MEMORY}): _PERCENTAGE,
    frozenset({keys.GPU_MEMORY_RATIO}): _PERCENTAGE,
    frozenset({keys.GPU_CORE, keys.GPU_MEMORY}): _PERCENTAGE,
    frozenset({keys.GPU_CORE, keys.GPU_MEMORY_RATIO}): _PERCENTAGE,
    frozenset({keys.GPU_SHARED, keys.GPU_MEMORY}): _SHARED,
    frozenset({keys.GPU_SHARED, keys.GPU_MEMORY_RATIO}): _SHARED,
    frozenset({keys.GPU_SHARED, keys.GPU_CORE, keys.GPU_MEMORY}): _SHARED,
    frozenset({keys.GPU_SHARED, keys.GPU_CORE, keys.GPU_MEMORY_RATIO}): _SHARED,
}


@dataclass(frozen=True)
class GPURequest:
    """What each of ``count`` GPUs must give the pod (core and memory ratio in hundredths of a
    card, memory in bytes); ``shared``: less than a whole card each."""

    per_gpu: Mapping[str, int]
    count: int
    shared: bool
    isolation_provider: str = ""


def _percentage(amount: int) -> bool:
    """Koordinator's ValidatePercentageResource: up to 100, or whole cards beyond."""
    return amount <= FULL or amount % FULL == 0


def validate_request(requests: Mapping[str, int]) -> str | None:
    """Koordinator's ValidateDeviceRequest for the GPU resources a pod asks for (zeros already
    removed): None when valid, else the reason."""
    if not requests:
        return "pod request should not be empty"
    if keys.GPU in requests and not _percentage(requests[keys.GPU]):
        return f"invalid resource unit {keys.GPU}: {requests[keys.GPU]}"
    rule = _COMBINATIONS.get(frozenset(requests))
    core, ratio = requests.get(keys.GPU_CORE), requests.get(keys.GPU_MEMORY_RATIO)
    valid = rule is not None
    if rule == _PERCENTAGE:
        valid = all(_percentage(a) for a in (core, ratio) if a is not None)
    elif rule == _SHARED:
        shared = requests[keys.GPU_SHARED]
        # each shared card takes an equal part, at most a whole card
        valid = all(a % shared == 0 and a // shared <= FULL for a in (core, ratio) if a is not None)
    if not valid:
        return f"invalid resource device requests: [{' '.join(sorted(requests))}]"
    return None


def convert_request(requests: Mapping[str, int]) -> dict[str, int]:
    """Koordinator's ConvertDeviceRequest for a valid request: whole cards as core and memory
    ratio (nvidia.com/gpu: 100 each a card; koordinator.sh/gpu: as many hundredths)."""
    if keys.NVIDIA_GPU in requests:
        cards = requests[keys.NVIDIA_GPU] * FULL
        return {keys.GPU_CORE: cards, keys.GPU_MEMORY_RATIO: cards}
    if keys.GPU in requests:
        return {keys.GPU_CORE: requests[keys.GPU], keys.GPU_MEMORY_RATIO: requests[keys.GPU]}
    return dict(requests)


def per_gpu(requests: Mapping[str, int]) -> tuple[dict[str, int], int, bool]:
    """Koordinator's calcDesiredRequestsAndCountForGPU: (what each GPU gives, how many GPUs,
    shared). gpu.shared names the count; else a memory ratio of whole cards beyond one does."""
    count = 1
    shared_count = requests.get(keys.GPU_SHARED, 0)
    ratio = requests.get(keys.GPU_MEMORY_RATIO)
    if shared_count > 0:
        count = shared_count
    elif ratio is not None and ratio > FULL and ratio % FULL == 0:
        count = ratio // FULL
    each: dict[str, int] = {}
    shared = False
    if keys.GPU_CORE in requests:
        each[keys.GPU_CORE] = requests[keys.GPU_CORE] // count
    if ratio is not None:
        each[keys.GPU_MEMORY_RATIO] = ratio // count
        shared = each[keys.GPU_MEMORY_RATIO] < FULL
    elif keys.GPU_MEMORY in requests:
        each[keys.GPU_MEMORY] = requests[keys.GPU_MEMORY] // count
        shared = True
    return each, count, shared


def gpu_request(pod: Mapping[str, Any]) -> GPURequest | str | None:
    """The pod's GPU request; None when it asks for none of GPU_RESOURCES (DeviceShare skips
    it), a reason when the request is invalid (no node can take the pod). Raises ModelError,
    TypeError or AttributeError for a malformed pod."""
    spec = pod.get("spec") or {}
    requests: dict[str, int] = {}
    for i in range(0, len(GPU_RESOURCES), 2):
        first, second = GPU_RESOURCES[i], GPU_RESOURCES[i + 1]
        a, b = pod_requests(spec, (first, second))
        requests.update((n, v) for n, v in ((first, a), (second, b)) if v > 0)
    if not requests:
        return None
    reason = validate_request(requests)
    if reason is not None:
        return reason
    each, count, shared = per_gpu(convert_request(requests))
    labels = (pod.get("metadata") or {}).get("labels") or {}
    provider = str(labels.get(keys.LABEL_GPU_ISOLATION_PROVIDER) or "")
    return GPURequest(each, count, shared, provider)


# -- the node's GPUs --------------------------------------------------------------------------


@dataclass(frozen=True)
class GPU:
    minor: int
    uuid: str
    total: Mapping[str, int]  # empty when unhealthy: it offers nothing
    numa_node: int | None = None  # None: the Device gives no topology
    pcie: str = ""


@dataclass(frozen=True)
class NodeGPUs:
    """A node's GPUs (by minor) and what the pods on it hold of each."""

    gpus: Mapping[int, GPU]
    used: Mapping[int, Mapping[str, int]]
    holders: Mapping[str, Mapping[int, Mapping[str, int]]] = field(default_factory=dict)

    def free(self, minor: int) -> dict[str, int]:
        """Total minus used, never below zero (an unhealthy card: zeros)."""
        total = self.gpus[minor].total
        used = self.used.get(minor, {})
        names = set(total) | set(used)
        return {n: max(total.get(n, 0) - used.get(n, 0), 0) for n in names}

    @property
    def topology_known(self) -> bool:
        return bool(self.gpus) and all(g.numa_node is not None for g in self.gpus.values())

    def without(self, pod_key: str) -> NodeGPUs:
        """The same node with ``pod_key``'s own allocation free again."""
        mine = self.holders.get(pod_key)
        if not mine:
            return self
        used = {m: dict(r) for m, r in self.used.items()}
        for minor, resources in mine.items():
            left = used.get(minor, {})
            for name, amount in resources.items():
                left[name] = left.get(name, 0) - amount
            kept = {n: a for n, a in left.items() if a > 0}
            if kept:
                used[minor] = kept
            else:
                used.pop(minor, None)
        holders = {k: v for k, v in self.holders.items() if k != pod_key}
        return NodeGPUs(self.gpus, used, holders)


def _amount(quantity: Any) -> int:
    try:
        return value(quantity)
    except (ModelError, TypeError, ValueError):
        return 0


def device_gpus(device: Mapping[str, Any]) -> dict[int, GPU]:
    """The GPU entries of a Device by minor; an unhealthy one with no resources, one without a
    minor left out."""
    gpus = {}
    for entry in (device.get("spec") or {}).get("devices") or ():
        if entry.get("type") != TYPE_GPU or not isinstance(entry.get("minor"), int):
            continue
        total: dict[str, int] = {}
        if entry.get("health") is True:
            resources = entry.get("resources") or {}
            total = {str(n): _amount(q) for n, q in resources.items()}
            total = {n: a for n, a in total.items() if a > 0}
        topology = entry.get("topology") or {}
        numa = topology.get("nodeID")
        gpus[entry["minor"]] = GPU(
            entry["minor"],
            str(entry.get("id") or ""),
            total,
            numa if isinstance(numa, int) and topology else None,
            str(topology.get("pcieID") or ""),
        )
    return gpus


def pod_gpu_allocation(pod: Mapping[str, Any]) -> dict[int, dict[str, int]]:
    """What the pod's device-allocated annotation gives it, by GPU minor; {} when none or
    unreadable (Koordinator logs and skips such a pod)."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(
        keys.ANNOTATION_DEVICE_ALLOCATED
    )
    if not text:
        return {}
    try:
        entries = annotation.parse_device_allocated(text).get(TYPE_GPU, ())
    except ModelError:
        return {}
    held: dict[int, dict[str, int]] = {}
    for entry in entries:
        if entry.minor is None:
            continue
        mine = held.setdefault(entry.minor, {})
        for name, amount in entry.resources.items():
            mine[name] = mine.get(name, 0) + _amount(str(amount))
    return held


def _terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def node_gpus(
    device: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]]
) -> NodeGPUs | None:
    """The node's GPUs with what its active pods hold; None without a Device (DeviceShare then
    lets every pod pass and scores the node 0)."""
    if device is None:
        return None
    used: dict[int, dict[str, int]] = {}
    holders: dict[str, Mapping[int, Mapping[str, int]]] = {}
    for pod in pods:
        if _terminated(pod):
            continue
        held = pod_gpu_allocation(pod)
        if not held:
            continue
        holders[_pod_key(pod)] = held
        for minor, resources in held.items():
            mine = used.setdefault(minor, {})
            for name, amount in resources.items():
                mine[name] = mine.get(name, 0) + amount
    return NodeGPUs(device_gpus(device), used, holders)


# -- scoring (Koordinator's resourceAllocationScorer) ----------------------------------------


def _resource_score(requested: int, capacity: int, strategy: ScoringStrategy) -> int:
    if capacity == 0:
        return 0
    if strategy is ScoringStrategy.MOST_ALLOCATED:
        return min(requested, capacity) * MAX_NODE_SCORE // capacity
    if requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _weighted(
    request: Mapping[str, int],
    total: Mapping[str, int],
    free: Mapping[str, int],
    args: DeviceShareArgs,
) -> int:
    """The strategy's score of taking ``request`` out of ``free`` of ``total``, averaged over
    the weighted resources the total has."""
    score = weights = 0
    for name, weight in args.weights.items():
        capacity = total.get(name, 0)
        if capacity == 0:
            continue
        left = free.get(name, 0)
        requested = capacity - left + request.get(name, 0) if capacity >= left else capacity
        score += _resource_score(requested, capacity, args.strategy) * weight
        weights += weight
    return score // weights if weights else 0


def score_device(
    request: Mapping[str, int],
    total: Mapping[str, int],
    free: Mapping[str, int],
    args: DeviceShareArgs,
) -> int:
    """One card's score for ``request`` (Koordinator's scoreDevice)."""
    return _weighted(request, total, free, args)


def score_gpus(request: GPURequest, gpus: NodeGPUs | None, args: DeviceShareArgs) -> int:
    """The node's score 0..100 (Koordinator's scoreNode: the sums over the node's cards, with
    one card's request); 0 for a node without a Device or GPUs."""
    if gpus is None or not gpus.gpus:
        return 0
    total: dict[str, int] = {}
    free: dict[str, int] = {}
    for minor, gpu in gpus.gpus.items():
        for name, amount in gpu.total.items():
            total[name] = total.get(name, 0) + amount
        for name, amount in gpus.free(minor).items():
            free[name] = free.get(name, 0) + amount
    return _weighted(request.per_gpu, total, free, args)


def normalize_scores(scores: Sequence[int]) -> list[int]:
    """kube-scheduler's DefaultNormalizeScore: the best node gets 100, the others in
    proportion (all 0 stays 0)."""
    best = max(scores, default=0)
    if best == 0:
        return [0] * len(scores)
    return [s * MAX_NODE_SCORE // best for s in scores]


# -- allocation -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUAllocation:
    minor: int
    resources: Mapping[str, int]
    uuid: str = ""


def _fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(amount <= free.get(name, 0) for name, amount in request.items())


@dataclass
class _Scope:
    """A level of Koordinator's GPU topology tree: the node, a NUMA node, a PCIe root."""

    level: int
    minors: list[int]
    children: list[_Scope] = field(default_factory=list)


@dataclass(frozen=True)
class _Found:
    minors: tuple[int, ...]
    depth: int
    not_empty: int  # how many scopes on its path already hold allocated cards
    score: int


def _topology_tree(gpus: NodeGPUs) -> _Scope:
    by_numa: dict[int, dict[str, list[int]]] = {}
    for minor in sorted(gpus.gpus):
        gpu = gpus.gpus[minor]
        by_numa.setdefault(gpu.numa_node or 0, {}).setdefault(gpu.pcie, []).append(minor)
    root = _Scope(0, sorted(gpus.gpus))
    for numa in sorted(by_numa):
        roots = by_numa[numa]
        numa_scope = _Scope(1, sorted(m for ms in roots.values() for m in ms))
        numa_scope.children = [_Scope(2, roots[pcie]) for pcie in sorted(roots)]
        root.children.append(numa_scope)
    return root


def _from_scope(
    scope: _Scope,
    request: GPURequest,
    gpus: NodeGPUs,
    args: DeviceShareArgs,
    *,
    depth: int,
    not_empty: int,
) -> _Found | None:
    """Koordinator's allocateFromScope: the deepest scope that can give every card wins (the
    one whose path already holds more allocated cards among equals; for a shared card, then
    the best-scoring card); a scope tries its own cards only when no child can."""
    if len(scope.minors) < request.count:
        return None
    depth += 1
    if any(m in gpus.used for m in scope.minors):
        not_empty += 1
    best: _Found | None = None
    for child in scope.children:
        if len(child.minors) < request.count:
            continue
        found = _from_scope(child, request, gpus, args, depth=depth, not_empty=not_empty)
        if found is None:
            continue
        if best is None:
            best = found
            continue
        if best.depth < found.depth or (
            best.depth == found.depth and best.not_empty < found.not_empty
        ):
            best = found
        if (
            request.shared
            and (best.depth, best.not_empty) == (found.depth, found.not_empty)
            and best.score < found.score
        ):
            best = found
    if best is not None:
        return best
    chosen: list[int] = []
    best_minor, best_score = -1, -1
    for minor in scope.minors:
        gpu = gpus.gpus[minor]
        free = gpus.free(minor)
        if not gpu.total or not _fits(request.per_gpu, free):
            continue
        if not request.shared:
            chosen.append(minor)
            if len(chosen) == request.count:
                break
            continue
        score = score_device(request.per_gpu, gpu.total, free, args)
        if score > best_score:
            best_minor, best_score = minor, score
    if request.shared:
        if best_minor < 0:
            return None
        return _Found((best_minor,), depth, not_empty, best_score)
    if len(chosen) < request.count:
        return None
    return _Found(tuple(chosen), depth, not_empty, -1)


def _by_score(request: GPURequest, gpus: NodeGPUs, args: DeviceShareArgs) -> list[int] | None:
    """Koordinator's defaultAllocateDevices: the cards by score (highest first), then minor;
    the first ``count`` that fit."""
    ranked = sorted(
        gpus.gpus,
        key=lambda m: (-score_device(request.per_gpu, gpus.gpus[m].total, gpus.free(m), args), m),
    )
    chosen = []
    for minor in ranked:
        free = gpus.free(minor)
        if not any(free.values()) or not _fits(request.per_gpu, free):
            continue
        chosen.append(minor)
        if len(chosen) == request.count:
            return chosen
    return None


def choose_minors(
    request: GPURequest, gpus: NodeGPUs, args: DeviceShareArgs
) -> tuple[list[int], None] | tuple[None, tuple[str, bool]]:
    """Which cards: by the topology tree when every card has a topology (not for several
    shared cards), else by score. ((minors, None), or (None, (reason, unresolvable)))."""
    if not gpus.gpus:
        return None, (REASON_INSUFFICIENT_GPU, True)
    if gpus.topology_known and not (request.shared and request.count > 1):
        found = _from_scope(_topology_tree(gpus), request, gpus, args, depth=0, not_empty=0)
        if found is None:
            return None, (REASON_INSUFFICIENT_TOPOLOGY_GPU, False)
        return list(found.minors), None
    minors = _by_score(request, gpus, args)
    if minors is None:
        return None, (REASON_INSUFFICIENT_GPU, False)
    return minors, None


def filter_gpus(
    request: GPURequest, gpus: NodeGPUs | None, node: Mapping[str, Any], args: DeviceShareArgs
) -> tuple[str, bool] | None:
    """None when the node can give the pod its GPUs (or has no Device: DeviceShare does not
    judge it), else (reason, unresolvable)."""
    if request.shared and request.isolation_provider:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(keys.LABEL_GPU_ISOLATION_PROVIDER) != request.isolation_provider:
            return REASON_ISOLATION_PROVIDER, True
    if request.shared and args.unsupported_models:
        labels = (node.get("metadata") or {}).get("labels") or {}
        vendor, model = labels.get(LABEL_GPU_VENDOR, ""), labels.get(LABEL_GPU_MODEL, "")
        if (vendor, model) in args.unsupported_models:
            return f'model "{model}" of vendor "{vendor}" does not support GPU Share', True
    if gpus is None:
        return None
    return choose_minors(request, gpus, args)[1]


def memory_ratio_to_bytes(ratio: int, total_memory: int) -> int:
    return ratio * total_memory // FULL


def memory_bytes_to_ratio(memory: int, total_memory: int) -> int:
    """Koordinator's memoryBytesToRatio: the float quotient in percent, truncated."""
    return int(memory / total_memory * FULL)


def allocate(
    request: GPURequest, gpus: NodeGPUs, args: DeviceShareArgs
) -> list[GPUAllocation] | tuple[str, bool]:
    """The cards for the pod, each with what it takes of it: core as asked, and both memory
    and memory ratio (one converted from the other with the card's total memory, as
    Koordinator's fillGPUTotalMem), with the card's UUID."""
    minors, reason = choose_minors(request, gpus, args)
    if minors is None:
        assert reason is not None
        return reason
    chosen = []
    for minor in minors:
        gpu = gpus.gpus[minor]
        resources = dict(request.per_gpu)
        total_memory = gpu.total.get(keys.GPU_MEMORY, 0)
        if total_memory:
            if keys.GPU_MEMORY in resources and keys.GPU_MEMORY_RATIO not in resources:
                resources[keys.GPU_MEMORY_RATIO] = memory_bytes_to_ratio(
                    resources[keys.GPU_MEMORY], total_memory
                )
            elif keys.GPU_MEMORY_RATIO in resources and keys.GPU_MEMORY not in resources:
                resources[keys.GPU_MEMORY] = memory_ratio_to_bytes(
                    resources[keys.GPU_MEMORY_RATIO], total_memory
                )
        chosen.append(GPUAllocation(minor, resources, gpu.uuid))
    return chosen


def device_allocated(allocations: Sequence[GPUAllocation]) -> str:
    """The scheduling.koordinator.sh/device-allocated value, as Koordinator's JSON encoder
    writes it: {"gpu": [{"minor", "resources" (sorted, quantities as strings), "id"}]}."""
    entries = []
    for a in allocations:
        resources = {
            name: format_binary(amount) if name == keys.GPU_MEMORY else str(amount)
            for name, amount in sorted(a.resources.items())
        }
        entry: dict[str, Any] = {"minor": a.minor, "resources": resources}
        if a.uuid:
            entry["id"] = a.uuid
        entries.append(entry)
    return json.dumps({TYPE_GPU: entries}, separators=(",", ":"))
