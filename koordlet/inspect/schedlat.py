"""SchedLatencyCollector: run-queue latency of each pod, container and QoS class.

Every ``interval`` (10 s) it reads the BPF program's cumulative histograms (cgroup id → log2
slots), takes the difference with the previous read (the window), and attributes each cgroup
id to a container or a pod by the inode numbers of their cgroup v2 directories (``unified/`` on
a hybrid host): a container directory is that container's; the pod's own directory and its
other children (the sandbox) are the pod's. Ids that belong to no known pod are the node's
(system daemons, koordlet itself) and are kept as the ``node`` total.

Samples (µs, over the window; only where the window has waits):
``container_runq_latency_{p50,p99,mean}{pod_uid,container_id}``,
``pod_runq_latency_{p50,p99,mean}`` and ``pod_runq_waits`` (the number of waits) ``{pod_uid}``,
``qos_runq_latency_{p50,p99,mean}{qos}``. The mean weighs the long waits a busy neighbour
causes, which a median of many short wake-ups hides.
The latest windows and the cumulative histograms stay in ``state`` for Prometheus, the status
API and ``koordctl inspect``.

The probes run on every wake-up and context switch, which costs a context-switch-bound
workload about 13 % while they are attached (benchmarks/schedlat_overhead.py). So they sample:
attached for ``sample`` seconds (2) at the start of each interval, detached for the rest; each
window then covers the sampled seconds. With ``sample`` >= ``interval`` they stay attached.

The program needs root, tracefs, kernel headers and bcc; where any is missing the collector is
unavailable with that reason, and the rest of koordlet runs as usual.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from koordapi.qos import default_qos_for_kube
from koordlet.cgroupfs.hierarchy import v2_root
from koordlet.collectors.base import CollectorUnavailable
from koordlet.inspect import histogram
from koordlet.inspect.program import InspectUnavailable, Probe, load
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

log = logging.getLogger(__name__)

NAME = "schedlat"
GATE = "SchedLatencyCollector"
NO_V2_TREE = "no-cgroup-v2-tree"

Hist = dict[int, int]


def pod_class(known: KnownPod) -> str:
    """The pod's QoS class, the Kubernetes QoS one standing in when it has no label."""
    pod = known.request
    qos = pod.qos if pod.qos.value else default_qos_for_kube(pod.kube_qos)
    return qos.value


@dataclass
class PodLatency:
    """One pod's latest window and its cumulative histogram since koordlet started."""

    uid: str
    name: str
    namespace: str
    qos: str
    window: Hist = field(default_factory=dict)
    total: Hist = field(default_factory=dict)
    containers: dict[str, Hist] = field(default_factory=dict)  # container name → window


@dataclass
class SchedLatencyState:
    """What the last pass found; replaced as a whole, so readers never see half a pass."""

    ts: float = 0.0
    window_seconds: float = 0.0
    pods: dict[str, PodLatency] = field(default_factory=dict)  # by pod uid
    classes: dict[str, Hist] = field(default_factory=dict)  # QoS class → window
    node: Hist = field(default_factory=dict)  # waits outside any known pod


