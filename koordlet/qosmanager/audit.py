"""What the QoS manager did and why: a bounded trail of actions, one structured log line each.

An action names its strategy, what it changed (``kind``: "cpuset", "cfs_quota", "evict",
...), the target (a cgroup or a pod), the value and a reason a person can check by hand
("suppress: capacity 8 x 65% - LS usage 2.10 - system 0.40 = 2.70 cores"), plus the inputs as
numbers. Actions that concern every pod of a class (the best-effort cpuset) carry that class as
their ``scope``; ``for_pod`` finds both kinds. Each strategy also has a status line ("no
action: node CPU usage is stale"), logged only when it changes, so a refusal is visible
without repeating every second.

Usage::

    trail = AuditTrail(on_action=lambda a: counter.labels(a.strategy, a.kind).inc())
    trail.record(Action(now, "CPUSuppress", "cpuset", "kubepods/besteffort", "0-3", reason,
                        scope="BE"))
    trail.status("CPUSuppress", "no action: node CPU usage is stale")
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 2000


@dataclass(frozen=True)
class Action:
    ts: float
    strategy: str  # Koordinator's strategy name: "CPUSuppress", "MemoryEvict", ...
    kind: str  # what changed: "cpuset", "cfs_quota", "evict", "memory.min", ...
    target: str  # a cgroup directory, a pod "namespace/name", or "node"
    value: str
    reason: str
    pod_uid: str = ""  # set when the action is about one pod
    scope: str = ""  # a QoS class ("BE") when the action concerns all of its pods
    inputs: Mapping[str, float | str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"inputs": dict(self.inputs)}


@dataclass(frozen=True)
class Status:
    ts: float
    text: str


class AuditTrail:
    """See the module docstring. Thread-safe: strategies run in worker threads."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        on_action: Callable[[Action], None] | None = None,
    ) -> None:
        self._actions: deque[Action] = deque(maxlen=capacity)
        self._status: dict[str, Status] = {}
        self._lock = threading.Lock()
        self.on_action = on_action

    def record(self, action: Action) -> None:
        with self._lock:
            self._actions.append(action)
        log.info(
            "qos action strategy=%s kind=%s target=%s value=%s reason=%r",
            action.strategy,
            action.kind,
            action.target,
            action.value,
            action.reason,
        )
        if self.on_action is not None:
            self.on_action(action)

    def status(self, strategy: str, text: str, now: float) -> None:
        """Set a strategy's current state; logged when the text changes."""
        with self._lock:
            before = self._status.get(strategy)
            self._status[strategy] = Status(now, text)
        if before is None or before.text != text:
            log.info("qos strategy %s: %s", strategy, text)

    def statuses(self) -> dict[str, Status]:
        with self._lock:
            return dict(self._status)

    def recent(self, limit: int = 100) -> list[Action]:
        with self._lock:
            return list(self._actions)[-limit:]

    def for_pod(self, uid: str, qos: str, limit: int = 50) -> list[Action]:
        """The newest actions about this pod or about every pod of its class."""
        with self._lock:
            found = [
                a
                for a in self._actions
                if (a.pod_uid and a.pod_uid == uid) or (a.scope and a.scope == qos)
            ]
        return found[-limit:]
