"""Int-or-percent limits: Kubernetes' GetScaledValueFromIntOrPercent and Koordinator's
GetMaxUnavailable / GetMaxMigrating.

Cases marked with an upstream test come from Koordinator v1.8.0's
pkg/descheduler/controllers/migration/util/util_test.go; "own" cases add corners.
"""

from __future__ import annotations

import pytest

from descheduler.migration.int_or_percent import (
    max_migrating,
    max_unavailable,
    percent_value,
    scaled_value,
)


@pytest.mark.parametrize(
    ("replicas", "value", "want"),
    [
        (6, "80%", 4),  # TestGetMaxUnavailable case1: 4.8 rounds down
        (6, "150%", 6),  # case2: never more than the replicas
        (6, 5, 5),  # case3
        (6, 7, 6),  # case4
        (6, None, 2),  # case5: no value, 4..10 replicas → 2
        (50, "0%", 1),  # case6: a given value of 0 allows one
        (6, 0, 1),  # case7: an empty IntOrString is the int 0
    ],
)
def test_max_unavailable_upstream_cases(replicas: int, value: int | str | None, want: int) -> None:
    assert max_unavailable(replicas, value) == want


@pytest.mark.parametrize(
    ("replicas", "want"),
    [(0, 0), (1, 1), (3, 1), (4, 2), (10, 2), (11, 1), (25, 2), (199, 19)],
)
def test_max_unavailable_without_a_value(replicas: int, want: int) -> None:
    # own: 1 below 4 replicas (capped to the replicas), 2 up to 10, then 10% rounded down
    assert max_unavailable(replicas, None) == want


@pytest.mark.parametrize("value", ["50%", "100%", 3, 0, None])
def test_a_workload_of_zero_replicas_allows_none(value: int | str | None) -> None:
    # own: percent of 0 replicas is 0, bumped to 1, then capped to the 0 replicas
    assert max_unavailable(0, value) == 0
    assert max_migrating(0, value) == 0


def test_a_negative_value_is_kept() -> None:
    # own: upstream validation accepts -1 (validation_pluginargs_test.go), and the limit stays
    # negative, so every "count >= limit" check holds the pod back
    assert max_unavailable(6, -1) == -1
    assert max_unavailable(6, "-50%") == -3


def test_max_migrating_follows_max_unavailable() -> None:
    assert max_migrating(6, "80%") == 4
    assert max_migrating(100, 99) == 99
    assert max_migrating(1, 0) == 1


@pytest.mark.parametrize(
    ("value", "total", "round_up", "want"),
    [
        ("33%", 10, False, 3),
        ("33%", 10, True, 4),
        ("+5%", 100, False, 5),  # Go's Atoi takes a sign
        ("-33%", 10, False, -4),  # math.Floor of -3.3
        (7, 1000, True, 7),
        ("0%", 0, True, 0),
    ],
)
def test_scaled_value(value: int | str, total: int, round_up: bool, want: int) -> None:
    assert scaled_value(value, total, round_up=round_up) == want


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "not a percentage"),
        ("abc", "not a percentage"),
        ("1.5%", "not an integer percentage"),
        (" 5%", "not an integer percentage"),
        ("5 %", "not an integer percentage"),
        ("%", "not an integer percentage"),
        ("99999999999999999999%", "not an integer percentage"),
        (True, "neither int nor percentage"),
        (1.5, "neither int nor percentage"),
    ],
)
def test_unparseable_int_or_string(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        percent_value(value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        max_unavailable(10, value)  # type: ignore[arg-type]


def test_percent_value_reports_the_kind() -> None:
    assert percent_value(12) == (12, False)
    assert percent_value("12%") == (12, True)
