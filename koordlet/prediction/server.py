"""Koordinator's peak predict server: decaying histograms of usage, trained from the metric cache.

Every --prediction-training-interval, ``train`` takes for each known pod the p90 of its cpu and
memory usage over the last interval (Koordinator's metricServer query) and adds it, weight 1, to
the pod's model; the same for the node, for each priority class (the sum of its pods; 0 where it
has none) and for the system (the ``sys_*`` series the collectors derive from the same pass;
Koordinator's node minus all pods where that series has no sample). A model is two histograms:
cpu (cores, buckets from 25 milli-cores growing 5 % up to 1024 cores) and memory (bytes, from
5 MiB growing 5 % up to 2 TiB), their weights halving every --prediction-cpu- and
--prediction-memory-histogram-decay-halflife. Models not updated for
--prediction-model-expiration-duration are dropped with their checkpoints.

Checkpoints: after each pass, up to --prediction-model-checkpoint-max-per-step models whose last
checkpoint is older than --prediction-model-checkpoint-interval are saved, oldest first;
``restore`` loads them at start. Koordinator removes, at start, the checkpoints of pods its
informer does not list; here they are restored and expire like any model that gets no sample,
so a pod the runtime reports only after the first pass keeps its history.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from koordapi.qos import NONE_PRIORITY, PRIORITY_CLASSES
from koordlet.metriccache import MetricCache
from koordlet.prediction.checkpoint import CheckpointStore
from koordlet.prediction.histogram import CheckpointError, DecayingHistogram, ExponentialBuckets
from koordlet.prediction.pods import PodFacts

log = logging.getLogger(__name__)

MIN_SAMPLE_WEIGHT = 0.1
EPSILON = 0.001 * MIN_SAMPLE_WEIGHT
BUCKET_GROWTH = 0.05
CPU_BUCKETS = ExponentialBuckets(1024, 0.025, 1 + BUCKET_GROWTH, EPSILON)
MEMORY_BUCKETS = ExponentialBuckets(float(1 << 41), float(5 << 20), 1 + BUCKET_GROWTH, EPSILON)

NODE_UID = "__node__"
SYSTEM_ITEM = "sys"  # the system overhead no pod accounts for
# Koordinator's KnownPriorityClasses: prod, mid, batch, free and none ("")
KNOWN_PRIORITY_CLASSES = tuple(pc.name for pc in (*PRIORITY_CLASSES, NONE_PRIORITY))


def node_item_uid(item: str) -> str:
    """A model of the whole node's part (a priority class, the system): Koordinator's id."""
    return f"__node-{item}__"


@dataclass(frozen=True)
class Peak:
    """A model's percentiles as Koordinator's GetPrediction rounds them: cpu in milli-cores,
    memory in bytes, both truncated."""

    cpu_milli: int
    memory: int


@dataclass
class Model:
    cpu: DecayingHistogram
    memory: DecayingHistogram
    last_updated: float = 0.0
    last_checkpointed: float = 0.0
    # when this koordlet first trained it: a pod's start where its spec is not known
    first_seen: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class ServerSettings:
    """The --prediction-* durations (seconds) and counts the server uses."""

    training_interval: float
    cpu_half_life: float
    memory_half_life: float
    model_expiration: float
    checkpoint_interval: float
    checkpoint_max_per_step: int


class PredictServer:
    """The models by uid (a pod's uid, ``NODE_UID`` or ``node_item_uid(...)``)."""

    def __init__(
        self,
        cache: MetricCache,
        checkpoints: CheckpointStore,
        settings: ServerSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.checkpoints = checkpoints
        self.settings = settings
        self.clock = clock
        self.models: dict[str, Model] = {}
        self._lock = threading.Lock()
        self.synced = False  # one training pass done (Koordinator's HasSynced)

    def _new_model(self, now: float) -> Model:
        return Model(
            DecayingHistogram(CPU_BUCKETS, self.settings.cpu_half_life),
            DecayingHistogram(MEMORY_BUCKETS, self.settings.memory_half_life),
            first_seen=now,
        )

    # -- training -----------------------------------------------------------------------------

    def _p90(self, name: str, labels: dict[str, str], now: float) -> float | None:
        found = self.cache.aggregate(name, labels, now - self.settings.training_interval, now)
        return None if found is None else found.p90

    def train(self, pods: Iterable[PodFacts]) -> None:
        """One pass: each pod's, the node's, each priority class' and the system's sample."""
        now = self.clock()
        by_class: dict[str, tuple[float, float]] = {}
        all_cpu = all_memory = 0.0
        for pod in pods:
            labels = {"pod_uid": pod.uid}
            cpu = self._p90("pod_cpu_usage", labels, now)
            memory = self._p90("pod_memory_usage", labels, now)
            if cpu is None or memory is None:  # no sample in the interval: not trained
                continue
            self.update(pod.uid, cpu, memory, now)
            c, m = by_class.get(pod.priority_class, (0.0, 0.0))
            by_class[pod.priority_class] = (c + cpu, m + memory)
            all_cpu += cpu
            all_memory += memory
        node_cpu = self._p90("node_cpu_usage", {}, now)
        node_memory = self._p90("node_memory_usage", {}, now)
        if node_cpu is not None and node_memory is not None:
            self.update(NODE_UID, node_cpu, node_memory, now)
        for name in KNOWN_PRIORITY_CLASSES:
            cpu, memory = by_class.get(name, (0.0, 0.0))
            self.update(node_item_uid(name), cpu, memory, now)
        sys_cpu = self._p90("sys_cpu_usage", {}, now)
        sys_memory = self._p90("sys_memory_usage", {}, now)
        if sys_cpu is None:
            sys_cpu = max((node_cpu or 0.0) - all_cpu, 0.0)
        if sys_memory is None:
            sys_memory = max((node_memory or 0.0) - all_memory, 0.0)
        self.update(node_item_uid(SYSTEM_ITEM), sys_cpu, sys_memory, now)
        self.synced = True

    def update(self, uid: str, cpu: float, memory: float, now: float) -> None:
        with self._lock:
            model = self.models.get(uid)
            if model is None:
                model = self.models[uid] = self._new_model(now)
        with model.lock:
            model.last_updated = now
            model.cpu.add_sample(cpu, 1.0, now)
            model.memory.add_sample(memory, 1.0, now)

    # -- reading ------------------------------------------------------------------------------

    def peak(self, uid: str, cpu_percentile: float, memory_percentile: float) -> Peak | None:
        """The model's percentiles; None when there is no model for ``uid``."""
        model = self.models.get(uid)
        if model is None:
            return None
        with model.lock:
            return Peak(
                int(model.cpu.percentile(cpu_percentile) * 1000),
                int(model.memory.percentile(memory_percentile)),
            )

    def first_seen(self, uid: str) -> float | None:
        model = self.models.get(uid)
        return None if model is None else model.first_seen

    # -- upkeep -------------------------------------------------------------------------------

    def gc(self) -> list[str]:
        """Drop the models (and checkpoints) not updated within the expiration."""
        if not self.synced:
            return []
        now = self.clock()
        with self._lock:
            expired = [
                uid
                for uid, model in self.models.items()
                if now - model.last_updated > self.settings.model_expiration
            ]
            for uid in expired:
                del self.models[uid]
        for uid in expired:
            log.info("prediction model %s expired", uid)
            self.checkpoints.remove(uid)
        return expired

    def checkpoint(self) -> int:
        """Save the models least recently saved, at most max-per-step; how many were saved."""
        if not self.synced:
            return 0
        now = self.clock()
        with self._lock:
            ordered = sorted(self.models.items(), key=lambda item: item[1].last_checkpointed)
        due: dict[str, dict[str, Any]] = {}
        for uid, model in ordered:
            if len(due) >= self.settings.checkpoint_max_per_step:
                break
            if now - model.last_checkpointed < self.settings.checkpoint_interval:
                break  # the rest were saved more recently still
            with model.lock:
                due[uid] = {
                    "cpu": model.cpu.save(),
                    "memory": model.memory.save(),
                    "lastUpdated": now,
                    "firstSeen": model.first_seen,
                }
            model.last_checkpointed = now  # as Koordinator: a failed save waits an interval
        if due:
            self.checkpoints.save(due)  # a failure is logged there
        return len(due)

    def restore(self) -> int:
        """Load the saved models; one that does not load is logged, removed and skipped."""
        restored = 0
        for stored in self.checkpoints.restore():
            model = self._new_model(0.0)
            try:
                if stored.model is None:
                    raise CheckpointError(stored.error or "unreadable")
                last_updated = stored.model.get("lastUpdated")
                first_seen = stored.model.get("firstSeen", last_updated)
                if not isinstance(last_updated, int | float) or not isinstance(
                    first_seen, int | float
                ):
                    raise CheckpointError("lastUpdated and firstSeen must be times")
                model.cpu.load(stored.model.get("cpu"))
                model.memory.load(stored.model.get("memory"))
            except CheckpointError as err:
                log.error("skipping the prediction checkpoint of %s: %s", stored.uid, err)
                self.checkpoints.remove(stored.uid)
                continue
            model.last_updated = float(last_updated)
            model.first_seen = float(first_seen)
            with self._lock:
                self.models[stored.uid] = model
            restored += 1
        return restored
