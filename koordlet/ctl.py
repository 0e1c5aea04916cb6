"""The ``koordctl`` command: look at what the node agent and the runtime see.

Subcommands:
    nri-events   register as an external NRI plugin and print every NRI message as a JSON line
    kernel       the kernel interfaces koordlet would use here (cgroup version, group identity
                 mechanism, core scheduling, resctrl)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from importlib.metadata import version
from pathlib import Path

from koordlet.executor.resctrl import Resctrl
from koordlet.states.topology import detect_kernel
from nri_plugin import DEFAULT_SOCKET_PATH, NriError, Stub
from nri_plugin.eventlog import EventLog


def nri_events(args: argparse.Namespace) -> int:
    """Print NRI messages until interrupted (or until the runtime goes away, with --once)."""
    try:
        stub = Stub(
            EventLog(sys.stdout),
            name=args.name,
            index=args.idx,
            socket_path=args.socket,
            reconnect=not args.once,
        )
    except NriError as err:
        print(f"koordctl nri-events: {err}", file=sys.stderr)
        return 2

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stub.stop)
        await stub.run()

    try:
        asyncio.run(main())
    except NriError as err:
        print(f"koordctl nri-events: {err}", file=sys.stderr)
        return 1
    return 0


def kernel(args: argparse.Namespace) -> int:
    """Print what koordlet detects on this node, as it detects it at start."""
    found = detect_kernel(
        Path(args.cgroup_root_dir), Resctrl(Path(args.sys_fs_root_dir) / "resctrl")
    )
    report = {
        "cgroup_version": found.cgroup_version,
        "group_identity": found.group_identity_mechanism,
        "cpu_idle": found.cpu_idle,
        "bvt": found.bvt,
        "core_scheduling": found.core_sched,
        "resctrl": found.resctrl,
        "memory_qos_on_cgroup_v1": found.memory_qos_v1,
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:24} {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koordctl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version("koordinator-py"))
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log protocol details to stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    events = sub.add_parser(
        "nri-events",
        help="print every NRI message as a JSON line",
        description="Register as an external NRI plugin and print every message the runtime "
        "sends (configure, synchronize, each pod and container event) as one JSON object per "
        "line. It changes nothing. It reconnects when the runtime restarts.",
    )
    events.add_argument(
        "--socket", default=str(DEFAULT_SOCKET_PATH), help="NRI socket (default %(default)s)"
    )
    events.add_argument("--name", default="nri-events", help="plugin name (default %(default)s)")
    events.add_argument(
        "--idx", default="99", help="plugin index, two digits; 99 runs after every other plugin"
    )
    events.add_argument("--once", action="store_true", help="exit when the connection closes")
    events.set_defaults(func=nri_events)
    kern = sub.add_parser("kernel", help="the kernel interfaces koordlet would use on this node")
    kern.add_argument("--cgroup-root-dir", default="/sys/fs/cgroup/")
    kern.add_argument("--sys-fs-root-dir", default="/sys/fs/")
    kern.add_argument("--json", action="store_true", help="one JSON object")
    kern.set_defaults(func=kernel)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    with contextlib.suppress(KeyboardInterrupt):
        return int(args.func(args))
    return 130
