"""``koordctl kernel``: the kernel interfaces koordlet would use here (cgroup version, group
identity mechanism, core scheduling, resctrl), detected as koordlet detects them at start."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from koordlet.executor.resctrl import Resctrl
from koordlet.states.topology import detect_kernel


def run(args: argparse.Namespace) -> int:
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
