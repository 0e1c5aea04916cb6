"""Text helpers shared by koordctl's commands: units, QoS class order, the live screen."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from koordctl.client import KoordletUnreachable

QOS_ORDER = ("LSE", "LSR", "LS", "BE", "SYSTEM", "none")


def cores(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def mib(value: float | None) -> str:
    return "-" if value is None else f"{value / (1 << 20):.0f}Mi"


def latency(us: float | None) -> str:
    """Microseconds in human units: "850us", "1.20ms", "12.5ms", "250ms"."""
    if us is None:
        return "-"
    if round(us) < 1000:
        return f"{us:.0f}us"
    ms = us / 1000
    if ms < 9.995:
        return f"{ms:.2f}ms"
    return f"{ms:.1f}ms" if ms < 99.95 else f"{ms:.0f}ms"


def percent(value: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return "-" if value is None else f"{value * scale:.{digits}f}%"


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def live(command: str, screen: Callable[[], str], once: bool, interval: float) -> int:
    """Print ``screen()`` once, or redraw it every ``interval`` seconds until interrupted."""
    try:
        while True:
            text = screen()
            if once:
                print(text)
                return 0
            sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
            sys.stdout.flush()
            time.sleep(interval)
    except KoordletUnreachable as err:
        print(f"koordctl {command}: {err}", file=sys.stderr)
        return 1
