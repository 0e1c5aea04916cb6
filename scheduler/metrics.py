"""koord-scheduler's Koordinator series, and the census of those not measured here.

Koordinator's koord-scheduler exports 14 series of its own (pkg/scheduler/metrics/metrics.go
and pkg/scheduler/plugins/elasticquota/metrics.go, all ``scheduler_*``). Where the behaviour
exists in this extender the series is exported by Koordinator's name, type and labels; the
others are in ``NOT_MEASURED`` with the reason (docs/scheduler.md has the table; the test
holds Koordinator's list). Beside them: kube-scheduler's framework series for the extension
points this extender runs (Filter, Score, Bind: its filter, prioritize and bind verbs), and
the feature gates and flags accepted with no effect here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest


def _exponential(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ExponentialBuckets."""
    return [start * factor**i for i in range(count)]


EVALUATED_NODES = "scheduler_pod_scheduling_evaluated_nodes"
FEASIBLE_NODES = "scheduler_pod_scheduling_feasible_nodes"
EXTENSION_POINT_DURATION = "scheduler_framework_extension_point_duration_seconds"

# Koordinator's series not exported here, and why; the rest of its 14 are.
_QUOTA = "the extender exports no quota series; koord-manager exports each quota's numbers"
_RESERVATION = "no Reservation plugin here"
NOT_MEASURED = {
    "scheduler_scheduling_timeout": (
        "no scheduling queue or cycle here: kube-scheduler schedules, the extender answers "
        "its calls (each call's time is in scheduler_framework_extension_point_duration_"
        "seconds)"
    ),
    "scheduler_reservation_status_phase": _RESERVATION,
    "scheduler_reservation_resource": _RESERVATION,
    "scheduler_elastic_quota_process_latency": _QUOTA,
    "scheduler_elastic_quota_hook_plugin_latency": _QUOTA,
    "scheduler_elastic_quota_spec": _QUOTA,
    "scheduler_elastic_quota_status": _QUOTA,
    "scheduler_update_elastic_quota_status_duration_seconds": _QUOTA,
    "scheduler_secondary_device_not_well_planned": (
        "DeviceShare here allocates GPUs only: no secondary devices (RDMA, FPGA) are planned"
    ),
    "scheduler_waiting_gang_group_number": "no Coscheduling (gangs) here",
    "scheduler_next_pod_delete_from_queue_latency": "no scheduling queue here",
    "scheduler_job_preemption_duration_seconds": "no job preemption (Coscheduling) here",
}

# the verbs as kube-scheduler's framework names their extension points
EXTENSION_POINTS = {"filter": "Filter", "prioritize": "Score", "bind": "Bind"}


class SchedulerMetrics:
    """The registry of the series above, filled as the extender answers."""

    def __init__(self, profile: str = "default-scheduler") -> None:
        self.profile = profile
        self.registry = CollectorRegistry(auto_describe=True)
        nodes = _exponential(1, 2, 24)  # Koordinator's buckets
        self.evaluated_nodes = Histogram(
            EVALUATED_NODES,
            "The number of nodes the scheduler evaluated the pod against in the filtering "
            "phase (here: the nodes of an extender filter call)",
            buckets=nodes,
            registry=self.registry,
        )
        self.feasible_nodes = Histogram(
            FEASIBLE_NODES,
            "The number of nodes out of the evaluated ones that fit the pod (here: that the "
            "extender's filter passed)",
            buckets=nodes,
            registry=self.registry,
        )
        self.extension_point_duration = Histogram(
            EXTENSION_POINT_DURATION,
            "Latency for running the extension points of this extender (its verbs)",
            ["extension_point", "status", "profile"],
            buckets=_exponential(0.0001, 2, 12),  # kube-scheduler's
            registry=self.registry,
        )
        self.gates_unimplemented = Gauge(
            "koord_scheduler_feature_gate_unimplemented",
            "1 for a feature gate that is on and changes nothing here",
            ["gate"],
            registry=self.registry,
        )
        self.flags_unimplemented = Gauge(
            "koord_scheduler_flag_unimplemented",
            "1 for a flag that was given and changes nothing here",
            ["flag"],
            registry=self.registry,
        )

    def unimplemented(self, gates: Iterable[str], flags: Iterable[str]) -> None:
        for gate in gates:
            self.gates_unimplemented.labels(gate).set(1)
        for flag in flags:
            self.flags_unimplemented.labels(flag).set(1)

    def filtered(self, evaluated: int, feasible: int) -> None:
        self.evaluated_nodes.observe(evaluated)
        self.feasible_nodes.observe(feasible)

    @contextmanager
    def timed(self, verb: str) -> Iterator[list[str]]:
        """Times one call of ``verb``; the caller sets the list's one item to "Error" when the
        reply carries an error (it starts as "Success")."""
        status = ["Success"]
        start = time.perf_counter()
        try:
            yield status
        except BaseException:
            status[0] = "Error"
            raise
        finally:
            self.extension_point_duration.labels(
                EXTENSION_POINTS[verb], status[0], self.profile
            ).observe(time.perf_counter() - start)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
