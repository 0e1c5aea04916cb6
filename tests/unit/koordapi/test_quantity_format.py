"""Writing quantities: plain integers for decimal amounts, canonical binary suffixes for bytes."""

from __future__ import annotations

from decimal import Decimal

import pytest

from koordapi.errors import QuantityError
from koordapi.quantity import format_binary, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        pytest.param(37000, "37000", id="milli-cores-never-37k"),
        pytest.param(0, "0", id="zero"),
        pytest.param(-5, "-5", id="negative"),
        pytest.param(Decimal(12), "12", id="integral-decimal"),
        pytest.param(Decimal("1.5"), "1500m", id="milli"),
        pytest.param(Decimal("0.000002"), "2u", id="micro"),
        pytest.param(Decimal("3e-9"), "3n", id="nano"),
        pytest.param(Decimal("1.0"), "1", id="trailing-zero"),
    ],
)
def test_format_quantity(amount: int | Decimal, text: str) -> None:
    assert format_quantity(amount) == text
    assert parse_quantity(text) == amount


@pytest.mark.parametrize("amount", [Decimal("1e-10"), Decimal("NaN"), Decimal("Infinity")])
def test_format_quantity_refuses_what_it_cannot_write(amount: Decimal) -> None:
    with pytest.raises(QuantityError):
        format_quantity(amount)


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        pytest.param(98 << 30, "98Gi", id="gibi"),
        pytest.param(1536 << 20, "1536Mi", id="not-whole-gibi"),
        pytest.param(3 << 10, "3Ki", id="kibi"),
        pytest.param(1 << 60, "1Ei", id="exbi"),
        pytest.param(5 << 40, "5Ti", id="tebi"),
        pytest.param(1_500_000, "1500000", id="plain-bytes"),
        pytest.param(1000, "1000", id="below-kibi"),
        pytest.param(0, "0", id="zero"),
        pytest.param(-(2 << 30), "-2Gi", id="negative"),
    ],
)
def test_format_binary(amount: int, text: str) -> None:
    assert format_binary(amount) == text
    assert parse_quantity(text) == amount
