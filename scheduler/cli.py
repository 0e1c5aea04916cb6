"""The ``koord-scheduler`` command: the scheduler extender."""

from __future__ import annotations

import argparse
from importlib.metadata import version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="koord-scheduler", description="the scheduler extender")
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.parse_args(argv)
    parser.exit(
        2,
        "koord-scheduler: the scheduler extender is not in this release yet (README.md, Status)\n",
    )
