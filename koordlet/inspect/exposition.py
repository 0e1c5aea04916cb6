"""Run-queue latency for Prometheus, built from the collector's state on each scrape.

    koordlet_pod_runqueue_latency_seconds{node, pod_name, pod_namespace, pod_uid, qos}
        histogram of each pod's waits since koordlet started (the collector's ``total``)
    koordlet_qos_runqueue_latency_seconds{node, qos}
        histogram of each QoS class: its pods' totals added up
    koordlet_pod_runqueue_latency_quantile_seconds{node, pod_name, ..., quantile}
        p50 and p99 of each pod over the latest window (only pods that waited in it); a
        summary, the type Prometheus keeps the ``quantile`` label for (``promtool check
        metrics`` refuses it on a gauge), so it also has the usual cumulative _count and _sum

The kernel's log2 slots map one to one onto buckets: slot s holds waits in [2^s, 2^(s+1)) us,
so its bucket is ``le = 2^(s+1) us`` in seconds. Every series has the same buckets, slots 0 to
``TOP_SLOT`` (2 us to 8.4 s), so that ``sum by (le)`` and ``histogram_quantile`` work across
pods; waits in higher slots only show in ``+Inf``. The kernel keeps counts, not the waits
themselves, so ``_sum`` is an estimate: each wait taken at its slot's midpoint.

A pod that leaves takes its histogram with it; its last counts stay in its class's histogram
(kept here), so the class series only go down when koordlet restarts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import HistogramMetricFamily, Metric, SummaryMetricFamily

from koordlet.inspect import histogram
from koordlet.inspect.schedlat import PodLatency, SchedLatencyState

TOP_SLOT = 22  # le = 2^23 us = 8.4 s; anything slower only counts in +Inf
US_PER_SECOND = 1e6
QUANTILES = (0.5, 0.99)
POD_LABELS = ["node", "pod_name", "pod_namespace", "pod_uid", "qos"]
SUM_NOTE = "_sum is estimated from bucket midpoints (the kernel keeps counts only)"


def bucket_bound(slot: int) -> float:
    """The bucket's upper bound (le) in seconds: 2^(slot+1) us."""
    return histogram.slot_bounds(slot)[1] / US_PER_SECOND


def buckets(hist: Mapping[int, int]) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs for slots 0..TOP_SLOT, then +Inf with every wait."""
    out = []
    seen = 0
    for slot in range(TOP_SLOT + 1):
        seen += hist.get(slot, 0)
        out.append((repr(bucket_bound(slot)), float(seen)))  # as Go writes it: 2e-06
    out.append(("+Inf", float(histogram.count(hist))))
    return out


def estimated_sum(hist: Mapping[int, int]) -> float:
    """Seconds waited, each wait taken at its slot's midpoint."""
    return sum(sum(histogram.slot_bounds(s)) / 2 * n for s, n in hist.items()) / US_PER_SECOND


class SchedLatencyExposition:
    """A prometheus_client collector over ``state()``; None or an empty state gives no series."""

    def __init__(self, node: str, state: Callable[[], SchedLatencyState | None]) -> None:
        self.node = node
        self.state = state
        self._lock = threading.Lock()  # scrapes may run in parallel
        self._seen: dict[str, tuple[str, dict[int, int]]] = {}  # pod uid -> (qos, last total)
        self._departed: dict[str, dict[int, int]] = {}  # qos -> counts of pods that left

    def describe(self) -> list[Metric]:
        return []  # built per scrape; nothing to register up front

    def collect(self) -> Iterator[Metric]:
        state = self.state()
        pods = list(state.pods.values()) if state is not None else []
        pod_hist = HistogramMetricFamily(
            "koordlet_pod_runqueue_latency_seconds",
            "Time the pod's threads waited runnable for a CPU, since koordlet started; " + SUM_NOTE,
            labels=POD_LABELS,
        )
        quantiles = SummaryMetricFamily(
            "koordlet_pod_runqueue_latency_quantile_seconds",
            "Quantiles of the pod's run-queue waits over the latest collection window; _count "
            "and _sum since koordlet started, " + SUM_NOTE,
            labels=POD_LABELS,
        )
        for pod in sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)):
            key = self._labels(pod)
            pod_hist.add_metric(key, buckets(pod.total), estimated_sum(pod.total))
            for q in QUANTILES:
                value = histogram.percentile(pod.window, q)
                if value is not None:
                    labels = {**dict(zip(POD_LABELS, key, strict=True)), "quantile": str(q)}
                    quantiles.add_sample(quantiles.name, labels, value / US_PER_SECOND)
            count = histogram.count(pod.total)
            quantiles.add_metric(key, count, estimated_sum(pod.total))
        class_hist = HistogramMetricFamily(
            "koordlet_qos_runqueue_latency_seconds",
            "Time the threads of the QoS class's pods waited runnable for a CPU, since koordlet "
            "started (pods that left included); " + SUM_NOTE,
            labels=["node", "qos"],
        )
        for qos, hist in sorted(self._classes(pods).items()):
            class_hist.add_metric([self.node, qos], buckets(hist), estimated_sum(hist))
        yield from (pod_hist, class_hist, quantiles)

    def _labels(self, pod: PodLatency) -> list[str]:
        return [self.node, pod.name, pod.namespace, pod.uid, pod.qos]

    def _classes(self, pods: list[PodLatency]) -> dict[str, dict[int, int]]:
        """Each class's cumulative counts: its live pods' totals plus those of pods gone."""
        with self._lock:
            live = {p.uid for p in pods}
            for uid, (qos, total) in list(self._seen.items()):
                if uid not in live:
                    self._departed[qos] = histogram.merge([self._departed.get(qos, {}), total])
                    del self._seen[uid]
            for pod in pods:
                self._seen[pod.uid] = (pod.qos, dict(pod.total))
            by_class: dict[str, list[Mapping[int, int]]] = {
                qos: [hist] for qos, hist in self._departed.items()
            }
            for pod in pods:
                by_class.setdefault(pod.qos, []).append(pod.total)
            return {qos: histogram.merge(hists) for qos, hists in by_class.items()}
