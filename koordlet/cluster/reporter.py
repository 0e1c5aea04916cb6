"""The NodeMetric status reporter of a cluster-mode koordlet (Koordinator's
``statesinformer/impl/states_nodemetric.go``).

Every ``spec.metricCollectPolicy.reportIntervalSeconds`` of this node's NodeMetric (watched by
an Informer with ``fieldSelector=metadata.name=NODE``; the fallback is
``--node-metric-report-interval``) it builds the status from the metric cache in a worker
thread (usage averaged over ``aggregateDurationSeconds``, ``aggregatedNodeUsages`` with avg,
p50, p90, p95, p99 for each of ``nodeAggregatePolicy.durations``) and merge-patches the
NodeMetric's ``status`` subresource.

The NodeMetric is koord-manager's to create. Koordinator's koordlet waits until it exists;
this one creates it with an empty spec when the status patch answers 404, so that a cluster
without koord-manager still gets its node metrics (koord-manager adopts it and fills the
spec later).

Failures (409, 429, 5xx, timeouts, the API server down) are logged once per kind until a
report gets through, and never leave the task. Only the newest report is kept (a queue of
one): a failed report is not re-sent; the next interval builds and sends a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from koordapi.duration import parse_go_duration
from koordkube.client import KubeApi
from koordkube.errors import AlreadyExists, KubeError, NotFound
from koordkube.informer import Informer
from koordkube.resources import NodeMetric, Object
from koordlet.cluster import cancel_and_wait
from koordlet.threads import in_thread

log = logging.getLogger(__name__)

DEFAULT_AGGREGATE_SECONDS = 300
MIN_AGGREGATE_SECONDS = 60
DEFAULT_DURATIONS = (300, 600, 1800)
MIN_REPORT_SECONDS = 30.0  # Koordinator's floor for reportIntervalSeconds
REQUEST_TIMEOUT = 30.0

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class ReportPolicy:
    """What the NodeMetric's ``spec.metricCollectPolicy`` asks for."""

    interval: float
    aggregate_seconds: int = DEFAULT_AGGREGATE_SECONDS
    durations: tuple[int, ...] = DEFAULT_DURATIONS


def policy_from(
    obj: Object | None, fallback_interval: float, *, min_interval: float = MIN_REPORT_SECONDS
) -> ReportPolicy:
    """The report policy of a NodeMetric object (None: the fallback and Koordinator's defaults)."""
    spec = (obj or {}).get("spec") or {}
    policy = spec.get("metricCollectPolicy") if isinstance(spec, dict) else None
    if not isinstance(policy, dict):
        return ReportPolicy(fallback_interval)
    interval = fallback_interval
    raw = policy.get("reportIntervalSeconds")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and raw > 0:
        interval = max(float(raw), min_interval)
    aggregate = DEFAULT_AGGREGATE_SECONDS
    raw = policy.get("aggregateDurationSeconds")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and raw > 0:
        aggregate = max(int(raw), MIN_AGGREGATE_SECONDS)
    durations: tuple[int, ...] = DEFAULT_DURATIONS
    node_policy = policy.get("nodeAggregatePolicy")
    if isinstance(node_policy, dict) and isinstance(node_policy.get("durations"), list):
        parsed = []
        for text in node_policy["durations"]:
            try:
                seconds = int(parse_go_duration(str(text)))
            except ValueError as err:
                log.warning("NodeMetric nodeAggregatePolicy: ignoring %s", err)
                continue
            if seconds > 0:
                parsed.append(seconds)
        durations = tuple(parsed)
    return ReportPolicy(interval, aggregate, durations)


BuildStatus = Callable[[int, Sequence[int]], dict[str, Any]]
"""(aggregate_seconds, durations) → the NodeMetric status; runs in a worker thread."""


class NodeMetricReporter:
    """Patch this node's NodeMetric status on the interval its spec asks for."""

    def __init__(
        self,
        api: KubeApi,
        node_name: str,
        build: BuildStatus,
        *,
        fallback_interval: float = 60.0,
        min_interval: float = MIN_REPORT_SECONDS,
        timeout: float = REQUEST_TIMEOUT,
        informer: Informer | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.build = build
        self.fallback_interval = fallback_interval
        self.min_interval = min_interval
        self.timeout = timeout
        self.informer = informer or Informer(api, NodeMetric, fields=f"metadata.name={node_name}")
        self._sleep = sleep
        self.pending: dict[str, Any] | None = None
        """The newest report not yet written (a queue of one)."""
        self.reports = 0
        """Reports written, for tests and status."""
        self.created = False
        """True once this koordlet created the NodeMetric itself."""
        self.last_error: str | None = None
        self._logged: set[str] = set()

    def policy(self) -> ReportPolicy:
        obj = self.informer.get(self.node_name)
        return policy_from(obj, self.fallback_interval, min_interval=self.min_interval)

    async def run(self) -> None:
        """Watch the NodeMetric and report every interval until cancelled."""
        watching = asyncio.create_task(self.informer.run())
        try:
            while True:
                await self._sleep(self.policy().interval)
                await self.report_once()
        finally:
            await cancel_and_wait(watching)

    async def report_once(self) -> bool:
        """Build the newest report and write it; False (logged) when that failed."""
        policy = self.policy()
        try:
            self.pending = await in_thread(self.build, policy.aggregate_seconds, policy.durations)
        except Exception as err:
            self._failed("build", f"cannot build the NodeMetric report: {err!r}")
            return False
        try:
            async with asyncio.timeout(self.timeout):
                await self._write(self.pending)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            kind = _error_kind(err)
            self._failed(kind, f"NodeMetric {self.node_name} status not written ({kind}): {err!r}")
            return False
        self.pending = None
        self.reports += 1
        if self._logged:
            log.info("NodeMetric %s status written again", self.node_name)
        self._logged.clear()
        self.last_error = None
        return True

    async def _write(self, status: dict[str, Any]) -> None:
        try:
            await self.api.patch(
                NodeMetric, self.node_name, {"status": status}, subresource="status"
            )
        except NotFound:
            pass  # no NodeMetric yet
        else:
            return
        # koord-manager has not made it (yet): make it, with an empty spec, and write again.
        try:
            await self.api.create(NodeMetric, {"metadata": {"name": self.node_name}, "spec": {}})
            self.created = True
            log.info("created NodeMetric %s (no koord-manager made it)", self.node_name)
        except AlreadyExists:
            pass  # koord-manager made it meanwhile
        await self.api.patch(NodeMetric, self.node_name, {"status": status}, subresource="status")

    def _failed(self, kind: str, message: str) -> None:
        self.last_error = message
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("%s; retrying at the next interval", message)
        else:
            log.debug("%s", message)


def _error_kind(err: BaseException) -> str:
    if isinstance(err, TimeoutError):
        return "timeout"
    if isinstance(err, KubeError) and err.code is not None:
        return f"http-{err.code}"
    return type(err).__name__
