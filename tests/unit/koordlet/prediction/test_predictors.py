"""Koordinator's prod reclaimable formulas (pkg/koordlet/prediction/peak_predictor_test.go's
TestProdReclaimablePredictor_AddPod, with other numbers and a 25 % margin, exact in binary).

Models (p95 cpu, p98 memory): pod warm 610m / 1,100,000,000; pod over 480m / 300 MiB; the
system 270m / 333 MiB; the prod class 2100m / 2.5 GiB; the no-class 450m / 300 MiB.
"""

from __future__ import annotations

import pytest

from koordapi import keys
from koordlet.prediction.pods import PodFacts
from koordlet.prediction.predictors import (
    MinPredictor,
    Pair,
    PodReclaimable,
    PredictionError,
    PriorityReclaimable,
    node_allocatable,
    prod_reclaimable,
)
from koordlet.prediction.server import Peak, node_item_uid

GI, MI = 1 << 30, 1 << 20
NOW = 50_000.0
COLD_START = 1800.0
MARGIN = 25


class Models:
    def __init__(self, peaks: dict[str, Peak], first_seen: dict[str, float] | None = None):
        self.peaks = peaks
        self.seen = first_seen or {}
        self.asked: list[tuple[str, float, float]] = []

    def peak(self, uid: str, cpu_percentile: float, memory_percentile: float) -> Peak | None:
        self.asked.append((uid, cpu_percentile, memory_percentile))
        return self.peaks.get(uid)

    def first_seen(self, uid: str) -> float | None:
        return self.seen.get(uid)


def pod(
    uid: str,
    cpu: int,
    memory: int,
    *,
    created: float | None = NOW - 7200,
    priority: str = "koord-prod",
    terminating: bool = False,
) -> PodFacts:
    return PodFacts(uid, f"ns/{uid}", priority, cpu, memory, created, terminating)


WARM = pod("warm", 2400, 3 * GI)
COLD = pod("cold", 1300, 2 * GI, created=NOW - 600)  # 10 minutes old, cold start 30
LEAVING = pod("leaving", 1000, GI, terminating=True)
BATCH = pod("batch", 4000, 4 * GI, priority="koord-batch")
OVER = pod("over", 200, 256 * MI, priority="")  # no class: counts as prod; peaks above request
PODS = [WARM, COLD, LEAVING, BATCH, OVER]

