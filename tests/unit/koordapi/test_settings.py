"""Settings tables: a dataclass's fields carry their flags; the parser and the object come from it.

Also the one duration parser of the command lines and the one logging set-up.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from koordapi import logsetup
from koordapi.duration import parse_go_duration, parse_seconds
from koordapi.settings import Setting, add_arguments, flag, load, parse_bool, settings


class Color(enum.StrEnum):
    RED = "Red"
    BLUE = "Blue"


@dataclass(frozen=True, kw_only=True)
class Table:
    name: str = field(default="x", metadata=flag("name", "a name (default %(default)s)"))
    count: int = field(default=3, metadata=flag("count", group="numbers", ours=True))
    period: float = field(default=10.0, metadata=flag("period", group="numbers"))
    whole_seconds: float = field(default=1.0, metadata=flag("whole-seconds", parse=int))
    enabled: bool = field(default=True, metadata=flag("enabled"))
    dry_run: bool = field(default=False, metadata=flag("dry-run", bare=True))
    folder: Path = field(default=Path("/var/lib/x"), metadata=flag("folder"))
    state: Path | None = field(default=Path("/var/lib/x/state"), metadata=flag("state"))
    optional_text: str | None = field(default=None, metadata=flag("optional-text"))
    color: Color = field(default=Color.RED, metadata=flag("color"))
    mode: str = field(default="", metadata=flag("mode", choices=["", "fast", "slow"]))
    target: Path = field(metadata=flag("target", koordinator="upstream-target"))  # required
    not_a_flag: int = 7


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t", allow_abbrev=False)
    add_arguments(p, Table, logsetup.LogOptions)
    return p


def parse(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["--target=/t", *argv])


def refusal(*argv: str) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        parser().parse_args(["--target=/t", *argv])
    assert exit_.value.code == 2
    return err.getvalue()


# -- the table ---------------------------------------------------------------------------------


def test_only_fields_with_a_flag_are_settings_in_field_order() -> None:
    assert [s.flag.name for s in settings(Table)] == [
        "name",
        "count",
        "period",
        "whole-seconds",
        "enabled",
        "dry-run",
        "folder",
        "state",
        "optional-text",
        "color",
        "mode",
        "target",
    ]
    by_name = {s.flag.name: s for s in settings(Table)}
    assert by_name["target"].required and not by_name["name"].required
    assert by_name["enabled"].boolean and by_name["dry-run"].boolean
    assert not by_name["count"].boolean
    assert by_name["whole-seconds"].dest == "whole_seconds"
    assert by_name["whole-seconds"].option == "--whole-seconds"


def test_koordinators_name_is_the_flags_own_unless_ours_or_renamed() -> None:
    names = {s.flag.name: s.flag.koordinator for s in settings(Table)}
    assert names["name"] == "name"
    assert names["count"] is None  # ours
    assert names["target"] == "upstream-target"


def test_the_parsers_defaults_are_the_tables() -> None:
    args = parse()
    for setting in settings(Table):
        if not setting.required:
            assert getattr(args, setting.dest) == getattr(Table(target=Path()), setting.field)


def test_the_type_drives_the_conversion() -> None:
    args = parse(
        "--count=4",
        "--period=1m30s",
        "--whole-seconds",
        "5",
        "--enabled=false",
        "--dry-run",
        "--folder=/f",
        "--state=",
        "--optional-text=",
        "--color=Blue",
        "--mode=fast",
    )
    assert load(Table, args) == Table(
        count=4,
        period=90.0,
        whole_seconds=5,
        enabled=False,
        dry_run=True,
        folder=Path("/f"),
        state=None,  # "" is None
        optional_text=None,
        color=Color.BLUE,
        mode="fast",
        target=Path("/t"),
    )
    assert load(Table, parse("--optional-text=x", "--state=/s")).state == Path("/s")


def test_load_takes_a_mapping_of_flag_values_and_given_fields() -> None:
    values = {s.dest: s.default for s in settings(Table) if not s.required}
    table = load(Table, {**values, "target": Path("/t")}, count=9, not_a_flag=1)
    assert (table.count, table.not_a_flag, table.target) == (9, 1, Path("/t"))


def test_choices_show_in_help_as_argparse_shows_them() -> None:
    text = parser().format_help()
    assert "--enabled {true,false}" in text
    assert "--color {Red,Blue}" in text
    assert "--mode {,fast,slow}" in text
    assert "--log-level {debug,info,warning,error}" in text
    assert "[--dry-run]" in text  # no value
    assert "a name (default x)" in text
    assert "numbers:" in text  # a group's section


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        pytest.param(
            ["--enabled=yes"],
            "argument --enabled: invalid choice: 'yes' (choose from 'true', 'false')",
            id="bool",
        ),
        pytest.param(
            ["--color=Green"],
            "argument --color: invalid choice: 'Green' (choose from 'Red', 'Blue')",
            id="enum",
        ),
        pytest.param(["--count=x"], "argument --count: invalid int value: 'x'", id="int"),
        pytest.param(["--whole-seconds=1.5"], "invalid int value: '1.5'", id="whole-seconds"),
        pytest.param(["--period=1x"], "argument --period: not a duration: '1x'", id="duration"),
        pytest.param(["--dry-run=true"], "ignored explicit argument 'true'", id="bare"),
        pytest.param(["--coun=4"], "unrecognized arguments: --coun=4", id="abbreviation"),
        pytest.param(["--log-level=trace"], "invalid choice: 'trace'", id="log-level"),
    ],
)
def test_refusals_name_the_flag_and_why(argv: list[str], said: str) -> None:
    assert said in refusal(*argv)


def test_a_required_flag_is_one_without_a_default() -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        parser().parse_args([])
    assert "the following arguments are required: --target" in err.getvalue()


def test_convert_is_the_text_parser_for_any_command_line_syntax() -> None:
    (enabled,) = [s for s in settings(Table) if s.flag.name == "enabled"]
    assert isinstance(enabled, Setting)
    assert enabled.convert("true") is True and enabled.convert("false") is False
    with pytest.raises(ValueError, match="invalid choice: 'True'"):
        enabled.convert("True")
    assert parse_bool("false") is False


def test_a_type_without_a_parser_needs_one() -> None:
    @dataclass(frozen=True)
    class Odd:
        pair: tuple[int, int] = field(default=(1, 2), metadata=flag("pair"))

    with pytest.raises(TypeError, match="no flag parser"):
        settings(Odd)


def test_only_a_bool_defaulting_to_false_may_be_bare() -> None:
    @dataclass(frozen=True)
    class Odd:
        on: bool = field(default=True, metadata=flag("on", bare=True))

    with pytest.raises(TypeError, match="bare"):
        settings(Odd)


# -- durations ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("10", 10.0),  # plain seconds, as the flags always took them
        ("2.5", 2.5),
        ("10s", 10.0),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("0", 0.0),
        (" 3s ", 3.0),
    ],
)
def test_a_duration_flag_takes_gos_form_or_plain_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1x", "s", "1m30", "ten", "10 s"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(text)


def test_objects_durations_stay_gos_only() -> None:
    """A NodeMetric's collect policy is a metav1.Duration: "10" is not one."""
    with pytest.raises(ValueError, match="not a duration"):
        parse_go_duration("10")


# -- logging -----------------------------------------------------------------------------------


@contextlib.contextmanager
def bare_root_logger() -> Iterator[logging.Logger]:
    """The root logger without pytest's handlers, as a fresh process has it; restored after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        yield root
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


def test_the_one_logging_set_up_formats_and_filters() -> None:
    out = io.StringIO()
    with bare_root_logger() as root:
        logsetup.configure("warning", handler=logging.StreamHandler(out))
        assert root.level == logging.WARNING
        logging.getLogger("koordlet.x").info("not shown")
        logging.getLogger("koordlet.x").warning("shown %d", 1)
    (line,) = out.getvalue().splitlines()
    assert line.endswith(" WARNING koordlet.x: shown 1")


def test_log_levels_by_name_or_number() -> None:
    assert logsetup.level_number("debug") == logging.DEBUG
    assert logsetup.level_number(logging.ERROR) == logging.ERROR
    assert logsetup.level_number("nonsense") == logging.INFO
    assert logsetup.LEVELS == ("debug", "info", "warning", "error")
