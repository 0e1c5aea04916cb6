"""systemd notifications over a real datagram socket, as systemd receives them."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from koordlet.sdnotify import notify, watchdog_interval


def test_notify_sends_one_datagram_to_the_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(path))
        assert notify("READY=1\nSTATUS=ready", {"NOTIFY_SOCKET": str(path)})
        assert systemd.recv(4096) == b"READY=1\nSTATUS=ready"


def test_abstract_socket_addresses_start_with_an_at_sign() -> None:
    name = f"koord-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind("\0" + name)
        assert notify("WATCHDOG=1", {"NOTIFY_SOCKET": "@" + name})
        assert systemd.recv(64) == b"WATCHDOG=1"


def test_without_systemd_nothing_is_sent_and_nothing_fails(tmp_path: Path) -> None:
    assert not notify("READY=1", {})
    assert not notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "gone")})  # logged


def test_the_watchdog_is_pinged_at_half_its_period_and_only_for_us() -> None:
    me = str(os.getpid())
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": me}) == 30.0
    assert watchdog_interval({"WATCHDOG_USEC": "60000000"}) == 30.0
    assert watchdog_interval({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval({}) is None
