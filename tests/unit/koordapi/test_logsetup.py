"""The one logging set-up: the HTTP client's per-request lines only at debug."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from koordapi import logsetup


@pytest.fixture(autouse=True)
def _restore_loggers() -> Iterator[None]:
    root, client = logging.getLogger(), logging.getLogger("httpx2")
    saved = (root.handlers[:], root.level, client.level)
    yield
    root.handlers[:], root.level = saved[:2]
    client.setLevel(saved[2])


def lines(level: str) -> list[str]:
    """What configure(level) prints for two client lines and one of ours."""
    out = io.StringIO()
    logging.getLogger().handlers.clear()  # configure() is basicConfig: only on a bare root
    logsetup.configure(level, handler=logging.StreamHandler(out))
    logging.getLogger("httpx2").info('HTTP Request: PUT https://api/leases/x "HTTP/1.1 200 OK"')
    logging.getLogger("httpx2").warning("connection pool is full")
    logging.getLogger("manager.app").info("leading: starting the controllers")
    return out.getvalue().splitlines()


def test_at_info_the_per_request_lines_are_left_out_and_the_rest_stays() -> None:
    got = lines("info")
    assert len(got) == 2
    assert got[0].endswith("WARNING httpx2: connection pool is full")
    assert got[1].endswith("INFO manager.app: leading: starting the controllers")


def test_at_debug_every_request_is_logged() -> None:
    got = lines("debug")
    assert any("INFO httpx2: HTTP Request: PUT" in line for line in got)
    assert len(got) == 3
