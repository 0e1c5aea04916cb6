"""koord-scheduler's command line, from its settings table (cli.SchedulerOptions): the options
a command line gives are the ones the hand-written parser gave.

Every flag's name, default and choices: tests/unit/test_command_lines.py.
"""

from __future__ import annotations

from pathlib import Path

from scheduler.cli import SchedulerOptions, build_parser, options_from_args
from tests.unit.commandline import refusal


def test_a_representative_command_line_gives_the_same_options_as_before() -> None:
    args = build_parser().parse_args(
        [
            "--kubeconfig",
            "/etc/kube/config",
            "--port=8443",
            "--cert-dir=/certs",
            "--url-prefix=/koord/extender",
            "--metrics-addr=",
            "--load-aware-config=/etc/koord/loadaware.yaml",
            "--log-level=error",
        ]
    )
    assert args.log_level == "error"
    assert options_from_args(args) == SchedulerOptions(
        kubeconfig="/etc/kube/config",
        port=8443,
        cert_dir=Path("/certs"),
        url_prefix="/koord/extender",
        metrics_addr="",
        load_aware_config="/etc/koord/loadaware.yaml",
    )


def test_the_certificate_folder_is_required() -> None:
    assert "the following arguments are required: --cert-dir" in refusal(build_parser, [])
