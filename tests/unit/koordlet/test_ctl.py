"""koordctl's command line."""

from __future__ import annotations

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
