"""koord-scheduler's bind audit: every extender bind, bound or failed, one line each.

Each bind becomes a ``koordapi.audit.Action`` logged as koordlet logs its QoS actions, led by
"extender bind"::

    extender bind strategy=bind kind=bound target=team-a/web value=node-1 \
reason='cpuset 0-1,16-17' uid='2f1c...'
    extender bind strategy=bind kind=failed target=team-a/web value=node-1 \
reason='binding team-a/web to node-1: ...' uid='2f1c...'

kind is the result, target the pod, value the node kube-scheduler chose, reason what was
allocated (the cpuset of an LSE/LSR pod, the GPU minors of a GPU pod, the Reservation an owner
went into or a reserve pod placed, or nothing) or the error answered to kube-scheduler. A
bind whose arguments name no pod or node is counted and logged with what it had. Counted
in ``koord_scheduler_extender_binds_total{result}`` (ours).
``routes()`` serves the recent binds of one pod at ``GET /explain/pods/{namespace}/{name}`` on
the metrics server (read-only), for ``koordctl explain pod --scheduler``; in memory, the last
``capacity`` binds since this process started.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from koordapi.audit import DEFAULT_CAPACITY, Action, AuditTrail

log = logging.getLogger(__name__)

PREFIX = "extender bind"
STRATEGY = "bind"
EXPLAIN_PATH = "/explain/pods/{namespace}/{name}"
BOUND, FAILED = "bound", "failed"
NOTHING = "no CPUs pinned, no devices allocated"


def allocated(cpuset: str, gpus: str, reservation: str = "") -> str:
    """What a successful bind gave the pod, in words."""
    parts = [f"cpuset {cpuset}"] * bool(cpuset) + [f"gpus {gpus}"] * bool(gpus)
    parts += [f"reservation {reservation}"] * bool(reservation)
    return ", ".join(parts) or NOTHING


class BindAudit:
    """The trail and the per-result counts; the Binder calls ``bound`` or ``failed``."""

    def __init__(
        self, *, capacity: int = DEFAULT_CAPACITY, clock: Callable[[], float] = time.time
    ) -> None:
        self.clock = clock
        self.trail = AuditTrail(capacity, prefix=PREFIX, logger=log, logged_inputs=("uid",))
        self.counts: dict[str, int] = {BOUND: 0, FAILED: 0}

    def _record(
        self, result: str, pod: str, uid: str, node: str, reason: str, **inputs: str
    ) -> None:
        self.counts[result] += 1
        namespace, _, name = pod.partition("/")
        action = Action(
            self.clock(),
            STRATEGY,
            result,
            pod,
            node,
            reason,
            pod_uid=uid,
            inputs={"uid": uid, "namespace": namespace, "name": name, "node": node, **inputs},
        )
        self.trail.record(action)

    def bound(
        self,
        pod: str,
        uid: str,
        node: str,
        *,
        cpuset: str = "",
        gpus: str = "",
        reservation: str = "",
    ) -> None:
        """``reservation``: the Reservation the pod went into, or (a reserve pod) was placed."""
        what = allocated(cpuset, gpus, reservation)
        self._record(BOUND, pod, uid, node, what, cpuset=cpuset, gpus=gpus, reservation=reservation)

    def failed(self, pod: str, uid: str, node: str, error: str) -> None:
        self._record(FAILED, pod, uid, node, error)

    def for_pod(self, namespace: str, name: str, uid: str = "") -> list[dict[str, Any]]:
        """The recorded binds of pod ``namespace/name`` (or ``uid``), oldest first, as JSON."""
        key = f"{namespace}/{name}"
        return [
            a.as_dict()
            for a in self.trail.matching(
                lambda a: a.target == key or bool(uid and a.pod_uid == uid)
            )
        ]

    def exposition(self) -> str:
        """The counts in Prometheus' text format (appended to the extender's request counts)."""
        lines = ["# TYPE koord_scheduler_extender_binds_total counter"]
        lines += [
            f'koord_scheduler_extender_binds_total{{result="{result}"}} {count}'
            for result, count in sorted(self.counts.items())
        ]
        return "\n".join(lines) + "\n"

    def routes(self) -> list[web.RouteDef]:
        """``GET /explain/pods/{namespace}/{name}[?uid=UID]``, read-only."""

        async def explain_pod(request: web.Request) -> web.Response:
            namespace, name = request.match_info["namespace"], request.match_info["name"]
            return web.json_response(
                {
                    "component": "koord-scheduler",
                    "pod": f"{namespace}/{name}",
                    "capacity": self.trail.capacity,
                    "actions": self.for_pod(namespace, name, request.query.get("uid", "")),
                }
            )

        return [web.get(EXPLAIN_PATH, explain_pod)]
