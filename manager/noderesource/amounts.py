"""The integers the formulas work in, back to text for explanations, and the arithmetic on
them that must match Koordinator's.

CPU is counted in milli-cores and memory in bytes, converted from quantities by
koordapi.quantity (``milli_value``, ``value``: rounded up as Kubernetes' MilliValue/Value).
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

from koordapi.quantity import Pair, format_binary

ZERO: Pair = (0, 0)


def cores(milli_cores: int) -> str:
    """Milli-cores as cores for explanations: 37000 → "37", 3250 → "3.25"."""
    if milli_cores % 1000 == 0:
        return str(milli_cores // 1000)
    return str(Decimal(milli_cores).scaleb(-3).normalize())


def size(amount: int) -> str:
    """Bytes as an exact binary quantity for explanations: "98Gi", else plain bytes."""
    return format_binary(amount)


class Amount(NamedTuple):
    """A computed amount (milli-cores or bytes) and the arithmetic that produced it, written
    with the same numbers so a reader can redo it."""

    value: int
    expression: str


def percent_of(amount: int, percent: int) -> int:
    """amount x percent/100 as Koordinator's MultiplyMilliQuant and MultiplyQuant compute it: in
    float64, truncated toward zero by the int64 conversion. So 29 % of 100 is 28
    (100 x 0.29 = 28.999999999999996), and published amounts agree to the milli and the byte."""
    return int(float(amount) * (percent / 100.0))
