"""NRI plugin conflicts: a started container's cgroup does not hold what koordlet asked for.

Koordinator issue #2334: two NRI plugins both set CPU pinning, and nothing notices. NRI itself
refuses two plugins adjusting the same field of one CreateContainer (the container then fails
to create), but not another plugin's unsolicited UpdateContainers, an OCI hook that writes the
cgroup, or the kubelet's UpdateContainerResources: the container starts with the other value,
koordlet's reconciler later puts its own back, and the two fight unseen.

So koordlet remembers what its CreateContainer adjustment (and any UpdateContainer answer)
asked for each container: cpuset, cpu shares, CFS quota (and period), memory limit. When the
container has started (PostStartContainer) it reads those few files of the container's cgroup,
before its own post-start reconcile writes anything, and ``compare`` judges them by meaning:
cpusets as sets, shares as the kernel or runc stores them (v2: the ``cpu.weight`` runc computes,
``1 + ((shares - 2) * 9999) / 262142``, or newer runc's quadratic mapping), "max", negative
quotas and v1's huge numbers as unlimited, memory limits rounded down to whole pages. Each
difference is logged once with both values, counted in
``koordlet_nri_conflicts_total{resource}`` and kept for ``koordctl explain``. What koordlet
itself writes to a container (or finds in place) before the check, through the executor (the
QoS manager), replaces what it asked, so its own changes are never reported; the reconciler's
periodic passes leave such containers to their post-start pass.

Bounded: at most ``MAX_PENDING`` containers wait for their start (one is dropped when checked,
stopped or removed, the oldest when full) and ``MAX_RECORDS`` conflicts are kept for explain
(dropped with their pod, the oldest when full).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Protocol

from prometheus_client import Counter

from koordapi.cgroup import shares_to_weight
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordlet.cgroupfs.resources import V1_UNLIMITED_FLOOR
from koordlet.executor import CgroupWrite, Executor
from nri_plugin import api
from runtimehooks.request import ContainerRequest

log = logging.getLogger(__name__)

# The ``resource`` label of koordlet_nri_conflicts_total.
CPUSET, CPU_SHARES, CPU_QUOTA, MEMORY_LIMIT = "cpuset", "cpu_shares", "cpu_quota", "memory_limit"
RESOURCES = (CPUSET, CPU_SHARES, CPU_QUOTA, MEMORY_LIMIT)
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MIN_SHARES, MAX_SHARES = 2, 262_144  # what the v1 kernel clamps cpu.shares to
MAX_WEIGHT = 10_000
MAX_PENDING = 4096
MAX_RECORDS = 1024

# Each resource's file: (v1, v2). On v2 the period is part of cpu.max.
FILES = {
    CPUSET: ("cpuset.cpus", "cpuset.cpus"),
    CPU_SHARES: ("cpu.shares", "cpu.weight"),
    CPU_QUOTA: ("cpu.cfs_quota_us", "cpu.max"),
    MEMORY_LIMIT: ("memory.limit_in_bytes", "memory.max"),
}


@dataclass(frozen=True)
class Asked:
    """What koordlet asked the runtime for; None: nothing (NRI leaves it to the others)."""

    cpuset: str | None = None
    cpu_shares: int | None = None
    cpu_quota: int | None = None
    cpu_period: int | None = None
    memory_limit: int | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def merged(self, newer: Asked) -> Asked:
        """This, with every value ``newer`` asks for replacing this one's."""
        changes = {f.name: getattr(newer, f.name) for f in fields(newer)}
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def asked_in(resources: api.LinuxResources) -> Asked:
    """The compared values of an NRI adjustment's or update's resources. 0 is runc's "leave it
    as it is" for shares, quota, period and memory limit: not asked."""
    cpu, memory = resources.cpu, resources.memory
    return Asked(
        cpuset=cpu.cpus or None,
        cpu_shares=cpu.shares.value if cpu.HasField("shares") and cpu.shares.value else None,
        cpu_quota=cpu.quota.value if cpu.HasField("quota") and cpu.quota.value else None,
        cpu_period=cpu.period.value if cpu.HasField("period") and cpu.period.value else None,
        memory_limit=(
            memory.limit.value if memory.HasField("limit") and memory.limit.value else None
        ),
    )


