"""GPU usage through NVML (pynvml): per device, and per pod and container by their processes.

Each pass asks NVML, device by device (by index): the minor number and UUID, memory info (total
and used bytes), utilization rates (percent of time the SM array was busy), the compute
processes with their GPU memory, and the per-process SM utilization samples NVML recorded since
the previous pass. Processes map to pods and containers through each container's cgroup.procs.

Not here: graphics processes (GPU pods run CUDA compute contexts), MIG instances, other
accelerators (XPU), and anything that changes a device. pynvml is the optional ``gpu`` extra
(PyPI nvidia-ml-py): it is imported on the first pass, so this module imports without it; a
missing module, a failing ``nvmlInit`` (no driver, no libnvidia-ml.so) or a node without GPUs
raises ``CollectorUnavailable`` with the reason. A device failing one call is skipped for that
pass and counted; the other devices are still read.

NVML reports pids in the host's pid namespace and cgroup.procs lists them in the reader's: koordlet
must run in the host pid namespace (Koordinator's DaemonSet sets hostPID) for the mapping to hold.

Usage::

    collector = GPUCollector(lambda: pod_store, cgroup_root=Path("/sys/fs/cgroup"))
    samples = collector.collect(time.time())   # CollectorUnavailable without NVML
    gpu_inventory()                             # [GPUDevice(index=0, minor=0, uuid=...), ...]
"""

from __future__ import annotations

import importlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol, cast

from koordlet.cgroupfs.readers import CgroupProcs, PidsOf
from koordlet.collectors.base import CollectorUnavailable
from koordlet.metriccache import Sample
from koordlet.states.pods import KnownPod

log = logging.getLogger(__name__)

INSTALL_HINT = "pynvml not installed: pip install 'koordinator-py[gpu]'"

# Reasons counted in ``skipped``.
NVML_ERROR = "nvml-error"  # one device failed a call this pass (the message is logged)
MEMORY_NOT_AVAILABLE = "gpu-memory-not-available"  # NVML had no usedGpuMemory for a process


class MemoryInfo(Protocol):
    """pynvml's c_nvmlMemory_t: bytes."""

    @property
    def total(self) -> int: ...
    @property
    def free(self) -> int: ...
    @property
    def used(self) -> int: ...


class Utilization(Protocol):
    """pynvml's c_nvmlUtilization_t: percent of the last sample period."""

    @property
    def gpu(self) -> int: ...
    @property
    def memory(self) -> int: ...


class ProcessInfo(Protocol):
    """An entry of nvmlDeviceGetComputeRunningProcesses (pynvml's nvmlFriendlyObject)."""

    @property
    def pid(self) -> int: ...
    @property
    def usedGpuMemory(self) -> int | None: ...  # None: not available (pynvml maps ~0 to None)


class ProcessUtilizationSample(Protocol):
    """pynvml's c_nvmlProcessUtilizationSample_t; timeStamp is CPU time in microseconds."""

    @property
    def pid(self) -> int: ...
    @property
    def timeStamp(self) -> int: ...
    @property
    def smUtil(self) -> int: ...


class NVML(Protocol):
    """The part of the pynvml module this collector calls; tests pass a fake with these names."""

    @property
    def NVMLError(self) -> type[Exception]: ...  # every NVML failure (pynvml's base class)
    @property
    def NVMLError_NotFound(self) -> type[Exception]: ...

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetMinorNumber(self, handle: object) -> int: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str: ...
    def nvmlDeviceGetName(self, handle: object) -> str: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> MemoryInfo: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Utilization: ...
    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> Sequence[ProcessInfo]: ...
    def nvmlDeviceGetProcessUtilization(
        self, handle: object, timeStamp: int
    ) -> Sequence[ProcessUtilizationSample]: ...


