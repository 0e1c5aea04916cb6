"""Koordinator's command lines as they are written for its Go binaries, made ours.

Koordinator's daemons parse flags with Go's ``flag`` package and klog, and its chart and docs
write them that way: ``-addr=:9316`` (one dash for a long flag), ``--enable-leader-election``
(a bool without a value), ``-v=4`` (klog's verbosity), ``--logtostderr=true``. ``translate``
turns such an argument list into the form our argparse parsers read, so a DaemonSet written
for Koordinator starts unchanged:

- one or two dashes, ``-name=value`` or ``-name value``, as Go's flag package takes them;
- a bool setting given bare is true; its value may be any of Go's ``strconv.ParseBool``
  spellings (1, t, T, TRUE, true, True and the false ones);
- ``-v``/``--v`` (klog verbosity) becomes ``--log-level``: 4 and above is debug (klog's
  convention: V(4) is debug, V(5) trace), below is info;
- a flag of Koordinator's whose concept does not exist here (``ignored``, and klog's output
  flags) is accepted, with its value, and reported once in ``Translated.notes``;
- everything else is left for argparse, which refuses an unknown flag as before.

``--`` ends the flags, as in Go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordapi.settings import settings

GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")
# klog's V(n): 4 is "debug level verbosity" in Kubernetes' logging conventions.
DEBUG_VERBOSITY = 4


@dataclass(frozen=True)
class Ignored:
    """A Koordinator flag that is accepted and changes nothing here, and why."""

    why: str
    boolean: bool = False  # a bool flag takes no separate value


_STDERR = "logs always go to stderr, one line per record (--log-level sets the level)"
_FORMAT = "the log format is fixed"
# klog's flags (klog.InitFlags), which every Koordinator binary takes; -v is translated.
KLOG: Mapping[str, Ignored] = {
    "logtostderr": Ignored(_STDERR, boolean=True),
    "alsologtostderr": Ignored(_STDERR, boolean=True),
    "stderrthreshold": Ignored(_STDERR),
    "log_dir": Ignored(_STDERR),
    "log_file": Ignored(_STDERR),
    "log_file_max_size": Ignored(_STDERR),
    "one_output": Ignored(_STDERR, boolean=True),
    "skip_headers": Ignored(_FORMAT, boolean=True),
    "skip_log_headers": Ignored(_FORMAT, boolean=True),
    "add_dir_header": Ignored(_FORMAT, boolean=True),
    "vmodule": Ignored("no per-file verbosity; --log-level is for the whole daemon"),
    "log_backtrace_at": Ignored("no backtraces on a log line"),
}


def by_reason(table: Mapping[str, Ignored]) -> str:
    """--help's list of ``table``'s flags, grouped by why: "--a, --b (why); --c (why)"."""
    groups: dict[str, list[str]] = {}
    for name, ignored in table.items():
        groups.setdefault(ignored.why, []).append(f"--{name}")
    return "; ".join(f"{', '.join(names)} ({why})" for why, names in groups.items())


@dataclass
class Translated:
    """``argv`` for argparse, and one note per ignored flag (to log once logging is set up);
    ``ignored``: the same flags by name, with why (for a command that names them its own way)."""

    argv: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)


def _go_bool(text: str) -> str | None:
    if text in GO_TRUE:
        return "true"
    if text in GO_FALSE:
        return "false"
    return None


def verbosity_level(text: str) -> str:
    """klog's ``-v`` value as a --log-level; an unreadable one is left for argparse to refuse."""
    try:
        return "debug" if int(text) >= DEBUG_VERBOSITY else "info"
    except ValueError:
        return text


def translate(
    argv: Sequence[str], tables: Iterable[type[Any]], ignored: Mapping[str, Ignored]
) -> Translated:
    """See the module docstring; ``tables`` are the command's settings tables."""
    known = {s.flag.name: s for table in tables for s in settings(table)}
    skip = {**KLOG, **ignored}
    out = Translated()
    noted: set[str] = set()
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.argv += args[i - 1 :]
            break
        if not arg.startswith("-") or arg == "-":
            out.argv.append(arg)
            continue
        name, sep, value = arg.lstrip("-").partition("=")
        has_value = sep == "="
        takes_next = not has_value and i < len(args)
        if name == "v":
            if takes_next:
                value, i = args[i], i + 1
            out.argv.append(f"--log-level={verbosity_level(value)}")
            continue
        if name in skip and name not in known:
            why = skip[name]
            if not why.boolean and takes_next:
                i += 1  # its value goes with it
            if name not in noted:
                noted.add(name)
                out.notes.append(f"ignored --{name}: {why.why}")
                out.ignored[name] = why.why
            continue
        setting = known.get(name)
        if setting is None or len(name) == 1:
            out.argv.append(arg)  # argparse's: --help, --version, or an unknown flag it refuses
            continue
        if setting.boolean:
            truth = _go_bool(value) if has_value else "true"
            if setting.flag.bare:
                if truth != "false":
                    out.argv.append(setting.option if truth else arg)
            else:
                out.argv.append(f"{setting.option}={truth or value}")
            continue
        if not has_value and takes_next:
            value, has_value, i = args[i], True, i + 1
        out.argv.append(f"{setting.option}={value}" if has_value else setting.option)
    return out
