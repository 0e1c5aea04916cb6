"""``koordctl explain POD --manager URL --scheduler URL``: after koordlet's part, koord-manager's
admission decisions and koord-scheduler's binds for the pod, read over real HTTP from the real
components' /explain/pods handlers (AdmissionAudit.routes, BindAudit.routes) on the probe
server they share; koordlet's answer is canned. A part that cannot be read is one stderr line
and exit 1, the rest still printed."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import koordctl as ctl
from koordctl import client
from koordctl.explain import render_explain
from koordctl.explain_pod import render_manager, render_scheduler
from koordkube.probes import serve_probes
from manager.webhooks.admission import AdmissionResponse, parse_review
from manager.webhooks.audit import AdmissionAudit
from scheduler.audit import BindAudit
from tests.unit.koordctl.test_ctl import explain_data
from tests.unit.manager.webhooks import builders

NOW = 1700000000.0
AT = time.strftime("%H:%M:%S", time.localtime(NOW))
PATCH = [{"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"}]
DOCS = Path(__file__).resolve().parents[3] / "docs"
KOORDLET = explain_data([])  # pod default/job, uid u-job

MANAGER_TEXT = f"""\
manager: 2 admission decisions for default/job
  {AT} mutate-pod mutated CREATE by admin (system:authenticated): ClusterColocationProfile be
    patch {json.dumps(PATCH, separators=(",", ":"))}
  {AT} validate-pod denied CREATE by admin (system:authenticated): HTTP 400: must be BE"""
SCHEDULER_TEXT = f"""\
scheduler: 2 extender binds for default/job
  {AT} failed on node-1: binding default/job to node-1: conflict
  {AT} bound to node-2: cpuset 0-3"""


def review(name: str = "job", **meta: Any) -> Any:
    pod = builders.pod(name=name)
    pod["metadata"].update(namespace="default", **meta)
    if not name:
        del pod["metadata"]["name"]
    return parse_review(json.dumps(builders.review(pod, namespace="default")))


def manager_audit() -> AdmissionAudit:
    audit = AdmissionAudit(clock=lambda: NOW)
    mutated = AdmissionResponse(True, patch=PATCH, decided_by="ClusterColocationProfile be")
    audit.decide("/mutate-pod", review(), mutated, "default")
    audit.decide("/validate-pod", review(), AdmissionResponse(False, 400, "must be BE"), "default")
    audit.decide("/validate-pod", review("other"), AdmissionResponse(False, 400, "no"), "default")
    return audit


def scheduler_audit() -> BindAudit:
    audit = BindAudit(clock=lambda: NOW)
    audit.failed("default/job", "u-job", "node-1", "binding default/job to node-1: conflict")
    audit.bound("default/renamed", "u-job", "node-2", cpuset="0-3")  # found by its uid
    audit.bound("default/other", "u-other", "node-3")
    return audit


class Served:
    """The routes on a probe server in a thread of their own (koordctl's urllib blocks)."""

    def __init__(self, routes: list[web.RouteDef]) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        serving = serve_probes("127.0.0.1:0", lambda: True, lambda: (b"", "text/plain"), routes)
        self.runner = asyncio.run_coroutine_threadsafe(serving, self.loop).result(10)
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def manager() -> Iterator[Served]:
    served = Served(manager_audit().routes())
    yield served
    served.close()


@pytest.fixture
def scheduler() -> Iterator[Served]:
    served = Served(scheduler_audit().routes())
    yield served
    served.close()


@pytest.fixture(autouse=True)
def koordlet_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """koordlet's part, canned; the paths koordctl asked it."""
    for env in ("KOORD_MANAGER_URL", "KOORD_SCHEDULER_URL"):
        monkeypatch.delenv(env, raising=False)
    asked: list[str] = []

    def fetch(addr: str, path: str) -> Any:
        asked.append(path)
        return json.loads(json.dumps(KOORDLET))

    monkeypatch.setattr(client, "fetch", fetch)
    return asked


def unreachable_koordlet(monkeypatch: pytest.MonkeyPatch) -> None:
    def fetch(addr: str, path: str) -> Any:
        raise client.KoordletUnreachable("cannot reach koordlet at 127.0.0.1:9316 (refused)")

    monkeypatch.setattr(client, "fetch", fetch)


def test_explain_pod_prints_the_managers_and_the_schedulers_decisions_after_koordlets(
    manager: Served, scheduler: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "job", "--manager", manager.url, "--scheduler", scheduler.url]

    assert ctl.main(argv) == 0

    out = capsys.readouterr()
    assert out.err == ""
    assert out.out == "\n".join([render_explain(KOORDLET), MANAGER_TEXT, SCHEDULER_TEXT]) + "\n"


def test_the_urls_come_from_the_environment_and_bare_addresses_are_http(
    manager: Served,
    scheduler: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KOORD_MANAGER_URL", manager.url.removeprefix("http://"))
    monkeypatch.setenv("KOORD_SCHEDULER_URL", scheduler.url)

    assert ctl.main(["explain", "job"]) == 0

    text = capsys.readouterr().out
    assert MANAGER_TEXT in text and SCHEDULER_TEXT in text


def test_json_holds_every_part_raw(
    manager: Served, scheduler: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "job", "--manager", manager.url, "--scheduler", scheduler.url, "--json"]

    assert ctl.main(argv) == 0

    data = json.loads(capsys.readouterr().out)
    assert data["pod"] == KOORDLET
    assert data["manager"]["component"] == "koord-manager"
    assert [a["kind"] for a in data["manager"]["actions"]] == ["mutated", "denied"]
    assert [a["kind"] for a in data["scheduler"]["actions"]] == ["failed", "bound"]


def test_without_urls_explain_pod_is_koordlets_part_alone(
    manager: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["explain", "job"]) == 0
    assert capsys.readouterr().out == render_explain(KOORDLET) + "\n"

    assert ctl.main(["explain", "job", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == KOORDLET


def test_an_unreachable_scheduler_is_one_line_and_exit_1_the_rest_printed(
    manager: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", "job", "--manager", manager.url, "--scheduler", "http://127.0.0.1:1"]

    assert ctl.main(argv) == 1

    out = capsys.readouterr()
    assert out.out == "\n".join([render_explain(KOORDLET), MANAGER_TEXT]) + "\n"
    (line,) = out.err.splitlines()
    assert line.startswith(
        "koordctl explain: koord-scheduler: cannot reach koord-scheduler at http://127.0.0.1:1 ("
    )


def test_without_koordlet_a_namespace_name_still_asks_the_control_plane(
    manager: Served,
    scheduler: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unreachable_koordlet(monkeypatch)
    argv = ["explain", "default/job", "--manager", manager.url, "--scheduler", scheduler.url]

    assert ctl.main(argv) == 1

    out = capsys.readouterr()
    assert out.err == "koordctl explain: cannot reach koordlet at 127.0.0.1:9316 (refused)\n"
    # without koordlet's uid the scheduler finds only the bind recorded under the pod's name
    by_name = f"""\
scheduler: 1 extender bind for default/job
  {AT} failed on node-1: binding default/job to node-1: conflict"""
    assert out.out == f"{MANAGER_TEXT}\n{by_name}\n"


def test_without_koordlet_a_bare_name_cannot_be_asked_about(
    manager: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unreachable_koordlet(monkeypatch)

    assert ctl.main(["explain", "job", "--manager", manager.url]) == 1

    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.splitlines()[1] == (
        "koordctl explain: cannot ask koord-manager: koordlet did not say which pod 'job' is; "
        "give it as NAMESPACE/NAME"
    )


def test_nothing_recorded_says_where_records_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    manager, scheduler = Served(AdmissionAudit().routes()), Served(BindAudit().routes())
    try:
        argv = ["explain", "job", "--manager", manager.url, "--scheduler", scheduler.url]
        assert ctl.main(argv) == 0
    finally:
        manager.close()
        scheduler.close()

    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == (
        "manager: no admission decision recorded for default/job (the replica that answered "
        "keeps its last 2000 that mutated or denied)"
    )
    assert lines[-1].startswith("scheduler: no extender bind recorded for default/job (")


def test_a_mutation_found_by_generate_name_is_marked(capsys: pytest.CaptureFixture[str]) -> None:
    audit = AdmissionAudit(clock=lambda: NOW)
    mutated = AdmissionResponse(True, patch=PATCH, decided_by="ClusterColocationProfile be")
    audit.decide("/mutate-pod", review("", generateName="jo"), mutated, "default")
    manager = Served(audit.routes())
    try:
        assert ctl.main(["explain", "job", "--manager", manager.url]) == 0
    finally:
        manager.close()

    text = capsys.readouterr().out
    assert "    matched by generateName jo: may be a sibling pod of the same owner\n" in text


def test_a_bad_answer_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    async def odd(_request: web.Request) -> web.Response:
        return web.json_response({"pod": "default/job"})

    served = Served([web.get("/explain/pods/{namespace}/{name}", odd)])
    try:
        assert ctl.main(["explain", "job", "--manager", served.url]) == 1
    finally:
        served.close()

    out = capsys.readouterr()
    assert out.err == (
        f"koordctl explain: koord-manager at {served.url} gave a bad answer (KeyError: 'actions')\n"
    )
    assert out.out == render_explain(KOORDLET) + "\n"


def test_the_docs_show_what_koordctl_prints() -> None:
    """docs/metrics-and-koordctl.md's example is these answers rendered in UTC."""
    answers = [
        {
            "pod": "default/job",
            "capacity": 2000,
            "actions": audit.for_pod("default", "job", "u-job"),
        }
        for audit in (manager_audit(), scheduler_audit())
    ]
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        shown = render_manager(answers[0]) + "\n" + render_scheduler(answers[1])
    finally:
        if zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = zone
        time.tzset()

    assert shown in (DOCS / "metrics-and-koordctl.md").read_text()
