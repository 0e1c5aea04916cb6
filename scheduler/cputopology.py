"""A node's CPU topology and which of its CPUs a new LSE/LSR pod may still take.

The topology is koordlet's ``node.koordinator.sh/cpu-topology`` annotation,
``{"detail": [{"id": 0, "core": 0, "socket": 0, "node": 0}, ...]}`` (Koordinator keeps it on
the NodeResourceTopology object; here it is read from whatever annotations the caller passes,
the Node's by default). Free CPUs are the topology's minus the node's reserved CPUs
(``node.koordinator.sh/reservation`` reservedCPUs) minus every active pod's
``scheduling.koordinator.sh/resource-status`` cpuset. Nothing here raises on bad input: a
malformed topology comes back as an error string, a malformed pod annotation as a note.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi import annotation, keys
from koordapi.cpuset import MAX_CPU_ID, parse_cpuset
from koordapi.errors import ModelError

_EMPTY: Mapping[str, Any] = {}
_TERMINATED = ("Succeeded", "Failed")
_MAX_TOPOLOGY_ID = 4095  # sockets and NUMA nodes
_MAX_CORE_ID = 0xFFFF  # core ids are made unique per socket as socket << 16 | core


@dataclass(frozen=True, slots=True)
class CPUInfo:
    cpu: int
    core: int  # socket << 16 | core id: core ids repeat across sockets
    socket: int
    node: int  # NUMA node


@dataclass(frozen=True)
class CPUTopology:
    cpus: Mapping[int, CPUInfo]
    num_cores: int
    num_nodes: int  # NUMA nodes, counted per socket as Koordinator does
    num_sockets: int

    @property
    def cpus_per_core(self) -> int:
        return len(self.cpus) // self.num_cores

    @property
    def cpus_per_socket(self) -> int:
        return len(self.cpus) // self.num_sockets

    @property
    def cpus_per_node(self) -> int:
        return len(self.cpus) // self.num_nodes


def _field(entry: Mapping[str, Any], name: str, where: str, hi: int) -> int:
    value = entry.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}.{name} must be an integer, got {value!r}")
    if not 0 <= value <= hi:
        raise ValueError(f"{where}.{name}={value} is outside 0..{hi}")
    return value


@functools.lru_cache(maxsize=256)
def parse_cpu_topology(text: str) -> CPUTopology | str:
    """The topology, or an error string naming the annotation and the problem. Stricter than
    Go's decoder on purpose: koordlet always writes all four fields and unique ids."""
    key = keys.ANNOTATION_CPU_TOPOLOGY
    try:
        data = annotation.load_json(key, text)
        detail = data.get("detail")
        if not isinstance(detail, list) or not detail:
            raise ValueError("detail must be a non-empty list")
        cpus: dict[int, CPUInfo] = {}
        cores, nodes, sockets = set(), set(), set()
        for i, entry in enumerate(detail):
            where = f"detail[{i}]"
            if not isinstance(entry, dict):
                raise ValueError(f"{where} must be an object")
            cpu = _field(entry, "id", where, MAX_CPU_ID)
            socket = _field(entry, "socket", where, _MAX_TOPOLOGY_ID)
            node = _field(entry, "node", where, _MAX_TOPOLOGY_ID)
            core = socket << 16 | _field(entry, "core", where, _MAX_CORE_ID)
            if cpu in cpus:
                raise ValueError(f"{where}: cpu {cpu} listed twice")
            cpus[cpu] = CPUInfo(cpu, core, socket, node)
            cores.add(core)
            nodes.add((socket, node))
            sockets.add(socket)
    except ModelError as err:
        return str(err)
    except ValueError as err:
        return f"{key}: {err}"
    return CPUTopology(cpus, len(cores), len(nodes), len(sockets))


def node_cpu_topology(annotations: Mapping[str, Any]) -> CPUTopology | str:
    text = annotations.get(keys.ANNOTATION_CPU_TOPOLOGY)
    if not text:
        return f"{keys.ANNOTATION_CPU_TOPOLOGY}: missing"
    if not isinstance(text, str):
        return f"{keys.ANNOTATION_CPU_TOPOLOGY}: not a string"
    return parse_cpu_topology(text)


