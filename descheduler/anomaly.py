"""The anomaly detector: AnomalyDetector, which makes a node hot only after repeated
abnormal reports, and LowNodeLoadState, the two sets of detectors the plugin keeps between
rounds.

It follows Koordinator v1.8.0's pkg/descheduler/utils/anomaly/basic_detector.go (consecutive
abnormal reports) and the detector cache of
pkg/descheduler/framework/plugins/loadaware/low_node_load.go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from descheduler.args import AnomalyCondition, LowNodeLoadArgs


@dataclass
class _Detector:
    condition: AnomalyCondition
    anomalous: bool = False
    abnormalities: int = 0  # consecutive, since the last state change
    normalities: int = 0
    expires: float | None = None  # when an anomaly lapses (None: no clock was given)
    touched: float | None = None  # last abnormal observation, for the cache's expiry

    def enter(self, anomalous: bool, now: float | None) -> None:
        # a state change starts a new generation: counters cleared
        if self.anomalous == anomalous:
            return
        self.anomalous = anomalous
        self.abnormalities = self.normalities = 0
        timeout = self.condition.timeout if self.condition.timeout > 0 else 60.0
        self.expires = now + timeout if anomalous and now is not None else None

    def settle(self, now: float | None) -> None:
        lapsed = self.expires is not None and now is not None and self.expires < now
        if self.anomalous and (lapsed or self.normalities > self.condition.consecutive_normalities):
            self.enter(False, now)


class AnomalyDetector:
    """Koordinator's BasicDetector for every node, keyed by node name, as the plugin keeps
    them (one set for node usage, one for prod usage).

    ``observe(node, abnormal=True)`` counts a report over the high thresholds; the node turns
    anomalous when the count of consecutive such reports *exceeds* its condition's
    ``consecutive_abnormalities`` (the 6th with the default 5), and stays so until more than
    ``consecutive_normalities`` normal observations in a row, ``reset``, or ``timeout``
    seconds (only when ``now`` is given). The plugin skips the detector when the condition
    asks for 1, so one report is enough then (``balance`` does that).

    A node's condition is the one in force when its first abnormal report came (the plugin's
    cache). An entry not observed abnormal for ``cache_timeout`` seconds is forgotten
    (only when ``now`` is given)."""

    def __init__(
        self, condition: AnomalyCondition | None = None, cache_timeout: float = 300.0
    ) -> None:
        self.condition = condition or AnomalyCondition()
        self.cache_timeout = cache_timeout
        self._nodes: dict[str, _Detector] = {}

    def _get(self, node: str, now: float | None) -> _Detector | None:
        entry = self._nodes.get(node)
        if (
            entry is not None
            and now is not None
            and entry.touched is not None
            and now > entry.touched + self.cache_timeout
        ):
            del self._nodes[node]
            return None
        return entry

    def observe(
        self,
        node: str,
        abnormal: bool,
        *,
        now: float | None = None,
        condition: AnomalyCondition | None = None,
    ) -> bool:
        """Record one observation of ``node``; whether it is anomalous now. ``condition``
        applies when the node has no detector yet (default: the detector's)."""
        entry = self._get(node, now)
        if entry is None:
            if not abnormal:
                return False  # a fresh detector marked normal behaves as no detector
            entry = self._nodes[node] = _Detector(condition or self.condition)
        entry.settle(now)
        if abnormal:
            entry.abnormalities += 1
            entry.normalities = 0
            if entry.abnormalities > entry.condition.consecutive_abnormalities:
                entry.enter(True, now)
            entry.touched = now  # the plugin re-stores the detector on abnormal reports only
        else:
            entry.normalities += 1
            entry.abnormalities = 0
        entry.settle(now)
        return entry.anomalous

    def reset(self, node: str, *, now: float | None = None) -> None:
        """Make an anomalous node normal (counters cleared). A node that is not anomalous keeps
        its counters, as BasicDetector.Reset leaves an OK detector alone."""
        entry = self._get(node, now)
        if entry is not None:
            entry.enter(False, now)

    def is_anomalous(self, node: str, *, now: float | None = None) -> bool:
        entry = self._get(node, now)
        if entry is None:
            return False
        entry.settle(now)
        return entry.anomalous

    def counts(self, node: str) -> tuple[int, int]:
        """(consecutive abnormal, consecutive normal) observations since the last change."""
        entry = self._nodes.get(node)
        return (0, 0) if entry is None else (entry.abnormalities, entry.normalities)


@dataclass
class LowNodeLoadState:
    """What the plugin remembers between rounds: its two sets of anomaly detectors."""

    node_detector: AnomalyDetector = field(default_factory=AnomalyDetector)
    prod_detector: AnomalyDetector = field(default_factory=AnomalyDetector)

    @classmethod
    def for_args(cls, args: LowNodeLoadArgs) -> LowNodeLoadState:
        return cls(
            AnomalyDetector(cache_timeout=args.detector_cache_timeout),
            AnomalyDetector(cache_timeout=args.detector_cache_timeout),
        )
