"""The GPU collector against a fake of pynvml: devices, processes → pods, failures, inventory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from koordlet.cgroupfs.readers import CgroupProcs
from koordlet.collectors.base import Collector, CollectorRunner, CollectorUnavailable
from koordlet.collectors.gpu import (
    INSTALL_HINT,
    MEMORY_NOT_AVAILABLE,
    NVML_ERROR,
    GPUCollector,
    GPUDevice,
    gpu_inventory,
)
from koordlet.metriccache import MetricCache, Sample
from koordlet.states.pods import KnownPod
from tests.unit.koordlet.collectors import fake_nvml
from tests.unit.koordlet.collectors.fake_nvml import FakeGPU, FakeNVML
from tests.unit.koordlet.collectors.fakes import pod, write

NOW = 1_700_000_000.0
US = 1_000_000
GIB = 1 << 30

POD_A = pod(
    "uid-a", "kubepods/poduid-a", {"ca1": "kubepods/poduid-a/ca1", "ca2": "kubepods/poduid-a/ca2"}
)
POD_B = pod("uid-b", "kubepods/poduid-b", {"cb1": "kubepods/poduid-b/cb1"})
PIDS = {
    "kubepods/poduid-a/ca1": [100, 101],
    "kubepods/poduid-a/ca2": [200],
    "kubepods/poduid-b/cb1": [300],
}


def pids_of(cgroup_dir: str) -> list[int]:
    return PIDS.get(cgroup_dir, [])


def collector(nvml: FakeNVML, pods: list[KnownPod] | None = None) -> GPUCollector:
    known = [POD_A, POD_B] if pods is None else pods
    return GPUCollector(lambda: known, nvml=nvml, pids_of=pids_of)


def by_series(samples: list[Sample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    return by_series(samples)[(name, tuple(sorted(labels.items())))]


def names(samples: list[Sample]) -> set[str]:
    return {s.name for s in samples}


def two_gpus() -> list[FakeGPU]:
    return [
        FakeGPU(minor=0, uuid="GPU-aaaa", total=80 * GIB, used=10 * GIB, gpu_util=35),
        FakeGPU(minor=2, uuid="GPU-bbbb", total=80 * GIB, used=0, gpu_util=0),
    ]


def test_missing_pynvml_is_unavailable_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml → ImportError

    with pytest.raises(CollectorUnavailable, match=r"pip install 'koordinator-py\[gpu\]'"):
        GPUCollector().collect(NOW)
    with pytest.raises(CollectorUnavailable) as info:
        gpu_inventory()
    assert str(info.value) == INSTALL_HINT


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        pytest.param(
            fake_nvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            "NVML init failed: NVML Shared Library Not Found",
            id="no-libnvidia-ml",
        ),
        pytest.param(
            fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED,
            "NVML init failed: Driver Not Loaded",
            id="no-driver",
        ),
    ],
)
def test_nvml_init_failure_is_unavailable_with_nvmls_reason(code: int, reason: str) -> None:
    with pytest.raises(CollectorUnavailable) as info:
        collector(FakeNVML(two_gpus(), init_error=code)).collect(NOW)
    assert str(info.value) == reason


def test_the_runner_turns_the_collector_off_once_with_the_reason() -> None:
    nvml = FakeNVML(two_gpus(), init_error=fake_nvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    gpu = collector(nvml)
    runner = CollectorRunner([gpu], MetricCache())

    runner.run_once(gpu, NOW)
    runner.run_once(gpu, NOW + 1)

    assert runner.health["gpu"].unavailable == "NVML init failed: NVML Shared Library Not Found"
    assert [c for c, _ in nvml.calls].count("nvmlInit") == 1


def test_a_node_without_gpus_is_unavailable_and_releases_nvml() -> None:
    nvml = FakeNVML([])
    with pytest.raises(CollectorUnavailable, match="no GPU"):
        collector(nvml).collect(NOW)
    assert nvml.refcount == 0


def test_node_samples_per_device_carry_minor_and_uuid() -> None:
    samples = collector(FakeNVML(two_gpus())).collect(NOW)

    gpu0 = {"gpu_minor": "0", "gpu_device_uuid": "GPU-aaaa"}
    gpu2 = {"gpu_minor": "2", "gpu_device_uuid": "GPU-bbbb"}
    assert value(samples, "node_gpu_memory_total", **gpu0) == 80 * GIB
    assert value(samples, "node_gpu_memory_usage", **gpu0) == 10 * GIB
    assert value(samples, "node_gpu_core_usage", **gpu0) == 35
    assert value(samples, "node_gpu_memory_usage", **gpu2) == 0
    assert names(samples) == {
        "node_gpu_memory_total",
        "node_gpu_memory_usage",
        "node_gpu_core_usage",
    }
    assert all(s.ts == NOW for s in samples)


def test_processes_add_up_per_container_and_per_pod_on_each_device() -> None:
    gpus = two_gpus()
    ts = int(NOW * US) - 100_000  # a sample taken 0.1 s before the pass
    gpus[0].processes = [(100, 1 * GIB), (101, 2 * GIB), (200, 4 * GIB), (300, 8 * GIB), (999, GIB)]
    gpus[0].samples = [(100, ts, 10), (101, ts, 5), (200, ts, 20), (300, ts, 30), (999, ts, 35)]
    gpus[1].processes = [(100, 3 * GIB)]
    gpus[1].samples = [(100, ts, 50)]

    samples = collector(FakeNVML(gpus)).collect(NOW)

    assert (
        value(
            samples,
            "container_gpu_memory_usage",
            pod_uid="uid-a",
            container_id="ca1",
            gpu_minor="0",
        )
        == 3 * GIB
    )
    assert (
        value(
            samples, "container_gpu_core_usage", pod_uid="uid-a", container_id="ca1", gpu_minor="0"
        )
        == 15
    )
    assert (
        value(
            samples, "container_gpu_core_usage", pod_uid="uid-a", container_id="ca2", gpu_minor="0"
        )
        == 20
    )
    assert value(samples, "pod_gpu_memory_usage", pod_uid="uid-a", gpu_minor="0") == 7 * GIB
    assert value(samples, "pod_gpu_core_usage", pod_uid="uid-a", gpu_minor="0") == 35
    assert value(samples, "pod_gpu_memory_usage", pod_uid="uid-b", gpu_minor="0") == 8 * GIB
    assert value(samples, "pod_gpu_core_usage", pod_uid="uid-a", gpu_minor="2") == 50
    assert (
        value(
            samples,
            "container_gpu_memory_usage",
            pod_uid="uid-a",
            container_id="ca1",
            gpu_minor="2",
        )
        == 3 * GIB
    )
    # pid 999 belongs to no known container: node totals only; uid-b has nothing on minor 2.
    pod_series = {
        tuple(sorted(s.labels.items())) for s in samples if s.name == "pod_gpu_core_usage"
    }
    assert pod_series == {
        (("gpu_minor", "0"), ("pod_uid", "uid-a")),
        (("gpu_minor", "0"), ("pod_uid", "uid-b")),
        (("gpu_minor", "2"), ("pod_uid", "uid-a")),
    }


def test_a_process_without_utilization_samples_counts_memory_and_zero_core() -> None:
    gpus = two_gpus()
    gpus[0].processes = [(300, 5 * GIB)]  # NVML raises NotFound: no sample since last time

    gpu = collector(FakeNVML(gpus))
    samples = gpu.collect(NOW)

    assert value(samples, "pod_gpu_memory_usage", pod_uid="uid-b", gpu_minor="0") == 5 * GIB
    assert value(samples, "pod_gpu_core_usage", pod_uid="uid-b", gpu_minor="0") == 0
    assert not gpu.skipped


def test_each_pass_asks_for_samples_newer_than_the_last_one_seen_and_keeps_the_newest() -> None:
    gpus = two_gpus()
    t0 = int(NOW * US)
    gpus[0].processes = [(300, GIB)]
    gpus[0].samples = [(300, t0 - 2 * US, 90), (300, t0 - 300_000, 40), (300, t0 - 600_000, 10)]
    nvml = FakeNVML(gpus)
    gpu = collector(nvml)

    first = gpu.collect(NOW)
    gpus[0].samples.append((300, t0 + 700_000, 60))
    second = gpu.collect(NOW + 1)
    third = gpu.collect(NOW + 2)

    since = [args[1] for fn, args in nvml.calls if fn == "nvmlDeviceGetProcessUtilization"]
    # First pass: one interval back (the 2 s old sample is left out); then the newest seen.
    assert since == [t0 - US, t0 - 300_000, t0 + 700_000]
    assert value(first, "pod_gpu_core_usage", pod_uid="uid-b", gpu_minor="0") == 40
    assert value(second, "pod_gpu_core_usage", pod_uid="uid-b", gpu_minor="0") == 60
    assert value(third, "pod_gpu_core_usage", pod_uid="uid-b", gpu_minor="0") == 0  # idle since


def test_process_memory_nvml_cannot_report_is_counted_not_summed() -> None:
    gpus = two_gpus()
    gpus[0].processes = [(100, None), (101, 2 * GIB)]

    gpu = collector(FakeNVML(gpus))
    samples = gpu.collect(NOW)

    assert value(samples, "pod_gpu_memory_usage", pod_uid="uid-a", gpu_minor="0") == 2 * GIB
    assert gpu.skipped == {MEMORY_NOT_AVAILABLE: 1}


@pytest.mark.parametrize(
    ("function", "code"),
    [
        pytest.param("nvmlDeviceGetHandleByIndex", fake_nvml.NVML_ERROR_GPU_IS_LOST, id="handle"),
        pytest.param("nvmlDeviceGetUUID", fake_nvml.NVML_ERROR_GPU_IS_LOST, id="uuid"),
        pytest.param("nvmlDeviceGetMinorNumber", fake_nvml.NVML_ERROR_NOT_SUPPORTED, id="minor"),
        pytest.param("nvmlDeviceGetMemoryInfo", fake_nvml.NVML_ERROR_GPU_IS_LOST, id="memory"),
        pytest.param(
            "nvmlDeviceGetUtilizationRates", fake_nvml.NVML_ERROR_NOT_SUPPORTED, id="util"
        ),
        pytest.param(
            "nvmlDeviceGetComputeRunningProcesses", fake_nvml.NVML_ERROR_NO_PERMISSION, id="procs"
        ),
        pytest.param(
            "nvmlDeviceGetProcessUtilization", fake_nvml.NVML_ERROR_NOT_SUPPORTED, id="proc-util"
        ),
    ],
)
def test_a_device_failing_one_call_is_skipped_and_counted_the_others_still_report(
    function: str, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    gpus = two_gpus()
    for g in gpus:
        g.processes = [(300, GIB)]
    gpus[0].errors[function] = code

    gpu = collector(FakeNVML(gpus))
    samples = gpu.collect(NOW)
    gpu.collect(NOW + 1)

    assert {s.labels["gpu_minor"] for s in samples} == {"2"}
    assert value(samples, "pod_gpu_memory_usage", pod_uid="uid-b", gpu_minor="2") == GIB
    assert gpu.skipped == {NVML_ERROR: 2}
    warnings = [r for r in caplog.records if "GPU 0 skipped" in r.getMessage()]
    assert len(warnings) == 1  # the same failure is logged once, counted every pass


def test_a_failing_device_count_fails_the_pass() -> None:
    nvml = FakeNVML(two_gpus())
    gpu = collector(nvml)
    gpu.collect(NOW)
    nvml.refcount = 0  # as if NVML was shut down under us

    with pytest.raises(fake_nvml.NVMLError_Uninitialized):
        gpu.collect(NOW + 1)


def test_container_cgroups_are_not_read_while_no_gpu_runs_a_process() -> None:
    def no_reads(cgroup_dir: str) -> list[int]:
        raise AssertionError(f"read {cgroup_dir}")

    gpu = GPUCollector(lambda: [POD_A], nvml=FakeNVML(two_gpus()), pids_of=no_reads)
    assert names(gpu.collect(NOW)) == {
        "node_gpu_memory_total",
        "node_gpu_memory_usage",
        "node_gpu_core_usage",
    }


@pytest.mark.parametrize("version", [1, 2])
def test_the_default_pid_reader_uses_cgroup_procs_of_the_cpu_hierarchy(
    tmp_path: Path, version: int
) -> None:
    base = tmp_path / "cpu" if version == 1 else tmp_path
    if version == 2:
        write(tmp_path / "cgroup.controllers", "cpuset cpu io memory pids\n")
    write(base / "kubepods/poduid-b/cb1/cgroup.procs", "300\n301\n")
    gpus = two_gpus()
    gpus[0].processes = [(301, GIB)]

    samples = GPUCollector(lambda: [POD_B], nvml=FakeNVML(gpus), cgroup_root=tmp_path).collect(NOW)

    assert (
        value(
            samples,
            "container_gpu_memory_usage",
            pod_uid="uid-b",
            container_id="cb1",
            gpu_minor="0",
        )
        == GIB
    )
    procs = CgroupProcs(tmp_path)
    assert procs("/kubepods/poduid-b/cb1/") == [300, 301]
    assert procs("kubepods/gone") == []


def test_close_shuts_nvml_down_once() -> None:
    nvml = FakeNVML(two_gpus())
    gpu = collector(nvml)
    gpu.collect(NOW)
    assert nvml.refcount == 1

    gpu.close()
    gpu.close()

    assert nvml.refcount == 0


def test_inventory_lists_each_device_and_balances_init_and_shutdown() -> None:
    gpus = two_gpus()
    gpus[1].name = "NVIDIA A100-SXM4-80GB"
    nvml = FakeNVML(gpus)
    gpu = collector(nvml)
    gpu.collect(NOW)

    devices = gpu_inventory(nvml)

    assert devices == [
        GPUDevice(index=0, minor=0, uuid="GPU-aaaa", memory_total=80 * GIB, name="NVIDIA H200"),
        GPUDevice(1, 2, "GPU-bbbb", 80 * GIB, "NVIDIA A100-SXM4-80GB"),
    ]
    assert nvml.refcount == 1  # the collector's own initialization is still there
    assert gpu.collect(NOW + 1)


def test_inventory_leaves_out_a_device_nvml_cannot_describe() -> None:
    gpus = two_gpus()
    gpus[0].errors["nvmlDeviceGetName"] = fake_nvml.NVML_ERROR_GPU_IS_LOST
    nvml = FakeNVML(gpus)

    assert [d.uuid for d in gpu_inventory(nvml)] == ["GPU-bbbb"]
    assert nvml.refcount == 0


def test_inventory_without_nvml_says_why() -> None:
    nvml = FakeNVML([], init_error=fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(CollectorUnavailable, match="Driver Not Loaded"):
        gpu_inventory(nvml)


def test_it_is_a_collector_on_a_one_second_schedule_behind_the_accelerators_gate() -> None:
    gpu: Collector = GPUCollector()
    assert (gpu.name, gpu.interval, GPUCollector.feature_gate) == ("gpu", 1.0, "Accelerators")
