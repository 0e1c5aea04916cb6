"""Go durations (metav1.Duration) as Koordinator's objects carry them: "5m0s", "300s", "1h30m".

One parser and one formatter for the NodeMetric collect policy, which koord-manager writes
and koordlet reads (Kubernetes' convention: servers emit the canonical form and accept others),
and for the daemons' duration flags (``parse_seconds``, which also takes plain seconds).
"""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """Seconds of a Go duration string ("5m0s", "300s", "1.5h", "0"); ValueError if malformed."""
    text = text.strip()
    if not text:
        raise ValueError("empty duration")
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text):
        if text == "0":
            return 0.0
        raise ValueError(f"not a duration: {text!r}")
    return total


def format_go_duration(seconds: int) -> str:
    """Go's Duration.String for whole seconds: 45 → "45s", 300 → "5m0s", 3900 → "1h5m0s"."""
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def parse_seconds(text: str) -> float:
    """Seconds of a duration as a command line gives it: Go's form ("1m30s", "500ms", "0") or
    plain seconds ("10", "2.5"); ValueError otherwise."""
    try:
        return parse_go_duration(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a duration: {text.strip()!r} (e.g. 10s, 1m30s, 500ms)") from None
