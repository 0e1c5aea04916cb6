"""Koordinator's ProdReclaimablePredictor: how much of the prod pods' requests their peaks leave.

Two estimates, and the report takes the smaller of each resource (``MinPredictor``):

- per pod (``PodReclaimable``): for each prod (or no-class) pod with a model, peak = p95 cpu
  and p98 memory of its model times (100 + --prediction-safety-margin-percent) / 100;
  reclaimable = Σ max(request - peak, 0), capped by allocatable - Σ peak (at least 0). A pod
  younger than --prediction-cold-start-duration, or deleted or finished, adds nothing (neither
  its request nor its peak).
- per priority class (``PriorityReclaimable``): peak = (p95/p98 of the system's model + of the
  prod class' and the no-class' sums) times the same margin; reclaimable =
  max(Σ requests of those pods - peak, 0), capped by allocatable - peak (at least 0).

Allocatable is the node's raw-allocatable annotation (before amplification) when it parses,
else its status.allocatable. A pod without a model is skipped (Koordinator logs it), and as
in Koordinator a pod the per-pod estimate fails on is not added to the per-class one either;
without the node's allocatable or a model of the system or of a prod class there is no
prediction, and the NodeMetric carries no prodReclaimableMetric.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from koordapi import keys
from koordapi.qos import NONE_PRIORITY, PROD
from koordapi.quantity import milli_value, value
from koordlet.prediction.pods import PodFacts
from koordlet.prediction.server import SYSTEM_ITEM, Peak, node_item_uid

Pair = tuple[int, int]  # (cpu milli-cores, memory bytes)
Record = Callable[[str, Pair], None]  # (predictor's name, its result)

PROD_RECLAIMABLE_CLASSES = (PROD.name, NONE_PRIORITY.name)
CPU_PERCENTILE = 0.95
MEMORY_PERCENTILE = 0.98


class Models(Protocol):
    """What the predictors read of the models (PredictServer)."""

    def peak(self, uid: str, cpu_percentile: float, memory_percentile: float) -> Peak | None: ...

    def first_seen(self, uid: str) -> float | None: ...


class PredictionError(Exception):
    """An input the prediction needs is missing."""


def node_allocatable(annotations: Mapping[str, str], allocatable: Mapping[str, int]) -> Pair | None:
    """cpu and memory allocatable: the raw-allocatable annotation's when it parses, else
    status.allocatable's (``allocatable`` is in milli-cores and bytes); None without either."""
    raw = annotations.get(keys.ANNOTATION_NODE_RAW_ALLOCATABLE)
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                return milli_value(parsed.get("cpu", 0)), value(parsed.get("memory", 0))
        except (ValueError, TypeError):  # QuantityError is a ValueError
            pass  # Koordinator falls back to status.allocatable too
    if not allocatable:
        return None
    return allocatable.get("cpu", 0), allocatable.get("memory", 0)


def _with_margin(pair: Pair, margin_percent: int) -> Pair:
    ratio = (100 + margin_percent) / 100
    return int(pair[0] * ratio), int(pair[1] * ratio)


def _capped(allocatable: Pair, peak: Pair, reclaimable: Pair) -> Pair:
    cpu = min(max(allocatable[0] - peak[0], 0), reclaimable[0])
    memory = min(max(allocatable[1] - peak[1], 0), reclaimable[1])
    return cpu, memory


