"""``koordctl nri-events``: register as an external NRI plugin and print every NRI message."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from nri_plugin import NriError, Stub
from nri_plugin.eventlog import EventLog


def run(args: argparse.Namespace) -> int:
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
