"""The executor's other writers on fake trees: resctrl groups, oom_score_adj; and the NRI
translation of memory QoS (cgroup v2's ``unified`` map)."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordlet.executor import procfs
from koordlet.executor.resctrl import Resctrl, ResctrlError
from koordlet.hookresults import container_writes
from koordlet.nri.translate import to_adjustment, to_update
from runtimehooks.patch import ContainerPatch
from runtimehooks.rules import KernelFeatures


def resctrl_tree(root: Path) -> Path:
    (root / "info" / "L3").mkdir(parents=True)
    (root / "info" / "L3" / "cbm_mask").write_text("7ff\n")
    (root / "schemata").write_text("    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n")
    return root


def test_resctrl_reads_the_mask_and_cache_ids(tmp_path: Path) -> None:
    resctrl = Resctrl(resctrl_tree(tmp_path))
    assert resctrl.available
    assert resctrl.cbm_mask() == 0x7FF
    assert resctrl.l3_cache_ids() == (0, 1)


def test_a_pod_group_is_created_with_its_schemata_then_removed(tmp_path: Path) -> None:
    resctrl = Resctrl(resctrl_tree(tmp_path))

    assert resctrl.ensure_group("koordlet-u1", ["L3:0=3c;1=3c", "MB:0=50;1=50"]) is True

    group = tmp_path / "koordlet-u1"
    assert group.is_dir()
    assert (group / "schemata").read_text() == "MB:0=50;1=50\n"  # the last line written
    (group / "schemata").write_text("L3:0=3c;1=3c\nMB:0=50;1=50\n")  # as the kernel shows it
    assert resctrl.ensure_group("koordlet-u1", ["L3:0=3c;1=3c", "MB:0=50;1=50"]) is False
    (group / "tasks").write_text("10\n")
    assert resctrl.add_tasks("koordlet-u1", [10, 11]) == 1
    for name in ("schemata", "tasks"):  # resctrl's pseudo-files vanish with the group; these don't
        (group / name).unlink()
    assert resctrl.remove_group("koordlet-u1") is True
    assert not group.exists()
    assert resctrl.remove_group("koordlet-u1") is False


@pytest.mark.parametrize("name", ["../etc", "a/b", "", "x" * 200, "koordlet-u1\n"])
def test_group_names_are_never_paths(tmp_path: Path, name: str) -> None:
    with pytest.raises(ResctrlError, match="invalid resctrl group name"):
        Resctrl(resctrl_tree(tmp_path)).ensure_group(name, [])


def test_oom_score_adj_is_written_only_where_it_differs(tmp_path: Path) -> None:
    for pid, value in ((10, "0"), (11, "-500")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "oom_score_adj").write_text(value + "\n")

    changed = procfs.set_oom_score_adj([10, 11, 12], -500, tmp_path)  # 12 has exited

    assert changed == 1
    assert (tmp_path / "10" / "oom_score_adj").read_text().strip() == "-500"
    with pytest.raises(ValueError, match="outside"):
        procfs.set_oom_score_adj([10], 2000, tmp_path)


MEMORY_QOS = ContainerPatch(memory_min=1 << 20, memory_low=2 << 20, memory_high=-1)


def test_memory_qos_goes_in_the_unified_map_on_cgroup_v2() -> None:
    adjust = to_adjustment(MEMORY_QOS, KernelFeatures(cgroup_version=2))
    assert adjust is not None
    assert dict(adjust.linux.resources.unified) == {
        "memory.min": str(1 << 20),
        "memory.low": str(2 << 20),
        "memory.high": "max",
    }
    update = to_update("c1", MEMORY_QOS, KernelFeatures(cgroup_version=2))
    assert update is not None and update.linux.resources.unified["memory.high"] == "max"


def test_memory_qos_is_left_out_on_a_mainline_cgroup_v1() -> None:
    assert to_adjustment(MEMORY_QOS, KernelFeatures(cgroup_version=1)) is None
    assert container_writes("kubepods/c", MEMORY_QOS, KernelFeatures(cgroup_version=1)) == []
    anolis = container_writes("kubepods/c", MEMORY_QOS, KernelFeatures(memory_qos_v1=True))
    assert [w.resource for w in anolis] == ["memory.min", "memory.low", "memory.high"]