PEAKS = {
    "warm": Peak(610, 1_100_000_000),
    "cold": Peak(900, GI),
    "leaving": Peak(0, 0),
    "batch": Peak(3000, 3 * GI),
    "over": Peak(480, 300 * MI),
    node_item_uid("sys"): Peak(270, 333 * MI),
    node_item_uid("koord-prod"): Peak(2100, 5 * GI // 2),
    node_item_uid(""): Peak(450, 300 * MI),
}

# per pod: peaks warm 762m (610 * 1.25 = 762.5, truncated) / 1,375,000,000 and over 600m /
# 393,216,000; reclaimable warm 2400 - 762 = 1638m / 3 GiB - 1,375,000,000 = 1,846,225,472,
# over none (its peaks exceed its request); cold, leaving and batch add nothing
POD_PEAK = (762 + 600, 1_375_000_000 + 393_216_000)
POD_RECLAIMABLE = (1638, 1_846_225_472)
# per class: requests warm + cold + over = 3900m / 5,637,144,576; peak (270 + 2100 + 450) *
# 1.25 = 3525m and (333 MiB + 2.5 GiB + 300 MiB) * 1.25 = 4,185,128,960
CLASS_RECLAIMABLE = (3900 - 3525, 5_637_144_576 - 4_185_128_960)


def predictors(
    models: Models, allocatable: Pair | None
) -> tuple[PodReclaimable, PriorityReclaimable]:
    return (
        PodReclaimable(
            models, allocatable, now=NOW, cold_start=COLD_START, safety_margin_percent=MARGIN
        ),
        PriorityReclaimable(models, allocatable, safety_margin_percent=MARGIN),
    )


@pytest.mark.parametrize(
    ("allocatable", "by_pod", "by_class"),
    [
        # 5.3 cores, 7 GiB: allocatable - peak is larger than what the requests leave
        ((5300, 7 * GI), POD_RECLAIMABLE, CLASS_RECLAIMABLE),
        # 1.2 cores, 1.5 GiB: less than the peaks, nothing is reclaimable
        ((1200, 3 * GI // 2), (0, 0), (0, 0)),
        # 5 cores, 2 GiB: cpu as above; memory capped by allocatable - peak (per pod:
        # 2 GiB - 1,768,216,000 = 379,267,648; per class: below 0, so 0)
        ((5000, 2 * GI), (1638, 2 * GI - POD_PEAK[1]), (375, 0)),
    ],
)
def test_each_estimate_and_the_smaller_of_both(
    allocatable: Pair, by_pod: Pair, by_class: Pair
) -> None:
    models = Models(PEAKS)
    per_pod, per_class = predictors(models, allocatable)
    recorded: dict[str, Pair] = {}
    both = MinPredictor([per_pod, per_class], recorded.__setitem__)
    for p in PODS:
        both.add_pod(p)
    result = both.result()
    assert recorded["podReclaimablePredictor"] == by_pod
    assert recorded["priorityReclaimablePredictor"] == by_class
    assert result == (min(by_pod[0], by_class[0]), min(by_pod[1], by_class[1]))
    assert recorded["minPredictor"] == result
    # p95 for cpu, p98 for memory, of the pods past their cold start only
    asked_pods = [uid for uid, *_ in models.asked if not uid.startswith("__")]
    assert asked_pods == ["warm", "over"]
    assert {(c, m) for _, c, m in models.asked} == {(0.95, 0.98)}


def test_the_cold_start_ends_after_its_duration() -> None:
    young = pod("young", 1000, GI, created=NOW - COLD_START)  # exactly the duration: still cold
    older = pod("older", 1000, GI, created=NOW - COLD_START - 1)
    models = Models({"young": Peak(100, MI), "older": Peak(100, MI)})
    per_pod, _ = predictors(models, (8000, 8 * GI))
    per_pod.add_pod(young)
    assert per_pod.result() == (0, 0)
    per_pod.add_pod(older)
    assert per_pod.result() == (1000 - 125, GI - int(MI * 1.25))


def test_without_a_creation_time_the_models_first_sample_starts_the_cold_start() -> None:
    standalone = pod("nri-only", 1500, 0, created=None)  # no spec: memory request unknown
    per_pod, _ = predictors(Models({"nri-only": Peak(400, MI)}, {"nri-only": NOW - 60}), (8000, GI))
    per_pod.add_pod(standalone)
    assert per_pod.result() == (0, 0)  # seen a minute ago: cold
    per_pod, _ = predictors(
        Models({"nri-only": Peak(400, MI)}, {"nri-only": NOW - 3600}), (8000, GI)
    )
    per_pod.add_pod(standalone)
    assert per_pod.result() == (1000, 0)  # 1500 - 400 * 1.25; memory: no request, none left


def test_terminating_pods_add_neither_request_nor_peak() -> None:
    models = Models(PEAKS)
    per_pod, per_class = predictors(models, (5300, 7 * GI))
    for p in (WARM, LEAVING):
        per_pod.add_pod(p)
        per_class.add_pod(p)
    assert per_pod.peak == [762, 1_375_000_000]
    assert per_class.request == [2400, 3 * GI]


def test_a_pod_without_a_model_is_left_out_of_both_estimates() -> None:
    # Koordinator's minPredictor stops at the first failing part: the class estimate does not
    # see the pod's request either
    stranger = pod("stranger", 3000, 3 * GI)
    with_stranger = prod_reclaimable(
        Models(PEAKS), [*PODS, stranger], (5300, 7 * GI),
        now=NOW, cold_start=COLD_START, safety_margin_percent=MARGIN,
    )  # fmt: skip
    without = prod_reclaimable(
        Models(PEAKS), PODS, (5300, 7 * GI),
        now=NOW, cold_start=COLD_START, safety_margin_percent=MARGIN,
    )  # fmt: skip
    assert with_stranger == without == CLASS_RECLAIMABLE


def test_a_pod_added_twice_is_refused() -> None:
    per_pod, _ = predictors(Models(PEAKS), (5300, 7 * GI))
    per_pod.add_pod(WARM)
    with pytest.raises(PredictionError, match="twice"):
        per_pod.add_pod(WARM)


@pytest.mark.parametrize(
    "missing", [node_item_uid("sys"), node_item_uid("koord-prod"), node_item_uid("")]
)
def test_without_the_system_or_a_prod_class_model_there_is_no_prediction(missing: str) -> None:
    peaks = {uid: peak for uid, peak in PEAKS.items() if uid != missing}
    with pytest.raises(PredictionError, match="no model"):
        prod_reclaimable(
            Models(peaks), PODS, (5300, 7 * GI),
            now=NOW, cold_start=COLD_START, safety_margin_percent=MARGIN,
        )  # fmt: skip


def test_without_the_nodes_allocatable_there_is_no_prediction() -> None:
    with pytest.raises(PredictionError, match="allocatable"):
        prod_reclaimable(
            Models(PEAKS), PODS, None, now=NOW, cold_start=COLD_START, safety_margin_percent=MARGIN
        )


def test_allocatable_is_the_raw_annotation_when_it_parses_else_the_status() -> None:
    status = {"cpu": 31_500, "memory": 61 * GI}
    raw = {keys.ANNOTATION_NODE_RAW_ALLOCATABLE: '{"cpu":"6500m","memory":"9Gi"}'}
    assert node_allocatable(raw, status) == (6500, 9 * GI)
    broken = {keys.ANNOTATION_NODE_RAW_ALLOCATABLE: '{"cpu":"lots"}'}
    assert node_allocatable(broken, status) == (31_500, 61 * GI)
    assert node_allocatable({}, status) == (31_500, 61 * GI)
    assert node_allocatable({}, {}) is None
