"""An NRI plugin for the e2e suite: gives every new container the cpu shares it is told.

The shares come from ``--shares`` or, when containerd launched it from its plugin folder, from
the drop-in configuration (``{"shares": N}`` in ``NN-name.conf``). It also marks containers
with the annotation ``e2e.koordinator.sh/adjusted-by`` so tests can see which plugin acted.

    python -m tests.e2e.plugins.shares --socket PATH --shares 700 [--name N --idx NN]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from nri_plugin import Stub, api

ANNOTATION = "e2e.koordinator.sh/adjusted-by"


class Shares:
    def __init__(self, shares: int) -> None:
        self.shares = shares
        self.name = ""

    def configure(self, config: str, runtime_name: str, runtime_version: str) -> None:
        if config.strip():
            self.shares = int(json.loads(config)["shares"])

    async def create_container(
        self, pod: api.PodSandbox, container: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = self.shares
        adjust.annotations[ANNOTATION] = self.name
        return adjust, []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", default=None)
    parser.add_argument("--shares", type=int, default=0)
    parser.add_argument("--name", default=None)
    parser.add_argument("--idx", default=None)
    parser.add_argument(
        "--timings", action="store_true", help="print handler_us and rpc_us per CreateContainer"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    plugin = Shares(args.shares)
    handler_s: dict[str, float] = {}

    def on_handled(name: str, seconds: float, outcome: str) -> None:
        handler_s[name] = seconds

    def on_served(method: str, seconds: float) -> None:
        if method == "CreateContainer":
            record = {
                "event": method,
                "handler_us": round(handler_s.get("create_container", -1e-6) * 1e6, 1),
                "rpc_us": round(seconds * 1e6, 1),
            }
            print(json.dumps(record), flush=True)

    stub = Stub(
        plugin,
        name=args.name,
        index=args.idx,
        socket_path=args.socket,
        backoff_max=0.5,
        on_handled=on_handled if args.timings else None,
        on_served=on_served if args.timings else None,
    )
    plugin.name = f"{stub.index}-{stub.name}"
    asyncio.run(stub.run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
