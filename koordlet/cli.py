"""The ``koordlet`` command: the node QoS daemon."""

from __future__ import annotations

import argparse
from importlib.metadata import version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="koordlet", description="the node QoS daemon")
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.parse_args(argv)
    parser.exit(2, "koordlet: the node QoS daemon is not in this release yet (README.md, Status)\n")
