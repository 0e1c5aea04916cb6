"""The ``koordlet`` command: the node QoS daemon, standalone by default.

Flag names are Koordinator's where it has the setting, so existing DaemonSet arguments work.
The flags come from the settings table, koordlet.config.Config, and koordapi.logsetup's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from importlib.metadata import version

from koordapi import logsetup
from koordapi.errors import ModelError
from koordapi.settings import add_arguments, load
from koordlet.config import Config

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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logsetup.configure(args.log_level)
    # Imported after argument parsing: --help and bad flags answer without loading the daemon.
    from koordlet.daemon import Koordlet  # noqa: PLC0415

    try:
        daemon = Koordlet(config_from_args(args))
    except (ModelError, OSError) as err:
        print(f"koordlet: {err}", file=sys.stderr)
        return 2
    asyncio.run(daemon.run())
    return 0
