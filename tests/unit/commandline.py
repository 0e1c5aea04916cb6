"""What the daemons' command-line tests share."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable

import pytest


def refusal(build_parser: Callable[[], argparse.ArgumentParser], argv: list[str]) -> str:
    """What the parser says when it refuses ``argv`` (exit status 2)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    return err.getvalue()
