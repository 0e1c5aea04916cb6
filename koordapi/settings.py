"""Settings tables: a daemon's settings are a frozen dataclass whose fields carry their flags.

A field declared with ``field(default=..., metadata=flag("name", "help", ...))`` is a setting:
the dataclass is the typed object the daemon reads (mypy checks it like any dataclass), and
the same declaration gives the command-line flag (``--name``), its default, choices, help and
Koordinator's name for it. ``add_arguments`` builds argparse's flags from such tables and
``load`` builds the dataclass back from the parsed arguments, so a setting is written once.

The field's type says how the flag's text becomes its value:

- ``bool``: "true" or "false" (shown as choices), or a bare flag with ``bare=True``;
- ``int``, ``str``, ``Path``: the type itself;
- ``float``: a duration in seconds, Go's form ("1m30s", "500ms") or plain seconds ("10");
- an ``Enum``: its member with that value; the values are the choices;
- ``X | None``: "" is None, any other text is X's.

``parse=`` replaces the type's parser (e.g. ``int`` for Koordinator's ``*-seconds`` flags kept
as float seconds). ``settings(table)`` lists each flag resolved (name, text parser, choices,
default, whether it is a bool, Koordinator's name), which is all a parser of Go's flag syntax
needs as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from koordapi.duration import parse_seconds

T = TypeVar("T")

_KEY = "koordapi.settings.flag"
_RESOLVED: dict[type[Any], tuple[Setting, ...]] = {}
BOOLEANS = ("true", "false")


@dataclass(frozen=True)
class Flag:
    """A field's flag as declared in its metadata (see ``flag``)."""

    name: str  # without dashes: "cgroup-root-dir" is --cgroup-root-dir
    help: str | None = None
    group: str | None = None  # the --help section; None: the main list
    parse: Callable[[str], Any] | None = None  # None: from the field's type
    choices: tuple[str, ...] = ()  # the texts accepted; (): any (a bool's or an Enum's: implied)
    bare: bool = False  # a bool flag that takes no value (argparse's store_true)
    koordinator: str | None = None  # Koordinator's name for this flag; None: ours only


def flag(
    name: str,
    help: str | None = None,
    *,
    group: str | None = None,
    parse: Callable[[str], Any] | None = None,
    choices: Iterable[str] = (),
    bare: bool = False,
    ours: bool = False,
    koordinator: str | None = None,
) -> Mapping[str, Flag]:
    """A dataclass field's metadata that makes it a setting with flag ``--name``.

    ``ours``: Koordinator has no such flag; ``koordinator``: its name there when it differs.
    """
    spec = Flag(
        name=name,
        help=help,
        group=group,
        parse=parse,
        choices=tuple(choices),
        bare=bare,
        koordinator=None if ours else koordinator or name,
    )
    return {_KEY: spec}


@dataclass(frozen=True)
class Setting:
    """One field of a settings table with its flag, text parser, choices and default resolved."""

    field: str
    flag: Flag
    parse: Callable[[str], Any]
    choices: tuple[str, ...]
    default: Any  # dataclasses.MISSING: the flag is required
    boolean: bool  # the field is a bool: Go's flag syntax accepts it bare

    @property
    def option(self) -> str:
        return f"--{self.flag.name}"

    @property
    def dest(self) -> str:
        """The attribute of argparse's namespace (from the flag's name, as argparse makes it)."""
        return self.flag.name.replace("-", "_")

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING

    def convert(self, text: str) -> Any:
        """The field's value for the flag's text; ValueError saying why it is refused."""
        if self.choices and text not in self.choices:
            choices = ", ".join(map(repr, self.choices))
            raise ValueError(f"invalid choice: {text!r} (choose from {choices})")
        return self.parse(text)


def parse_bool(text: str) -> bool:
    """ "true" or "false", as the daemons' bool flags take them."""
    if text not in BOOLEANS:
        raise ValueError(f"not true or false: {text!r}")
    return text == "true"


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def optional(text: str) -> Any:
        return None if text == "" else parse(text)

    optional.__name__ = getattr(parse, "__name__", "optional")
    return optional


def _type_parser(tp: Any) -> tuple[Callable[[str], Any], tuple[str, ...]]:
    """The text parser and implied choices of a field's type (module docstring)."""
    if tp is bool:
        return parse_bool, BOOLEANS
    if tp is float:
        return parse_seconds, ()
    if tp in (int, str, Path):
        return typing.cast(Callable[[str], Any], tp), ()
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp, tuple(str(member.value) for member in tp)
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (types.UnionType, typing.Union) and type(None) in args:
        (inner, *others) = [a for a in args if a is not type(None)]
        parse, choices = _type_parser(inner)
        if not others and not choices:
            return _optional(parse), ()
    raise TypeError(f"no flag parser for a {tp!r} setting; give flag(..., parse=...)")


def settings(table: type[Any]) -> tuple[Setting, ...]:
    """The settings of a dataclass: its fields that carry a ``flag``, in field order."""
    if table not in _RESOLVED:
        _RESOLVED[table] = _resolve(table)
    return _RESOLVED[table]


def _resolve(table: type[Any]) -> tuple[Setting, ...]:
    hints = typing.get_type_hints(table)
    found: list[Setting] = []
    for f in dataclasses.fields(table):
        spec = f.metadata.get(_KEY)
        if not isinstance(spec, Flag):
            continue
        parse, choices = spec.parse, spec.choices
        if parse is None:
            parse, implied = _type_parser(hints[f.name])
            choices = choices or implied
        default: Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()  # made once: a table's defaults are immutable values
        boolean = hints[f.name] is bool
        if spec.bare and not (boolean and default is False):
            raise TypeError(
                f"{table.__name__}.{f.name}: only a bool that defaults to False is bare"
            )
        found.append(Setting(f.name, spec, parse, choices, default, boolean))
    return tuple(found)


def _argparse_type(setting: Setting) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return setting.convert(text)
        except ValueError as err:
            if setting.parse in (int, float):
                raise  # argparse says "invalid int value: 'x'", as it always did
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = getattr(setting.parse, "__name__", "value")
    return convert


def add_arguments(parser: argparse.ArgumentParser, *tables: type[Any]) -> None:
    """Add the flags of ``tables`` to ``parser``; a group's section is made on first use.

    The namespace gets each flag's value already converted (``Setting.dest``); a flag not given
    gets the field's default.
    """
    sections: dict[str, argparse._ArgumentGroup] = {}
    for table in tables:
        for setting in settings(table):
            title = setting.flag.group
            target: argparse._ActionsContainer = parser
            if title is not None:
                if title not in sections:
                    sections[title] = parser.add_argument_group(title)
                target = sections[title]
            if setting.flag.bare:
                target.add_argument(
                    setting.option, dest=setting.dest, action="store_true", help=setting.flag.help
                )
                continue
            target.add_argument(
                setting.option,
                dest=setting.dest,
                type=_argparse_type(setting),
                default=None if setting.required else setting.default,
                required=setting.required,
                metavar="{" + ",".join(setting.choices) + "}" if setting.choices else None,
                help=setting.flag.help,
            )


def load(table: type[T], args: argparse.Namespace | Mapping[str, Any], **given: Any) -> T:
    """The ``table`` dataclass from parsed flags (argparse's namespace, or a mapping of each
    ``Setting.dest`` to its value); ``given`` fields are set as they are."""
    values = vars(args) if isinstance(args, argparse.Namespace) else args
    fields = {s.field: values[s.dest] for s in settings(table) if s.field not in given}
    return table(**fields, **given)
