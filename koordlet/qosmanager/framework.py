"""The frame every strategy runs in: what it reads (``Context``) and the loop (``QoSManager``).

A strategy is an object with Koordinator's ``name``, an ``interval`` and two methods:
``enabled(gates)`` (its feature gates) and ``run(ctx)``, which reads the context, decides, and
writes through the executor or the evictor. The manager builds a fresh context for every run
(the node config, a copy of the known pods, the node's resources, the clock) and runs each
strategy in a worker thread on its own interval, so a slow strategy neither blocks the NRI
requests on the event loop nor delays the others. An exception in one run is logged and the
loop goes on.

Metrics are read through ``Context.last``: the newest sample counts only when it is at most
two collect intervals old (Koordinator's rule); anything older is ``None``, and a strategy that
needs it records "no action: ... is stale" instead of guessing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from koordapi.features import FeatureGates
from koordapi.qos import KubeQoS, QoSClass
from koordlet.metriccache import Aggregate, MetricCache
from koordlet.qosmanager.audit import Action, AuditTrail
from koordlet.states.pods import CGROUPFS, KnownPod, kube_qos_dirs
from koordlet.states.topology import Topology
from koordlet.threads import in_thread
from runtimehooks.rules import Rules

log = logging.getLogger(__name__)

MIN_COLLECT_INTERVAL = 1.0  # below this Koordinator turns the whole QoS manager off


@dataclass(frozen=True)
class NodeResources:
    """Capacity from the machine; allocatable from the node config (the Node's status)."""

    cpu_milli: int
    memory: int
    allocatable: Mapping[str, int] = field(default_factory=dict)
    # node.koordinator.sh/reservation: reservedCPUs, else resources.cpu
    reservation_cpu_milli: int = 0

    @property
    def allocatable_cpu_milli(self) -> int:
        return self.allocatable.get("cpu", self.cpu_milli)

    @property
    def allocatable_memory(self) -> int:
        return self.allocatable.get("memory", self.memory)

    @property
    def reserved_cpu_milli(self) -> int:
        """max(capacity - allocatable, the reservation annotation): what the system keeps."""
        return max(self.cpu_milli - self.allocatable_cpu_milli, self.reservation_cpu_milli)


def node_resources(
    topology: Topology, rules: Rules, allocatable: Mapping[str, int]
) -> NodeResources:
    reservation = rules.node.reservation
    reserved = reservation.cpu_milli if reservation is not None else 0
    return NodeResources(
        cpu_milli=len(topology.cpus) * 1000,
        memory=topology.memory_bytes,
        allocatable=allocatable,
        reservation_cpu_milli=reserved,
    )


@dataclass
class Context:
    """One run's inputs. ``pods`` is a copy: the strategy may keep it."""

    rules: Rules
    pods: Sequence[KnownPod]
    topology: Topology
    node: NodeResources
    cache: MetricCache
    audit: AuditTrail
    now: float
    max_age: float  # how old a sample may be and still count (2 x collect interval)
    # The kubelet's QoS-level cgroups under its cgroup driver (PodStore.kube_qos_dirs).
    qos_dirs: Mapping[KubeQoS, str] = field(default_factory=lambda: kube_qos_dirs(CGROUPFS))

    def last(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """The newest sample if fresh, else None."""
        return self.cache.last(name, labels or {}, self.now, self.max_age)

    def window(
        self, name: str, seconds: float, labels: Mapping[str, str] | None = None
    ) -> Aggregate | None:
        """Aggregates over the last ``seconds``."""
        return self.cache.aggregate(name, labels or {}, self.now - seconds, self.now)

    def record(self, action: Action) -> None:
        self.audit.record(action)

    def status(self, strategy: str, text: str) -> None:
        self.audit.status(strategy, text, self.now)


class Strategy(Protocol):
    name: str
    interval: float

    def enabled(self, gates: FeatureGates) -> bool: ...

    def run(self, ctx: Context) -> None: ...


def pod_labels(known: KnownPod) -> dict[str, str]:
    """The metric cache labels of a pod's series."""
    return {"pod_uid": known.request.uid}


def is_be(known: KnownPod) -> bool:
    """Koordinator's "BE pod": the BE class, or Kubernetes BestEffort (whatever its label)."""
    pod = known.request
    return pod.qos is QoSClass.BE or pod.kube_qos is KubeQoS.BESTEFFORT


def is_labelled_be(known: KnownPod) -> bool:
    """A pod whose koordinator.sh/qosClass label says BE (Koordinator's GetPodQoSClassRaw): the
    BE evictions' victims. A Kubernetes BestEffort pod without the label holds no batch
    resource, so evicting it would release none."""
    return known.request.qos is QoSClass.BE


class QoSManager:
    """Runs the strategies; see the module docstring."""

    def __init__(
        self,
        strategies: Sequence[Strategy],
        *,
        context: Callable[[], Context],
        gates: FeatureGates,
        collect_interval: float,
        on_run: Callable[[str, float], None] | None = None,
    ) -> None:
        self.strategies = list(strategies)
        self.on_run = on_run  # (strategy name, seconds) after each run
        self.context = context
        self.gates = gates
        self.collect_interval = collect_interval
        self.runs: dict[str, int] = {s.name: 0 for s in self.strategies}
        self.failures: dict[str, int] = {s.name: 0 for s in self.strategies}

    def active(self) -> list[Strategy]:
        if self.collect_interval < MIN_COLLECT_INTERVAL:
            return []
        return [s for s in self.strategies if s.enabled(self.gates) and s.interval > 0]

    def run_once(self, strategy: Strategy) -> None:
        """One run of one strategy with a fresh context (the loop's body; tests call it)."""
        self.runs[strategy.name] += 1
        start = time.perf_counter()
        try:
            strategy.run(self.context())
        except Exception:  # a bug in one run must not end the loop
            self.failures[strategy.name] += 1
            log.exception("qos strategy %s failed", strategy.name)
        if self.on_run is not None:
            self.on_run(strategy.name, time.perf_counter() - start)

    async def run(self) -> None:
        if self.collect_interval < MIN_COLLECT_INTERVAL:
            log.warning(
                "QoS manager off: --collect-res-used-interval %.2fs is under %.0fs",
                self.collect_interval,
                MIN_COLLECT_INTERVAL,
            )
            return
        active = self.active()
        log.info("QoS manager strategies: %s", ", ".join(s.name for s in active) or "none")
        await asyncio.gather(*(self._loop(s) for s in active))

    async def _loop(self, strategy: Strategy) -> None:
        while True:
            started = time.monotonic()
            await in_thread(self.run_once, strategy)
            await asyncio.sleep(max(0.0, strategy.interval - (time.monotonic() - started)))
