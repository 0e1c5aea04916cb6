"""Timeouts that stretch with the machine the suite runs on.

Every wait in the harness takes its timeout in seconds as the tests would need on an ordinary
machine, and stretches it by ``KOORD_E2E_TIME_SCALE`` (1 unless set). The VM runner sets it in
the guest (tests/e2e/harness/vm.py: 10 under software emulation), where everything is 10-40 times
slower; containerd's NRI registration and request timeouts are stretched the same way.
"""

from __future__ import annotations

import os
import time

SCALE_ENV = "KOORD_E2E_TIME_SCALE"


def scale() -> float:
    try:
        value = float(os.environ.get(SCALE_ENV, "1"))
    except ValueError:
        return 1.0
    return value if value >= 1 else 1.0


def scaled(seconds: float) -> float:
    return seconds * scale()


def deadline(seconds: float) -> float:
    """The time.monotonic() value ``seconds`` (stretched) from now."""
    return time.monotonic() + scaled(seconds)


def go_duration(seconds: float) -> str:
    """``seconds`` stretched, as a Go duration for containerd's configuration ("5s", "100s")."""
    return f"{scaled(seconds):g}s"
