"""PSICollector: avg10 of cpu, memory and io pressure per pod and container cgroup."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.cgroupfs.readers import Skip
from koordlet.collectors.base import CollectorUnavailable
from koordlet.collectors.psi import PSICollector, parse_pressure, pressure_root
from koordlet.metriccache import Sample

from .fakes import pod, write

POD_DIR = "kubepods/burstable/poda"
C1 = f"{POD_DIR}/c1"

# As the kernel writes them (6.x): cpu.pressure has a "full" line since 5.13.
CPU = "some avg10=1.50 avg60=0.80 avg300=0.20 total=123456\nfull avg10=0.25 avg60=0.10 avg300=0.00 total=4567\n"  # noqa: E501
MEMORY = "some avg10=12.04 avg60=3.00 avg300=1.00 total=999\nfull avg10=7.00 avg60=1.00 avg300=0.50 total=555\n"  # noqa: E501
IO = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"  # noqa: E501
OLD_CPU = "some avg10=3.25 avg60=1.00 avg300=0.50 total=42\n"  # before 5.13: no "full"


def fill(cgroup: Path, cpu: str = CPU, memory: str = MEMORY, io: str = IO) -> None:
    write(cgroup / "cpu.pressure", cpu)
    write(cgroup / "memory.pressure", memory)
    write(cgroup / "io.pressure", io)


def psi(samples: list[Sample]) -> dict[tuple[str, str, str, str], float]:
    out = {}
    for s in samples:
        assert s.labels["psi_precision"] == "avg10"
        series = s.labels.get("container_id", s.labels["pod_uid"])
        out[(s.name, series, s.labels["psi_resource_type"], s.labels["psi_degree"])] = s.value
    return out


def test_parse_pressure_reads_avg10_of_each_line() -> None:
    assert parse_pressure(CPU, "cpu.pressure") == {"some": 1.5, "full": 0.25}
    assert parse_pressure(OLD_CPU, "cpu.pressure") == {"some": 3.25}
    for bad in ["", "some avg60=1.0 total=3\n", "some avg10=x\n", "partial avg10=1\n"]:
        with pytest.raises(Skip) as caught:
            parse_pressure(bad, "x.pressure")
        assert caught.value.reason == "malformed"


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    write(tmp_path / "proc" / "pressure" / "cpu", OLD_CPU)
    return tmp_path / "proc"


def test_v2_pod_and_container_pressure(tmp_path: Path, proc: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu io memory\n")
    fill(root / POD_DIR)
    fill(root / C1, cpu=OLD_CPU)
    pods = [pod("a", POD_DIR, {"c1": C1})]
    collector = PSICollector(lambda: pods, root, proc)
    assert collector.interval == 10.0
    assert collector.gate == "PSICollector"
    samples = collector.collect(50.0)
    assert psi(samples) == {
        ("pod_psi", "a", "cpu", "some"): 1.5,
        ("pod_psi", "a", "cpu", "full"): 0.25,
        ("pod_psi", "a", "mem", "some"): 12.04,
        ("pod_psi", "a", "mem", "full"): 7.0,
        ("pod_psi", "a", "io", "some"): 0.0,
        ("pod_psi", "a", "io", "full"): 0.0,
        ("container_psi", "c1", "cpu", "some"): 3.25,
        ("container_psi", "c1", "mem", "some"): 12.04,
        ("container_psi", "c1", "mem", "full"): 7.0,
        ("container_psi", "c1", "io", "some"): 0.0,
        ("container_psi", "c1", "io", "full"): 0.0,
    }
    container = next(s for s in samples if s.name == "container_psi")
    assert set(container.labels) == {
        "pod_uid", "container_id", "psi_resource_type", "psi_precision", "psi_degree",
    }  # fmt: skip
    assert not collector.skipped


def test_a_hybrid_host_reads_the_unified_tree(tmp_path: Path, proc: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "cpu").mkdir(parents=True)  # v1 controllers ...
    write(root / "unified" / "cgroup.controllers", "")  # ... and the v2 tree beside them
    assert pressure_root(root) == root / "unified"
    fill(root / "unified" / POD_DIR)
    collector = PSICollector(lambda: [pod("a", POD_DIR)], root, proc)
    assert psi(collector.collect(1.0))[("pod_psi", "a", "mem", "full")] == 7.0


def test_a_v1_host_without_a_unified_tree_falls_back_to_cpuacct(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "cpuacct").mkdir(parents=True)
    assert pressure_root(root) == root / "cpuacct"


def test_missing_and_malformed_files_are_skipped_and_counted(tmp_path: Path, proc: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "")
    write(root / POD_DIR / "cpu.pressure", CPU)
    write(root / POD_DIR / "memory.pressure", "garbage\n")  # io.pressure missing
    collector = PSICollector(lambda: [pod("a", POD_DIR)], root, proc)
    assert psi(collector.collect(1.0)) == {
        ("pod_psi", "a", "cpu", "some"): 1.5,
        ("pod_psi", "a", "cpu", "full"): 0.25,
    }
    assert collector.skipped == {"malformed": 1, "missing": 1}


def test_a_kernel_without_psi_makes_the_collector_unavailable(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "")
    collector = PSICollector(lambda: [], root, tmp_path / "proc")
    with pytest.raises(CollectorUnavailable, match=r"PSI is disabled.*psi=0"):
        collector.collect(1.0)