@dataclass(frozen=True)
class Found:
    """The files' text as read; None: not read, absent or unreadable (never a conflict)."""

    cpuset: str | None = None  # cpuset.cpus
    cpu_shares: str | None = None  # cpu.shares (v1) or cpu.weight (v2)
    cpu_quota: str | None = None  # cpu.cfs_quota_us (v1) or cpu.max "quota period" (v2)
    cpu_period: str | None = None  # cpu.cfs_period_us (v1); on v2 in cpu.max
    memory_limit: str | None = None  # memory.limit_in_bytes (v1) or memory.max (v2)


@dataclass(frozen=True)
class Conflict:
    resource: str  # one of RESOURCES
    asked: str  # koordlet's value (with what the file should hold, where that differs)
    found: str  # what the file holds
    file: str  # the file read


# -- the comparison (pure) ------------------------------------------------------------------


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _cpus(text: str) -> frozenset[int] | None:
    try:
        return parse_cpuset(text)
    except ModelError:
        return None


def _unlimited(number: int) -> int:
    """-1 for every way of saying "no limit": negative, or v1's largest page-aligned int64."""
    return -1 if number < 0 or number >= V1_UNLIMITED_FLOOR else number


def _max_or_int(text: str) -> int | None:
    text = text.strip()
    if text == "max":
        return -1
    number = _int(text)
    return None if number is None else _unlimited(number)


def shares_weights(shares: int) -> frozenset[int]:
    """The cgroup v2 ``cpu.weight`` values runc may have made of ``shares``: its long-standing
    linear mapping (1 + ((shares - 2) * 9999) / 262142) and the quadratic one of newer runc
    versions (shares 2, 1024 and 262144 to weights 1, 100 and 10000)."""
    weights = {shares_to_weight(shares)}
    if shares <= MIN_SHARES:
        weights.add(1)
    elif shares >= MAX_SHARES:
        weights.add(MAX_WEIGHT)
    else:
        log2 = math.log2(shares)  # exact for powers of two, as Go's
        weights.add(math.ceil(10 ** ((log2 * log2 + 125 * log2) / 612 - 7 / 34)))
    return frozenset(weights)