class PodReclaimable:
    name = "podReclaimablePredictor"

    def __init__(
        self,
        server: Models,
        allocatable: Pair | None,
        *,
        now: float,
        cold_start: float,
        safety_margin_percent: int,
    ) -> None:
        self.server = server
        self.allocatable = allocatable
        self.now = now
        self.cold_start = cold_start
        self.margin = safety_margin_percent
        self.seen: set[str] = set()
        self.reclaimable = [0, 0]
        self.peak = [0, 0]

    def add_pod(self, pod: PodFacts) -> None:
        if pod.priority_class not in PROD_RECLAIMABLE_CLASSES:
            return
        if pod.uid in self.seen:
            raise PredictionError(f"pod {pod.key} added twice")
        self.seen.add(pod.uid)
        started = pod.created if pod.created is not None else self.server.first_seen(pod.uid)
        if started is None or self.now - started <= self.cold_start:
            return  # cold start: its usage is not yet what it will be
        if pod.terminating:
            return
        peak = self.server.peak(pod.uid, CPU_PERCENTILE, MEMORY_PERCENTILE)
        if peak is None:
            raise PredictionError(f"no model for pod {pod.key}")
        cpu, memory = _with_margin((peak.cpu_milli, peak.memory), self.margin)
        self.peak[0] += cpu
        self.peak[1] += memory
        self.reclaimable[0] += max(pod.cpu_request - cpu, 0)
        self.reclaimable[1] += max(pod.memory_request - memory, 0)

    def result(self) -> Pair:
        if self.allocatable is None:
            raise PredictionError("the node's allocatable is not known")
        peak = (self.peak[0], self.peak[1])
        return _capped(self.allocatable, peak, (self.reclaimable[0], self.reclaimable[1]))


class PriorityReclaimable:
    name = "priorityReclaimablePredictor"

    def __init__(
        self, server: Models, allocatable: Pair | None, *, safety_margin_percent: int
    ) -> None:
        self.server = server
        self.allocatable = allocatable
        self.margin = safety_margin_percent
        self.request = [0, 0]

    def add_pod(self, pod: PodFacts) -> None:
        # no cold start here (Koordinator's "TBD"): the class' model already has its usage
        if pod.priority_class not in PROD_RECLAIMABLE_CLASSES or pod.terminating:
            return
        self.request[0] += pod.cpu_request
        self.request[1] += pod.memory_request

    def result(self) -> Pair:
        if self.allocatable is None:
            raise PredictionError("the node's allocatable is not known")
        cpu = memory = 0
        for item in (SYSTEM_ITEM, *PROD_RECLAIMABLE_CLASSES):
            peak = self.server.peak(node_item_uid(item), CPU_PERCENTILE, MEMORY_PERCENTILE)
            if peak is None:
                raise PredictionError(f"no model for {item or 'no priority class'}")
            cpu += peak.cpu_milli
            memory += peak.memory
        peak_pair = _with_margin((cpu, memory), self.margin)
        reclaimable = (
            max(self.request[0] - peak_pair[0], 0),
            max(self.request[1] - peak_pair[1], 0),
        )
        return _capped(self.allocatable, peak_pair, reclaimable)


class MinPredictor:
    name = "minPredictor"

    def __init__(self, parts: list[PodReclaimable | PriorityReclaimable], record: Record) -> None:
        self.parts = parts
        self.record = record

    def add_pod(self, pod: PodFacts) -> None:
        for part in self.parts:  # stops at the first failure, as Koordinator's does
            try:
                part.add_pod(pod)
            except PredictionError as err:
                raise PredictionError(f"{part.name}: {err}") from None

    def result(self) -> Pair:
        least: Pair | None = None
        for part in self.parts:
            found = part.result()
            self.record(part.name, found)
            least = found if least is None else (min(least[0], found[0]), min(least[1], found[1]))
        result = least if least is not None else (0, 0)
        self.record(self.name, result)
        return result


def prod_reclaimable(
    server: Models,
    pods: Iterable[PodFacts],
    allocatable: Pair | None,
    *,
    now: float,
    cold_start: float,
    safety_margin_percent: int,
    record: Record = lambda name, pair: None,
) -> Pair:
    """The prod reclaimable resources (Koordinator's ProdReclaimablePredictor); raises
    PredictionError when it cannot say. A pod that fails is skipped (Koordinator logs it)."""
    predictor = MinPredictor(
        [
            PodReclaimable(
                server,
                allocatable,
                now=now,
                cold_start=cold_start,
                safety_margin_percent=safety_margin_percent,
            ),
            PriorityReclaimable(server, allocatable, safety_margin_percent=safety_margin_percent),
        ],
        record,
    )
    for pod in pods:
        try:
            predictor.add_pod(pod)
        except PredictionError:
            continue
    return predictor.result()
