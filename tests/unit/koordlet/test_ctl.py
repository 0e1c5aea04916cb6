"""koordctl's command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordlet import ctl


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
