"""Quantities as the integers the formulas work in, and back to text for explanations.

CPU is counted in milli-cores and memory in bytes, both rounded up as Kubernetes'
``MilliValue``/``Value`` do. The reconciler reads a few hundred quantities per node, most of
them plain digits or one suffix ("3250m", "12Gi", "123456789"), so those forms are converted
with integer arithmetic and only the rest go through the exact Decimal parser.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import NamedTuple

from koordapi.errors import QuantityError
from koordapi.quantity import format_binary, parse_quantity

Pair = tuple[int, int]  # (milli-cores, bytes)
ZERO: Pair = (0, 0)

_MULTIPLIERS = {
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}


def _scaled(quantity: object, scale: int) -> int:
    """ceil(quantity * scale); scale is 1 (Value) or 1000 (MilliValue)."""
    if type(quantity) is str:
        if quantity.isascii():
            if quantity.isdigit():
                return int(quantity) * scale
            last = quantity[-1:]
            if last == "m":
                digits = quantity[:-1]
                if digits.isdigit():
                    return -(-int(digits) * scale // 1000)
            else:
                cut = 2 if last == "i" else 1
                multiplier = _MULTIPLIERS.get(quantity[-cut:])
                digits = quantity[:-cut]
                if multiplier is not None and digits.isdigit():
                    return int(digits) * multiplier * scale
        return math.ceil(parse_quantity(quantity) * scale)
    if type(quantity) is int:
        return quantity * scale
    if isinstance(quantity, Decimal) and quantity.is_finite():
        return math.ceil(quantity * scale)
    if isinstance(quantity, int | float | str):
        return math.ceil(parse_quantity(quantity) * scale)
    raise QuantityError(f"not a quantity: {quantity!r}")


def milli(quantity: object) -> int:
    """The quantity in thousandths, rounded up; raises QuantityError when malformed."""
    # the two forms koordlet reports CPU in, checked before any other work
    if type(quantity) is str and quantity.isascii():
        if quantity.isdigit():
            return int(quantity) * 1000
        if quantity[-1:] == "m" and quantity[:-1].isdigit():
            return int(quantity[:-1])
    return _scaled(quantity, 1000)


def units(quantity: object) -> int:
    """The quantity rounded up to a whole number; raises QuantityError when malformed."""
    if type(quantity) is str and quantity.isascii() and quantity.isdigit():
        return int(quantity)  # the form koordlet reports memory in
    return _scaled(quantity, 1)


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
