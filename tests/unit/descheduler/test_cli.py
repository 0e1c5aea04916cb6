"""The koord-descheduler command line: Koordinator's flags over the configuration file."""

from __future__ import annotations

from pathlib import Path

import pytest

from descheduler import cli
from descheduler.config import ConfigError


def options(*argv: str) -> cli.DeschedulerOptions:
    args, _ = cli.parse_args(list(argv))
    return cli.options_from_args(args)


def test_without_a_file_koordinators_defaults_and_the_insecure_port() -> None:
    config = cli.config_from_options(options())
    assert config.metrics_bind_address == "0.0.0.0:10251"
    assert config.leader_election.resource_name == "koord-descheduler"
    assert cli.config_from_options(options("--port=0")).healthz_bind_address == ""


def test_leader_election_flags_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "leaderElection: {leaderElect: false, resourceName: from-file, leaseDuration: 30s}\n"
        "metricsBindAddress: 127.0.0.1:9999\n"
    )
    config = cli.config_from_options(options(f"--config={path}", "--port=1234"))
    assert not config.leader_election.leader_elect
    assert config.leader_election.resource_name == "from-file"
    assert config.leader_election.lease_duration == 30.0
    assert config.metrics_bind_address == "127.0.0.1:9999"  # --port is ignored with --config
    given = cli.config_from_options(
        options(
            f"-config={path}",
            "--leader-elect",
            "-leader-elect-resource-name",
            "flagged",
            "--leader-elect-lease-duration=20s",
        )
    )
    assert given.leader_election.leader_elect
    assert (given.leader_election.resource_name, given.leader_election.lease_duration) == (
        "flagged",
        20.0,
    )


def test_koordinators_flags_without_a_counterpart_are_noted() -> None:
    _, notes = cli.parse_args(["--secure-port=10258", "--v=4"])
    assert notes == [
        "ignored --secure-port: no HTTPS serving: /healthz, /readyz and /metrics are served "
        "over HTTP"
    ]


def test_a_missing_or_bad_file_is_refused_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="No such file"):
        cli.config_from_options(options(f"--config={tmp_path / 'none.yaml'}"))
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
        "profiles:\n- plugins:\n    deschedule:\n      enabled: [{name: PodLifeTime}]\n"
    )
    assert cli.main([f"--config={path}"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"koord-descheduler: --config {path}: unsupported plugin(s): ")
    assert "PodLifeTime (deschedule)" in said


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip()


def test_dry_run_from_the_flag_or_the_file(tmp_path: Path) -> None:
    assert not cli.config_from_options(options()).effective_dry_run
    assert cli.config_from_options(options("--dry-run")).effective_dry_run  # Go's bare bool
    assert not cli.config_from_options(options("--dry-run=false")).effective_dry_run
    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n")
    assert cli.config_from_options(options(f"--config={path}", "-dry-run")).effective_dry_run
    path.write_text(path.read_text() + "dryRun: true\n")
    # the file's dryRun stands whatever the flag says: either one makes a dry run
    assert cli.config_from_options(options(f"--config={path}")).effective_dry_run
    assert cli.config_from_options(options(f"--config={path}", "--dry-run=false")).dry_run
