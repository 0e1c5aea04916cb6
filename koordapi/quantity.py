"""Kubernetes resource quantities ("500m", "2Gi", "1.5", "1e3"): parsed into exact decimals,
converted to the integers every component counts in (milli-cores, bytes: ``milli_value``,
``value``, rounded up as Kubernetes' MilliValue and Value are), and formatted back."""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from koordapi.errors import QuantityError

_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]{1,3})?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)\Z")
MAX_CHARS = 64  # a quantity is short; longer input is refused before any parsing


def parse_quantity(value: str | int | float) -> Decimal:
    """The quantity's exact value; raises QuantityError for anything Kubernetes would refuse."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise QuantityError(f"not a quantity: {value!r}")
        return Decimal(str(value))
    text = str(value).strip()
    if len(text) > MAX_CHARS:
        raise QuantityError(f"quantity of {len(text)} characters is too long")
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"malformed quantity {text!r}")
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        raise QuantityError(f"malformed quantity {text!r}") from None
    return number * _SUFFIXES[match.group(2)]


# -- integers: Kubernetes' Value and MilliValue --------------------------------------------

Pair = tuple[int, int]
"""Two amounts as integers, most often a pod's or a node's (milli-cores, bytes)."""

# the whole-number suffixes, for the integer fast path
_MULTIPLIERS = {suffix: int(factor) for suffix, factor in _SUFFIXES.items() if factor > 1}


def _scaled(quantity: object, scale: int) -> int:
    """ceil(quantity * scale); scale is 1 (Value) or 1000 (MilliValue). The forms that come
    up most (plain digits, one suffix: "3250m", "12Gi", "123456789") are converted with integer
    arithmetic, the rest by the exact parser."""
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


def milli_value(quantity: object) -> int:
    """The quantity in thousandths, rounded up (Kubernetes ``Quantity.MilliValue``): text, a
    JSON number or a Decimal; raises QuantityError for anything else or malformed text."""
    # the two forms CPU comes in most, checked before any other work
    if type(quantity) is str and quantity.isascii():
        if quantity.isdigit():
            return int(quantity) * 1000
        if quantity[-1:] == "m" and quantity[:-1].isdigit():
            return int(quantity[:-1])
    return _scaled(quantity, 1000)


def value(quantity: object) -> int:
    """The quantity rounded up to a whole number (Kubernetes ``Quantity.Value``); raises
    QuantityError like ``milli_value``."""
    if type(quantity) is str and quantity.isascii() and quantity.isdigit():
        return int(quantity)  # the form memory is reported in
    return _scaled(quantity, 1)


def resource_value(name: str, quantity: object) -> int:
    """A resource amount as the scheduler counts it: ``cpu`` in milli-cores (MilliValue),
    every other resource in whole units (Value; batch-cpu and mid-cpu already count
    milli-cores, memory counts bytes)."""
    return milli_value(quantity) if name == "cpu" else value(quantity)


# -- formatting ------------------------------------------------------------------------------

_BINARY_SUFFIXES = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_DECIMAL_FRACTIONS = (("m", 3), ("u", 6), ("n", 9))


def format_quantity(amount: int | Decimal) -> str:
    """A decimal quantity as Kubernetes accepts it: integers as plain digits ("37000", never
    "37k", so a milli-core count reads as one), fractions with the coarsest exact suffix
    ("1500m"). Raises QuantityError for amounts finer than a nano-unit."""
    if isinstance(amount, int):
        return str(amount)
    if not amount.is_finite():
        raise QuantityError(f"not a quantity: {amount!r}")
    if amount == amount.to_integral_value():
        return str(int(amount))
    for suffix, digits in _DECIMAL_FRACTIONS:
        scaled = amount.scaleb(digits)
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    raise QuantityError(f"{amount} is finer than a nano-unit")


def format_binary(amount: int) -> str:
    """Whole bytes in Kubernetes' canonical binary form: the largest power-of-1024 suffix that
    keeps the number whole ("98Gi", "1536Mi"), else plain bytes ("1500000")."""
    if amount == 0:
        return "0"
    for suffix, shift in _BINARY_SUFFIXES:
        if amount % (1 << shift) == 0:
            return f"{amount >> shift}{suffix}"  # exact, so the shift is a division
    return str(amount)