def load_nvml() -> NVML:
    """The pynvml module, or CollectorUnavailable saying how to install it."""
    try:
        # By name at run time: the extra is optional and ships no type information.
        module = importlib.import_module("pynvml")
    except ImportError as err:
        raise CollectorUnavailable(INSTALL_HINT) from err
    return cast(NVML, module)


def init_nvml(nvml: NVML) -> None:
    """nvmlInit, or CollectorUnavailable with NVML's own reason (no driver, no library)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        raise CollectorUnavailable(f"NVML init failed: {err}") from err


@dataclass(frozen=True)
class GPUDevice:
    index: int
    minor: int
    uuid: str
    memory_total: int  # bytes
    name: str


def gpu_inventory(nvml: NVML | None = None) -> list[GPUDevice]:
    """The node's GPUs; a device NVML cannot describe is left out (and logged).

    Calls nvmlInit and nvmlShutdown around the queries: NVML counts them, so this is safe while
    a collector holds its own initialization.
    """
    nvml = load_nvml() if nvml is None else nvml
    init_nvml(nvml)
    devices: list[GPUDevice] = []
    try:
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                devices.append(
                    GPUDevice(
                        index=index,
                        minor=nvml.nvmlDeviceGetMinorNumber(handle),
                        uuid=nvml.nvmlDeviceGetUUID(handle),
                        memory_total=nvml.nvmlDeviceGetMemoryInfo(handle).total,
                        name=nvml.nvmlDeviceGetName(handle),
                    )
                )
            except nvml.NVMLError as err:
                log.warning("GPU %d left out of the inventory: %s", index, err)
    finally:
        nvml.nvmlShutdown()
    return devices


@dataclass
class _Usage:
    memory: int = 0  # bytes
    core: int = 0  # percent of one GPU (SM utilization)


@dataclass
class _DeviceReading:
    minor: int
    uuid: str
    memory_total: int
    memory_used: int
    core: int
    processes: dict[int, _Usage] = field(default_factory=dict)  # pid → usage on this device


class GPUCollector:
    """See the module docstring. ``pods`` returns the known pods (``lambda: pod_store``)."""

    name = "gpu"
    feature_gate: ClassVar[str] = "Accelerators"

    def __init__(
        self,
        pods: Callable[[], Iterable[KnownPod]] = tuple,
        *,
        nvml: NVML | None = None,
        cgroup_root: Path = Path("/sys/fs/cgroup"),
        pids_of: PidsOf | None = None,
        interval: float = 1.0,
    ) -> None:
        self.pods = pods
        self.interval = interval
        self.skipped: Counter[str] = Counter()
        self._nvml = nvml
        self._initialized = False
        self._pids_of = CgroupProcs(cgroup_root) if pids_of is None else pids_of
        # Per device (UUID): the newest process sample seen, so each pass asks NVML only for
        # samples taken since the previous one.
        self._last_seen: dict[str, int] = {}
        self._last_error: dict[int, str] = {}  # per device index: log a failure once, not 1/s

    def _open(self) -> NVML:
        nvml = load_nvml() if self._nvml is None else self._nvml
        self._nvml = nvml
        if not self._initialized:
            init_nvml(nvml)
            self._initialized = True
            if nvml.nvmlDeviceGetCount() == 0:
                self.close()
                raise CollectorUnavailable("NVML reports no GPU on this node")
        return nvml

    def close(self) -> None:
        """Release NVML (nvmlShutdown) if this collector initialized it."""
        if self._initialized and self._nvml is not None:
            self._initialized = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError as err:
                log.warning("nvmlShutdown failed: %s", err)

    def collect(self, now: float) -> list[Sample]:
        nvml = self._open()
        readings: list[_DeviceReading] = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                readings.append(self._read_device(nvml, index, now))
            except nvml.NVMLError as err:
                # One device failing (fallen off the bus, reset in progress) must not hide the
                # others: skip it for this pass only.
                self.skipped[NVML_ERROR] += 1
                if self._last_error.get(index) != str(err):
                    log.warning("GPU %d skipped: %s", index, err)
                self._last_error[index] = str(err)
            else:
                self._last_error.pop(index, None)
        samples: list[Sample] = []
        for r in readings:
            labels = {"gpu_minor": str(r.minor), "gpu_device_uuid": r.uuid}
            samples.append(Sample("node_gpu_memory_total", labels, now, float(r.memory_total)))
            samples.append(Sample("node_gpu_memory_usage", labels, now, float(r.memory_used)))
            samples.append(Sample("node_gpu_core_usage", labels, now, float(r.core)))
        # Reading every container's cgroup.procs costs a file per container per second: only
        # worth it when some GPU has a compute process at all.
        if any(r.processes for r in readings):
            samples.extend(self._pod_samples(readings, now))
        return samples

    def _read_device(self, nvml: NVML, index: int, now: float) -> _DeviceReading:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = nvml.nvmlDeviceGetUUID(handle)
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        reading = _DeviceReading(
            minor=nvml.nvmlDeviceGetMinorNumber(handle),
            uuid=uuid,
            memory_total=memory.total,
            memory_used=memory.used,
            core=nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
        )
        processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        if not processes:
            return reading
        since = self._last_seen.get(uuid, int((now - self.interval) * 1_000_000))
        try:
            utilization = nvml.nvmlDeviceGetProcessUtilization(handle, since)
        except nvml.NVMLError_NotFound:
            utilization = []  # no sample since ``since``: the processes were idle
        sm: dict[int, ProcessUtilizationSample] = {}
        for s in utilization:
            if s.pid not in sm or s.timeStamp > sm[s.pid].timeStamp:
                sm[s.pid] = s  # NVML may return several samples per process: keep the newest
        if sm:
            self._last_seen[uuid] = max(s.timeStamp for s in sm.values())
        for p in processes:
            usage = reading.processes.setdefault(p.pid, _Usage())
            if p.usedGpuMemory is None:
                self.skipped[MEMORY_NOT_AVAILABLE] += 1
            else:
                usage.memory += p.usedGpuMemory
            if p.pid in sm:
                usage.core = sm[p.pid].smUtil
        return reading

    def _owners(self) -> dict[int, tuple[str, str]]:
        """pid → (pod uid, container id) for every process of every known container."""
        owners: dict[int, tuple[str, str]] = {}
        for pod in self.pods():
            # list() copies in one step: the NRI handlers may add a container meanwhile.
            for container in list(pod.containers.values()):
                if not container.cgroup_dir:
                    continue
                for pid in self._pids_of(container.cgroup_dir):
                    owners[pid] = (pod.request.uid, container.id)
        return owners

    def _pod_samples(self, readings: list[_DeviceReading], now: float) -> list[Sample]:
        owners = self._owners()
        pods: dict[tuple[str, int], _Usage] = {}
        containers: dict[tuple[str, str, int], _Usage] = {}
        for r in readings:
            for pid, usage in r.processes.items():
                owner = owners.get(pid)
                if owner is None:
                    continue  # a process outside any known container (a host process)
                uid, cid = owner
                for total in (
                    pods.setdefault((uid, r.minor), _Usage()),
                    containers.setdefault((uid, cid, r.minor), _Usage()),
                ):
                    total.memory += usage.memory
                    total.core += usage.core
        samples: list[Sample] = []
        for (uid, minor), u in pods.items():
            labels = {"pod_uid": uid, "gpu_minor": str(minor)}
            samples.append(Sample("pod_gpu_memory_usage", labels, now, float(u.memory)))
            samples.append(Sample("pod_gpu_core_usage", labels, now, float(u.core)))
        for (uid, cid, minor), u in containers.items():
            labels = {"pod_uid": uid, "container_id": cid, "gpu_minor": str(minor)}
            samples.append(Sample("container_gpu_memory_usage", labels, now, float(u.memory)))
            samples.append(Sample("container_gpu_core_usage", labels, now, float(u.core)))
        return samples
