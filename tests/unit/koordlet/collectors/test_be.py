"""BECollector on fake v1 and v2 trees: real limit, batch-cpu requests and usage (milli-cores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordapi import keys
from koordlet.collectors.be import BECollector, real_limit_milli
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

from .fakes import CgroupTree, be_pod, pod, write

BE = "kubepods/besteffort"


def set_be_cpu(
    tree: CgroupTree, cpus: str, quota: int, period: int = 100_000, *, be: str = BE
) -> None:
    if tree.version == 1:
        write(tree.file("cpuset", be, "cpuset.cpus"), f"{cpus}\n")
        write(tree.file("cpu", be, "cpu.cfs_quota_us"), f"{quota}\n")
        write(tree.file("cpu", be, "cpu.cfs_period_us"), f"{period}\n")
    else:
        write(tree.file("cpuset", be, "cpuset.cpus"), "\n")  # empty unless set: not used
        write(tree.file("cpuset", be, "cpuset.cpus.effective"), f"{cpus}\n")
        write(tree.file("cpu", be, "cpu.max"), f"{'max' if quota < 0 else quota} {period}\n")


@pytest.fixture(params=[1, 2], ids=["v1", "v2"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> CgroupTree:
    version: int = request.param
    tree = CgroupTree(tmp_path / "cgroup", version)
    set_be_cpu(tree, "0-3", 250_000)
    tree.set_cpu(BE, 10_000_000_000)
    return tree


def node_be(samples: list[Sample]) -> dict[str, float]:
    out = {}
    for s in samples:
        assert s.name == "node_be"
        assert s.labels["be_resource"] == "cpu"
        out[s.labels["be_allocation"]] = s.value
    return out


def test_real_limit_arithmetic() -> None:
    assert real_limit_milli(4, -1, 100_000) == 4000.0  # no quota: the cpuset
    assert real_limit_milli(4, 250_000, 100_000) == 2500.0  # 2.5 cores of quota
    assert real_limit_milli(2, 500_000, 100_000) == 2000.0  # quota above the cpuset
    assert real_limit_milli(4, 0, 100_000) == 4000.0  # quota 0 is not a cap


def test_limit_request_and_usage(tree: CgroupTree, tmp_path: Path) -> None:
    pods: list[KnownPod] = [
        be_pod("b1", {"c1": "1000", "c2": "500"}),
        be_pod("b2", {"main": "2000"}),
        be_pod("ls", {"main": "4000"}, qos="LS"),  # not BE: ignored
        be_pod("k", {"main": "250"}, qos=None),  # no label, kube BestEffort: BE
        pod("plain", f"{BE}/podplain"),  # BE without the annotation: 0
    ]
    collector = BECollector(lambda: pods, tree.root, tmp_path / "sys")
    assert node_be(collector.collect(100.0)) == {
        "request": 1000 + 500 + 2000 + 250,
        "real-limit": 2500.0,  # 4 CPUs = 4000, capped by 250000 / 100000 * 1000
    }
    tree.set_cpu(BE, 13_000_000_000)
    set_be_cpu(tree, "0-1", -1)
    assert node_be(collector.collect(102.0)) == {
        "request": 3750.0,
        "real-limit": 2000.0,  # 2 CPUs, no quota
        "usage": 1500.0,  # Δ3e9 ns over 2 s = 1.5 cores
    }
    assert not collector.skipped


def test_the_deprecated_batch_cpu_name_counts(tree: CgroupTree, tmp_path: Path) -> None:
    spec = {"containers": {"c": {"requests": {keys.DEPRECATED_BATCH_CPU: "300"}}}}
    known = pod(
        "b",
        f"{BE}/podb",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
    )
    collector = BECollector(lambda: [known], tree.root, tmp_path / "sys")
    assert node_be(collector.collect(1.0))["request"] == 300.0


def test_a_malformed_annotation_is_left_out_and_counted(tree: CgroupTree, tmp_path: Path) -> None:
    bad = pod(
        "bad",
        f"{BE}/podbad",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: "{not json"},
    )
    pods = [bad, be_pod("ok", {"c": "700"})]
    collector = BECollector(lambda: pods, tree.root, tmp_path / "sys")
    assert node_be(collector.collect(1.0))["request"] == 700.0
    assert collector.skipped == {"malformed-annotation": 1}


def test_a_be_cgroup_counter_that_went_backwards_is_skipped(
    tree: CgroupTree, tmp_path: Path
) -> None:
    collector = BECollector(lambda: [], tree.root, tmp_path / "sys")
    collector.collect(1.0)
    tree.set_cpu(BE, 1_000_000_000)
    assert "usage" not in node_be(collector.collect(2.0))
    assert collector.skipped == {"counter-reset": 1}
    tree.set_cpu(BE, 1_500_000_000)
    assert node_be(collector.collect(3.0))["usage"] == 500.0


def test_without_a_besteffort_cgroup_only_the_request_is_known(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path / "cgroup", 2)
    collector = BECollector(lambda: [be_pod("b", {"c": "100"})], tree.root, tmp_path / "sys")
    assert node_be(collector.collect(1.0)) == {"request": 100.0}
    assert collector.skipped == {"no-besteffort-cgroup": 1}


def test_the_systemd_besteffort_slice_is_found(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path / "cgroup", 2)
    slice_dir = "kubepods.slice/kubepods-besteffort.slice"
    write(tree.file("cpu", slice_dir, "cpuset.cpus.effective"), "0-5\n")
    write(tree.file("cpu", slice_dir, "cpu.max"), "max 100000\n")
    tree.set_cpu(slice_dir, 0)
    collector = BECollector(lambda: [], tree.root, tmp_path / "sys")
    assert node_be(collector.collect(1.0))["real-limit"] == 6000.0


def test_the_besteffort_cgroup_is_found_below_the_cgroup_kube_dir(tree: CgroupTree) -> None:
    """A kubelet with cgroupRoot /koordk8s: --cgroup-kube-dir=koordk8s/kubepods/ reads its
    besteffort cgroup, not the /kubepods one another kubelet left (the fixture's)."""
    own = "koordk8s/kubepods/besteffort"
    set_be_cpu(tree, "1,3,5", 70_000, be=own)  # 3 CPUs, 0.7 of a core of quota
    tree.set_cpu(own, 4_000_000_000)
    moved = BECollector(lambda: [], tree.root, tree.root / "sys", kube_dir="/koordk8s/kubepods/")
    assert node_be(moved.collect(10.0)) == {"request": 0.0, "real-limit": 700.0}
    tree.set_cpu(own, 4_300_000_000)  # 0.3 s of CPU in 2 s: 150 milli-cores
    tree.set_cpu(BE, 90_000_000_000)  # the stale /kubepods tree's counter is not read
    assert node_be(moved.collect(12.0)) == {"request": 0.0, "real-limit": 700.0, "usage": 150.0}
    # the default still reads /kubepods/besteffort (4 CPUs capped at 2.5 cores)
    default = BECollector(lambda: [], tree.root, tree.root / "sys")
    assert node_be(default.collect(10.0))["real-limit"] == 2500.0


def test_a_cgroup_kube_dir_without_its_besteffort_cgroup_finds_none(tree: CgroupTree) -> None:
    """The fixture's /kubepods tree is not a fallback for another kube dir."""
    moved = BECollector(lambda: [], tree.root, tree.root / "sys", kube_dir="koordk8s/kubepods/")
    assert node_be(moved.collect(1.0)) == {"request": 0.0}
    assert moved.skipped == {"no-besteffort-cgroup": 1}


def test_v2_without_the_cpuset_controller_uses_the_online_cpus(tmp_path: Path) -> None:
    tree = CgroupTree(tmp_path / "cgroup", 2)
    write(tree.file("cpu", BE, "cpu.max"), "350000 100000\n")
    tree.set_cpu(BE, 0)
    sys = tmp_path / "sys"
    write(sys / "devices" / "system" / "cpu" / "online", "0-7\n")
    collector = BECollector(lambda: [], tree.root, sys)
    assert node_be(collector.collect(1.0))["real-limit"] == 3500.0  # min(8000, 3500)
    write(tree.file("cpu", BE, "cpu.max"), "max 100000\n")
    assert node_be(collector.collect(2.0))["real-limit"] == 8000.0
