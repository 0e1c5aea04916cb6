"""ResctrlReconcile on a fake resctrl tree: L3 masks, MBA, None values, tasks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from koordapi import keys
from koordapi.features import FeatureGates
from koordlet.executor import Executor
from koordlet.executor.resctrl import Resctrl
from koordlet.qosmanager.audit import Action
from koordlet.qosmanager.framework import Context
from koordlet.qosmanager.resctrlreconcile import ResctrlReconcile
from koordlet.states.pods import KnownPod
from runtimehooks.rules import KernelFeatures
from tests.unit.koordlet.qosmanager.fakes import context, known_pod, rules, write


def resctrl_tree(root: Path, cbm: str = "7ff", mba: bool = True) -> Path:
    write(root / "info" / "L3" / "cbm_mask", cbm + "\n")
    lines = [f"L3:0={cbm};1={cbm}"] + (["MB:0=100;1=100"] if mba else [])
    write(root / "schemata", "\n".join(lines) + "\n")
    return root


def classes(**enabled: Mapping[str, Any]) -> dict[str, Any]:
    """A NodeSLO spec with resctrlQOS of the named classes ("beClass", ...)."""
    return {"resourceQOSStrategy": {k: {"resctrlQOS": v} for k, v in enabled.items()}}


def run(
    tmp_path: Path,
    spec: Mapping[str, Any] | None = None,
    pods: list[KnownPod] | None = None,
    *,
    resctrl_root: Path | None = None,
    vendor: str = "intel",
) -> Context:
    root = resctrl_root or resctrl_tree(tmp_path / "resctrl")
    strategy = ResctrlReconcile(Resctrl(root), Executor(tmp_path / "cgroup"))
    ctx = context(pods=pods, rules_=rules(spec, kernel=KernelFeatures(mba_vendor=vendor)))
    strategy.run(ctx)
    return ctx


def schemata(ctx: Context, group: str) -> list[str]:
    return [a.value for a in ctx.audit.recent(100) if a.target == f"resctrl/{group}"]


def status(ctx: Context) -> str:
    return ctx.audit.statuses()["ResctrlReconcile"].text


@pytest.mark.parametrize(
    ("cbm", "start", "end", "mask"),
    [
        ("ff", 0, 100, "ff"),
        ("3ff", 10, 80, "fe"),
        ("7ff", 10, 50, "3c"),
        ("3ff", 0, 30, "7"),
        ("3ff", 10, 85, "1fe"),
    ],
)
def test_l3_masks_for_every_cache_id(
    tmp_path: Path, cbm: str, start: int, end: int, mask: str
) -> None:
    spec = classes(
        beClass={"enable": True, "catRangeStartPercent": start, "catRangeEndPercent": end}
    )
    ctx = run(tmp_path, spec, resctrl_root=resctrl_tree(tmp_path / "resctrl", cbm))
    assert schemata(ctx, "BE")[0] == f"L3:0={mask};1={mask}"


def test_disabled_classes_get_the_full_range_in_all_three_groups(tmp_path: Path) -> None:
    ctx = run(tmp_path)  # the defaults: every class disabled, BE would be 0-30% if enabled
    for group in ("LSR", "LS", "BE"):
        assert (tmp_path / "resctrl" / group).is_dir()
        assert schemata(ctx, group) == ["L3:0=7ff;1=7ff", "MB:0=100;1=100"]
    action = next(a for a in ctx.audit.recent() if a.target == "resctrl/BE")
    assert "disabled: None values" in action.reason and "11 ways" in action.reason
    assert status(ctx) == "groups LSR, LS, BE reconciled"


def test_groups_in_place_are_left_alone_whatever_the_padding(tmp_path: Path) -> None:
    root = resctrl_tree(tmp_path / "resctrl")
    for group in ("LSR", "LS", "BE"):  # the kernel pads masks with 0 and MB values with spaces
        write(root / group / "schemata", "L3:0=07ff;1=07ff\nMB:0= 100;1= 100\n")
    ctx = run(tmp_path, resctrl_root=root)
    assert ctx.audit.recent() == []
    assert (root / "BE" / "schemata").read_text() == "L3:0=07ff;1=07ff\nMB:0= 100;1= 100\n"


def test_a_changed_line_alone_is_rewritten(tmp_path: Path) -> None:
    root = resctrl_tree(tmp_path / "resctrl")
    for group in ("LSR", "LS", "BE"):
        write(root / group / "schemata", "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    spec = classes(lsClass={"enable": True, "catRangeStartPercent": 0, "mbaPercent": 55})
    ctx = run(tmp_path, spec, resctrl_root=root)
    assert [(a.target, a.value) for a in ctx.audit.recent()] == [("resctrl/LS", "MB:0=60;1=60")]
    assert (root / "LS" / "schemata").read_text() == "MB:0=60;1=60\n"


@pytest.mark.parametrize(("percent", "value"), [(100, 2048), (50, 80)])
def test_amd_bandwidth(tmp_path: Path, percent: int, value: int) -> None:
    ctx = run(tmp_path, classes(beClass={"enable": True, "mbaPercent": percent}), vendor="amd")
    assert f"MB:0={value};1={value}" in schemata(ctx, "BE")


def test_no_mb_line_without_mba(tmp_path: Path) -> None:
    ctx = run(tmp_path, resctrl_root=resctrl_tree(tmp_path / "resctrl", mba=False))
    assert schemata(ctx, "LS") == ["L3:0=7ff;1=7ff"]


@pytest.mark.parametrize(
    ("spec", "cbm", "problem", "kept"),
    [
        pytest.param(
            classes(beClass={"enable": True, "catRangeStartPercent": 50, "catRangeEndPercent": 30}),
            "7ff",
            "BE: resctrl: range [50, 30] is invalid",
            "MB:0=100;1=100",
            id="start-above-end",
        ),
        pytest.param(
            classes(beClass={"enable": True, "mbaPercent": 0}),
            "7ff",
            "BE: mbaPercent 0 is outside (0, 100]",
            "L3:0=f;1=f",  # 30% of 11 ways: ceil(3.3) = 4
            id="mba-zero",
        ),
        pytest.param(
            None,
            "101",
            "BE: resctrl: cbm mask 0x101 is not contiguous",
            "MB:0=100;1=100",
            id="cbm-not-contiguous",
        ),
    ],
)
def test_a_bad_line_is_skipped_and_named_the_rest_applies(
    tmp_path: Path, spec: dict[str, Any] | None, cbm: str, problem: str, kept: str
) -> None:
    ctx = run(tmp_path, spec, resctrl_root=resctrl_tree(tmp_path / "resctrl", cbm))
    assert problem in status(ctx)
    assert schemata(ctx, "BE") == [kept]
    assert (tmp_path / "resctrl" / "BE").is_dir()


def task_files(tmp_path: Path, pods: list[KnownPod], threads: str, v2: bool) -> None:
    if v2:
        write(tmp_path / "cgroup" / "cgroup.controllers", "cpu memory\n")
    for known in pods:
        for ctr in known.containers.values():
            base = tmp_path / "cgroup" if v2 else tmp_path / "cgroup" / "cpu"
            write(base / ctr.cgroup_dir / ("cgroup.threads" if v2 else "tasks"), threads)


@pytest.mark.parametrize("v2", [False, True], ids=["v1-cpu-tasks", "v2-cgroup-threads"])
def test_new_threads_of_enabled_classes_join_their_group(tmp_path: Path, v2: bool) -> None:
    ls = known_pod("ls", qos="LS")
    lse = known_pod("lse", qos="LSE", kube="Guaranteed")
    own_group = known_pod("own", qos="LS", annotations={keys.ANNOTATION_RESCTRL: "{}"})
    be = known_pod("be", qos="BE", kube="BestEffort")  # BE resctrl stays disabled
    pods = [ls, lse, own_group, be]
    task_files(tmp_path, pods, "100\n101\n", v2)
    root = resctrl_tree(tmp_path / "resctrl")
    write(root / "LS" / "tasks", "100\n")
    spec = classes(lsClass={"enable": True}, lsrClass={"enable": True})
    ctx = run(tmp_path, spec, pods, resctrl_root=root)
    tasks = {a.target: a for a in ctx.audit.recent() if a.kind == "tasks"}
    assert tasks["resctrl/LS"].value == "+1"  # 101 only: the other pod's threads too, once
    assert tasks["resctrl/LSR"].value == "+2"  # the LSE pod joins LSR
    assert "resctrl/BE" not in tasks
    assert (root / "LS" / "tasks").read_text() == "101\n"  # the last write of the fake file


def test_without_resctrl_nothing_is_written(tmp_path: Path) -> None:
    missing = tmp_path / "resctrl"
    ctx = run(tmp_path, resctrl_root=missing)
    assert status(ctx) == f"resctrl not available at {missing}: nothing written"
    assert not missing.exists()
    assert ctx.audit.recent() == []


def test_gate_is_on_by_default(tmp_path: Path) -> None:
    strategy = ResctrlReconcile(Resctrl(tmp_path), Executor(tmp_path))
    assert strategy.name == "ResctrlReconcile" and strategy.interval == 1.0
    assert strategy.enabled(FeatureGates())
    assert not strategy.enabled(FeatureGates.parse("RdtResctrl=false"))


def test_actions_name_the_class(tmp_path: Path) -> None:
    ctx = run(tmp_path, classes(beClass={"enable": True}))
    be: list[Action] = [a for a in ctx.audit.recent() if a.target == "resctrl/BE"]
    assert {a.scope for a in be} == {"BE"}
    assert be[0].reason == "BE resctrlQOS enabled: cat 0-30% of 11 ways, mba 100% (intel)"
    assert be[0].value == "L3:0=f;1=f"


def test_a_line_that_is_a_textual_prefix_of_the_current_one_is_written(tmp_path: Path) -> None:
    root = resctrl_tree(tmp_path / "resctrl")
    for group in ("LSR", "LS", "BE"):
        write(root / group / "schemata", "L3:0=7ff;1=7ff\nMB:0=100;1=100\n")
    write(root / "LS" / "schemata", "L3:0=7ff;1=7ff\nMB:0=10;1=100\n")  # cache 1 still at 100
    ctx = run(tmp_path, classes(lsClass={"enable": True, "mbaPercent": 10}), resctrl_root=root)
    assert schemata(ctx, "LS") == ["MB:0=10;1=10"]
    assert (root / "LS" / "schemata").read_text() == "MB:0=10;1=10\n"
