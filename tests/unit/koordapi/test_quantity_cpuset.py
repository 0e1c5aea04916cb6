"""Kubernetes quantities and kernel CPU lists."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from koordapi.cpuset import MAX_CPU_ID, format_cpuset, parse_cpuset
from koordapi.errors import ModelError, QuantityError
from koordapi.quantity import milli_value, parse_quantity, resource_value, value

# -- quantities ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param("500", Decimal(500), id="plain"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("1.5", Decimal("1.5"), id="decimal"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("2Gi", Decimal(2 << 30), id="gibi"),
        pytest.param("512Mi", Decimal(512 << 20), id="mebi"),
        pytest.param("4Ki", Decimal(4096), id="kibi"),
        pytest.param("1Ei", Decimal(1 << 60), id="exbi"),
        pytest.param("100M", Decimal(100_000_000), id="mega"),
        pytest.param("2k", Decimal(2000), id="kilo"),
        pytest.param("3G", Decimal(3 * 10**9), id="giga"),
        pytest.param("7n", Decimal("7e-9"), id="nano"),
        pytest.param("5u", Decimal("5e-6"), id="micro"),
        pytest.param(" 10 ", Decimal(10), id="surrounding-space"),
        pytest.param("+1", Decimal(1), id="plus-sign"),
        pytest.param("-1", Decimal(-1), id="negative"),
        pytest.param(1000, Decimal(1000), id="int"),
        pytest.param(0.25, Decimal("0.25"), id="float"),
    ],
)
def test_quantities_parse_to_exact_decimals(given: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(given) == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param("", "malformed quantity ''", id="empty"),
        pytest.param("lots", "malformed quantity 'lots'", id="word"),
        pytest.param("2GB", "malformed quantity '2GB'", id="unknown-suffix"),
        pytest.param("1.2.3", "malformed quantity '1.2.3'", id="two-points"),
        pytest.param(".", "malformed quantity '.'", id="lone-point"),
        pytest.param("1 Gi", "malformed quantity", id="inner-space"),
        pytest.param("1e1234", "malformed quantity", id="four-digit-exponent"),
        pytest.param("1" * 65, "quantity of 65 characters is too long", id="too-long"),
        pytest.param(True, "not a quantity: True", id="bool"),
        pytest.param(float("inf"), "not a quantity: inf", id="infinity"),
        pytest.param(float("nan"), "not a quantity: nan", id="nan"),
    ],
)
def test_malformed_quantities_raise_quantity_error(given: str | float, message: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(message)):
        parse_quantity(given)


@pytest.mark.parametrize(
    ("given", "whole", "milli"),
    [
        pytest.param("500m", 1, 500, id="half-core"),
        pytest.param("1.2", 2, 1200, id="rounds-up"),
        pytest.param("2Gi", 2 << 30, (2 << 30) * 1000, id="memory"),
        pytest.param("0.1m", 1, 1, id="sub-milli-rounds-up"),
        pytest.param("-1.5", -1, -1500, id="negative-ceil"),
    ],
)
def test_value_and_milli_value_round_up_like_kubernetes(given: str, whole: int, milli: int) -> None:
    assert value(given) == whole
    assert milli_value(given) == milli


@hypothesis.given(
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u"]),
)
def test_fast_integer_paths_agree_with_the_exact_parser(number: int, suffix: str) -> None:
    text = f"{number}{suffix}"
    exact = parse_quantity(text)
    assert milli_value(text) == math.ceil(exact * 1000)
    assert value(text) == math.ceil(exact)


@pytest.mark.parametrize("bad", ["", "1.2.3", "12Q", "m", "Gi", True, None, [1], Decimal("NaN")])
def test_integer_values_refuse_malformed_quantities(bad: Any) -> None:
    with pytest.raises(QuantityError):
        milli_value(bad)
    with pytest.raises(QuantityError):
        value(bad)


def test_integer_values_accept_json_numbers_fractions_and_decimals() -> None:
    assert milli_value(2) == 2000
    assert milli_value(0.25) == 250
    assert value("1.5") == 2  # rounded up, as Quantity.Value
    assert milli_value("0.0001") == 1
    assert milli_value("-3") == -3000  # callers decide what a negative means
    assert milli_value(Decimal("2.5")) == 2500
    assert value(Decimal("0.1")) == 1


@pytest.mark.parametrize(
    ("name", "given", "expected"),
    [
        pytest.param("cpu", "1500m", 1500, id="cpu-milli"),
        pytest.param("cpu", "2", 2000, id="cpu-cores"),
        pytest.param("memory", "1Ki", 1024, id="memory-bytes"),
        pytest.param("kubernetes.io/batch-cpu", "2000", 2000, id="batch-cpu-already-milli"),
        pytest.param("kubernetes.io/batch-memory", "0.5Ki", 512, id="batch-memory"),
    ],
)
def test_resource_value_counts_cpu_in_milli_and_the_rest_whole(
    name: str, given: str, expected: int
) -> None:
    assert resource_value(name, given) == expected


def test_quantity_error_is_a_model_error() -> None:
    assert issubclass(QuantityError, ModelError)


# -- cpusets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        pytest.param("", frozenset(), id="empty"),
        pytest.param("  ", frozenset(), id="blank"),
        pytest.param("3", frozenset({3}), id="single"),
        pytest.param("0-3", frozenset({0, 1, 2, 3}), id="range"),
        pytest.param("0-3,8,10-11", frozenset({0, 1, 2, 3, 8, 10, 11}), id="mixed"),
        pytest.param(" 1 , 2-3 ", frozenset({1, 2, 3}), id="spaces"),
        pytest.param("5-5", frozenset({5}), id="one-cpu-range"),
        pytest.param("2,1,2", frozenset({1, 2}), id="unsorted-duplicates"),
        pytest.param(f"{MAX_CPU_ID}", frozenset({MAX_CPU_ID}), id="highest-id"),
        pytest.param("0-16383", frozenset(range(16384)), id="widest-range"),
    ],
)
def test_cpu_lists_parse_to_sets(text: str, cpus: frozenset[int]) -> None:
    assert parse_cpuset(text) == cpus


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("a", "malformed cpu list 'a'", id="word"),
        pytest.param("1-a", "malformed cpu list", id="bad-end"),
        pytest.param("-1", "malformed cpu list", id="negative"),
        pytest.param("1,,2", "malformed cpu list", id="empty-item"),
        pytest.param("0-3-5", "malformed cpu list", id="double-dash"),
        pytest.param("4-2", "cpu range '4-2' in '4-2' is out of range 0..16383", id="reversed"),
        pytest.param("16384", "out of range 0..16383", id="id-too-high"),
        pytest.param("0-999999999", "out of range 0..16383", id="hostile-range"),
    ],
)
def test_malformed_or_out_of_range_cpu_lists_raise(text: str, message: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(message)):
        parse_cpuset(text)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        pytest.param([], "", id="empty"),
        pytest.param([3], "3", id="single"),
        pytest.param([0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11", id="mixed"),
        pytest.param([11, 10, 3, 3, 0, 1, 2], "0-3,10-11", id="unsorted-duplicates"),
        pytest.param(range(8, 16), "8-15", id="range-object"),
    ],
)
def test_cpu_sets_format_sorted_with_ranges_collapsed(cpus: list[int], text: str) -> None:
    assert format_cpuset(cpus) == text


@pytest.mark.parametrize("text", ["0-3,8,10-11", "1", "0,2,4,6", "0-127"])
def test_format_of_parse_is_canonical(text: str) -> None:
    assert format_cpuset(parse_cpuset(text)) == text
