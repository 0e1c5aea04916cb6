"""Koordinator's Go-style command lines, translated for our parsers (koordapi.goflags)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from koordapi.goflags import Ignored, by_reason, translate, verbosity_level
from koordapi.settings import flag


@dataclass(frozen=True)
class Table:
    addr: str = field(default=":9316", metadata=flag("addr"))
    enable: bool = field(default=False, metadata=flag("enable-thing"))
    leader: bool = field(default=False, metadata=flag("enable-leader-election", bare=True))
    count: int = field(default=0, metadata=flag("count"))


IGNORED = {
    "runtime-hooks-addr": Ignored("no proxy here"),
    "enable-pod-taskids": Ignored("read when needed", boolean=True),
}


def argv_of(*args: str) -> list[str]:
    return translate(args, [Table], IGNORED).argv


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(["-addr=:1"], ["--addr=:1"], id="one-dash-equals"),
        pytest.param(["-addr", ":1"], ["--addr=:1"], id="one-dash-separate-value"),
        pytest.param(["--count", "-3"], ["--count=-3"], id="a-value-that-looks-like-a-flag"),
        pytest.param(["--enable-thing"], ["--enable-thing=true"], id="bare-bool-is-true"),
        pytest.param(["-enable-thing=F"], ["--enable-thing=false"], id="go-bool-spelling"),
        pytest.param(["--enable-thing=1"], ["--enable-thing=true"], id="go-bool-digit"),
        pytest.param(["--enable-leader-election"], ["--enable-leader-election"], id="bare"),
        pytest.param(["--enable-leader-election=True"], ["--enable-leader-election"], id="b-t"),
        pytest.param(["--enable-leader-election=false"], [], id="bare-false-is-the-default"),
        pytest.param(["--v=4"], ["--log-level=debug"], id="klog-4-is-debug"),
        pytest.param(["-v", "2"], ["--log-level=info"], id="klog-2-is-info"),
        pytest.param(["--v=x"], ["--log-level=x"], id="unreadable-left-to-argparse"),
        pytest.param(["--", "-addr=:1"], ["--", "-addr=:1"], id="double-dash-ends-flags"),
        pytest.param(["--nope=1"], ["--nope=1"], id="unknown-left-to-argparse"),
        pytest.param(["-h"], ["-h"], id="short-help"),
    ],
)
def test_go_syntax_becomes_ours(given: list[str], expected: list[str]) -> None:
    assert argv_of(*given) == expected


def test_ignored_flags_take_their_value_with_them_and_are_noted_once() -> None:
    out = translate(
        [
            "-runtime-hooks-addr",
            "/run/x.sock",
            "--enable-pod-taskids",
            "-addr=:2",
            "--runtime-hooks-addr=/y",
            "--logtostderr",
            "-alsologtostderr=true",
            "--vmodule",
            "x=4",
        ],
        [Table],
        IGNORED,
    )
    assert out.argv == ["--addr=:2"]
    assert out.notes == [
        "ignored --runtime-hooks-addr: no proxy here",
        "ignored --enable-pod-taskids: read when needed",
        "ignored --logtostderr: logs always go to stderr, one line per record (--log-level "
        "sets the level)",
        "ignored --alsologtostderr: logs always go to stderr, one line per record "
        "(--log-level sets the level)",
        "ignored --vmodule: no per-file verbosity; --log-level is for the whole daemon",
    ]
    # the same flags by name, in the order given, each once
    assert list(out.ignored) == [n.split(":")[0].removeprefix("ignored --") for n in out.notes]
    assert out.ignored["runtime-hooks-addr"] == "no proxy here"


@pytest.mark.parametrize(
    ("v", "level"), [("0", "info"), ("3", "info"), ("4", "debug"), ("10", "debug")]
)
def test_klog_verbosity_follows_kubernetes_conventions(v: str, level: str) -> None:
    assert verbosity_level(v) == level


def test_help_lists_ignored_flags_grouped_by_why_in_table_order() -> None:
    table = {
        "tls-min-version": Ignored("no HTTPS here"),
        "vmodule": Ignored("one verbosity"),
        "cert-dir": Ignored("no HTTPS here", boolean=False),
    }
    assert (
        by_reason(table)
        == "--tls-min-version, --cert-dir (no HTTPS here); --vmodule (one verbosity)"
    )
    assert by_reason({}) == ""
