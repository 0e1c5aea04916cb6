"""``koordctl devices`` on the fake NVML and a fake sysfs: the table, --json, and no GPUs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import koordctl as ctl
from koordlet.collectors import devices as devices_mod
from tests.unit.koordlet.collectors.fake_nvml import (
    NVML_ERROR_LIBRARY_NOT_FOUND,
    FakeGPU,
    FakeNVML,
)
from tests.unit.koordlet.collectors.test_devices import gpu_function
from tests.unit.koordlet.collectors.test_rdma import PF0, FakeSysfs


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeSysfs, FakeNVML]:
    fs = FakeSysfs(tmp_path)
    gpu_function(fs, "0000:4d:00.0", "1")
    fs.function(PF0)
    fs.ibdev(PF0, "mlx5_0", "ec0d:9a03:0078:1234")
    nvml = FakeNVML([FakeGPU(0, "GPU-a", total=80 << 30, bus_id="0000:4d:00.0")])
    nvml.gpus[0].events_supported = False
    monkeypatch.setattr(devices_mod, "load_nvml", lambda: nvml)
    return fs, nvml


def test_the_table_lists_gpus_and_rdma_nics(
    node: tuple[FakeSysfs, FakeNVML], capsys: pytest.CaptureFixture[str]
) -> None:
    fs, nvml = node
    assert ctl.main(["devices", "--sys-root-dir", str(fs.sys)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "TYPE",
        "MINOR",
        "UUID/ID",
        "HEALTH",
        "MEMORY",
        "NUMA",
        "PCIE",
        "BUS",
    ]
    gpu = lines[1].split()
    assert gpu[:3] == ["gpu", "0", "GPU-a"]
    assert "unhealthy (DeviceHealthCheckNotSupported)" in lines[1]
    assert gpu[-4:] == ["81920Mi", "1", "pci0000:4a", "0000:4d:00.0"]
    assert lines[2].split() == ["rdma", "0", PF0, "healthy", "-", "0", "pci0000:3a", PF0]
    assert lines[3] == "GPU model H200, driver 570.124.06"
    assert nvml.refcount == 0  # NVML released


def test_json_has_the_rows_and_the_device_koordlet_would_report(
    node: tuple[FakeSysfs, FakeNVML], capsys: pytest.CaptureFixture[str]
) -> None:
    fs, _ = node
    assert ctl.main(["devices", "--sys-root-dir", str(fs.sys), "--node", "n1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["type"] for r in report["devices"]] == ["gpu", "rdma"]
    assert report["gpu_reason"] is None
    assert report["device"]["metadata"]["name"] == "n1"
    assert [d["id"] for d in report["device"]["spec"]["devices"]] == ["GPU-a", PF0]


def test_no_nvml_prints_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    failing = FakeNVML([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(devices_mod, "load_nvml", lambda: failing)
    assert ctl.main(["devices", "--sys-root-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "no GPUs or RDMA NICs",
        "GPUs: none (NVML init failed: NVML Shared Library Not Found)",
    ]
