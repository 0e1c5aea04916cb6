"""The executor on fake cgroup trees: v1 and v2 files, conversions, validation, leveled order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordlet.executor import CgroupWrite, Executor, Status, WriteResult

POD = "kubepods/besteffort/podA"
CTR = f"{POD}/c1"


def v1_tree(root: Path) -> Path:
    for cg in ("", "kubepods", "kubepods/besteffort", POD, CTR):
        cpu = root / "cpu" / cg
        cpu.mkdir(parents=True, exist_ok=True)
        for name, value in {
            "cpu.shares": "1024",
            "cpu.cfs_quota_us": "-1",
            "cpu.cfs_period_us": "100000",
            "cpu.idle": "0",
            "cgroup.procs": "",
        }.items():
            (cpu / name).write_text(value + "\n")
        cpuset = root / "cpuset" / cg
        cpuset.mkdir(parents=True, exist_ok=True)
        (cpuset / "cpuset.cpus").write_text("0-3\n")
        memory = root / "memory" / cg
        memory.mkdir(parents=True, exist_ok=True)
        (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    return root


def v2_tree(root: Path) -> Path:
    (root / "cgroup.controllers").parent.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu memory\n")
    for cg in (POD, CTR):
        d = root / cg
        d.mkdir(parents=True, exist_ok=True)
        for name, value in {
            "cpu.weight": "100",
            "cpu.max": "max 100000",
            "cpu.idle": "0",
            "memory.max": "max",
            "memory.min": "0",
            "memory.low": "0",
            "memory.high": "max",
            "cpuset.cpus": "",
        }.items():
            (d / name).write_text(value + "\n")
    return root


def read(root: Path, *parts: str) -> str:
    return root.joinpath(*parts).read_text().strip()


def test_v1_writes_go_to_the_controller_hierarchies(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    ex = Executor(root)

    results = ex.apply(
        [
            CgroupWrite(POD, "cpu.shares", 512),
            CgroupWrite(POD, "cpu.cfs_quota_us", 50000),
            CgroupWrite(CTR, "cpuset.cpus", "1-2"),
            CgroupWrite(POD, "memory.limit_in_bytes", 1 << 30),
        ]
    )

    assert [r.status for r in results] == [Status.APPLIED] * 4
    assert read(root, "cpu", POD, "cpu.shares") == "512"
    assert read(root, "cpu", POD, "cpu.cfs_quota_us") == "50000"
    assert read(root, "cpuset", CTR, "cpuset.cpus") == "1-2"
    assert read(root, "memory", POD, "memory.limit_in_bytes") == str(1 << 30)


@pytest.mark.parametrize(
    ("resource", "value", "file", "expected"),
    [
        pytest.param("cpu.shares", 512, "cpu.weight", "20", id="shares-to-weight-512"),
        pytest.param("cpu.shares", 1024, "cpu.weight", "39", id="shares-to-weight-1024"),
        pytest.param("cpu.cfs_quota_us", 50000, "cpu.max", "50000", id="quota-alone"),
        pytest.param("cpu.cfs_quota_us", -1, "cpu.max", "max", id="unlimited-quota-is-max"),
        pytest.param(
            "memory.limit_in_bytes", -1, "memory.max", "max", id="unlimited-memory-is-max"
        ),
        pytest.param("memory.limit_in_bytes", 1 << 20, "memory.max", "1048576", id="memory-max"),
        pytest.param("memory.high", -1, "memory.high", "max", id="memory-high-max"),
        pytest.param("cpu.idle", 1, "cpu.idle", "1", id="idle"),
    ],
)
def test_v2_converts_files_and_values(
    tmp_path: Path, resource: str, value: int, file: str, expected: str
) -> None:
    root = v2_tree(tmp_path)
    if resource in ("cpu.cfs_quota_us", "memory.limit_in_bytes", "memory.high") and value == -1:
        (root / POD / file).write_text("123456\n")  # so that "max" is a change

    (result,) = Executor(root).apply([CgroupWrite(POD, resource, value)])

    assert result.status is Status.APPLIED
    assert read(root, POD, file) == expected


def test_writing_what_is_there_is_unchanged_by_meaning(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    (root / "cpuset" / CTR / "cpuset.cpus").write_text("0,1,2,3\n")
    ex = Executor(root)

    results = ex.apply(
        [
            CgroupWrite(POD, "cpu.cfs_quota_us", -1),
            CgroupWrite(POD, "memory.limit_in_bytes", -1),  # the v1 "no limit" number
            CgroupWrite(CTR, "cpuset.cpus", "0-3"),
        ]
    )

    assert [r.status for r in results] == [Status.UNCHANGED] * 3
    assert read(root, "cpuset", CTR, "cpuset.cpus") == "0,1,2,3"


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        pytest.param("cpu.shares", 1, id="shares-below-2"),
        pytest.param("cpu.shares", 300000, id="shares-above-max"),
        pytest.param("cpu.cfs_quota_us", 500, id="quota-below-1000"),
        pytest.param("cpu.idle", 2, id="idle-not-boolean"),
        pytest.param("cpu.bvt_warp_ns", 3, id="bvt-out-of-range"),
        pytest.param("cpuset.cpus", "0-999999", id="cpuset-out-of-range"),
        pytest.param("memory.min", -5, id="negative-protection"),
        pytest.param("cpu.shares", "12; rm -rf /", id="not-a-number"),
    ],
)
def test_invalid_values_are_refused_before_any_write(
    tmp_path: Path, resource: str, value: object
) -> None:
    root = v1_tree(tmp_path)
    before = {p: p.read_text() for p in root.rglob("*") if p.is_file()}

    (result,) = Executor(root).apply([CgroupWrite(POD, resource, value)])  # type: ignore[arg-type]

    assert result.status is Status.INVALID
    assert {p: p.read_text() for p in root.rglob("*") if p.is_file()} == before


def test_missing_cgroup_is_gone_and_missing_file_unsupported(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    ex = Executor(root)

    gone, unsupported, no_v2 = ex.apply(
        [
            CgroupWrite("kubepods/besteffort/podGone", "cpu.shares", 512),
            CgroupWrite(POD, "cpu.bvt_warp_ns", 2),  # a mainline kernel has no bvt
            CgroupWrite(POD, "unknown.file", 1),
        ]
    )

    assert gone.status is Status.GONE
    assert unsupported.status is Status.UNSUPPORTED
    assert no_v2.status is Status.INVALID
    assert not (root / "cpu" / POD / "cpu.bvt_warp_ns").exists()


def test_net_cls_has_no_v2_file(tmp_path: Path) -> None:
    (result,) = Executor(v2_tree(tmp_path)).apply([CgroupWrite(POD, "net_cls.classid", 0x10003)])
    assert result.status is Status.UNSUPPORTED


class RecordingExecutor(Executor):
    """Records the order of writes that reach the files."""

    def __init__(self, root: Path, **options: Any) -> None:
        super().__init__(root, **options)
        self.order: list[str] = []

    def _do_write(self, write: CgroupWrite, cacheable: bool) -> WriteResult:
        result = super()._do_write(write, cacheable)
        if result.status is Status.APPLIED:
            self.order.append(f"{write.cgroup}:{write.resource}={write.value}")
        return result


def test_leveled_update_loosens_top_down_then_writes_exact_values_bottom_up(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    (root / "cpu" / POD / "cpu.cfs_quota_us").write_text("50000\n")
    (root / "cpu" / CTR / "cpu.cfs_quota_us").write_text("50000\n")
    (root / "cpuset" / POD / "cpuset.cpus").write_text("0-1\n")
    (root / "cpuset" / CTR / "cpuset.cpus").write_text("0-1\n")
    ex = RecordingExecutor(root)

    results = ex.apply_leveled(
        [
            [CgroupWrite(POD, "cpu.cfs_quota_us", 80000), CgroupWrite(POD, "cpuset.cpus", "2-3")],
            [CgroupWrite(CTR, "cpu.cfs_quota_us", 80000), CgroupWrite(CTR, "cpuset.cpus", "2-3")],
        ]
    )

    assert ex.order == [
        f"{POD}:cpu.cfs_quota_us=80000",  # pod first raised (looser) ...
        f"{POD}:cpuset.cpus=0-3",  # ... and its cpuset widened to the union
        f"{CTR}:cpu.cfs_quota_us=80000",
        f"{CTR}:cpuset.cpus=0-3",
        f"{CTR}:cpuset.cpus=2-3",  # then exact values, children first
        f"{POD}:cpuset.cpus=2-3",
    ]
    assert [r.write.cgroup for r in results] == [POD, POD, CTR, CTR]
    assert read(root, "cpuset", POD, "cpuset.cpus") == "2-3"
    # Every value changed, even those the loosening pass already wrote exactly (the quotas).
    assert [r.status for r in results] == [Status.APPLIED] * 4
    again = ex.apply_leveled([[CgroupWrite(POD, "cpu.cfs_quota_us", 80000)]])
    assert [r.status for r in again] == [Status.UNCHANGED]


def test_procs_reads_the_container_pids(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    (root / "cpu" / CTR / "cgroup.procs").write_text("10\n11\n")
    ex = Executor(root)
    assert ex.procs(CTR) == [10, 11]
    assert ex.procs("kubepods/none") == []


def test_force_update_window_trusts_what_was_written_or_seen(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    now = [0.0]
    ex = RecordingExecutor(root, force_update_seconds=60, clock=lambda: now[0])
    quota = root / "cpu" / CTR / "cpu.cfs_quota_us"

    def cached(value: int) -> WriteResult:
        return ex.apply([CgroupWrite(CTR, "cpu.cfs_quota_us", value)], cacheable=True)[0]

    assert cached(50000).status is Status.APPLIED
    quota.write_text("70000\n")  # changed behind koordlet's back
    now[0] = 59.0
    trusted = cached(50000)
    assert (trusted.status, trusted.detail) == (Status.UNCHANGED, "written or seen recently")
    assert read(root, "cpu", CTR, "cpu.cfs_quota_us") == "70000"  # not looked at yet
    now[0] = 61.0  # the window is over: read, compare, put it back
    assert cached(50000).status is Status.APPLIED
    assert read(root, "cpu", CTR, "cpu.cfs_quota_us") == "50000"
    # A different value is never served from the window.
    assert cached(60000).status is Status.APPLIED


def test_one_cache_trusted_only_by_cacheable_writes(tmp_path: Path) -> None:
    """koordlet's one executor: the reconciler's writes (not cacheable) always read the file,
    and what they write is trusted by the QoS manager's cacheable writes."""
    root = v1_tree(tmp_path)
    now = [0.0]
    ex = Executor(root, force_update_seconds=60, clock=lambda: now[0])
    quota = root / "cpu" / CTR / "cpu.cfs_quota_us"
    write = CgroupWrite(CTR, "cpu.cfs_quota_us", 43000)

    assert ex.apply([write])[0].status is Status.APPLIED  # the reconciler
    quota.write_text("71000\n")  # changed behind koordlet's back
    now[0] = 13.0
    assert ex.apply([write], cacheable=True)[0].status is Status.UNCHANGED  # trusted
    assert read(root, "cpu", CTR, "cpu.cfs_quota_us") == "71000"
    assert ex.apply([write])[0].status is Status.APPLIED  # the reconciler reads: put back
    assert read(root, "cpu", CTR, "cpu.cfs_quota_us") == "43000"


