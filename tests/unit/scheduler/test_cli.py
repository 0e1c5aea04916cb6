"""koord-scheduler's command line, from its settings table (cli.SchedulerOptions): the options
a command line gives are the ones the hand-written parser gave.

Every flag's name, default and choices: tests/unit/test_command_lines.py.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from scheduler.cli import SchedulerOptions, build_parser, options_from_args, self_signed
from tests.unit.commandline import refusal


def test_a_representative_command_line_gives_the_same_options_as_before() -> None:
    args = build_parser().parse_args(
        [
            "--kubeconfig",
            "/etc/kube/config",
            "--secure-port=8443",
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
        secure_port=8443,
        cert_dir=Path("/certs"),
        url_prefix="/koord/extender",
        metrics_addr="",
        load_aware_config="/etc/koord/loadaware.yaml",
    )


def test_without_a_certificate_folder_a_self_signed_pair_is_made(tmp_path: Path) -> None:
    self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")  # a matching pair
    assert options_from_args(build_parser().parse_args([])).cert_dir is None


def test_a_bad_feature_gate_is_refused() -> None:
    assert "unknown feature gate 'NoSuchGate'" in refusal(
        build_parser, ["--feature-gates=NoSuchGate=true"]
    )
