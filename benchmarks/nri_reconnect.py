"""How long koordlet leaves containers without QoS when containerd restarts.

On a private containerd with NRI, koordlet runs as users start it; containerd is restarted
``-n`` times. For each restart the gap is from the moment containerd's NRI socket accepts a
connection (polled every millisecond from here) to containerd's own log line saying koordlet's
plugin connected (its timestamp). After each re-registration a BE container is created and its
batch values read back: "values ok" counts those that had them. Prints one JSON line with each
gap, the median and the worst; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/nri_reconnect.py -n 15
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
import time

from tests.e2e.harness.containerd import accepting
from tests.e2e.harness.cri import ContainerSpec
from tests.e2e.harness.koordlet import PLUGIN_ID, KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.test_koordlet import MiB, be_pod

CONNECTED = re.compile(r'time="([^"]+)".*plugin \\"' + re.escape(PLUGIN_ID) + r'\\" connected')


def log_time(stamp: str) -> float:
    """containerd's RFC 3339 time with nanoseconds, as a Unix time."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    moment = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC)
    return moment.timestamp() + float(f"0.{frac or 0}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-n", "--restarts", type=int, default=15)
    args = parser.parse_args()
    node = Node.start()
    gaps: list[float] = []
    values_ok = 0
    try:
        with KoordletProcess(node):
            socket_path = node.containerd.layout.nri_socket
            for _ in range(args.restarts):
                node.containerd.stop()
                node.containerd.start()
                while not accepting(socket_path):
                    time.sleep(0.001)
                accepted = time.time()
                node.containerd.wait_for_log(f'plugin \\"{PLUGIN_ID}\\" connected')
                stamps = CONNECTED.findall(node.containerd.log_text(since_start=True))
                gaps.append(max(0.0, log_time(stamps[-1]) - accepted))
                node.cri.wait_ready()
                pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
                cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))
                values = node.container_values(pod_id, cid)
                values_ok += (values.cpu_quota, values.memory_limit) == (100000, 512 * MiB)
                node.remove_pod(pod_id)
    finally:
        left = node.teardown()
    result = {
        "restarts": args.restarts,
        "gap_ms": [round(g * 1000, 1) for g in gaps],
        "median_ms": round(statistics.median(gaps) * 1000, 1) if gaps else None,
        "worst_ms": round(max(gaps) * 1000, 1) if gaps else None,
        "values_ok": values_ok,
        "left_behind": left,
    }
    print(json.dumps(result))
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
