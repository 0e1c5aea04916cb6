"""Fake /proc, /sys and cgroup trees (v1 with per-subsystem dirs, or v2) for the collectors."""

from __future__ import annotations

import json
from pathlib import Path

from koordapi import keys
from koordlet.states.pods import KnownPod
from runtimehooks.request import ContainerRequest, PodRequest


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class CgroupTree:
    """Writes cgroup files the way the kernel lays them out for one version."""

    def __init__(self, root: Path, version: int) -> None:
        self.root = root
        self.version = version
        root.mkdir(parents=True, exist_ok=True)
        if version == 2:
            write(root / "cgroup.controllers", "cpuset cpu io memory pids\n")

    def file(self, subsystem: str, cgroup: str, name: str) -> Path:
        base = self.root / subsystem if self.version == 1 else self.root
        return base / cgroup / name

    def set_cpu(self, cgroup: str, usage_ns: int, periods: int = 0, throttled: int = 0) -> None:
        """CPU time and throttling counters (usage_ns must be a whole number of µs on v2)."""
        if self.version == 1:
            write(self.file("cpuacct", cgroup, "cpuacct.usage"), f"{usage_ns}\n")
            write(
                self.file("cpu", cgroup, "cpu.stat"),
                f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time 0\n",
            )
        else:
            assert usage_ns % 1000 == 0
            write(
                self.file("cpu", cgroup, "cpu.stat"),
                f"usage_usec {usage_ns // 1000}\nuser_usec 0\nsystem_usec 0\n"
                f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec 0\n",
            )

    def set_memory(
        self,
        cgroup: str,
        *,
        inactive_anon: int = 0,
        active_anon: int = 0,
        unevictable: int = 0,
        active_file: int = 0,
        inactive_file: int = 0,
    ) -> None:
        if self.version == 1:
            # The local (non-total_) keys differ on purpose: only total_* may be used.
            text = (
                "cache 1\nrss 1\ninactive_anon 7\nactive_anon 7\nunevictable 7\n"
                "active_file 7\ninactive_file 7\n"
                f"total_cache {active_file + inactive_file}\n"
                f"total_inactive_anon {inactive_anon}\ntotal_active_anon {active_anon}\n"
                f"total_active_file {active_file}\ntotal_inactive_file {inactive_file}\n"
                f"total_unevictable {unevictable}\n"
            )
        else:
            text = (
                f"anon {inactive_anon + active_anon}\nfile {active_file + inactive_file}\n"
                f"inactive_anon {inactive_anon}\nactive_anon {active_anon}\n"
                f"inactive_file {inactive_file}\nactive_file {active_file}\n"
                f"unevictable {unevictable}\n"
            )
        write(self.file("memory", cgroup, "memory.stat"), text)


def pod(
    uid: str,
    cgroup_dir: str,
    containers: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> KnownPod:
    """A known pod; ``containers`` maps container id → cgroup dir (name "c-<id>")."""
    request = PodRequest(
        uid=uid,
        name=f"pod-{uid}",
        namespace="default",
        labels=labels or {},
        annotations=annotations or {},
        cgroup_dir=cgroup_dir,
    )
    known = KnownPod(request)
    for cid, directory in (containers or {}).items():
        known.containers[cid] = ContainerRequest(
            pod=request, name=f"c-{cid}", id=cid, cgroup_dir=directory
        )
    return known


def be_pod(uid: str, batch_cpu: dict[str, str], qos: str | None = "BE") -> KnownPod:
    """A pod with an extended-resource-spec of batch-cpu requests per container name."""
    spec = {
        "containers": {
            name: {"requests": {keys.BATCH_CPU: value}} for name, value in batch_cpu.items()
        }
    }
    return pod(
        uid,
        f"kubepods/besteffort/pod{uid}",
        labels={keys.LABEL_QOS_CLASS: qos} if qos else {},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
    )
