"""koordctl's command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import koordctl as ctl
from koordctl.explain import render_explain


def test_nri_events_refuses_a_bad_index_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl.main(["nri-events", "--idx", "7"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "koordctl nri-events: invalid plugin index '7': two digits, 00..99"


def test_nri_events_once_reports_a_missing_socket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["nri-events", "--socket", str(tmp_path / "none.sock"), "--once"]) == 1
    assert "cannot use the NRI socket" in capsys.readouterr().err


def test_a_subcommand_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        ctl.main([])
    assert exit_.value.code == 2


def test_kernel_reports_the_group_identity_mechanism_of_a_fake_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cgroup" / "cpu").mkdir(parents=True)
    (tmp_path / "cgroup" / "cpu" / "cpu.idle").write_text("0\n")
    args = [
        "kernel",
        "--cgroup-root-dir",
        str(tmp_path / "cgroup"),
        "--sys-fs-root-dir",
        str(tmp_path),
    ]

    assert ctl.main([*args, "--json"]) == 0

    report = json.loads(capsys.readouterr().out)
    assert report["cgroup_version"] == 1
    assert report["group_identity"] == "cpu.idle"
    assert report["resctrl"] is False


def explain_data(actions: list[dict[str, object]]) -> dict[str, object]:
    return {
        "uid": "u-job",
        "name": "job",
        "namespace": "default",
        "qos": "BE",
        "kube_qos": "BestEffort",
        "cgroup": "kubepods/besteffort/podu-job",
        "applied": {"cpu.shares": 2, "cpuset.cpus": "0-3", "cpu.cfs_quota_us": None},
        "usage": {"cpu": 0.75, "memory": 512 << 20},
        "containers": [{"name": "main", "applied": {"cpu.shares": 2}}],
        "actions": actions,
        "strategies": {
            "CPUSuppress": {"ts": 0.0, "text": "BE gets 0-3"},
            "MemoryEvict": {"ts": 0.0, "text": "memory 50% < threshold 70%"},
        },
    }


def test_render_explain_shows_values_reasons_and_strategy_statuses() -> None:
    action = {
        "ts": 1_800_000_000.0,
        "strategy": "MemoryEvict",
        "kind": "evict",
        "value": "BEMemoryEvict",
        "target": "default/job",
        "reason": "node memory 80% >= threshold 70%: release 983 MiB",
    }

    text = render_explain(explain_data([action]))

    lines = text.splitlines()
    assert lines[0] == "pod default/job (uid u-job)"
    assert "QoS BE (Kubernetes BestEffort), cgroup kubepods/besteffort/podu-job" in text
    assert "usage: cpu 0.75 cores, memory 512Mi" in text
    assert "  pod: cpu.shares=2  cpuset.cpus=0-3" in lines  # unset values are left out
    assert "  main: cpu.shares=2" in lines
    (why,) = [line for line in lines if "MemoryEvict: evict" in line]
    assert why.endswith(
        "MemoryEvict: evict BEMemoryEvict on default/job because node memory 80% >= threshold"
        " 70%: release 983 MiB"
    )
    assert lines.index("strategies:") < lines.index("  MemoryEvict: memory 50% < threshold 70%")
    assert "  CPUSuppress: BE gets 0-3" in lines


def test_render_explain_lists_the_pods_nri_conflicts() -> None:
    data = explain_data([])
    data["conflicts"] = [
        {
            "ts": 1_800_000_000.0,
            "pod_uid": "u-job",
            "container": "main",
            "container_id": "c1",
            "resource": "cpuset",
            "asked": "0-3",
            "found": "4-7",
            "file": "cpuset.cpus",
        }
    ]

    lines = render_explain(data).splitlines()

    header = lines.index(
        "conflicts (another NRI plugin or the kubelet changed what koordlet asked):"
    )
    assert lines[header + 1].endswith(" main: cpuset asked 0-3, found 4-7 (cpuset.cpus)")
    assert header < lines.index("why:")
    assert not [line for line in render_explain(explain_data([])).splitlines()
                if line.startswith("conflicts")]  # fmt: skip


def test_render_explain_without_actions_says_so() -> None:
    text = render_explain(explain_data([]))

    assert "no QoS manager action concerns this pod" in text
    assert "because" not in text


def test_explain_reports_an_unreachable_koordlet(capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl.main(["explain", "job", "--addr", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("koordctl explain: cannot reach koordlet at 127.0.0.1:1")
