"""The anomaly detector: consecutive reports, resets, timeouts and its cache.

Most cases re-express Koordinator v1.8.0's own tests with their numbers:
pkg/descheduler/utils/anomaly/basic_detector_test.go and
pkg/descheduler/framework/plugins/loadaware/low_node_load_test.go. Cases marked "own"
add numbers and corners of our own.
"""

from __future__ import annotations

import pytest

from descheduler.anomaly import AnomalyDetector
from descheduler.args import AnomalyCondition

# -- the anomaly detector (basic_detector_test.go, low_node_load_test.go) -------------------


def test_basic_detector() -> None:
    # upstream's conditions ">= 2 abnormal" and ">= 1 normal" are "> 1" and "> 0" here
    detector = AnomalyDetector(AnomalyCondition(1, 0, timeout=3))
    assert detector.observe("test", False, now=0) is False
    assert detector.observe("test", True, now=0) is False
    assert detector.counts("test") == (1, 0)
    assert detector.observe("test", True, now=0) is True
    assert detector.observe("test", False, now=0) is False
    detector.observe("test", True, now=1)
    assert detector.observe("test", True, now=1) is True
    assert detector.is_anomalous("test", now=4) is True  # entered at 1, lapses after 4
    assert detector.is_anomalous("test", now=4.001) is False  # upstream sleeps the timeout
    assert detector.observe("test", True, now=5) is False
    assert detector.observe("test", True, now=5) is True
    assert detector.counts("test") == (0, 0)  # a state change clears the counters


def test_basic_detector_with_custom_normal_condition() -> None:
    detector = AnomalyDetector(AnomalyCondition(1, 2, timeout=3))
    marks = [
        (True, False),
        (True, True),
        (False, True),
        (False, True),
        (False, False),
        (True, False),
        (True, True),
        (False, True),
        (True, True),
        (False, True),
        (False, True),
        (False, False),
    ]
    for abnormal, anomalous in marks:
        assert detector.observe("test", abnormal) is anomalous


@pytest.mark.parametrize(
    ("before", "want"),
    [
        (0, False),  # ConsecutiveAbnormalities 2 and did not detect abnormality
        (2, True),  # detected 2 times before: the third report makes it anomalous
    ],
)
def test_filter_real_abnormal_nodes(before: int, want: bool) -> None:
    detector = AnomalyDetector(AnomalyCondition(2, 1))
    for _ in range(before):
        for node in ("test-node-1", "test-node-2"):
            detector.observe(node, True)
    assert [detector.observe(n, True) for n in ("test-node-1", "test-node-2")] == [want, want]


def test_filter_real_abnormal_mixed_nodes() -> None:
    detector = AnomalyDetector(AnomalyCondition(2, 1))
    for _ in range(2):
        detector.observe("test-node-2", True)
    assert detector.observe("test-node-1", True) is False
    assert detector.observe("test-node-2", True) is True


def test_reset_nodes_as_normal() -> None:
    detector = AnomalyDetector(AnomalyCondition(2, 3))
    for _ in range(2):
        detector.observe("test-node-", True)
    assert detector.observe("test-node-", True) is True
    detector.reset("test-node-")
    assert detector.observe("test-node-", True) is False


def test_try_mark_nodes_as_normal() -> None:
    detector = AnomalyDetector(AnomalyCondition(2, 2))
    for _ in range(3):
        detector.observe("test-node-", True)
    assert detector.is_anomalous("test-node-")
    detector.observe("test-node-", False)
    detector.observe("test-node-", False)
    assert detector.is_anomalous("test-node-")
    detector.observe("test-node-", False)
    assert not detector.is_anomalous("test-node-")


def test_reset_leaves_a_normal_node_counting() -> None:
    # own: BasicDetector.Reset is a no-op in the OK state, so a streak survives it
    detector = AnomalyDetector(AnomalyCondition(3, 1))
    detector.observe("n", True)
    detector.observe("n", True)
    detector.reset("n")
    assert detector.counts("n") == (2, 0)
    detector.observe("n", True)
    assert detector.observe("n", True) is True  # the fourth report, across the reset


def test_a_normal_observation_breaks_the_streak() -> None:
    detector = AnomalyDetector(AnomalyCondition(2, 1))
    detector.observe("n", True)
    detector.observe("n", True)
    detector.observe("n", False)
    assert detector.counts("n") == (0, 1)
    assert detector.observe("n", True) is False


def test_detector_cache_forgets_quiet_nodes() -> None:
    # own: not observed abnormal for longer than the cache timeout: a fresh detector
    detector = AnomalyDetector(AnomalyCondition(2, 1), cache_timeout=300)
    detector.observe("n", True, now=0)
    detector.observe("n", True, now=300)  # exactly at the timeout: still kept
    assert detector.counts("n") == (2, 0)
    assert detector.observe("n", True, now=600.5) is False
    assert detector.counts("n") == (1, 0)


def test_a_node_keeps_the_condition_it_started_with() -> None:
    detector = AnomalyDetector(AnomalyCondition(5, 3))
    detector.observe("n", True, condition=AnomalyCondition(1, 1))
    assert detector.observe("n", True, condition=AnomalyCondition(5, 3)) is True
