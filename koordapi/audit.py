"""What a component did and why: a bounded trail of actions, one structured log line each.

Shared by koordlet's QoS manager ("qos action ..."), koord-manager's admission webhooks
("admission ...") and koord-scheduler's extender bind ("extender bind ..."): the same record and
the same line, so one grep or log query reads all three. The leading words (``prefix``) say
which component acted; the rest is always::

    <prefix> strategy=<who decided> kind=<what changed> target=<on what> value=<to what> \
reason=<why, quoted>[ <input>=<quoted> ...]

An action names its strategy, what it changed (``kind``: "cpuset", "cfs_quota", "evict",
"mutated", "bound", ...), the target (a cgroup, a pod, an object), the value and a reason a
person can check by hand, plus the inputs (numbers or strings). The inputs named in
``logged_inputs`` are appended to the line, quoted (``%r``: a user name or a message cannot
break the line); koordlet names none, so its line is unchanged. Actions that concern every pod
of a class (the best-effort cpuset) carry that class as their ``scope``; ``for_pod`` finds both
kinds. A trail also keeps a status per strategy ("no action: node CPU usage is stale"), logged
only when it changes, so a refusal is visible without repeating every second.

Usage::

    trail = AuditTrail(on_action=lambda a: counter.labels(a.strategy, a.kind).inc(),
                       prefix="qos action", logger=logging.getLogger(__name__))
    trail.record(Action(now, "CPUSuppress", "cpuset", "kubepods/besteffort", "0-3", reason,
                        scope="BE"))
    trail.status("CPUSuppress", "no action: node CPU usage is stale", now)
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_CAPACITY = 2000


@dataclass(frozen=True)
class Action:
    ts: float
    strategy: str  # who decided: "CPUSuppress", "mutate-pod", "bind", ...
    kind: str  # what changed: "cpuset", "cfs_quota", "evict", "mutated", "denied", "bound", ...
    target: str  # a cgroup directory, a pod "namespace/name", an object, or "node"
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
    """See the module docstring. Thread-safe: koordlet's strategies run in worker threads."""

    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        on_action: Callable[[Action], None] | None = None,
        *,
        prefix: str,
        logger: logging.Logger,
        status_prefix: str = "",
        logged_inputs: Sequence[str] = (),
    ) -> None:
        self._actions: deque[Action] = deque(maxlen=capacity)
        self._status: dict[str, Status] = {}
        self._lock = threading.Lock()
        self.on_action = on_action
        self.capacity = capacity
        self.prefix = prefix
        self.status_prefix = status_prefix or f"{prefix} status"
        self.logged_inputs = tuple(logged_inputs)
        self._log = logger

    def record(self, action: Action) -> None:
        with self._lock:
            self._actions.append(action)
        extra = [(key, action.inputs[key]) for key in self.logged_inputs if key in action.inputs]
        self._log.info(
            self.prefix
            + " strategy=%s kind=%s target=%s value=%s reason=%r"
            + "".join(f" {key}=%r" for key, _ in extra),
            action.strategy,
            action.kind,
            action.target,
            action.value,
            action.reason,
            *(value for _, value in extra),
        )
        if self.on_action is not None:
            self.on_action(action)

    def status(self, strategy: str, text: str, now: float) -> None:
        """Set a strategy's current state; logged when the text changes."""
        with self._lock:
            before = self._status.get(strategy)
            self._status[strategy] = Status(now, text)
        if before is None or before.text != text:
            self._log.info("%s %s: %s", self.status_prefix, strategy, text)

    def statuses(self) -> dict[str, Status]:
        with self._lock:
            return dict(self._status)

    def recent(self, limit: int = 100) -> list[Action]:
        with self._lock:
            return list(self._actions)[-limit:]

    def matching(self, wanted: Callable[[Action], bool], limit: int = 50) -> list[Action]:
        """The newest ``limit`` actions for which ``wanted`` is true, oldest first."""
        with self._lock:
            found = [a for a in self._actions if wanted(a)]
        return found[-limit:]

    def for_pod(self, uid: str, qos: str = "", limit: int = 50) -> list[Action]:
        """The newest actions about this pod or about every pod of its class."""
        return self.matching(
            lambda a: bool((a.pod_uid and a.pod_uid == uid) or (a.scope and a.scope == qos)),
            limit,
        )
