"""PodCollector on fake cgroup v1 and v2 trees: CPU cores, memory, throttling, skips."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from koordlet.collectors.pods import PodCollector
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

from .fakes import CgroupTree, pod

POD_DIR = "kubepods/burstable/poda"
C1 = f"{POD_DIR}/c1"
C2 = f"{POD_DIR}/c2"


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> CgroupTree:
    version: int = request.param
    tree = CgroupTree(tmp_path / "cgroup", version)
    tree.set_cpu(POD_DIR, 5_000_000_000, periods=100, throttled=10)
    tree.set_cpu(C1, 3_000_000_000, periods=100, throttled=10)
    tree.set_cpu(C2, 1_000_000_000, periods=40, throttled=0)
    tree.set_memory(
        POD_DIR, inactive_anon=100, active_anon=200, unevictable=50,
        active_file=1000, inactive_file=2000,
    )  # fmt: skip
    tree.set_memory(C1, inactive_anon=10, active_anon=20, active_file=5)
    tree.set_memory(C2, active_anon=64, inactive_file=36)
    return tree


def the_pod() -> KnownPod:
    return pod("a", POD_DIR, {"c1": C1, "c2": C2})


def values(samples: list[Sample]) -> dict[tuple[str, str], float]:
    """(metric, series) → value; the series is the container id, or the pod uid for pods."""
    out = {}
    for s in samples:
        assert math.isfinite(s.value) and s.value >= 0, s
        out[(s.name, s.labels.get("container_id", s.labels["pod_uid"]))] = s.value
    return out


def test_the_first_pass_has_memory_only_with_exact_values(tree: CgroupTree) -> None:
    pods = [the_pod()]
    collector = PodCollector(lambda: pods, tree.root)
    assert collector.cgroups.version == tree.version
    assert values(collector.collect(10.0)) == {
        ("pod_memory_usage", "a"): 100 + 200 + 50,
        ("pod_memory_usage_with_page_cache", "a"): 350 + 1000 + 2000,
        ("container_memory_usage", "c1"): 30,
        ("container_memory_usage_with_page_cache", "c1"): 35,
        ("container_memory_usage", "c2"): 64,
        ("container_memory_usage_with_page_cache", "c2"): 100,
    }
    assert not collector.skipped


def test_two_passes_give_exact_cores_and_throttling(tree: CgroupTree) -> None:
    pods = [the_pod()]
    collector = PodCollector(lambda: pods, tree.root)
    collector.collect(10.0)
    tree.set_cpu(POD_DIR, 7_000_000_000, periods=150, throttled=20)
    tree.set_cpu(C1, 4_500_000_000, periods=150, throttled=20)
    tree.set_cpu(C2, 1_500_000_000, periods=40, throttled=0)
    samples = collector.collect(11.0)
    got = values(samples)
    assert got[("pod_cpu_usage", "a")] == 2.0  # Δ2e9 ns over Δ1 s
    assert got[("container_cpu_usage", "c1")] == 1.5
    assert got[("container_cpu_usage", "c2")] == 0.5
    assert got[("pod_cpu_throttled", "a")] == 0.2  # 10 more throttled of 50 more periods
    assert got[("container_cpu_throttled", "c1")] == 0.2
    assert got[("container_cpu_throttled", "c2")] == 0.0  # no period elapsed
    labels = {(s.name, s.labels.get("container_id")): dict(s.labels) for s in samples}
    assert labels[("pod_cpu_usage", None)] == {"pod_uid": "a"}
    assert labels[("container_cpu_usage", "c1")] == {"pod_uid": "a", "container_id": "c1"}
    assert not collector.skipped


def test_cores_are_per_elapsed_wall_second(tree: CgroupTree) -> None:
    pods = [pod("a", POD_DIR)]
    collector = PodCollector(lambda: pods, tree.root)
    collector.collect(10.0)
    tree.set_cpu(POD_DIR, 8_000_000_000)
    assert values(collector.collect(12.0))[("pod_cpu_usage", "a")] == 1.5  # 3e9 ns / 2 s


def test_a_removed_container_is_forgotten(tree: CgroupTree) -> None:
    known = the_pod()
    collector = PodCollector(lambda: [known], tree.root)
    collector.collect(10.0)
    assert ("cpu", "a", "c2") in collector._counters
    del known.containers["c2"]
    shutil.rmtree(tree.file("cpu", C2, ""))
    if tree.version == 1:
        shutil.rmtree(tree.file("cpuacct", C2, ""))
        shutil.rmtree(tree.file("memory", C2, ""))
    tree.set_cpu(POD_DIR, 6_000_000_000, periods=100, throttled=10)
    got = values(collector.collect(11.0))
    assert got[("pod_cpu_usage", "a")] == 1.0
    assert not any(series == "c2" for _, series in got)
    assert ("cpu", "a", "c2") not in collector._counters
    assert ("throttle", "a", "c2") not in collector._counters
    assert not collector.skipped  # gone from the pod list: nothing to skip


def test_a_gone_pod_drops_all_its_state(tree: CgroupTree) -> None:
    pods = [the_pod()]
    collector = PodCollector(lambda: pods, tree.root)
    collector.collect(10.0)
    assert len(collector._counters) == 6  # cpu + throttle for the pod and two containers
    pods.clear()
    assert collector.collect(11.0) == []
    assert len(collector._counters) == 0


def test_a_listed_container_whose_cgroup_vanished_is_skipped_as_missing(
    tree: CgroupTree,
) -> None:
    pods = [the_pod()]
    collector = PodCollector(lambda: pods, tree.root)
    for subsystem in ("cpu", "cpuacct", "memory") if tree.version == 1 else ("",):
        shutil.rmtree(tree.file(subsystem, C2, ""))
    got = values(collector.collect(10.0))
    assert not any(series == "c2" for _, series in got)
    assert ("container_memory_usage", "c1") in got
    # Counted per file read: v1 cpu.stat, cpuacct.usage, memory.stat; v2 cpu.stat, memory.stat.
    assert collector.skipped == {"missing": 3 if tree.version == 1 else 2}


def test_a_malformed_memory_stat_skips_that_series_and_counts_it(tree: CgroupTree) -> None:
    pods = [the_pod()]
    collector = PodCollector(lambda: pods, tree.root)
    tree.file("memory", C1, "memory.stat").write_text("total_inactive_anon\nanon x\n")
    got = values(collector.collect(10.0))
    assert ("container_memory_usage", "c1") not in got
    assert ("container_memory_usage_with_page_cache", "c1") not in got
    assert got[("container_memory_usage", "c2")] == 64
    assert got[("pod_memory_usage", "a")] == 350
    assert collector.skipped == {"malformed": 1}


def test_a_memory_stat_without_the_needed_keys_is_malformed(tree: CgroupTree) -> None:
    pods = [pod("a", POD_DIR)]
    collector = PodCollector(lambda: pods, tree.root)
    tree.file("memory", POD_DIR, "memory.stat").write_text("cache 5\nrss 7\n")
    assert values(collector.collect(10.0)) == {}
    assert collector.skipped == {"malformed": 1}


def test_a_negative_value_is_malformed_never_stored(tree: CgroupTree) -> None:
    pods = [pod("a", POD_DIR)]
    collector = PodCollector(lambda: pods, tree.root)
    line = "total_active_anon 200" if tree.version == 1 else "anon 300"
    path = tree.file("memory", POD_DIR, "memory.stat")
    lines = path.read_text().splitlines()
    lines[lines.index(line)] = line.replace(" ", " -")
    path.write_text("\n".join(lines) + "\n")
    assert values(collector.collect(10.0)) == {}
    assert collector.skipped == {"malformed": 1}


def test_a_counter_that_went_backwards_is_skipped_then_recovers(tree: CgroupTree) -> None:
    pods = [pod("a", POD_DIR)]
    collector = PodCollector(lambda: pods, tree.root)
    collector.collect(10.0)
    tree.set_cpu(POD_DIR, 1_000_000_000, periods=100, throttled=10)  # restarted: counter fell
    got = values(collector.collect(11.0))
    assert ("pod_cpu_usage", "a") not in got
    assert got[("pod_cpu_throttled", "a")] == 0.0  # throttling counters did not go back
    assert collector.skipped == {"counter-reset": 1}
    tree.set_cpu(POD_DIR, 3_000_000_000, periods=110, throttled=15)
    got = values(collector.collect(12.0))
    assert got[("pod_cpu_usage", "a")] == 2.0
    assert got[("pod_cpu_throttled", "a")] == 0.5
    assert collector.skipped == {"counter-reset": 1}


def test_the_same_time_twice_gives_no_rate(tree: CgroupTree) -> None:
    pods = [pod("a", POD_DIR)]
    collector = PodCollector(lambda: pods, tree.root)
    collector.collect(10.0)
    got = values(collector.collect(10.0))
    assert ("pod_cpu_usage", "a") not in got
    assert collector.skipped == {"time-not-advancing": 2}  # usage and throttling


def test_pods_and_containers_without_a_cgroup_dir_are_not_read_as_the_root(
    tree: CgroupTree,
) -> None:
    # The root's own files would be the whole node's usage.
    tree.set_cpu("", 9_000_000_000)
    tree.set_memory("", active_anon=1 << 30)
    pods = [pod("x", "", {"c": ""})]
    collector = PodCollector(lambda: pods, tree.root)
    assert collector.collect(10.0) == []
    assert collector.skipped == {"no-cgroup-dir": 2}


def test_v1_reads_total_keys_and_v2_anon(tmp_path: Path) -> None:
    v1 = CgroupTree(tmp_path / "v1", 1)
    v1.set_memory(POD_DIR, inactive_anon=1, active_anon=2, unevictable=4)
    v1.set_cpu(POD_DIR, 0)
    got = values(PodCollector(lambda: [pod("a", POD_DIR)], v1.root).collect(1.0))
    assert got[("pod_memory_usage", "a")] == 7  # not the local keys (7 + 7 + 7)
    v2 = CgroupTree(tmp_path / "v2", 2)
    v2.file("memory", POD_DIR, "").mkdir(parents=True)
    v2.file("memory", POD_DIR, "memory.stat").write_text(
        "anon 300\nfile 50\nunevictable 8\nactive_file 20\ninactive_file 30\n"
    )
    v2.set_cpu(POD_DIR, 0)
    got = values(PodCollector(lambda: [pod("a", POD_DIR)], v2.root).collect(1.0))
    assert got[("pod_memory_usage", "a")] == 308
    assert got[("pod_memory_usage_with_page_cache", "a")] == 358