class SchedLatencyCollector:
    """See the module docstring."""

    name = NAME

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]],
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        *,
        interval: float = 10.0,
        sample: float = 2.0,
        loader: Callable[[], Probe] = load,
    ) -> None:
        self.pods = pods
        self.cgroup_root = cgroup_root
        self.interval = interval
        self.sample = sample
        self.loader = loader
        self.skipped: Counter[str] = Counter()
        self.state = SchedLatencyState()
        self._probe: Probe | None = None
        self._before: dict[int, Hist] = {}
        self._totals: dict[str, Hist] = {}  # pod uid → cumulative, for Prometheus
        self._last_ts = 0.0
        self._lock = threading.Lock()
        self._detach_timer: threading.Timer | None = None

    def close(self) -> None:
        with self._lock:
            if self._detach_timer is not None:
                self._detach_timer.cancel()
            if self._probe is not None:
                self._probe.close()
                self._probe = None

    def _start_sample(self, probe: Probe) -> None:
        """Attach the probes, and detach them ``sample`` seconds later (called locked)."""
        probe.attach()
        if self.sample >= self.interval:
            return
        if self._detach_timer is not None:
            self._detach_timer.cancel()
        self._detach_timer = threading.Timer(self.sample, self._end_sample)
        self._detach_timer.daemon = True
        self._detach_timer.start()

    def _end_sample(self) -> None:
        with self._lock:
            if self._probe is not None:
                self._probe.detach()

    def _ensure_probe(self) -> Probe:
        if self._probe is None:
            try:
                self._probe = self.loader()
            except InspectUnavailable as err:
                raise CollectorUnavailable(f"run-queue latency off: {err}") from None
            log.info("run-queue latency probes loaded (eBPF, sched tracepoints)")
        return self._probe

    def collect(self, now: float) -> list[Sample]:
        with self._lock:
            probe = self._ensure_probe()
            counts = probe.read()
            self._start_sample(probe)
        windows = {
            cg: histogram.diff(hist, self._before.get(cg, {})) for cg, hist in counts.items()
        }
        self._before = counts
        known = list(self.pods())
        owners = self._owners(known)
        elapsed = now - self._last_ts if self._last_ts else 0.0
        # the probes were attached for at most ``sample`` seconds of the elapsed time
        state = SchedLatencyState(ts=now, window_seconds=min(elapsed, self.sample))
        self._last_ts = now
        by_pod: dict[str, list[Hist]] = {}
        by_container: dict[tuple[str, str], Hist] = {}
        node: list[Hist] = []
        for cg, window in windows.items():
            owner = owners.get(cg)
            if owner is None:
                node.append(window)
                continue
            uid, container = owner
            by_pod.setdefault(uid, []).append(window)
            if container:
                by_container[(uid, container)] = histogram.merge(
                    [by_container.get((uid, container), {}), window]
                )
        state.node = histogram.merge(node)
        samples: list[Sample] = []
        live = set()
        for pod in known:
            uid = pod.request.uid
            live.add(uid)
            window = histogram.merge(by_pod.get(uid, []))
            self._totals[uid] = histogram.merge([self._totals.get(uid, {}), window])
            names = {cid: c.name for cid, c in pod.containers.items()}
            entry = PodLatency(uid, pod.request.name, pod.request.namespace, pod_class(pod), window,
                               dict(self._totals[uid]))  # fmt: skip
            for (owner_uid, cid), hist in by_container.items():
                if owner_uid == uid:
                    entry.containers[names.get(cid, cid)] = hist
                    samples += _quantiles(
                        "container", {"pod_uid": uid, "container_id": cid}, hist, now
                    )
            state.pods[uid] = entry
            if window:
                samples += _quantiles("pod", {"pod_uid": uid}, window, now)
                samples.append(
                    Sample("pod_runq_waits", {"pod_uid": uid}, now, histogram.count(window))
                )
            if window or entry.qos not in state.classes:
                state.classes[entry.qos] = histogram.merge(
                    [state.classes.get(entry.qos, {}), window]
                )
        for qos, hist in state.classes.items():
            samples += _quantiles("qos", {"qos": qos}, hist, now)
        self._totals = {uid: h for uid, h in self._totals.items() if uid in live}
        self.state = state
        return samples

    def _owners(self, pods: Iterable[KnownPod]) -> dict[int, tuple[str, str]]:
        """cgroup id → (pod uid, container id or "" for the pod's own and sandbox cgroups)."""
        root = v2_root(self.cgroup_root)
        if root is None:
            raise CollectorUnavailable(
                f"run-queue latency off: no cgroup v2 hierarchy under {self.cgroup_root} "
                "(the BPF program names cgroups by their v2 ids)"
            )
        owners: dict[int, tuple[str, str]] = {}
        for known in pods:
            pod = known.request
            if not pod.cgroup_dir:
                continue
            pod_dir = f"{root}/{pod.cgroup_dir.strip('/')}"
            by_dir = {
                c.cgroup_dir.strip("/").rsplit("/", 1)[-1]: cid
                for cid, c in known.containers.items()
            }
            try:
                owners[Path(pod_dir).stat().st_ino] = (pod.uid, "")
                with os.scandir(pod_dir) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            owners[entry.inode()] = (pod.uid, by_dir.get(entry.name, ""))
            except OSError:
                self.skipped[NO_V2_TREE] += 1  # the pod is gone, or runc made no v2 cgroup
        return owners


def _quantiles(
    level: str, labels: Mapping[str, str], hist: Mapping[int, int], now: float
) -> list[Sample]:
    out = []
    for name, value in (
        ("p50", histogram.percentile(hist, 0.5)),
        ("p99", histogram.percentile(hist, 0.99)),
        ("mean", histogram.mean(hist)),
    ):
        if value is not None:
            out.append(Sample(f"{level}_runq_latency_{name}", dict(labels), now, value))
    return out
