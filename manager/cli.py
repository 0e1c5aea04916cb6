"""The ``koord-manager`` command: the manager."""

from __future__ import annotations

import argparse
from importlib.metadata import version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="koord-manager", description="the manager")
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.parse_args(argv)
    parser.exit(2, "koord-manager: the manager is not in this release yet (README.md, Status)\n")
