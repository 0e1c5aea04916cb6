"""``koordctl inspect``: the live table, one pod's histogram bars, and what a user sees when
the run-queue latency collector cannot run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import koordctl as ctl
from koordctl import client, render
from koordctl import inspect as inspect_cmd
from koordlet.metrics import KoordletMetrics
from koordlet.server import StatusServer
from tests.unit.koordlet.test_statusapi import make_views


def row(name: str, qos: str, p99: float | None, **extra: Any) -> dict[str, Any]:
    return {
        "uid": f"u-{name}",
        "name": name,
        "namespace": "default",
        "qos": qos,
        "runq_p50_us": None if p99 is None else p99 / 4,
        "runq_p99_us": p99,
        "waits": 0 if p99 is None else 100,
        "cpu_cores": None,
        "throttled": None,
        "psi_cpu_some_avg10": None,
        "cpi": None,
        **extra,
    }


def table_data() -> dict[str, Any]:
    return {
        "available": True,
        "reason": "",
        "window_seconds": 10.0,
        "pods": [
            row("batch", "BE", 40_000.0),
            row("idle", "LS", None),
            row("web", "LS", 800.0, cpu_cores=1.5, throttled=0.031, psi_cpu_some_avg10=12.5),
            row("api", "LS", 12_500.0, cpi=1.25),
            row("db", "LSR", 300.0),
        ],
        "classes": {
            "LS": {"p50_us": 20.0, "p99_us": 9000.0, "waits": 200},
            "BE": {"p50_us": 100.0, "p99_us": 40_000.0, "waits": 100},
            "LSR": {"p50_us": 75.0, "p99_us": 300.0, "waits": 100},
        },
        "node": {"p50_us": 3.0, "p99_us": 4.0, "waits": 40},
    }


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (None, "-"),
        (0.4, "0us"),
        (850.0, "850us"),
        (999.4, "999us"),
        (999.6, "1.00ms"),
        (1200.0, "1.20ms"),
        (12_500.0, "12.5ms"),
        (99_960.0, "100ms"),
        (250_000.0, "250ms"),
    ],
)
def test_latency_is_in_us_below_a_millisecond_and_ms_above(us: float | None, text: str) -> None:
    assert render.latency(us) == text


def test_table_groups_by_class_then_slowest_p99_first() -> None:
    lines = inspect_cmd.render_inspect(table_data()).splitlines()

    names = [line.split()[0] for line in lines[3:]]
    assert names == [
        "default/db",
        "=",  # LSR class
        "default/api",  # LS: 12.5 ms
        "default/web",  # 800 us
        "default/idle",  # no waits: last
        "=",
        "default/batch",
        "=",
        "=",  # outside pods
    ]
    assert lines[0].endswith("last 10s")
    assert lines[2].split() == [
        "POD", "QOS", "RUNQ", "p50", "RUNQ", "p99", "WAITS", "CPU", "THROTTLED", "PSI", "CPI",
    ]  # fmt: skip


def test_table_cells_use_human_units_and_dashes_for_what_is_off() -> None:
    lines = inspect_cmd.render_inspect(table_data()).splitlines()
    by_pod = {line.split()[0]: line.split() for line in lines[3:] if not line.startswith("=")}

    assert by_pod["default/web"] == [
        "default/web", "LS", "200us", "800us", "100", "1.50", "3%", "12.5%", "-",
    ]  # fmt: skip
    assert by_pod["default/api"][2:4] == ["3.12ms", "12.5ms"]
    assert by_pod["default/api"][-4:] == ["-", "-", "-", "1.25"]
    assert by_pod["default/idle"][2:5] == ["-", "-", "0"]
    (ls_summary,) = [line for line in lines if line.startswith("= LS class")]
    assert ls_summary.split()[-3:] == ["20us", "9.00ms", "200"]
    assert lines[-1].startswith("= outside pods") and lines[-1].split()[-3:] == ["3us", "4us", "40"]


def test_table_before_the_first_window_says_it_waits() -> None:
    data = {**table_data(), "window_seconds": 0.0, "pods": [], "classes": {}}

    assert "waiting for the first window" in inspect_cmd.render_inspect(data)


def pod_data() -> dict[str, Any]:
    def slots(counts: dict[int, int]) -> list[dict[str, Any]]:
        return [
            {"slot": s, "low_us": 0.0 if s == 0 else float(2**s), "high_us": float(2 ** (s + 1)),
             "count": n}
            for s, n in counts.items()
        ]  # fmt: skip

    return {
        "available": True,
        "reason": "",
        "window_seconds": 10.0,
        **row("web", "LS", 6144.0, throttled=0.5),
        "histogram": {
            "window": slots({3: 98, 4: 0, 5: 1, 9: 49}),
            "total": slots({3: 980}),
        },
        "containers": [{"name": "main", "p50_us": 12.0, "p99_us": 6144.0, "waits": 92}],
    }


def test_pod_histogram_bars_scale_to_the_fullest_slot() -> None:
    text = inspect_cmd.render_inspect_pod(pod_data())
    lines = text.splitlines()

    assert lines[0] == "pod default/web (uid u-web), QoS LS"
    start = lines.index("latest window (10s):")
    window = lines[start + 1 : start + 5]
    assert [line.split()[:4] for line in window] == [
        ["8us", "-", "16us", "98"],
        ["16us", "-", "32us", "0"],
        ["32us", "-", "64us", "1"],
        ["512us", "-", "1.02ms", "49"],
    ]
    bars = [line.split()[4] if len(line.split()) > 4 else "" for line in window]
    assert [len(b) for b in bars] == [inspect_cmd.BAR_WIDTH, 0, 1, inspect_cmd.BAR_WIDTH // 2]
    assert set("".join(bars)) == {"#"}
    since = lines.index("since koordlet started:")
    assert lines[since + 1].split()[3:] == ["980", "#" * inspect_cmd.BAR_WIDTH]
    assert "throttled 50%" in text
    assert lines[-1].split() == ["main", "p50", "12us", "p99", "6.14ms", "waits", "92"]


def test_pod_without_waits_says_so() -> None:
    data = {**pod_data(), "histogram": {"window": [], "total": []}, "containers": []}

    lines = inspect_cmd.render_inspect_pod(data).splitlines()

    assert lines[lines.index("latest window (10s):") + 1] == "  no waits"
    assert "no container waits" in lines[-1]


def answer(monkeypatch: pytest.MonkeyPatch, data: dict[str, Any]) -> list[str]:
    paths: list[str] = []

    def fetch(addr: str, path: str) -> dict[str, Any]:
        paths.append(path)
        return data

    monkeypatch.setattr(client, "fetch", fetch)
    return paths


OFF = {"available": False, "reason": "run-queue latency off: no kernel headers at /lib/modules"}


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["inspect", "--once"], id="once"),
        pytest.param(["inspect"], id="live"),
        pytest.param(["inspect", "--pod", "web"], id="pod"),
    ],
)
def test_an_unavailable_collector_prints_the_reason_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    answer(monkeypatch, OFF)

    assert ctl.main(argv) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == (
        "koordctl inspect: run-queue latency is not available: run-queue latency off: "
        "no kernel headers at /lib/modules"
    )


def test_json_prints_the_answer_and_its_exit_code_tells_availability(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    answer(monkeypatch, table_data())
    assert ctl.main(["inspect", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == table_data()

    answer(monkeypatch, OFF)
    assert ctl.main(["inspect", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["available"] is False


def test_pod_asks_for_that_pod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = answer(monkeypatch, pod_data())

    assert ctl.main(["inspect", "--pod", "default/web"]) == 0

    assert paths == ["/api/v1/inspect?pod=default%2Fweb"]
    assert "since koordlet started:" in capsys.readouterr().out


def test_live_table_clears_the_screen_and_refreshes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = answer(monkeypatch, table_data())
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)  # koordctl sleeps between refreshes

    assert ctl.main(["inspect", "--interval", "0.5"]) == 130

    out = capsys.readouterr().out
    assert out.count("\x1b[H\x1b[2J") == 2 and out.count("default/web") == 2
    assert sleeps == [0.5, 0.5] and paths == ["/api/v1/inspect"] * 2


def test_unreachable_koordlet_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl.main(["inspect", "--once", "--addr", "127.0.0.1:1"]) == 1
    assert "cannot reach koordlet at 127.0.0.1:1" in capsys.readouterr().err


@pytest.fixture
def server() -> Iterator[StatusServer]:
    srv = StatusServer("127.0.0.1", 0, KoordletMetrics("n1").registry, make_views())
    srv.start()
    yield srv
    srv.stop()


def test_against_koordlets_api(server: StatusServer, capsys: pytest.CaptureFixture[str]) -> None:
    addr = f"127.0.0.1:{server.port}"

    assert ctl.main(["inspect", "--once", "--addr", addr]) == 0
    table = capsys.readouterr().out.splitlines()
    pods = [line.split()[0] for line in table[3:] if not line.startswith("=")]
    assert pods == ["default/web", "default/api", "batch/job"]  # LS by p99 (6.1 ms, 64 us), BE
    web = table[3].split()
    assert web[3:9] == ["6.14ms", "100", "1.50", "25%", "12.5%", "2.00"]

    assert ctl.main(["inspect", "--pod", "web", "--addr", addr]) == 0
    assert "4.10ms - 8.19ms" in capsys.readouterr().out

    assert ctl.main(["inspect", "--pod", "nope", "--addr", addr]) == 1
    assert "HTTP 404" in capsys.readouterr().err
