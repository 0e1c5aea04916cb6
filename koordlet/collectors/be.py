"""What best-effort pods may use, ask for and use, in milli-cores: ``node_be{be_resource=cpu}``.

* ``be_allocation="real-limit"``: CPUs in the besteffort QoS cgroup's cpuset * 1000, lowered
  to its CFS quota * 1000 / period when a quota is set (> 0). CPU suppress moves both, so
  this is what BE pods can get right now, not what was scheduled.
* ``be_allocation="request"``: Σ batch-cpu requests (kubernetes.io/batch-cpu, or the
  deprecated koordinator.sh/batch-cpu) of BE pods, from each pod's
  node.koordinator.sh/extended-resource-spec annotation.
* ``be_allocation="usage"``: Δ CPU time of the besteffort QoS cgroup over the elapsed wall
  time (no sample on the first pass).

A pod counts as BE by its koordinator.sh/qosClass label, or, without one, when Kubernetes
made it BestEffort. A pod whose annotation does not parse is left out of the request and
counted as ``malformed-annotation``. Memory and per-container cpusets are not read here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path

from koordapi import keys
from koordapi.annotation import parse_extended_resource_spec
from koordapi.cpuset import parse_cpuset
from koordapi.errors import ModelError
from koordapi.qos import KubeQoS, QoSClass
from koordlet.cgroupfs.readers import MALFORMED, CgroupFS, Skip, read_text
from koordlet.collectors.rates import Counters
from koordlet.metriccache import Sample
from koordlet.states.pods import (
    CGROUP_DRIVERS,
    DEFAULT_KUBE_DIR,
    KnownPod,
    kube_qos_dirs,
)

MALFORMED_ANNOTATION = "malformed-annotation"
NO_BE_CGROUP = "no-besteffort-cgroup"


def be_dirs(kube_dir: str = DEFAULT_KUBE_DIR) -> tuple[str, ...]:
    """The besteffort QoS cgroup under the cgroupfs (below ``kube_dir``, --cgroup-kube-dir)
    and the systemd drivers, tried in this order."""
    return tuple(kube_qos_dirs(driver, kube_dir)[KubeQoS.BESTEFFORT] for driver in CGROUP_DRIVERS)


BE_DIRS = be_dirs()  # with the default --cgroup-kube-dir

_BATCH_CPU = (keys.BATCH_CPU, keys.DEPRECATED_BATCH_CPU)


def labels(allocation: str) -> dict[str, str]:
    return {"be_resource": "cpu", "be_allocation": allocation}


def is_be(pod: KnownPod) -> bool:
    qos = pod.request.qos
    if qos is QoSClass.NONE:
        return pod.request.kube_qos is KubeQoS.BESTEFFORT
    return qos is QoSClass.BE


def batch_cpu_request(pod: KnownPod) -> Decimal:
    """Σ batch-cpu requests (milli-cores) of a pod's containers; 0 without the annotation."""
    text = pod.request.annotations.get(keys.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if not text:
        return Decimal(0)
    total = Decimal(0)
    for spec in parse_extended_resource_spec(text).values():
        for name in _BATCH_CPU:
            if name in spec.requests:
                total += spec.requests[name]
                break  # the current name wins over the deprecated one
    return total


def real_limit_milli(cpus: int, quota: int, period: int) -> float:
    """cpuset size * 1000, capped by quota * 1000 / period when the quota is positive."""
    limit = float(cpus * 1000)
    if quota > 0 and period > 0:
        limit = min(limit, quota * 1000 / period)
    return limit


class BECollector:
    """See the module docstring. ``be_dir`` None finds the besteffort cgroup of either driver
    (the cgroupfs one below ``kube_dir``, koordlet's --cgroup-kube-dir)."""

    name = "be"

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]],
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        sys_root: Path = Path("/sys"),
        *,
        be_dir: str | None = None,
        kube_dir: str = DEFAULT_KUBE_DIR,
        interval: float = 1.0,
        cgroup_version: int | None = None,
    ) -> None:
        self.pods = pods
        self.cgroups = CgroupFS(cgroup_root, cgroup_version)
        self.sys_root = sys_root
        self.be_dir = be_dir
        self.be_dirs = be_dirs(kube_dir)
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        self._counters: Counters[str] = Counters()

    def _find_be_dir(self) -> str | None:
        if self.be_dir is not None:
            return self.be_dir
        for candidate in self.be_dirs:
            if self.cgroups.path("cpu", candidate, "").is_dir():
                return candidate
        return None

    def collect(self, now: float) -> list[Sample]:
        samples = [Sample("node_be", labels("request"), now, self._request())]
        be_dir = self._find_be_dir()
        if be_dir is None:
            # No BE cgroup yet (no kubelet, or it has not created the QoS dirs): only the
            # request is known. Not "unavailable": the directory appears once kubelet runs.
            self.skipped[NO_BE_CGROUP] += 1
            self._counters.forget("usage")
            return samples
        try:
            samples.append(Sample("node_be", labels("real-limit"), now, self._real_limit(be_dir)))
        except Skip as skip:
            self.skipped[skip.reason] += 1
        try:
            delta = self._counters.update("usage", now, self.cgroups.cpu_usage_ns(be_dir))
            if delta is not None:
                milli = delta.per_second(unit=1e6)  # ns per second per milli-core
                samples.append(Sample("node_be", labels("usage"), now, milli))
        except Skip as skip:
            self.skipped[skip.reason] += 1
        return samples

    def _request(self) -> float:
        total = Decimal(0)
        for pod in self.pods():
            if not is_be(pod):
                continue
            try:
                total += batch_cpu_request(pod)
            except ModelError:
                self.skipped[MALFORMED_ANNOTATION] += 1
        return float(total)

    def _real_limit(self, be_dir: str) -> float:
        cpus = self.cgroups.cpuset(be_dir)
        if cpus is None:  # v2 without the cpuset controller: every online CPU
            path = self.sys_root / "devices" / "system" / "cpu" / "online"
            try:
                cpus = parse_cpuset(read_text(path))
            except ModelError as err:
                raise Skip(MALFORMED, f"{path}: {err}") from None
        quota, period = self.cgroups.cfs_quota(be_dir)
        return real_limit_milli(len(cpus), quota, period)
