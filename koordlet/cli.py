"""The ``koordlet`` command: the node QoS daemon, standalone by default.

Flag names are Koordinator's where it has the setting, so existing DaemonSet arguments work:
they may be written as for Koordinator's Go binary (``-addr=:9316``, bare bools, ``--v=4``,
klog's flags; koordapi.goflags), and its flags with no counterpart here are accepted, listed
at the end of ``--help`` with why, and named at start-up in one warning
(koordlet.config.KOORDINATOR_ONLY). The path flags' defaults follow Koordinator's host layout
(koordlet.config.choose_layout: its DaemonSet's mounts, or the host's own folders). The flags
come from the settings table, koordlet.config.Config, and koordapi.logsetup's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import textwrap
from collections.abc import Mapping, Sequence
from importlib.metadata import version

from koordapi import goflags, logsetup
from koordapi.errors import ModelError
from koordapi.settings import add_arguments, load, settings
from koordlet.config import KOORDINATOR_ONLY, Config, HostLayout, choose_layout

# The settings tables of the command line, in --help's order.
TABLES = (Config, logsetup.LogOptions)
_HELP_WIDTH = 100


def no_effect_help() -> str:
    """--help's closing list: each Koordinator flag accepted here without effect, and why."""
    lines = [
        "Koordinator's flags accepted with no effect here (named in a warning at start-up and "
        "in koordlet_flag_unimplemented{flag}):"
    ]
    for name, why in sorted({**goflags.KLOG, **KOORDINATOR_ONLY}.items()):
        lines += textwrap.wrap(
            f"--{name}  no effect: {why.why}",
            _HELP_WIDTH,
            initial_indent="  ",
            subsequent_indent="      ",
            break_on_hyphens=False,
        )
    return "\n".join(lines)


def build_parser(layout: HostLayout | None = None) -> argparse.ArgumentParser:
    """The parser; ``layout`` (default: this machine's, choose_layout) sets the path flags'
    defaults."""
    layout = layout if layout is not None else choose_layout(os.environ)
    p = argparse.ArgumentParser(
        prog="koordlet",
        description="Koordinator's node QoS daemon, in Python.",
        epilog=no_effect_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    by_flag = {s.flag.name: s for s in settings(Config)}
    p.set_defaults(
        **{
            by_flag[name].dest: by_flag[name].convert(text)
            for name, text in layout.defaults.items()
        }
    )
    return p


def config_from_args(
    args: argparse.Namespace,
    *,
    ignored: Mapping[str, str] | None = None,
    layout: HostLayout | None = None,
) -> Config:
    return load(
        Config,
        args,
        node_name=os.environ.get("NODE_NAME") or socket.gethostname(),
        ignored_flags=tuple((ignored or {}).items()),
        layout=layout.describe() if layout is not None else "",
    )


def translate(argv: Sequence[str]) -> goflags.Translated:
    """Ours or Koordinator's syntax, made argparse's; the ignored flags set aside."""
    return goflags.translate(argv, TABLES, KOORDINATOR_ONLY)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags, from ours or Koordinator's syntax, and what was ignored (to log)."""
    translated = translate(argv)
    return build_parser().parse_args(translated.argv), translated.notes


def main(argv: list[str] | None = None) -> int:
    translated = translate(sys.argv[1:] if argv is None else argv)
    layout = choose_layout(os.environ)
    args = build_parser(layout).parse_args(translated.argv)
    logsetup.configure(args.log_level)
    # Imported after argument parsing: --help and bad flags answer without loading the daemon.
    from koordlet.daemon import Koordlet  # noqa: PLC0415

    try:
        config = config_from_args(args, ignored=translated.ignored, layout=layout)
        daemon = Koordlet(config)
    except (ModelError, OSError) as err:
        print(f"koordlet: {err}", file=sys.stderr)
        return 2
    asyncio.run(daemon.run())
    return 0
