"""The node's CPUs and NUMA nodes, memory, and which kernel interfaces exist.

Read from sysfs and procfs under injectable roots, once at start (CPU hot-plug is rare; a
restart picks it up).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from koordapi.cpuset import parse_cpuset
from koordlet.cgroupfs.hierarchy import detect_version
from koordlet.executor import coresched
from koordlet.executor.resctrl import Resctrl
from runtimehooks.rules import KernelFeatures


@dataclass(frozen=True)
class Processor:
    """One logical CPU and where it sits: its physical core, socket and NUMA node."""

    cpu: int
    core: int
    socket: int
    node: int


@dataclass(frozen=True)
class Topology:
    cpus: frozenset[int]
    numa: dict[int, frozenset[int]] = field(default_factory=dict)  # node → CPUs
    socket_of_node: dict[int, int] = field(default_factory=dict)
    memory_bytes: int = 0
    processors: tuple[Processor, ...] = ()  # by CPU id; empty when sysfs does not say

    def processor_list(self) -> tuple[Processor, ...]:
        """The processors, or one core per CPU on node 0 when the topology is unknown."""
        if self.processors:
            return self.processors
        node_of = {cpu: node for node, cpus in self.numa.items() for cpu in cpus}
        return tuple(
            Processor(
                cpu, cpu, self.socket_of_node.get(node_of.get(cpu, 0), 0), node_of.get(cpu, 0)
            )
            for cpu in sorted(self.cpus)
        )


def read_topology(sys_root: Path = Path("/sys"), proc_root: Path = Path("/proc")) -> Topology:
    cpu_dir = sys_root / "devices" / "system" / "cpu"
    cpus = parse_cpuset((cpu_dir / "online").read_text())
    numa: dict[int, frozenset[int]] = {}
    node_dir = sys_root / "devices" / "system" / "node"
    if node_dir.is_dir():
        for entry in sorted(node_dir.glob("node[0-9]*")):
            node_cpus = parse_cpuset((entry / "cpulist").read_text()) & cpus
            if node_cpus:
                numa[int(entry.name[4:])] = node_cpus
    if not numa:
        numa = {0: cpus}
    sockets = {}
    for node, node_cpus in numa.items():
        package = cpu_dir / f"cpu{min(node_cpus)}" / "topology" / "physical_package_id"
        sockets[node] = int(package.read_text()) if package.exists() else 0
    node_of = {cpu: node for node, node_cpus in numa.items() for cpu in node_cpus}
    processors = []
    for cpu in sorted(cpus):
        topo = cpu_dir / f"cpu{cpu}" / "topology"
        core = _read_int(topo / "core_id", cpu)
        socket = _read_int(topo / "physical_package_id", sockets.get(node_of.get(cpu, 0), 0))
        processors.append(Processor(cpu, core, socket, node_of.get(cpu, 0)))
    memory = 0
    meminfo = proc_root / "meminfo"
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    return Topology(cpus, numa, sockets, memory, tuple(processors))


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return default


def _any_child_has(root: Path, name: str) -> bool:
    if (root / name).exists():
        return True
    return any((child / name).exists() for child in root.iterdir() if child.is_dir())


# Linux 5.15 added cpu.idle (v1 and v2), mainline's stand-in for group identity.
CPU_IDLE_SINCE = (5, 15)


def kernel_release(text: str) -> tuple[int, int]:
    """(major, minor) of a release string such as "6.12.117+deb12-amd64"; (0, 0) if odd."""
    parts = text.split(".", 2)
    try:
        return int(parts[0]), int("".join(c for c in parts[1][:3] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return 0, 0


def has_cpu_idle(cpu_root: Path, release: str) -> bool:
    """Whether cgroups get cpu.idle: a cgroup that shows it, else the kernel's version.

    The file is not on the root cgroup, and on cgroup v2 a child has it only once the cpu
    controller is enabled for it: under systemd that happens when a unit first asks for CPU
    settings, which may be after koordlet starts (the kubelet's QoS slices come first).
    """
    if not cpu_root.is_dir():
        return False
    if _any_child_has(cpu_root, "cpu.idle"):
        return True
    controllers = cpu_root / "cgroup.controllers"
    v1_or_cpu = not controllers.exists() or "cpu" in controllers.read_text().split()
    return v1_or_cpu and kernel_release(release) >= CPU_IDLE_SINCE


def detect_kernel(
    cgroup_root: Path, resctrl: Resctrl, release: str | None = None
) -> KernelFeatures:
    """What the kernel offers; ``release`` is uname's (this machine's unless given)."""
    version = detect_version(cgroup_root)
    cpu_root = cgroup_root if version == 2 else cgroup_root / "cpu"
    memory_root = cgroup_root / "memory"
    has_resctrl = resctrl.available
    return KernelFeatures(
        cgroup_version=version,
        bvt=cpu_root.is_dir() and _any_child_has(cpu_root, "cpu.bvt_warp_ns"),
        cpu_idle=has_cpu_idle(cpu_root, os.uname().release if release is None else release),
        core_sched=coresched.supported(),
        resctrl=has_resctrl,
        memory_qos_v1=version == 1
        and memory_root.is_dir()
        and _any_child_has(memory_root, "memory.min"),
        l3_cbm_mask=resctrl.cbm_mask() if has_resctrl else 0,
        l3_cache_ids=resctrl.l3_cache_ids() if has_resctrl else (),
    )
