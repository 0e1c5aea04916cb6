"""The diagnostic event-log plugin against the fake runtime."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from nri_plugin import Stub, api, events
from nri_plugin.eventlog import EventLog
from nri_plugin.testing import FakeRuntime


def test_every_message_becomes_one_json_line(tmp_path: Path) -> None:
    out = io.StringIO()
    pod = api.PodSandbox(id="pid", name="web", namespace="prod", uid="u1")
    ctr = api.Container(id="cid", name="app", pod_sandbox_id="pid", state=api.CONTAINER_RUNNING)

    async def scenario() -> None:
        runtime = FakeRuntime(pods=[pod], containers=[ctr])
        await runtime.listen(tmp_path / "nri.sock")
        stub = Stub(EventLog(out), name="nri-events", index="99", socket_path=tmp_path / "nri.sock")
        task = asyncio.create_task(stub.run())
        session = await runtime.next_session()
        await session.state_change(api.RUN_POD_SANDBOX, pod)
        reply = await session.create_container(pod, ctr)
        assert not reply.HasField("adjust")  # it changes nothing
        resources = api.LinuxResources()
        resources.cpu.shares.value = 256
        await session.update_container(pod, ctr, resources)
        assert session.events == events.VALID_EVENTS_V06  # everything a 1.7 runtime knows
        stub.stop()
        await task
        await runtime.close()

    asyncio.run(asyncio.wait_for(scenario(), 10))

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["event"] for r in records] == [
        "configure",
        "synchronize",
        "run_pod_sandbox",
        "create_container",
        "update_container",
    ]
    assert records[0]["runtime_name"] == "fake-runtime"
    assert records[1]["pods"] == [{"id": "pid", "name": "web", "namespace": "prod", "uid": "u1"}]
    assert records[1]["containers"][0]["state"] == "CONTAINER_RUNNING"
    assert records[3]["container"]["name"] == "app" and records[3]["pod"]["namespace"] == "prod"
    assert records[4]["resources"]["cpu"]["shares"]["value"] == "256"
