"""The ``koordlet`` command: the node QoS daemon, standalone by default.

Flag names are Koordinator's where it has the setting, so existing DaemonSet arguments work:
they may be written as for Koordinator's Go binary (``-addr=:9316``, bare bools, ``--v=4``,
klog's flags; koordapi.goflags), and its flags with no counterpart here are accepted and said
at start-up (koordlet.config.KOORDINATOR_ONLY). The flags come from the settings table,
koordlet.config.Config, and koordapi.logsetup's.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from importlib.metadata import version

from koordapi import goflags, logsetup
from koordapi.errors import ModelError
from koordapi.settings import add_arguments, load
from koordlet.config import KOORDINATOR_ONLY, Config

# The settings tables of the command line, in --help's order.
TABLES = (Config, logsetup.LogOptions)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koordlet",
        description="Koordinator's node QoS daemon, in Python.",
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=version("koordinator-py"))
    add_arguments(p, *TABLES)
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    return load(Config, args, node_name=os.environ.get("NODE_NAME") or socket.gethostname())


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed flags, from ours or Koordinator's syntax, and what was ignored (to log)."""
    translated = goflags.translate(argv, TABLES, KOORDINATOR_ONLY)
    return build_parser().parse_args(translated.argv), translated.notes


def main(argv: list[str] | None = None) -> int:
    args, ignored = parse_args(sys.argv[1:] if argv is None else argv)
    logsetup.configure(args.log_level)
    for note in ignored:
        logging.getLogger("koordlet").info("%s", note)
    # Imported after argument parsing: --help and bad flags answer without loading the daemon.
    from koordlet.daemon import Koordlet  # noqa: PLC0415

    try:
        daemon = Koordlet(config_from_args(args))
    except (ModelError, OSError) as err:
        print(f"koordlet: {err}", file=sys.stderr)
        return 2
    asyncio.run(daemon.run())
    return 0
