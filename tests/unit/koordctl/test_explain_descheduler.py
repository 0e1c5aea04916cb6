"""``koordctl explain node NAME --descheduler URL``: koord-descheduler's view of the node after
koord-manager's part, from a canned /explain/nodes/NAME answer served over real HTTP on
localhost (the answer koord-descheduler gave in tests/unit/descheduler/test_explain.py)."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import koordctl as ctl
from koordctl import client
from koordctl.explain import render_descheduler

REASON = "node is overutilized, node cpu usage(75.00%)>threshold(50.00%)"
JOB = "617a45fb-6fbc-49c2-9d0c-84a9afae6bed"
ANSWER: dict[str, Any] = {
    "node": "hot",
    "time": 1700000000.0,
    "dryRun": False,
    "pools": [
        {
            "pool": "__default_node_pool__",
            "category": "high",
            "prodThresholds": False,
            "resources": [
                {
                    "name": "cpu",
                    "allocatable": 4000,
                    "usage": 3000,
                    "usagePercent": 75.0,
                    "low": 800,
                    "lowPercent": 20.0,
                    "high": 2000,
                    "highPercent": 50.0,
                },
                {
                    "name": "memory",
                    "allocatable": 8589934592,
                    "usage": 3221225472,
                    "usagePercent": 37.5,
                    "low": 1717986918,
                    "lowPercent": 20.0,
                    "high": 6871947673,
                    "highPercent": 80.0,
                },
            ],
            "anomalous": True,
            "anomalousBy": "node",
            "abnormalities": None,
            "consecutiveAbnormalities": 1,
            "hotReason": REASON,
            "candidates": [
                {
                    "pod": "default/web-0",
                    "reason": REASON,
                    "outcome": f"PodMigrationJob {JOB} created",
                }
            ],
            "note": "",
        }
    ],
    "note": "",
    "migrationJobs": [{"name": JOB, "phase": "Running", "pod": "default/web-0", "reason": REASON}],
}

EXPECTED = f"""\
descheduler: node hot, last round 2023-11-14T22:13:20Z
  pool __default_node_pool__: category high, anomalous (node usage)
    RESOURCE  USED/ALLOCATABLE  USAGE  LOW    HIGH
    cpu       3.00/4.00         75.0%  20.0%  50.0%
    memory    3072Mi/8192Mi     37.5%  20.0%  80.0%
    hot: {REASON}
    candidates:
      default/web-0: {REASON}
        -> PodMigrationJob {JOB} created
  open PodMigrationJobs:
    NAME                                  PHASE    POD            REASON
    {JOB}  Running  default/web-0  {REASON}"""

NODE = {"metadata": {"name": "hot"}, "status": {"allocatable": {"kubernetes.io/batch-cpu": "2"}}}
DOCS = Path(__file__).resolve().parents[3] / "docs"


class Descheduler:
    """A tiny koord-descheduler: canned answers by path, and the paths it was asked."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {
            "/explain/nodes/hot": (200, json.dumps(ANSWER).encode()),
        }
        self.asked: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.asked.append(self.path)
                message = {"message": f"node {self.path.rsplit('/', 1)[-1]} was not seen"}
                status, body = outer.answers.get(self.path, (404, json.dumps(message).encode()))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def descheduler() -> Iterator[Descheduler]:
    served = Descheduler()
    try:
        yield served
    finally:
        served.close()


@pytest.fixture(autouse=True)
def node_from_the_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KOORD_DESCHEDULER_URL", raising=False)
    monkeypatch.setattr(client, "read_node", lambda name, kubeconfig: copy.deepcopy(NODE))


def test_render_descheduler_shows_usage_thresholds_candidates_and_jobs() -> None:
    assert render_descheduler(ANSWER) == EXPECTED


def test_a_pod_the_evictor_refused_is_listed_without_a_reason() -> None:
    answer = copy.deepcopy(ANSWER)
    refused = {"pod": "default/db-0", "reason": "", "outcome": "not migrated: pod is a mirror pod"}
    answer["pools"][0]["candidates"].append(refused)
    lines = render_descheduler(answer).splitlines()
    at = lines.index("      default/db-0")
    assert lines[at + 1] == "        -> not migrated: pod is a mirror pod"


