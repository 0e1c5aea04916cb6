"""Pod and container CPU, memory and CFS throttling from their cgroups (v1 or v2).

For every known pod and each of its containers, one pass reads:

* CPU time (v1 cpuacct.usage in ns; v2 cpu.stat usage_usec * 1000) → ``*_cpu_usage`` in
  cores, Δns / (Δwall seconds * 1e9). The first pass of a series has no CPU sample.
* memory.stat → ``*_memory_usage`` = inactive_anon + active_anon + unevictable (v1: the
  ``total_*`` keys, which include child cgroups; v2: ``anon`` + ``unevictable``, already
  hierarchical), and ``*_memory_usage_with_page_cache`` adding active_file + inactive_file.
* cpu.stat nr_periods, nr_throttled → ``*_cpu_throttled`` = Δnr_throttled / Δnr_periods
  (0 when no period elapsed: nothing ran under a quota, so nothing was throttled).

Labels: ``{pod_uid}`` for pods, ``{pod_uid, container_id}`` for containers. A series that
cannot be read this pass is skipped and counted by reason (see ``koordlet.cgroupfs.readers``
and rates); the counters of pods and containers that are gone are dropped. Memory NUMA stats,
GPU usage and host applications are not read here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from koordlet.cgroupfs.readers import CgroupFS, Skip, require
from koordlet.collectors.rates import Counters
from koordlet.collectors.targets import NO_CGROUP_DIR, Target, TargetMemo
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

NS_PER_SECOND = 1e9

# memory.stat keys: (usage without page cache, page cache) per cgroup version.
_MEMORY_KEYS = {
    1: (["total_inactive_anon", "total_active_anon", "total_unevictable"],
        ["total_active_file", "total_inactive_file"]),
    2: (["anon", "unevictable"], ["active_file", "inactive_file"]),
}  # fmt: skip


_THROTTLE_KEYS = ("nr_periods", "nr_throttled")
# per level ("pod", "container"): the names of its samples, built once
_NAMES = {
    level: tuple(
        f"{level}_{what}"
        for what in ("cpu_usage", "cpu_throttled", "memory_usage", "memory_usage_with_page_cache")
    )
    for level in ("pod", "container")
}


def memory_usage(stat: Mapping[str, int], version: int, where: str) -> tuple[int, int]:
    """(usage, usage with page cache) in bytes from a parsed memory.stat."""
    anon_keys, file_keys = _MEMORY_KEYS[version]
    usage = sum(require(stat, anon_keys, where))
    return usage, usage + sum(require(stat, file_keys, where))


class PodCollector:
    """See the module docstring."""

    name = "pods"

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]],
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        *,
        interval: float = 1.0,
        cgroup_version: int | None = None,
    ) -> None:
        self.pods = pods
        self.cgroups = CgroupFS(cgroup_root, cgroup_version, keep_open=True)
        self._memory_keys = frozenset(k for ks in _MEMORY_KEYS[self.cgroups.version] for k in ks)
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        # (what, *series key): ("cpu", uid), ("throttle", uid, container id), ...
        self._counters: Counters[tuple[str, ...]] = Counters()
        self._targets = TargetMemo()

    def collect(self, now: float) -> list[Sample]:
        found, without_dir = self._targets(self.pods())
        if without_dir:
            self.skipped[NO_CGROUP_DIR] += without_dir
        samples: list[Sample] = []
        for target in found:
            self._cpu(target, now, samples)
            self._memory(target, now, samples)
        self._counters.retain_only(
            {(what, *target.key) for target in found for what in ("cpu", "throttle")}
        )
        self.cgroups.sweep()
        return samples

    def close(self) -> None:
        self.cgroups.close()

    def _cpu(self, target: Target, now: float, out: list[Sample]) -> None:
        """CPU usage and throttling; on v2 one cpu.stat read serves both. A ``Skip`` counts
        its reason and gives no sample (each measurement on its own)."""
        stat: dict[str, int] | None = None
        try:
            stat = self.cgroups.cpu_stat(target.cgroup_dir)
        except Skip as skip:
            self.skipped[skip.reason] += 1
        names = _NAMES[target.level]
        if stat is not None or self.cgroups.version == 1:  # v1 usage is in cpuacct.usage
            try:
                used_ns = self.cgroups.cpu_usage_ns(target.cgroup_dir, stat)
                delta = self._counters.update(("cpu", *target.key), now, used_ns)
            except Skip as skip:
                self.skipped[skip.reason] += 1
            else:
                if delta is not None:
                    cores = delta.per_second(unit=NS_PER_SECOND)
                    out.append(Sample(names[0], target.labels, now, cores))
        if stat is not None:
            try:
                periods, throttled = require(stat, _THROTTLE_KEYS, f"{target.cgroup_dir}/cpu.stat")
                delta = self._counters.update(("throttle", *target.key), now, periods, throttled)
            except Skip as skip:
                self.skipped[skip.reason] += 1
            else:
                if delta is not None:
                    d_periods, d_throttled = delta.values
                    ratio = d_throttled / d_periods if d_periods > 0 else 0.0
                    out.append(Sample(names[1], target.labels, now, ratio))

    def _memory(self, target: Target, now: float, out: list[Sample]) -> None:
        try:
            stat = self.cgroups.memory_stat(target.cgroup_dir, self._memory_keys)
            usage, with_cache = memory_usage(
                stat, self.cgroups.version, f"{target.cgroup_dir}/memory.stat"
            )
        except Skip as skip:
            self.skipped[skip.reason] += 1
            return
        names = _NAMES[target.level]
        out.append(Sample(names[2], target.labels, now, usage))
        out.append(Sample(names[3], target.labels, now, with_cache))
