"""What the QoS manager did and why: koordapi.audit's trail, its lines led by "qos action".

The record (``Action``), its bounds and its lookup live in ``koordapi.audit``, shared with
koord-manager's admission audit and koord-scheduler's bind audit so that all three log the same
line. Here the trail is given koordlet's leading words ("qos action ...", "qos strategy ...")
and this module's logger, as before the move.

Usage::

    trail = AuditTrail(on_action=lambda a: counter.labels(a.strategy, a.kind).inc())
    trail.record(Action(now, "CPUSuppress", "cpuset", "kubepods/besteffort", "0-3", reason,
                        scope="BE"))
    trail.status("CPUSuppress", "no action: node CPU usage is stale", now)
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from koordapi import audit
from koordapi.audit import DEFAULT_CAPACITY, Action, Status

__all__ = ["DEFAULT_CAPACITY", "Action", "AuditTrail", "Status"]

log = logging.getLogger(__name__)

PREFIX = "qos action"
STATUS_PREFIX = "qos strategy"


class AuditTrail(audit.AuditTrail):
    """koordapi.audit.AuditTrail with koordlet's leading words and logger."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        on_action: Callable[[Action], None] | None = None,
    ) -> None:
        super().__init__(
            capacity, on_action, prefix=PREFIX, status_prefix=STATUS_PREFIX, logger=log
        )
