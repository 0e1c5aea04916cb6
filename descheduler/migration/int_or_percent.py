"""Int-or-percent values (Kubernetes' intstr.IntOrString as the migration limits use it): how
a value such as ``5`` or ``"10%"`` scales against a workload's replicas, and the per-workload
limits Koordinator derives from it (max_unavailable, max_migrating).

It follows Kubernetes' intstr.GetScaledValueFromIntOrPercent and Koordinator v1.8.0's
pkg/descheduler/controllers/migration/util/util.go (GetMaxUnavailable, GetMaxMigrating).
"""

from __future__ import annotations

import re

IntOrPercent = int | str  # 5, or "10%" (a string that is not a percentage is an error)

_PERCENT = re.compile(r"([+-]?[0-9]+)%\Z")
_INT64 = 2**63


def percent_value(value: IntOrPercent) -> tuple[int, bool]:
    """(number, is_percent) of ``value``; ValueError for what Kubernetes refuses: a string
    that is not an integer followed by ``%`` ("5", "abc", "1.5%", " 5%")."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"invalid type: neither int nor percentage: {value!r}")
    if isinstance(value, int):
        return value, False
    if not value.endswith("%"):
        raise ValueError(f"invalid type: string is not a percentage: {value!r}")
    match = _PERCENT.match(value)
    if match is None or not -_INT64 <= int(match.group(1)) < _INT64:
        raise ValueError(f"invalid value {value!r}: not an integer percentage")
    return int(match.group(1)), True


def scaled_value(value: IntOrPercent, total: int, *, round_up: bool) -> int:
    """GetScaledValueFromIntOrPercent: an int as it is, a percentage of ``total`` rounded up
    or down (down: "80%" of 6 is 4). ValueError for an unparseable value."""
    number, is_percent = percent_value(value)
    if not is_percent:
        return number
    product = number * total
    return -(-product // 100) if round_up else product // 100


def max_unavailable(replicas: int, value: IntOrPercent | None) -> int:
    """GetMaxUnavailable: how many of a workload's ``replicas`` may be unavailable at once.

    A given value scales down against the replicas, and one that comes to 0 counts as 1 (a
    percentage too small for one pod still allows one). Without a value: 10% of more than 10
    replicas, 2 of 4 to 10, 1 of fewer. Never more than ``replicas`` (so 0 for a workload of
    0 replicas). A negative given value is kept, as upstream (validation does not refuse it):
    every check against it then fails. ValueError for an unparseable value."""
    limit = 0
    if value is not None:
        limit = scaled_value(value, replicas, round_up=False) or 1
    if limit == 0:
        if replicas > 10:
            limit = scaled_value("10%", replicas, round_up=False)
        elif 4 <= replicas <= 10:
            limit = 2
        else:
            limit = 1
    return min(limit, replicas)


def max_migrating(replicas: int, value: IntOrPercent | None) -> int:
    """GetMaxMigrating: the same rule as max_unavailable."""
    return max_unavailable(replicas, value)
