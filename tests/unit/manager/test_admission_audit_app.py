"""koord-manager serves its admission decisions next to its metrics: the Manager's probe
server answers GET /explain/pods/{namespace}/{name} and /metrics counts the decisions."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp

from manager.app import Manager, ManagerOptions
from manager.webhooks.admission import AdmissionResponse, parse_review
from tests.fakekube import FakeKubeAPI
from tests.unit.manager.webhooks import builders


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_managers_metrics_server_serves_decisions_and_their_count() -> None:
    port = free_port()
    options = ManagerOptions(
        webhook_port=None, metrics_addr=f"127.0.0.1:{port}", leader_elect=False
    )
    manager = Manager(FakeKubeAPI().kube_api(), options, clock=lambda: 1700000000.0)
    review = parse_review(json.dumps(builders.review(builders.pod())))

    async def scenario() -> tuple[dict[str, Any], str]:
        task = asyncio.create_task(manager.run())
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as session:
                for _ in range(200):  # until the probe server listens
                    try:
                        async with session.get(f"{base}/healthz"):
                            break
                    except aiohttp.ClientConnectionError:
                        await asyncio.sleep(0.02)
                denied = AdmissionResponse(False, 400, "must be BE")
                manager.admission_audit.decide("/validate-pod", review, denied, "team-a")
                async with session.get(f"{base}/explain/pods/team-a/web") as reply:
                    assert reply.status == 200
                    explained = await reply.json()
                async with session.get(f"{base}/metrics") as reply:
                    metrics = await reply.text()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return explained, metrics

    explained, metrics = asyncio.run(asyncio.wait_for(scenario(), 20))

    assert explained["component"] == "koord-manager"
    assert [a["reason"] for a in explained["actions"]] == ["must be BE"]
    assert (
        'koord_manager_webhook_decisions_total{decision="denied",object_type="pod",'
        'operation="CREATE",webhook_type="validate"} 1.0'
    ) in metrics
