"""``koordctl install``: put koordlet on this node, as a systemd service (--systemd) or as
containerd's pre-installed NRI plugin (--nri-plugin). The work is ``koordlet.install``'s."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from koordlet.install.installer import (
    InstallError,
    InstallOptions,
    install_nri_plugin,
    install_systemd,
)


def run(args: argparse.Namespace) -> int:
    options = InstallOptions(
        root=Path(args.root),
        containerd_config=Path(args.containerd_config),
        containerd_bin=args.containerd_bin,
        config_dir=Path(args.config_dir),
        plugin_path=Path(args.plugin_path) if args.plugin_path else None,
        koordlet_args=args.koordlet_args,
        start=not args.no_start,
    )
    try:
        steps = install_systemd(options) if args.systemd else install_nri_plugin(options)
    except InstallError as err:
        print(f"koordctl install: {err}; nothing was installed", file=sys.stderr)
        return 1
    for step in steps:
        print(step)
    return 0
