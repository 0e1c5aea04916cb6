"""The Device report against the fake API server: created, replaced on a change, not written
when unchanged, condition times kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

from koordlet.cluster.devices import DeviceReporter, inventory_builder
from koordlet.collectors.devices import DeviceInventory
from tests.fakekube import FakeKubeAPI
from tests.unit.koordlet.collectors.fake_nvml import FakeGPU, FakeNVML


def writes(fake: FakeKubeAPI) -> list[str]:
    return [r.verb for r in fake.requests if r.verb in ("create", "update", "patch")]


def test_the_device_is_created_updated_on_change_and_left_alone_otherwise(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        nvml = FakeNVML([FakeGPU(0, "GPU-a", total=8000), FakeGPU(1, "GPU-b", total=8000)])
        inventory = DeviceInventory(tmp_path, nvml=nvml, rdma=False)
        times = iter(["2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"])
        reporter = DeviceReporter(
            fake.kube_api(),
            "n1",
            inventory_builder(inventory),
            node_uid=lambda: "uid-n1",
            now=lambda: next(times),
        )
        assert await reporter.report_once() == "created"
        stored = fake.get("Device", "n1")
        assert stored is not None
        assert [d["id"] for d in stored["spec"]["devices"]] == ["GPU-a", "GPU-b"]
        assert stored["metadata"]["ownerReferences"][0]["uid"] == "uid-n1"
        assert stored["metadata"]["labels"]["node.koordinator.sh/gpu-vendor"] == "nvidia"

        assert await reporter.report_once() == "unchanged"
        assert writes(fake) == ["create"]

        nvml.xid(1, 79)
        assert await reporter.report_once() == "updated"
        stored = fake.get("Device", "n1")
        assert stored is not None
        sick = stored["spec"]["devices"][1]
        assert sick["health"] is False
        assert sick["conditions"][0]["reason"] == "Xid79"
        since = sick["conditions"][0]["lastTransitionTime"]
        assert await reporter.report_once() == "unchanged"
        assert writes(fake) == ["create", "update"]

        nvml.gpus[0].total = 16000  # another inventory: the condition keeps its time
        assert await reporter.report_once() == "updated"
        stored = fake.get("Device", "n1")
        assert stored is not None
        assert stored["spec"]["devices"][0]["resources"]["koordinator.sh/gpu-memory"] == "16000"
        assert stored["spec"]["devices"][1]["conditions"][0]["lastTransitionTime"] == since
        assert reporter.writes == 3
        inventory.close()

    asyncio.run(asyncio.wait_for(scenario(), 20))


def test_a_failed_write_is_retried_at_the_next_interval(tmp_path: Path) -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        nvml = FakeNVML([FakeGPU(0, "GPU-a")])
        reporter = DeviceReporter(
            fake.kube_api(), "n1", inventory_builder(DeviceInventory(tmp_path, nvml=nvml))
        )
        fake.fail("create", r"/devices$", 403, times=1)
        assert await reporter.report_once() is None
        assert "not written" in (reporter.last_error or "")
        assert await reporter.report_once() == "created"
        assert reporter.last_error is None
        stored = fake.get("Device", "n1")
        assert stored is not None
        assert "ownerReferences" not in stored["metadata"]  # no Node uid known

    asyncio.run(asyncio.wait_for(scenario(), 20))
