from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness.cgroups import (
    CgroupJanitor,
    CgroupReader,
    parse_cpu_max,
    parse_memory_limit,
    shares_to_weight,
)

V1_UNLIMITED = "9223372036854771712"


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")


def fake_v1(root: Path) -> Path:
    """A v1 layout: cpu,cpuacct with cpu/cpuacct links, cpuset, memory, unified (empty v2)."""
    for h in ("cpu,cpuacct", "cpuset", "memory", "unified"):
        _write(root / h, {"cgroup.procs": ""})
    (root / "cpu").symlink_to("cpu,cpuacct")
    (root / "cpuacct").symlink_to("cpu,cpuacct")
    return root


def test_v1_values_of_a_container(tmp_path: Path) -> None:
    root = fake_v1(tmp_path)
    cg = "kubepods/burstable/podU/c1"
    _write(
        root / "cpu,cpuacct" / cg,
        {
            "cgroup.procs": "42",
            "cpu.shares": "512",
            "cpu.cfs_quota_us": "50000",
            "cpu.cfs_period_us": "100000",
            "cpu.cfs_burst_us": "0",
            "cpu.idle": "1",
        },
    )
    _write(root / "cpuset" / cg, {"cpuset.cpus": "0-1", "cpuset.mems": "0"})
    _write(root / "memory" / cg, {"memory.limit_in_bytes": "67108864"})
    reader = CgroupReader(root)

    v = reader.values("/" + cg)

    assert reader.version == 1
    assert (v.cpu_shares, v.cpu_weight) == (512, 20)
    assert (v.cpu_quota, v.cpu_period, v.cpu_burst_us, v.cpu_idle) == (50000, 100000, 0, 1)
    assert (v.cpuset_cpus, v.cpuset_mems, v.memory_limit) == ("0-1", "0", 64 << 20)
    assert reader.procs("/kubepods/burstable/podU") == {42}


def test_v1_unlimited_values_and_missing_files(tmp_path: Path) -> None:
    root = fake_v1(tmp_path)
    _write(root / "cpu,cpuacct" / "pod", {"cpu.cfs_quota_us": "-1"})
    _write(root / "memory" / "pod", {"memory.limit_in_bytes": V1_UNLIMITED})

    v = CgroupReader(root).values("/pod")

    assert v.cpu_quota == -1
    assert v.memory_limit == -1
    assert v.cpu_burst_us is None and v.cpu_shares is None and v.cpuset_cpus is None


def test_v2_values_of_a_container(tmp_path: Path) -> None:
    _write(tmp_path, {"cgroup.controllers": "cpuset cpu memory"})
    _write(
        tmp_path / "kubepods" / "c",
        {
            "cpu.weight": "20",
            "cpu.max": "50000 100000",
            "cpu.max.burst": "1000",
            "cpu.idle": "0",
            "cpuset.cpus": "",
            "cpuset.cpus.effective": "0-3",
            "cpuset.mems.effective": "0",
            "memory.max": "max",
            "cgroup.procs": "7\n8",
        },
    )
    reader = CgroupReader(tmp_path)

    v = reader.values("/kubepods/c")

    assert reader.version == 2
    assert v.cpu_shares is None and v.cpu_weight == 20
    assert (v.cpu_quota, v.cpu_period, v.cpu_burst_us) == (50000, 100000, 1000)
    assert (v.cpuset_cpus, v.cpuset_mems, v.memory_limit) == ("0-3", "0", -1)
    assert reader.procs("/kubepods") == {7, 8}
    assert reader.hierarchies() == [tmp_path]


def test_values_of_a_missing_cgroup_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        CgroupReader(fake_v1(tmp_path)).values("/kubepods/nope")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("max 100000", (-1, 100000), id="unlimited"),
        pytest.param("50000 100000", (50000, 100000), id="quota"),
    ],
)
def test_parse_cpu_max(text: str, expected: tuple[int, int]) -> None:
    assert parse_cpu_max(text) == expected


def test_parse_cpu_max_rejects_garbage() -> None:
    with pytest.raises(ValueError, match=r"malformed cpu\.max"):
        parse_cpu_max("50000")


def test_memory_limits() -> None:
    assert parse_memory_limit("max", 2) == -1
    assert parse_memory_limit(V1_UNLIMITED, 1) == -1
    assert parse_memory_limit("1048576", 1) == 1 << 20


def test_shares_to_weight_matches_runc_at_the_ends() -> None:
    assert shares_to_weight(2) == 1
    assert shares_to_weight(262144) == 10000
    assert shares_to_weight(1024) == 39


def test_hierarchies_dedupe_linked_controllers(tmp_path: Path) -> None:
    names = [h.name for h in CgroupReader(fake_v1(tmp_path)).hierarchies()]
    assert sorted(names) == ["cpu", "cpuset", "memory", "unified"]


def test_janitor_removes_what_it_created_and_keeps_what_was_there(tmp_path: Path) -> None:
    root = fake_v1(tmp_path)
    (root / "cpuset" / "kubepods").mkdir()  # pre-existing: not ours to remove
    reader = CgroupReader(root)
    janitor = CgroupJanitor(reader)
    for h in ("cpu,cpuacct", "cpuset", "memory", "unified"):
        (root / h / "kubepods" / "besteffort" / "podA" / "c1").mkdir(parents=True)
    janitor.track("/kubepods/besteffort/podA")

    assert janitor.cleanup() == []

    assert janitor.leftovers() == []
    assert (root / "cpuset" / "kubepods").is_dir()
    assert not (root / "cpuset" / "kubepods" / "besteffort").exists()
    assert not (root / "memory" / "kubepods").exists()


def test_janitor_refuses_cgroups_outside_the_pod_parents(tmp_path: Path) -> None:
    janitor = CgroupJanitor(CgroupReader(fake_v1(tmp_path)))
    with pytest.raises(ValueError, match=r"refusing to track '/system\.slice/x'"):
        janitor.track("/system.slice/x")


def test_remove_reports_a_cgroup_it_cannot_remove(tmp_path: Path) -> None:
    root = fake_v1(tmp_path)
    busy = root / "memory" / "kubepods" / "podB"
    _write(busy, {"cgroup.procs": "99"})  # a regular file: rmdir fails like a busy cgroup

    problems = CgroupReader(root).remove("/kubepods/podB")

    assert len(problems) == 1 and "cannot remove" in problems[0]
    assert busy.is_dir()
