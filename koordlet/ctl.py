"""The ``koordctl`` command: the node command-line tool."""

from __future__ import annotations

import argparse
from importlib.metadata import version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="koordctl", description="the node command-line tool")
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.parse_args(argv)
    parser.exit(
        2, "koordctl: the node command-line tool is not in this release yet (README.md, Status)\n"
    )
