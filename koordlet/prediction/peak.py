"""koordlet's peak predictor as the daemon uses it: one training pass, one prediction.

``run_pass`` (a worker thread, every --prediction-training-interval) trains the models, drops
the expired ones and saves the due checkpoints; ``prod_reclaimable`` (the NodeMetric report's
thread) answers the prod reclaimable resources for the pods the report lists.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from koordlet.metriccache import MetricCache, Sample
from koordlet.prediction.checkpoint import FILE_NAME, CheckpointStore
from koordlet.prediction.pods import pod_facts
from koordlet.prediction.predictors import (
    Pair,
    PredictionError,
    Record,
    node_allocatable,
    prod_reclaimable,
)
from koordlet.prediction.server import PredictServer, ServerSettings
from koordlet.states.nodeconfig import NodeConfig
from koordlet.states.pods import KnownPod

log = logging.getLogger(__name__)

# the prediction of each pass, in cores and bytes
RECLAIMABLE_CPU, RECLAIMABLE_MEMORY = "prod_reclaimable_cpu", "prod_reclaimable_memory"


class PeakPredictor:
    def __init__(
        self,
        cache: MetricCache,
        folder: Path | None,
        settings: ServerSettings,
        *,
        cold_start: float,
        safety_margin_percent: int,
        node: Callable[[], NodeConfig],
        record: Record = lambda name, pair: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``folder``: the metric cache's (checkpoints in memory when None)."""
        self.server = PredictServer(
            cache,
            CheckpointStore(folder / FILE_NAME if folder is not None else None),
            settings,
            clock,
        )
        self.cold_start = cold_start
        self.safety_margin_percent = safety_margin_percent
        self.node = node
        self.record = record
        self._last_error = ""

    def restore(self) -> int:
        restored = self.server.restore()
        if restored:
            log.info("peak prediction: %d models restored from checkpoints", restored)
        return restored

    def run_pass(self, pods: Iterable[KnownPod]) -> None:
        known = list(pods)
        self.server.train(pod_facts(pod) for pod in known)
        self.server.gc()
        self.server.checkpoint()
        # Kept as series of the metric cache, so that `koordctl whatif` replays dynamic mid
        # resources from what was predicted then (the models themselves keep no history).
        now = self.server.clock()
        found = self.prod_reclaimable(known, now)
        if found is not None:
            self.server.cache.append(
                [
                    Sample(RECLAIMABLE_CPU, {}, now, found[0] / 1000),
                    Sample(RECLAIMABLE_MEMORY, {}, now, float(found[1])),
                ]
            )

    def prod_reclaimable(self, pods: Iterable[KnownPod], now: float) -> Pair | None:
        """The prediction, or None (logged once per new reason) while it cannot be made."""
        node = self.node()
        try:
            found = prod_reclaimable(
                self.server,
                (pod_facts(known) for known in pods),
                node_allocatable(node.annotations, node.allocatable),
                now=now,
                cold_start=self.cold_start,
                safety_margin_percent=self.safety_margin_percent,
                record=self.record,
            )
        except PredictionError as err:
            if str(err) != self._last_error:
                log.info("no prod reclaimable prediction yet: %s", err)
            self._last_error = str(err)
            return None
        self._last_error = ""
        return found

    def close(self) -> None:
        self.server.checkpoints.close()