def test_a_trusted_read_serves_what_was_written_or_seen_within_the_window(
    tmp_path: Path,
) -> None:
    root = v1_tree(tmp_path)
    now = [0.0]
    ex = Executor(root, force_update_seconds=60, clock=lambda: now[0])
    quota = root / "cpu" / CTR / "cpu.cfs_quota_us"
    quota.write_text("40000\n")
    assert ex.read_trusted(CTR, "cpu.cfs_quota_us") == 40000  # read, and seen now
    quota.write_text("70000\n")
    now[0] = 30.0
    assert ex.read_trusted(CTR, "cpu.cfs_quota_us") == 40000  # within the window
    assert ex.read(CTR, "cpu.cfs_quota_us") == 70000  # a plain read always reads
    now[0] = 61.0
    assert ex.read_trusted(CTR, "cpu.cfs_quota_us") == 70000
    ex.apply([CgroupWrite(CTR, "cpu.cfs_quota_us", 90000)])
    assert ex.read_trusted(CTR, "cpu.cfs_quota_us") == 90000  # what was written
    assert Executor(root).read_trusted(CTR, "cpu.cfs_quota_us") == 90000  # no window: reads


def test_without_a_window_every_write_reads_the_file(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    ex = Executor(root)
    ex.apply([CgroupWrite(CTR, "cpu.cfs_quota_us", 50000)])
    (root / "cpu" / CTR / "cpu.cfs_quota_us").write_text("70000\n")
    assert ex.apply([CgroupWrite(CTR, "cpu.cfs_quota_us", 50000)])[0].status is Status.APPLIED


def test_read_text_gives_the_files_text_on_v1_and_v2(tmp_path: Path) -> None:
    v1 = Executor(v1_tree(tmp_path / "v1"))
    v2 = Executor(v2_tree(tmp_path / "v2"))
    assert v1.read_text(CTR, "cpu.cfs_quota_us") == "-1\n"
    assert v1.read_text(CTR, "cpu.cfs_period_us") == "100000\n"
    assert v2.read_text(CTR, "cpu.cfs_quota_us") == "max 100000\n"  # cpu.max
    assert v2.read_text(CTR, "cpu.shares") == "100\n"  # cpu.weight
    assert v2.read_text(CTR, "memory.limit_in_bytes") == "max\n"  # memory.max
    assert v2.read_text(CTR, "cpu.cfs_period_us") is None  # part of cpu.max on v2
    assert v1.read_text(f"{POD}/gone", "cpu.shares") is None


@pytest.mark.parametrize(
    "cgroup",
    [
        "../../escape/pod",
        "/kubepods/../../../escape/pod",
        "kubepods/besteffort/../../../../escape/pod",
    ],
)
def test_a_runtime_path_that_leaves_the_root_is_refused_and_nothing_is_written(
    tmp_path: Path, cgroup: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = v1_tree(tmp_path / "cgroup")
    # what each path reaches from <root>/cpu, if it were followed: tmp_path/escape/pod
    victim = tmp_path / "escape" / "pod"
    victim.mkdir(parents=True)
    (victim / "cpu.shares").write_text("2\n")
    ex = Executor(root)
    assert (root / "cpu" / cgroup.strip("/") / "cpu.shares").resolve() == victim / "cpu.shares"

    results = ex.apply([CgroupWrite(cgroup, "cpu.shares", 512)] * 2)

    assert [r.status for r in results] == [Status.INVALID, Status.INVALID]
    assert "leaves the root" in results[0].detail
    assert read(victim, "cpu.shares") == "2"
    assert ex.read(cgroup, "cpu.shares") is None
    assert ex.read_text(cgroup, "cpu.shares") is None
    assert ex.subdirs(cgroup, "cpu.shares") == []
    said = [r.getMessage() for r in caplog.records if "refused cgroup path" in r.getMessage()]
    assert len(said) == 1  # once per path


def test_dots_inside_a_name_are_not_a_parent_reference(tmp_path: Path) -> None:
    root = v1_tree(tmp_path)
    odd = "kubepods/besteffort/pod..A"
    (root / "cpu" / odd).mkdir()
    (root / "cpu" / odd / "cpu.shares").write_text("2\n")
    result = Executor(root).apply([CgroupWrite(odd, "cpu.shares", 512)])[0]
    assert result.status is Status.APPLIED
    assert read(root, "cpu", odd, "cpu.shares") == "512"
