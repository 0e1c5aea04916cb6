"""CPU pinning for LSE/LSR pods (Koordinator's NodeNUMAResource, pkg/scheduler/plugins/
nodenumaresource): which pods get a cpuset, whether a node can give it, and which CPUs.

    request = cpu_bind_request(pod, args)           # None: no cpuset; str: unschedulable
    reason = fits_cpus(request, node_cpus)          # None: fits
    cpus = choose_cpus(request, node_cpus, args)
    annotations = {keys.ANNOTATION_RESOURCE_STATUS: resource_status(cpus)}

A pod gets a cpuset when its qosClass label is LSE or LSR, its priority class is koord-prod
and its bind policy (``scheduling.koordinator.sh/resource-spec``, else the default,
FullPCPUs) is FullPCPUs or SpreadByPCPUs; it must then request whole CPUs. The choice follows
Koordinator's cpuAccumulator: whole cores packed into one NUMA node if they fit (the node
with most free CPUs first, or fewest with the MostAllocated strategy), else one socket, else
across sockets. Not modelled: exclusive policies, NUMA topology policies (so resource-status
carries no numaNodeResources, as in Koordinator without one), kubelet's static CPU manager
and a node policy pinning pods other than LSE/LSR.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordapi import annotation, keys, qos
from koordapi.cpuset import format_cpuset
from koordapi.errors import AnnotationError
from koordapi.pod import pod_requests, priority_class_with_default, qos_class_raw
from scheduler.cputopology import CPUTopology, NodeCPUs

REASON_INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
REASON_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
REASON_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
REASON_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
REASON_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
UNRESOLVABLE = frozenset(
    {
        REASON_INVALID_REQUESTED_CPUS,
        REASON_INVALID_CPU_TOPOLOGY,
        REASON_SMT_ALIGNMENT,
        REASON_POLICY_CONFLICT,
    }
)
"""Reasons preemption cannot cure (Koordinator's UnschedulableAndUnresolvable)."""

_EMPTY: Mapping[str, Any] = {}


class CPUBindPolicy(enum.StrEnum):
    DEFAULT = "Default"
    FULL_PCPUS = "FullPCPUs"  # whole physical cores
    SPREAD_BY_PCPUS = "SpreadByPCPUs"  # one logical CPU per physical core
    CONSTRAINED_BURST = "ConstrainedBurst"  # a shared-pool policy: no cpuset


_BINDING = (CPUBindPolicy.FULL_PCPUS, CPUBindPolicy.SPREAD_BY_PCPUS)
_NODE_POLICIES = {  # node label node.koordinator.sh/cpu-bind-policy → the policy it requires
    "FullPCPUsOnly": CPUBindPolicy.FULL_PCPUS,
    "SpreadByPCPUs": CPUBindPolicy.SPREAD_BY_PCPUS,
}
MOST_ALLOCATED = "MostAllocated"
LEAST_ALLOCATED = "LeastAllocated"


@dataclass(frozen=True)
class CPUBindArgs:
    """NodeNUMAResourceArgs that matter here."""

    default_policy: CPUBindPolicy = CPUBindPolicy.FULL_PCPUS
    numa_allocate_strategy: str = LEAST_ALLOCATED  # a node label overrides it


@dataclass(frozen=True, slots=True)
class CPUBindRequest:
    num_cpus: int
    policy: CPUBindPolicy  # preferred (or required, if set)
    required: CPUBindPolicy | None = None  # from the pod's requiredCPUBindPolicy
    spec: Mapping[str, Any] = field(default_factory=dict)  # resource-spec, for the write-back


def cpu_bind_request(pod: Mapping[str, Any], args: CPUBindArgs) -> CPUBindRequest | str | None:
    """What cpuset the pod needs: None for none, a reason string when no node can give it
    (a fractional CPU request). Raises AnnotationError for a resource-spec that does not
    parse, and ModelError (or TypeError, AttributeError) for unreadable requests."""
    metadata = pod.get("metadata") or _EMPTY
    pinned = qos_class_raw(pod) in (qos.QoSClass.LSE, qos.QoSClass.LSR)
    if not pinned or priority_class_with_default(pod) is not qos.PROD:
        return None
    spec = _resource_spec(metadata)
    preferred = spec.get("preferredCPUBindPolicy") or CPUBindPolicy.DEFAULT
    if preferred == CPUBindPolicy.DEFAULT:
        preferred = args.default_policy
    required = spec.get("requiredCPUBindPolicy") or ""
    if required == CPUBindPolicy.DEFAULT:
        required = args.default_policy
    policy = required or preferred
    if policy not in _BINDING:  # ConstrainedBurst, or a name Koordinator does not know
        return None
    milli_cpus, _ = pod_requests(pod.get("spec") or _EMPTY)
    if milli_cpus % 1000:
        return REASON_INVALID_REQUESTED_CPUS
    if not milli_cpus:
        return None
    return CPUBindRequest(
        milli_cpus // 1000,
        CPUBindPolicy(policy),
        CPUBindPolicy(required) if required else None,
        spec,
    )


def _resource_spec(metadata: Mapping[str, Any]) -> dict[str, Any]:
    key = keys.ANNOTATION_RESOURCE_SPEC
    text = (metadata.get("annotations") or _EMPTY).get(key)
    if not text:
        return {}
    spec = dict(annotation.load_json(key, text))
    for name in ("requiredCPUBindPolicy", "preferredCPUBindPolicy", "preferredCPUExclusivePolicy"):
        if not isinstance(spec.get(name, ""), str):
            raise AnnotationError(key, f"{name} must be a string, got {spec[name]!r}")
    return spec


def effective_policy(
    request: CPUBindRequest, node_cpus: NodeCPUs
) -> tuple[CPUBindPolicy, bool] | str:
    """(policy, required) on this node, or the reason the pod's and the node's policies
    conflict. A node label cpu-bind-policy makes its policy required."""
    label = node_cpus.labels.get(keys.LABEL_NODE_CPU_BIND_POLICY)
    forced = _NODE_POLICIES.get(label) if isinstance(label, str) else None
    if forced is not None:
        if request.required is not None and request.required is not forced:
            return REASON_POLICY_CONFLICT
        return forced, True
    if request.required is not None:
        return request.required, True
    return request.policy, False


def fits_cpus(request: CPUBindRequest, node_cpus: NodeCPUs | str) -> str | None:
    """None when the node can pin the pod, else the reason. With a preferred policy any free
    CPUs do (the accumulator's last stage takes whatever is left); a required one counts only
    whole free cores (FullPCPUs) or one CPU per core (SpreadByPCPUs)."""
    if isinstance(node_cpus, str):
        return REASON_INVALID_CPU_TOPOLOGY
    effective = effective_policy(request, node_cpus)
    if isinstance(effective, str):
        return effective
    policy, required = effective
    per_core = node_cpus.topology.cpus_per_core
    if required and policy is CPUBindPolicy.FULL_PCPUS and request.num_cpus % per_core:
        return REASON_SMT_ALIGNMENT
    if not required:
        available = len(node_cpus.free)
    elif policy is CPUBindPolicy.FULL_PCPUS:
        available = node_cpus.full_free_cores * per_core
    else:
        available = node_cpus.cores_with_free
    return REASON_NOT_ENOUGH_CPUS if available < request.num_cpus else None


def numa_strategy(node_cpus: NodeCPUs, args: CPUBindArgs) -> str:
    label = node_cpus.labels.get(keys.LABEL_NODE_NUMA_ALLOCATE_STRATEGY)
    return label if isinstance(label, str) and label else args.numa_allocate_strategy


def choose_cpus(
    request: CPUBindRequest, node_cpus: NodeCPUs | str, args: CPUBindArgs
) -> list[int] | str:
    """The CPUs to pin, sorted, or the reason there are none."""
    reason = fits_cpus(request, node_cpus)
    if reason is not None:
        return reason
    assert not isinstance(node_cpus, str)
    effective = effective_policy(request, node_cpus)
    assert not isinstance(effective, str)
    policy, required = effective
    free: Iterable[int] = node_cpus.free
    if required:
        free = _required_subset(node_cpus, policy)
    most = numa_strategy(node_cpus, args) == MOST_ALLOCATED
    cpus = take_cpus(node_cpus.topology, frozenset(free), request.num_cpus, policy, most)
    return REASON_NOT_ENOUGH_CPUS if cpus is None else sorted(cpus)


def _required_subset(node_cpus: NodeCPUs, policy: CPUBindPolicy) -> list[int]:
    """Koordinator's filterCPUsByRequiredCPUBindPolicy: CPUs of whole free cores, or the
    lowest free CPU of each core."""
    by_core: dict[int, list[int]] = {}
    for cpu in sorted(node_cpus.free):
        by_core.setdefault(node_cpus.topology.cpus[cpu].core, []).append(cpu)
    per_core = node_cpus.topology.cpus_per_core
    if policy is CPUBindPolicy.FULL_PCPUS:
        return [cpu for cpus in by_core.values() if len(cpus) == per_core for cpu in cpus]
    return [cpus[0] for cpus in by_core.values()]


def resource_status(cpus: Iterable[int]) -> str:
    """The resource-status annotation value, as Go's json.Marshal writes it."""
    return json.dumps({"cpuset": format_cpuset(cpus)}, separators=(",", ":"))


def resource_spec_write_back(request: CPUBindRequest, node_cpus: NodeCPUs) -> str | None:
    """The resource-spec annotation recording the policy used, when the pod did not say
    (Koordinator's appendResourceSpecIfMissed), else None."""
    effective = effective_policy(request, node_cpus)
    if isinstance(effective, str):
        return None
    policy, required = effective
    spec = dict(request.spec)
    changed = False
    if required and spec.get("requiredCPUBindPolicy") in (None, "", CPUBindPolicy.DEFAULT):
        spec["requiredCPUBindPolicy"], changed = policy.value, True
    if spec.get("preferredCPUBindPolicy") == CPUBindPolicy.DEFAULT:
        spec["preferredCPUBindPolicy"], changed = policy.value, True
    if not spec.get("requiredCPUBindPolicy") and not spec.get("preferredCPUBindPolicy"):
        spec["preferredCPUBindPolicy"], changed = policy.value, True
    if not changed:
        return None
    fields = ("requiredCPUBindPolicy", "preferredCPUBindPolicy", "preferredCPUExclusivePolicy")
    ordered = {name: spec[name] for name in fields if spec.get(name)}  # Go's field order
    return json.dumps(ordered, separators=(",", ":"))


# -- the accumulator -------------------------------------------------------------------------


class _Accumulator:
    """Koordinator's cpuAccumulator without exclusive policies or shared (refcounted) CPUs.
    Go sorts with sort.Slice, which is not stable; ties here are broken by id, so the choice
    is deterministic."""

    def __init__(
        self, topology: CPUTopology, free: frozenset[int], need: int, most_allocated: bool
    ) -> None:
        self.topology = topology
        self.free = {cpu for cpu in free if cpu in topology.cpus}
        self.need = need
        self.result: list[int] = []
        # free-count orderings: most free first (LeastAllocated) or fewest (MostAllocated)
        self.sign = 1 if most_allocated else -1

    def take(self, cpus: Iterable[int]) -> None:
        for cpu in cpus:
            self.free.discard(cpu)
            self.result.append(cpu)
            self.need -= 1

    def _group(self, key: Callable[[int], int]) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for cpu in sorted(self.free):
            groups.setdefault(key(cpu), []).append(cpu)
        return groups

    def _cores(self) -> dict[int, list[int]]:
        cpus = self.topology.cpus
        return self._group(lambda cpu: cpus[cpu].core)

    def _count_by(self, attr: str) -> dict[int, int]:
        counts: dict[int, int] = {}
        for cpu in self.free:
            value = getattr(self.topology.cpus[cpu], attr)
            counts[value] = counts.get(value, 0) + 1
        return counts

    def free_cores_in_node(self) -> list[list[int]]:
        """The CPUs of whole free cores, per NUMA node, best node first."""
        per_core = self.topology.cpus_per_core
        info = self.topology.cpus
        socket_free = self._count_by("socket")
        nodes: dict[int, list[int]] = {}
        for _core, cpus in sorted(self._cores().items()):
            if len(cpus) == per_core:
                nodes.setdefault(info[cpus[0]].node, []).extend(cpus)
        return [
            nodes[n]
            for n in sorted(
                nodes,
                key=lambda n: (
                    self.sign * len(nodes[n]),
                    self.sign * socket_free[info[nodes[n][0]].socket],
                    n,
                ),
            )
        ]

    def free_cores_in_socket(self) -> list[list[int]]:
        per_core = self.topology.cpus_per_core
        info = self.topology.cpus
        sockets: dict[int, list[int]] = {}
        for _core, cpus in sorted(self._cores().items()):
            if len(cpus) == per_core:
                sockets.setdefault(info[cpus[0]].socket, []).extend(cpus)
        return [sockets[s] for s in sorted(sockets, key=lambda s: (self.sign * len(sockets[s]), s))]

    def _one_per_core(self, cpus: list[int]) -> list[int]:
        seen: set[int] = set()
        out = []
        for cpu in cpus:
            core = self.topology.cpus[cpu].core
            if core not in seen:
                seen.add(core)
                out.append(cpu)
        return out

    def free_cpus_in_node(self, one_per_core: bool) -> list[list[int]]:
        info = self.topology.cpus
        node_free, socket_free = self._count_by("node"), self._count_by("socket")
        groups = self._group(lambda cpu: info[cpu].node)
        order = sorted(
            groups,
            key=lambda n: (
                self.sign * node_free[n],
                self.sign * socket_free[info[groups[n][0]].socket],
                n,
            ),
        )
        return [self._one_per_core(groups[n]) if one_per_core else groups[n] for n in order]

    def free_cpus_in_socket(self, one_per_core: bool) -> list[list[int]]:
        info = self.topology.cpus
        groups = {
            s: self._one_per_core(cpus) if one_per_core else cpus
            for s, cpus in self._group(lambda cpu: info[cpu].socket).items()
        }
        return [groups[s] for s in sorted(groups, key=lambda s: (self.sign * len(groups[s]), s))]

    def free_cpus(self) -> list[int]:
        """Every free CPU, cores ordered to stay near what was taken: sockets already used
        first, then by free CPUs per socket and node, partly used cores first."""
        info = self.topology.cpus
        cores = self._cores()
        socket_free, node_free = self._count_by("socket"), self._count_by("node")
        colocated: dict[int, int] = {}
        for cpu in self.result:
            colocated[info[cpu].socket] = colocated.get(info[cpu].socket, 0) + 1

        def rank(core: int) -> tuple[int, ...]:
            first = info[cores[core][0]]
            return (
                -colocated.get(first.socket, 0),
                self.sign * socket_free[first.socket],
                self.sign * node_free[first.node],
                len(cores[core]),
                first.socket,
                core,
            )

        return [cpu for core in sorted(cores, key=rank) for cpu in cores[core]]

    def spread(self, cpus: list[int]) -> list[int]:
        """Round-robin over cores: the first CPU of each core, then the second, ..."""
        if len(cpus) <= self.topology.cpus_per_core:
            return cpus
        out: list[int] = []
        rest = cpus
        while rest:
            seen: set[int] = set()
            later = []
            for cpu in rest:
                core = self.topology.cpus[cpu].core
                if core in seen:
                    later.append(cpu)
                else:
                    seen.add(core)
                    out.append(cpu)
            rest = later
        return out


def take_cpus(
    topology: CPUTopology, free: frozenset[int], need: int, policy: CPUBindPolicy, most: bool
) -> list[int] | None:
    """Koordinator's takeCPUs: ``need`` CPUs out of ``free``, or None if there are too few."""
    acc = _Accumulator(topology, free, need, most)
    if acc.need <= 0:
        return []
    if acc.need > len(acc.free):
        return None
    per_core = topology.cpus_per_core
    full = policy is CPUBindPolicy.FULL_PCPUS
    if full or per_core == 1:
        # one NUMA node, then one socket, with whole cores
        for limit, groups in (
            (topology.cpus_per_node, acc.free_cores_in_node),
            (topology.cpus_per_socket, acc.free_cores_in_socket),
        ):
            if acc.need <= limit:
                for cpus in groups():
                    if len(cpus) >= acc.need:
                        acc.take(cpus[: acc.need])
                        return acc.result
        # across sockets: whole sockets' free cores, the fullest first ...
        unsatisfied = []
        for cpus in sorted(acc.free_cores_in_socket(), key=len, reverse=True):
            if acc.need < len(cpus):
                unsatisfied.append(cpus)
                continue
            acc.take(cpus)
            if acc.need < 1:
                return acc.result
        # ... then core by core from the emptiest
        if acc.need >= per_core:
            for cpus in sorted(unsatisfied, key=len):
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.need < 1:
                        return acc.result
                    if acc.need < per_core:
                        break
    if not full:
        # spread within one NUMA node, then one socket: one CPU per core if enough cores
        for limit, spread_groups in (
            (topology.cpus_per_node, acc.free_cpus_in_node),
            (topology.cpus_per_socket, acc.free_cpus_in_socket),
        ):
            if acc.need <= limit:
                for one_per_core in (True, False):
                    for cpus in spread_groups(one_per_core):
                        if len(cpus) >= acc.need:
                            acc.take(acc.spread(cpus)[: acc.need])
                            return acc.result
    # whatever is left, near what was taken
    for cpu in acc.spread(acc.free_cpus()):
        acc.take([cpu])
        if acc.need < 1:
            return acc.result
    return None
