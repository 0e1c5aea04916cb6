"""koordlet's own CPU and memory with many real containers (collectors every second, the
reconciler every 10 s), on the private containerd. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/koordlet_load.py -n 200 --seconds 60 \
        [--flame docs/flame-koordlet-200.svg]

With ``--flame``, py-spy (``pip install py-spy``) records koordlet for 20 s after the
measurement (py-spy's own cost never enters the measured window) and writes a flame graph of
every thread, idle frames left out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.procstats import cpu_seconds, record_flame, rss_bytes, strategy_times
from koordapi import keys
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node

# koordlet's defaults where the e2e harness shortens them (its NodeMetric report every 2 s)
DEFAULTS = ("--collect-res-used-interval", "1s", "--node-metric-report-interval", "60s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--containers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument(
        "--koordlet-arg",
        action="append",
        default=[],
        help="extra koordlet argument, repeatable (e.g. --koordlet-arg=--feature-gates=...)",
    )
    parser.add_argument("--flame", type=Path, help="write a py-spy flame graph (SVG) here")
    args = parser.parse_args()
    node = Node.start()
    result: dict[str, object] = {"benchmark": "koordlet_load", "containers": args.containers}
    try:
        with KoordletProcess(
            node, args=(*DEFAULTS, *args.koordlet_arg), interval="10s"
        ) as koordlet:
            assert koordlet.proc is not None
            pid = koordlet.proc.pid
            t0 = time.time()
            for i in range(args.containers):
                qos, label = ("besteffort", "BE") if i % 2 else ("burstable", "LS")
                pod_id = node.run_pod(PodSpec.new(qos=qos, labels={keys.LABEL_QOS_CLASS: label}))
                node.run_container(pod_id, ContainerSpec("app", cpu_shares=64))
            result["create_seconds"] = round(time.time() - t0, 1)
            time.sleep(15)  # settle: every container seen by the collectors and the reconciler
            cpu0, wall0 = cpu_seconds(pid), time.monotonic()
            time.sleep(args.seconds)
            cpu1, wall1 = cpu_seconds(pid), time.monotonic()
            cpu_percent = 100 * (cpu1 - cpu0) / (wall1 - wall0)
            result["cpu_percent_of_one_core"] = round(cpu_percent, 2)
            result["cpu_percent_per_100_containers"] = round(100 * cpu_percent / args.containers, 2)
            result["rss_mib"] = round(rss_bytes(pid) / (1 << 20), 1)
            url = f"http://127.0.0.1:{koordlet.port}/api/v1/node"
            with urllib.request.urlopen(url, timeout=10) as response:
                health = json.loads(response.read())["collectors"]
            result["collector_pass_ms"] = {
                k: round(v["seconds"] * 1000, 1) for k, v in health.items()
            }
            result["known_pods"] = koordlet.metric("koordlet_known_pods")
            result["qos_strategy_ms_per_run"] = strategy_times(koordlet.metrics_text())
            if args.flame:
                record_flame(pid, args.flame)
    finally:
        result["teardown_problems"] = node.teardown()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
