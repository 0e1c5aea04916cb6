"""koord-manager's command line, from its settings tables (ManagerOptions, cli.Command): the
options a command line gives are the ones the hand-written parser gave.

Every flag's name, default and choices: tests/unit/test_command_lines.py.
"""

from __future__ import annotations

from pathlib import Path

from manager.app import ManagerOptions
from manager.cli import build_parser, options_from_args
from tests.unit.commandline import refusal


def test_a_representative_command_line_gives_the_same_options_as_before() -> None:
    args = build_parser().parse_args(
        [
            "--kubeconfig=/etc/kube/config",
            "--config-namespace=koord",
            "--slo-config-name",
            "slo",
            "--webhook-port=9443",
            "--webhook-cert-dir=/certs",
            "--metrics-addr=:9090",
            "--enable-leader-election=false",
            "--leader-election-namespace=kube-system",
            "--leader-election-id=km",
            "--workers=0",
            "--log-level=warning",
        ]
    )
    assert (args.kubeconfig, args.log_level) == ("/etc/kube/config", "warning")
    assert options_from_args(args) == ManagerOptions(
        config_namespace="koord",
        slo_config_name="slo",
        webhook_port=9443,
        webhook_cert_dir=Path("/certs"),
        metrics_addr=":9090",
        leader_elect=False,
        leader_election_namespace="kube-system",
        leader_election_id="km",
        workers=1,  # at least one
    )
    disabled = options_from_args(build_parser().parse_args(["--disable-webhooks"]))
    assert disabled.webhook_port is None


def test_choices_and_numbers_are_refused_as_before() -> None:
    assert "invalid choice: 'yes'" in refusal(build_parser, ["--enable-leader-election=yes"])
    assert "argument --webhook-port: invalid int value: 'x'" in refusal(
        build_parser, ["--webhook-port=x"]
    )