def _memory_limits(asked: int, page_size: int) -> frozenset[int]:
    """What a memory file may hold for ``asked``: unlimited, or the bytes rounded down to whole
    pages (as the kernel stores them) or exactly as asked."""
    if _unlimited(asked) == -1:
        return frozenset({-1})
    return frozenset({_unlimited(asked // page_size * page_size), asked})


def _compare_quota(asked: Asked, found: Found, version: int) -> Conflict | None:
    """Quota and period, one conflict for both (the ``cpu_quota`` resource)."""
    if version == 2:
        parts = found.cpu_quota.split() if found.cpu_quota is not None else []
        quota_text = parts[0] if parts else None
        period_text = parts[1] if len(parts) > 1 else None
    else:
        quota_text, period_text = found.cpu_quota, found.cpu_period
    differs = False
    wanted, held = [], []
    if asked.cpu_quota is not None and quota_text is not None:
        have = _max_or_int(quota_text)
        want = _unlimited(asked.cpu_quota)
        if have is not None and have != want:
            differs = True
        wanted.append("max" if version == 2 and want == -1 else str(want))
        held.append(quota_text.strip())
    if asked.cpu_period is not None and period_text is not None:
        have = _int(period_text)
        if have is not None and have != asked.cpu_period:
            differs = True
        wanted.append(f"period {asked.cpu_period}")
        held.append(f"period {period_text.strip()}")
    if not differs:
        return None
    return Conflict(CPU_QUOTA, " ".join(wanted), " ".join(held), FILES[CPU_QUOTA][version - 1])


def compare(asked: Asked, found: Found, version: int, page_size: int = PAGE_SIZE) -> list[Conflict]:
    """The resources whose file holds something else than ``asked``, in RESOURCES order.

    Only what was asked and read is compared; a file that cannot be parsed is no conflict (it
    says nothing about who wrote it). ``version`` is the cgroup version of the files read (1
    also on hybrid hosts: koordlet uses the v1 controllers there).
    """
    side = 1 if version == 2 else 0
    out: list[Conflict] = []
    if asked.cpuset is not None and found.cpuset is not None:
        want_cpus, have_cpus = _cpus(asked.cpuset), _cpus(found.cpuset)
        if want_cpus is not None and have_cpus is not None and want_cpus != have_cpus:
            shown = found.cpuset.strip() or "(empty)"
            out.append(Conflict(CPUSET, asked.cpuset, shown, FILES[CPUSET][side]))
    if asked.cpu_shares is not None and found.cpu_shares is not None:
        have = _int(found.cpu_shares)
        shown = found.cpu_shares.strip()
        if version == 2:
            if have is not None and have not in shares_weights(asked.cpu_shares):
                text = f"{asked.cpu_shares} (cpu.weight {shares_to_weight(asked.cpu_shares)})"
                out.append(Conflict(CPU_SHARES, text, shown, FILES[CPU_SHARES][side]))
        elif have is not None and have != min(max(asked.cpu_shares, MIN_SHARES), MAX_SHARES):
            out.append(Conflict(CPU_SHARES, str(asked.cpu_shares), shown, FILES[CPU_SHARES][side]))
    quota = _compare_quota(asked, found, 2 if version == 2 else 1)
    if quota is not None:
        out.append(quota)
    if asked.memory_limit is not None and found.memory_limit is not None:
        held = _max_or_int(found.memory_limit)
        if held is not None and held not in _memory_limits(asked.memory_limit, page_size):
            want = _unlimited(asked.memory_limit)
            text = "max" if version == 2 and want == -1 else str(want)
            shown = found.memory_limit.strip()
            out.append(Conflict(MEMORY_LIMIT, text, shown, FILES[MEMORY_LIMIT][side]))
    return out


# -- reading and remembering ----------------------------------------------------------------


def read_found(executor: Executor, cgroup: str, asked: Asked) -> Found:
    """The files of what was asked, read through the executor (under its root, never a path
    that leaves it): one small file per resource asked (the v1 period has a file of its own)."""

    def text(resource: str, wanted: object) -> str | None:
        return None if wanted is None else executor.read_text(cgroup, resource)

    quota_asked = asked.cpu_quota if asked.cpu_quota is not None else asked.cpu_period
    return Found(
        cpuset=text("cpuset.cpus", asked.cpuset),
        cpu_shares=text("cpu.shares", asked.cpu_shares),
        cpu_quota=text("cpu.cfs_quota_us", quota_asked),
        cpu_period=(text("cpu.cfs_period_us", asked.cpu_period) if executor.version != 2 else None),
        memory_limit=text("memory.limit_in_bytes", asked.memory_limit),
    )


# koordlet's own writes (v1 resource names) that stand for an asked value
_WRITTEN = {
    "cpuset.cpus": CPUSET,
    "cpu.shares": CPU_SHARES,
    "cpu.cfs_quota_us": CPU_QUOTA,
    "memory.limit_in_bytes": MEMORY_LIMIT,
}


@dataclass(frozen=True)
class Pending:
    """A created container waiting for its start, and what koordlet asked for it."""

    pod_uid: str
    key: str  # namespace/pod/container
    name: str
    cgroup: str
    asked: Asked


class ConflictMetrics(Protocol):
    """What the tracker counts conflicts with: ``koordlet.metrics.KoordletMetrics``, which the QoS
    manager uses too (a protocol here keeps the NRI side out of its imports)."""

    node: str
    nri_conflicts: Counter


class ConflictTracker:
    """Remembers what koordlet asked per container and checks it after the start; see the
    module docstring. Called from the NRI handlers (the event loop) and, through
    ``note_write``, from the QoS manager's threads: every method takes the lock."""

    def __init__(
        self,
        executor: Executor,
        metrics: ConflictMetrics,
        *,
        max_pending: int = MAX_PENDING,
        max_records: int = MAX_RECORDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.executor = executor
        self.metrics = metrics
        for resource in RESOURCES:  # 0 from the start, so that increases show
            metrics.nri_conflicts.labels(metrics.node, resource)
        self.max_pending = max_pending
        self.clock = clock
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        self._by_cgroup: dict[str, str] = {}  # cgroup → container id, for note_write
        self._records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._lock = threading.Lock()

    def asked(self, request: ContainerRequest, adjustment: api.ContainerAdjustment | None) -> None:
        """At CreateContainer: what the adjustment asks for ``request`` (nothing: not kept)."""
        asked = asked_in(adjustment.linux.resources) if adjustment is not None else Asked()
        if asked.empty or not request.id or not request.cgroup_dir:
            return
        with self._lock:
            self._drop(request.id)
            self._pending[request.id] = Pending(
                request.pod.uid, request.key, request.name, request.cgroup_dir, asked
            )
            self._by_cgroup[request.cgroup_dir] = request.id
            while len(self._pending) > self.max_pending:
                oldest = next(iter(self._pending))
                log.debug("conflict check: too many containers waiting, dropping %s", oldest)
                self._drop(oldest)

    def updated(self, container_id: str, update: api.ContainerUpdate | None) -> None:
        """At UpdateContainer before the start: koordlet's answer is now what it asks."""
        if update is None:
            return
        newer = asked_in(update.linux.resources)
        with self._lock:
            pending = self._pending.get(container_id)
            if pending is not None and not newer.empty:
                self._pending[container_id] = replace(pending, asked=pending.asked.merged(newer))

    def note_write(self, write: CgroupWrite) -> None:
        """koordlet itself wrote ``write``, or found it in place (the executor's applied and
        unchanged results): a waiting container's asked value follows koordlet's wish."""
        field = _WRITTEN.get(write.resource)
        if field is None:
            return
        with self._lock:
            container_id = self._by_cgroup.get(write.cgroup.strip("/"))
            pending = None if container_id is None else self._pending.get(container_id)
            if container_id is None or pending is None or getattr(pending.asked, field) is None:
                return
            if field == CPUSET:
                asked = replace(pending.asked, cpuset=str(write.value))
            else:
                number = _int(str(write.value))
                if number is None:
                    return
                if field == CPU_SHARES:
                    asked = replace(pending.asked, cpu_shares=number)
                elif field == CPU_QUOTA:
                    asked = replace(pending.asked, cpu_quota=number)
                else:
                    asked = replace(pending.asked, memory_limit=number)
            self._pending[container_id] = replace(pending, asked=asked)

    def waiting(self, container_id: str) -> bool:
        """Whether the container is created but not yet checked (its start is to come)."""
        with self._lock:
            return container_id in self._pending

    def check(self, container_id: str) -> list[Conflict]:
        """At PostStartContainer: read, compare, log, count and keep each conflict; forget the
        container either way."""
        with self._lock:
            pending = self._drop(container_id)
        if pending is None:
            return []
        found = read_found(self.executor, pending.cgroup, pending.asked)
        conflicts = compare(pending.asked, found, self.executor.version)
        now = self.clock()
        for conflict in conflicts:
            log.warning(
                "NRI conflict on container %s (%s): %s asked %s, found %s in %s/%s; another "
                "NRI plugin or the kubelet set it after koordlet",
                pending.key,
                container_id[:12],
                conflict.resource,
                conflict.asked,
                conflict.found,
                pending.cgroup,
                conflict.file,
            )
            record = {
                "ts": now,
                "pod_uid": pending.pod_uid,
                "container": pending.name,
                "container_id": container_id,
                **asdict(conflict),
            }
            with self._lock:
                self._records.append(record)
            # counted last: whoever sees the count finds the log line and the record
            self.metrics.nri_conflicts.labels(self.metrics.node, conflict.resource).inc()
        return conflicts

    def forget(self, container_id: str) -> None:
        """The container stopped or was removed before its check."""
        with self._lock:
            self._drop(container_id)

    def forget_pod(self, pod_uid: str) -> None:
        """The pod is gone: its waiting containers and its recorded conflicts too."""
        with self._lock:
            for container_id in [c for c, p in self._pending.items() if p.pod_uid == pod_uid]:
                self._drop(container_id)
            kept = [r for r in self._records if r["pod_uid"] != pod_uid]
            self._records.clear()
            self._records.extend(kept)

    def for_pod(self, pod_uid: str) -> list[dict[str, Any]]:
        """The conflicts recorded for the pod's containers, oldest first (JSON-ready)."""
        with self._lock:
            return [dict(r) for r in self._records if r["pod_uid"] == pod_uid]

    def _drop(self, container_id: str) -> Pending | None:
        pending = self._pending.pop(container_id, None)
        if pending is not None and self._by_cgroup.get(pending.cgroup) == container_id:
            del self._by_cgroup[pending.cgroup]
        return pending