def test_the_docs_show_what_koordctl_prints() -> None:
    for page in ("metrics-and-koordctl.md", "descheduler.md"):
        assert EXPECTED in (DOCS / page).read_text(), page


def test_explain_node_adds_the_descheduler_part_after_the_managers(
    descheduler: Descheduler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["explain", "node", "hot", "--descheduler", descheduler.url]) == 0

    out = capsys.readouterr()
    assert out.err == ""
    manager, _, rest = out.out.partition("descheduler: ")
    assert manager.startswith("node hot\n")
    assert "no explanation: koord-manager has not written this node" in manager
    assert "descheduler: " + rest == EXPECTED + "\n"
    assert descheduler.asked == ["/explain/nodes/hot"]


def test_the_url_comes_from_the_environment_and_a_bare_address_is_http(
    descheduler: Descheduler, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KOORD_DESCHEDULER_URL", descheduler.url.removeprefix("http://"))

    assert ctl.main(["explain", "node", "hot"]) == 0

    assert EXPECTED in capsys.readouterr().out
    assert descheduler.asked == ["/explain/nodes/hot"]


def test_without_a_url_explain_node_is_as_before(
    descheduler: Descheduler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["explain", "node", "hot"]) == 0
    text = capsys.readouterr().out
    assert "descheduler" not in text and text.startswith("node hot\n")

    assert ctl.main(["explain", "node", "hot", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == NODE
    assert descheduler.asked == []


def test_json_holds_both_parts_raw(
    descheduler: Descheduler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["explain", "node", "hot", "--descheduler", descheduler.url, "--json"]) == 0

    assert json.loads(capsys.readouterr().out) == {"node": NODE, "descheduler": ANSWER}


def test_an_unreachable_descheduler_is_one_line_and_exit_1_under_the_managers_part(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ctl.main(["explain", "node", "hot", "--descheduler", "http://127.0.0.1:1"]) == 1

    out = capsys.readouterr()
    assert out.out.startswith("node hot\n") and "descheduler:" not in out.out
    (line,) = out.err.splitlines()
    assert line.startswith(
        "koordctl explain node: koord-descheduler: cannot reach koord-descheduler at "
        "http://127.0.0.1:1 ("
    )


def test_a_node_the_descheduler_has_not_seen(
    descheduler: Descheduler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ctl.main(["explain", "node", "new", "--descheduler", descheduler.url + "/"]) == 1

    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"koordctl explain node: koord-descheduler: {descheduler.url}/explain/nodes/new: "
        "HTTP 404: node new was not seen"
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>proxy error</html>", "a bad answer, not JSON"),
        (b"[1, 2]", "a bad answer, not a JSON object"),
        (json.dumps({"node": "hot"}).encode(), "gave a bad answer (KeyError: 'time')"),
    ],
)
def test_a_bad_answer_is_one_line_and_exit_1(
    descheduler: Descheduler, capsys: pytest.CaptureFixture[str], body: bytes, said: str
) -> None:
    descheduler.answers["/explain/nodes/hot"] = (200, body)

    assert ctl.main(["explain", "node", "hot", "--descheduler", descheduler.url]) == 1

    out = capsys.readouterr()
    (line,) = out.err.splitlines()
    assert line.startswith("koordctl explain node: koord-descheduler") and said in line
    assert out.out.startswith("node hot\n")


def test_a_manager_part_that_fails_does_not_hide_the_descheduler_part(
    descheduler: Descheduler, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def unreadable(name: str, kubeconfig: str | None) -> dict[str, Any]:
        raise RuntimeError("no credentials")

    monkeypatch.setattr(client, "read_node", unreadable)

    assert ctl.main(["explain", "node", "hot", "--descheduler", descheduler.url]) == 1

    out = capsys.readouterr()
    assert out.err == "koordctl explain node: cannot read node hot: no credentials\n"
    assert out.out == EXPECTED + "\n"


def test_a_url_of_another_scheme_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl.main(["explain", "node", "hot", "--descheduler", "file:///etc/passwd"]) == 1

    assert capsys.readouterr().err == (
        "koordctl explain node: koord-descheduler: file:///etc/passwd: not an http:// or "
        "https:// URL\n"
    )