def pod_key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or _EMPTY
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def pinned_cpus(pods: Sequence[Mapping[str, Any]]) -> tuple[dict[str, frozenset[int]], list[str]]:
    """The cpuset of each active pod with a resource-status annotation, by namespace/name, and
    a note for each annotation that does not parse (koordlet cannot apply it either, so those
    CPUs are not pinned)."""
    taken: dict[str, frozenset[int]] = {}
    notes: list[str] = []
    for pod in pods:
        text = ((pod.get("metadata") or _EMPTY).get("annotations") or _EMPTY).get(
            keys.ANNOTATION_RESOURCE_STATUS
        )
        if not text or (pod.get("status") or _EMPTY).get("phase") in _TERMINATED:
            continue
        try:
            cpuset = parse_cpuset(annotation.parse_resource_status(text).cpuset)
        except (ModelError, TypeError) as err:
            notes.append(f"pod {pod_key(pod)}: {err}")
            continue
        if cpuset:
            taken[pod_key(pod)] = cpuset
    return taken, notes


@dataclass(frozen=True)
class NodeCPUs:
    """A node's topology and the CPUs still free for pinning."""

    topology: CPUTopology
    free: frozenset[int]
    taken_by: Mapping[str, frozenset[int]]  # pod namespace/name -> its pinned CPUs
    reserved: frozenset[int] = frozenset()
    notes: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)  # the node's, for its policies
    full_free_cores: int = field(init=False)  # cores with every CPU free
    cores_with_free: int = field(init=False)  # cores with at least one CPU free

    def __post_init__(self) -> None:
        free_in_core: dict[int, int] = {}
        for cpu in self.free:
            core = self.topology.cpus[cpu].core
            free_in_core[core] = free_in_core.get(core, 0) + 1
        per_core = self.topology.cpus_per_core
        object.__setattr__(
            self, "full_free_cores", sum(1 for n in free_in_core.values() if n == per_core)
        )
        object.__setattr__(self, "cores_with_free", len(free_in_core))

    def without(self, key: str) -> NodeCPUs:
        """The same node with pod ``key``'s CPUs free again (a pod being re-bound)."""
        if key not in self.taken_by:
            return self
        taken_by = {k: v for k, v in self.taken_by.items() if k != key}
        taken = frozenset().union(*taken_by.values())
        free = frozenset(self.topology.cpus) - self.reserved - taken
        return NodeCPUs(self.topology, free, taken_by, self.reserved, self.notes, self.labels)


def node_cpus(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> NodeCPUs | str:
    """The node's free CPUs given the pods on it, or why its topology cannot be used."""
    annotations = (node.get("metadata") or _EMPTY).get("annotations") or _EMPTY
    topology = node_cpu_topology(annotations)
    if isinstance(topology, str):
        return topology
    notes: list[str] = []
    reserved: frozenset[int] = frozenset()
    text = annotations.get(keys.ANNOTATION_NODE_RESERVATION)
    if text:
        try:
            reserved = parse_cpuset(annotation.parse_node_reservation(text).reserved_cpus)
        except (ModelError, TypeError) as err:
            notes.append(f"reserved CPUs ignored: {err}")
    taken_by, pod_notes = pinned_cpus(pods)
    taken = frozenset().union(*taken_by.values())
    free = frozenset(topology.cpus) - reserved - taken
    labels = (node.get("metadata") or _EMPTY).get("labels") or _EMPTY
    return NodeCPUs(topology, free, taken_by, reserved, (*notes, *pod_notes), dict(labels))


class CPUCache:
    """node_cpus() per node name, redone only when the node's topology or reservation
    annotation, its labels or its pod list changes (pods compared by identity, element by
    element, so a changed pod must be a new object). Not thread-safe."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[tuple[Any, ...], NodeCPUs | str]] = {}

    def node_cpus(
        self, name: str, node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
    ) -> NodeCPUs | str:
        metadata = node.get("metadata") or _EMPTY
        annotations = metadata.get("annotations") or _EMPTY
        key = (
            annotations.get(keys.ANNOTATION_CPU_TOPOLOGY),
            annotations.get(keys.ANNOTATION_NODE_RESERVATION),
            metadata.get("labels"),
            *pods,
        )
        entry = self._nodes.get(name)
        if entry is not None and entry[0] == key:
            return entry[1]
        result = node_cpus(node, pods)
        self._nodes[name] = (key, result)
        return result
