"""Smoothing of published batch resources (batchResourceSmoothingWindowSeconds, ours)."""

from __future__ import annotations

import json

import pytest

from koordapi import keys
from manager.colocation import parse_colocation_config
from manager.errors import ConfigError
from manager.noderesource.calculator import NodeResourceResult, ResourceOutcome
from manager.noderesource.smoothing import BatchSmoother

GiB = 1 << 30


def result(cpu: int | None, memory: int | None = 8 * GiB) -> NodeResourceResult:
    def outcome(name: str, value: int | None) -> ResourceOutcome:
        text = f"{name} {value} = computed" if value is not None else f"{name} removed: degraded"
        return ResourceOutcome(name, value, text)

    return NodeResourceResult(
        {
            keys.BATCH_CPU: outcome(keys.BATCH_CPU, cpu),
            keys.BATCH_MEMORY: outcome(keys.BATCH_MEMORY, memory),
            keys.MID_CPU: outcome(keys.MID_CPU, 1700),
            keys.MID_MEMORY: outcome(keys.MID_MEMORY, GiB),
        }
    )


def published(
    smoother: BatchSmoother, cpu: int | None, now: float, window: float = 300
) -> int | None:
    return smoother.smooth("n1", result(cpu), window, now).resources[keys.BATCH_CPU].value


def test_a_fall_is_published_at_once_and_a_rise_only_after_holding_for_the_window() -> None:
    s = BatchSmoother()
    assert published(s, 37000, now=1000) == 37000
    assert published(s, 21500, now=1060) == 21500  # fall: at once
    assert published(s, 40000, now=1120) == 21500  # rise: held back
    assert published(s, 40000, now=1360) == 21500  # 21500 (t=1060) is still in the window
    assert published(s, 40000, now=1361) == 40000  # it left the window


def test_the_explanation_says_what_was_smoothed() -> None:
    s = BatchSmoother()
    s.smooth("n1", result(21500), 300, 1000)
    smoothed = s.smooth("n1", result(37000), 300, 1060)
    cpu = smoothed.resources[keys.BATCH_CPU]
    assert cpu.quantity == "21500"
    assert cpu.explanation == (
        "kubernetes.io/batch-cpu 21500 = smoothed: the lowest of 2 values computed in the last"
        " 300s (batchResourceSmoothingWindowSeconds); now 37000 = computed"
    )
    assert smoothed.resources[keys.MID_CPU].value == 1700  # mid is not smoothed
    assert list(smoothed.resources) == list(result(0).resources)  # order kept


def test_a_removed_key_is_not_smoothed_and_starts_afresh() -> None:
    s = BatchSmoother()
    published(s, 10000, now=1000)
    assert published(s, None, now=1010) is None
    assert published(s, 37000, now=1020) == 37000  # the 10000 before the removal is gone


def test_window_zero_is_off_and_forgets() -> None:
    s = BatchSmoother()
    published(s, 10000, now=1000)
    assert published(s, 37000, now=1001, window=0) == 37000
    assert published(s, 38000, now=1002) == 38000  # nothing kept from before


def test_the_window_is_a_colocation_config_field() -> None:
    config = parse_colocation_config(json.dumps({"batchResourceSmoothingWindowSeconds": 600}))
    assert config.strategy.batch_smoothing_window_seconds == 600
    assert parse_colocation_config("{}").strategy.batch_smoothing_window_seconds == 0
    with pytest.raises(ConfigError, match="batchResourceSmoothingWindowSeconds"):
        parse_colocation_config(json.dumps({"batchResourceSmoothingWindowSeconds": -1}))
