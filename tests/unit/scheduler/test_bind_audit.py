"""Extender binds audited over the real ExtenderServer (HTTPS on localhost, the fake API): one
"extender bind ..." line per bind, bound with the node and what was allocated or failed with
the error, counted by result in the scheduler's exposition, and served for one pod at
GET /explain/pods/{namespace}/{name} on the metrics server."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from koordkube.probes import serve_probes
from scheduler.audit import BindAudit, allocated
from scheduler.cli import requests_exposition
from scheduler.server import ExtenderServer
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.scheduler.objects import lsr_pod, make_pod
from tests.unit.scheduler.test_server import SERVER_NAME, Client, cluster

NOW = 1700000000.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, trustme.CA]:
    ca = trustme.CA()
    folder = tmp_path_factory.mktemp("certs")
    cert = ca.issue_cert(SERVER_NAME)
    cert.private_key_pem.write_to_path(str(folder / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    return folder, ca


@asynccontextmanager
async def serving(
    api: FakeKubeAPI, certs: tuple[Path, trustme.CA], *pods: str
) -> AsyncIterator[tuple[Client, ExtenderServer]]:
    folder, ca = certs
    view = InformerClusterView(api.kube_api())
    tasks = [asyncio.create_task(i.run()) for i in view.informers]
    server = ExtenderServer(
        api.kube_api(), view, host="127.0.0.1", port=0, cert_dir=folder, clock=lambda: NOW
    )
    await server.start()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    try:
        await eventually(view.synced)
        await eventually(lambda: all(view.pod("default", name) is not None for name in pods))
        async with aiohttp.ClientSession() as session:
            yield Client(session, f"https://127.0.0.1:{server.port}", context), server
    finally:
        await server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def bind_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "scheduler.audit" and r.getMessage().startswith("extender bind ")
    ]


def test_a_bound_lsr_pod_is_one_line_with_its_node_and_cpuset(
    certs: tuple[Path, trustme.CA], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api = cluster()
    api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=4)})
    audits: list[BindAudit] = []

    async def scenario() -> None:
        async with serving(api, certs, "db") as (client, server):
            args = {"PodName": "db", "PodNamespace": "default", "PodUID": "uid-db",
                    "Node": "node-2"}  # fmt: skip
            assert await client.post("bind", args) == {"Error": ""}
            audits.append(server.binder.audit)

    run(scenario())

    assert bind_lines(caplog) == [
        "extender bind strategy=bind kind=bound target=default/db value=node-2 "
        "reason='cpuset 0-1,16-17' uid='uid-db'"
    ]
    (action,) = audits[0].for_pod("default", "db")
    assert action["inputs"]["cpuset"] == "0-1,16-17" and action["ts"] == NOW
    assert audits[0].counts == {"bound": 1, "failed": 0}


def test_a_pod_without_cpus_or_devices_says_so(
    certs: tuple[Path, trustme.CA], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api = cluster()
    api.seed({"apiVersion": "v1", "kind": "Pod", **make_pod("web", requests={"cpu": "1"})})

    async def scenario() -> None:
        async with serving(api, certs, "web") as (client, _):
            args = {"PodName": "web", "PodNamespace": "default", "Node": "node-1"}
            assert await client.post("bind", args) == {"Error": ""}

    run(scenario())

    assert bind_lines(caplog) == [
        "extender bind strategy=bind kind=bound target=default/web value=node-1 "
        "reason='no CPUs pinned, no devices allocated' uid='uid-web'"
    ]


def test_failed_binds_are_lines_with_their_error_and_counted(
    certs: tuple[Path, trustme.CA], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api = cluster()
    api.seed({"apiVersion": "v1", "kind": "Pod", **lsr_pod("db", cpus=2, node="node-1")})
    replies: list[dict[str, str]] = []
    audits: list[BindAudit] = []

    async def scenario() -> None:
        async with serving(api, certs, "db") as (client, server):
            taken = {"PodName": "db", "PodNamespace": "default", "Node": "node-2"}
            replies.append(await client.post("bind", taken))
            replies.append(await client.post("bind", {"PodName": "db"}))
            audits.append(server.binder.audit)

    run(scenario())

    assert "already assigned" in replies[0]["Error"]
    first, second = bind_lines(caplog)
    assert first.startswith(
        "extender bind strategy=bind kind=failed target=default/db value=node-2 reason="
    )
    assert repr(replies[0]["Error"]) in first
    assert second == (
        "extender bind strategy=bind kind=failed target=/db value= "
        f"reason={replies[1]['Error']!r} uid=''"
    )
    assert audits[0].counts == {"bound": 0, "failed": 2}
    body, _ = requests_exposition({"bind": 2}, audits[0])
    assert body.decode().splitlines()[-3:] == [
        "# TYPE koord_scheduler_extender_binds_total counter",
        'koord_scheduler_extender_binds_total{result="bound"} 0',
        'koord_scheduler_extender_binds_total{result="failed"} 2',
    ]


def test_what_a_bind_allocated_in_words() -> None:
    assert allocated("0-3", "") == "cpuset 0-3"
    assert allocated("", "0,1") == "gpus 0,1"
    assert allocated("2-3", "1") == "cpuset 2-3, gpus 1"
    assert allocated("", "") == "no CPUs pinned, no devices allocated"


def test_the_explain_route_serves_the_pods_binds_by_name_or_uid() -> None:
    audit = BindAudit(clock=lambda: NOW)
    audit.bound("default/db", "uid-db", "node-2", cpuset="0-1")
    audit.failed("default/other", "uid-other", "node-1", "no")

    async def scenario() -> list[tuple[int, Any]]:
        runner = await serve_probes(
            "127.0.0.1:0", lambda: True, lambda: (b"", "text/plain"), audit.routes()
        )
        base = f"http://127.0.0.1:{runner.addresses[0][1]}/explain/pods"
        found = []
        try:
            async with aiohttp.ClientSession() as session:
                for path in ("/default/db", "/default/renamed?uid=uid-db", "/default/none"):
                    async with session.get(base + path) as reply:
                        found.append((reply.status, await reply.json()))
        finally:
            await runner.cleanup()
        return found

    by_name, by_uid, none = asyncio.run(asyncio.wait_for(scenario(), 10))

    assert by_name[0] == 200 and by_name[1]["component"] == "koord-scheduler"
    assert [(a["kind"], a["value"], a["reason"]) for a in by_name[1]["actions"]] == [
        ("bound", "node-2", "cpuset 0-1")
    ]
    assert by_uid[1]["actions"] == by_name[1]["actions"]
    assert none == (200, {"component": "koord-scheduler", "pod": "default/none",
                          "capacity": 2000, "actions": []})  # fmt: skip


def test_a_bind_that_raises_is_audited_before_the_handler_answers_it(
    certs: tuple[Path, trustme.CA], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    api = cluster()
    api.seed({"apiVersion": "v1", "kind": "Pod", **make_pod("web", requests={"cpu": "1"})})
    replies: list[dict[str, str]] = []

    async def scenario() -> None:
        async with serving(api, certs, "web") as (client, server):

            def broken(*_args: Any, **_kwargs: Any) -> None:
                raise RuntimeError("boom")

            server.binder.view.assume = broken  # type: ignore[method-assign]
            args = {"PodName": "web", "PodNamespace": "default", "Node": "node-1"}
            replies.append(await client.post("bind", args))

    run(scenario())

    assert replies == [{"Error": "bind failed: RuntimeError: boom"}]
    assert bind_lines(caplog) == [
        "extender bind strategy=bind kind=failed target=default/web value=node-1 "
        "reason='bind failed: RuntimeError: boom' uid=''"
    ]
