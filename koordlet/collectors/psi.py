"""Pressure stall information (PSI) of pod and container cgroups: ``pod_psi``, ``container_psi``.

Reads cpu.pressure, memory.pressure and io.pressure of each pod and container cgroup. Their
lines look like ``some avg10=1.50 avg60=0.80 avg300=0.20 total=123456`` (and ``full ...``);
the avg10 share (percent of the last 10 s that some / all tasks stalled) becomes a sample
labelled ``{pod_uid[, container_id], psi_resource_type: cpu|mem|io, psi_precision: avg10,
psi_degree: some|full}``. A "full" line that a kernel does not write (cpu.pressure before
5.13) is simply absent. ``latest`` holds the last pass with all three averages (avg10, avg60,
avg300) for Koordinator's ``koordlet_{pod,container}_psi`` series; only avg10 goes to the
metric cache, which is what decisions and reports read.

Pressure files live in the cgroup v2 tree: <root> on a v2 host, <root>/unified on a hybrid
v1 host. Without a v2 tree the v1 cpuacct hierarchy is tried (kernels such as Anolis expose
PSI there). A kernel without PSI (CONFIG_PSI off, or booted with psi=0) has no
/proc/pressure: the collector is then unavailable. Enabled by the PSICollector gate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from koordlet.cgroupfs.hierarchy import v2_root
from koordlet.cgroupfs.readers import MALFORMED, Skip, read_text
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.targets import NO_CGROUP_DIR, targets
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

GATE = "PSICollector"
PRECISION = "avg10"
PRECISIONS = ("avg10", "avg60", "avg300")  # what Koordinator exports

# file → psi_resource_type label value (Koordinator's names)
PRESSURE_FILES = {"cpu.pressure": "cpu", "memory.pressure": "mem", "io.pressure": "io"}


def parse_pressure(text: str, where: str, precision: str = PRECISION) -> dict[str, float]:
    """{"some": avg10, "full": avg10} from a *.pressure file (only the lines present)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        degree = parts[0]
        if degree not in ("some", "full"):
            raise Skip(MALFORMED, f"{where}: unknown line {line.strip()[:60]!r}")
        fields = {}
        for part in parts[1:]:
            name, _, number = part.partition("=")
            fields[name] = number
        try:
            value = float(fields[precision])
        except (KeyError, ValueError):
            raise Skip(
                MALFORMED, f"{where}: no numeric {precision} in {line.strip()[:60]!r}"
            ) from None
        if not math.isfinite(value) or value < 0:
            raise Skip(MALFORMED, f"{where}: {precision}={value}")
        out[degree] = value
    if not out:
        raise Skip(MALFORMED, f"{where}: empty")
    return out


def pressure_root(cgroup_root: Path) -> Path:
    """The hierarchy whose cgroups carry *.pressure files (see the module docstring)."""
    return v2_root(cgroup_root) or cgroup_root / "cpuacct"


class PSICollector:
    """See the module docstring."""

    name = "psi"
    gate = GATE

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]],
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        proc_root: Path = Path("/proc"),
        *,
        interval: float = 10.0,
    ) -> None:
        self.pods = pods
        self.cgroup_root = cgroup_root
        self.proc_root = proc_root
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        self.latest: list[Sample] = []  # the last pass, every precision (see the docstring)

    def collect(self, now: float) -> list[Sample]:
        if not (self.proc_root / "pressure").is_dir():
            raise CollectorUnavailable(
                f"PSI is disabled in this kernel: {self.proc_root / 'pressure'} does not exist "
                "(CONFIG_PSI off, or booted with psi=0; psi=1 on the kernel command line "
                "enables it)"
            )
        root = pressure_root(self.cgroup_root)
        found, without_dir = targets(self.pods())
        if without_dir:
            self.skipped[NO_CGROUP_DIR] += without_dir
        samples: list[Sample] = []
        latest: list[Sample] = []
        for target in found:
            for file_name, resource in PRESSURE_FILES.items():
                path = root / target.cgroup_dir / file_name
                try:
                    text = read_text(path)
                    by_precision = {p: parse_pressure(text, str(path), p) for p in PRECISIONS}
                except Skip as skip:
                    self.skipped[skip.reason] += 1
                    continue
                for precision, values in by_precision.items():
                    for degree, value in values.items():
                        labels = {
                            **target.labels,
                            "psi_resource_type": resource,
                            "psi_precision": precision,
                            "psi_degree": degree,
                        }
                        sample = Sample(f"{target.level}_psi", labels, now, value)
                        latest.append(sample)
                        if precision == PRECISION:
                            samples.append(sample)
        self.latest = latest
        return samples
