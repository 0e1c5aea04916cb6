"""Run-queue latency with eBPF on the real containerd: attribution, interference, degradation.

The BPF program needs what scripts/setup.sh installs (bcc, kernel headers, tracefs); these
tests run it for real in koordlet as users start it, and read the results from its API.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from koordapi import keys
from koordctl.inspect import render_inspect
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import scaled

FAST = ("--sched-latency-interval", "1s")
WAKE_LOOP = ["/bin/sh", "-c", "while :; do usleep 2000; done"]  # wakes 500 times a second
# A busy service: bursts of work (a few milliseconds of shell) with short sleeps between. It
# wants more than half a CPU, so beside a hog of equal weight it must queue for its share.
SERVICE = [
    "/bin/sh",
    "-c",
    "while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; usleep 1000; done",
]


def api(koordlet: KoordletProcess, path: str, **query: str) -> Any:
    url = f"http://127.0.0.1:{koordlet.port}{path}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=scaled(5)) as reply:
        return json.loads(reply.read())


def series(koordlet: KoordletProcess, metric: str, uid: str, window: str, agg: str) -> float | None:
    found = api(koordlet, "/api/v1/query", metric=metric, window=window, agg=agg,
                **{"label.pod_uid": uid})  # fmt: skip
    return float(found[0][agg]) if found else None


def waits(koordlet: KoordletProcess, uid: str, window: str = "1h") -> float:
    """All waits recorded for the pod in the window (sum of the per-pass counts)."""
    avg = series(koordlet, "pod_runq_waits", uid, window, "avg")
    count = series(koordlet, "pod_runq_waits", uid, window, "count")
    return 0.0 if avg is None or count is None else avg * count


def pod(qos: str, label: str) -> PodSpec:
    return PodSpec.new(qos=qos, labels={keys.LABEL_QOS_CLASS: label})


def test_waits_are_recorded_under_the_waking_pod_and_not_another(node: Node) -> None:
    with KoordletProcess(node, args=FAST) as koordlet:
        busy_id = node.run_pod(pod("burstable", "LS"))
        node.run_container(busy_id, ContainerSpec("waker", command=WAKE_LOOP))
        quiet_id = node.run_pod(pod("burstable", "LS"))
        node.run_container(quiet_id, ContainerSpec("sleeper"))
        busy, quiet = node.pods[busy_id].uid, node.pods[quiet_id].uid

        koordlet.wait_until(lambda: waits(koordlet, busy) > 500, 30, "waits of the waking pod")
        # The quiet pod's start-up (runc init's threads, the exec) may have queued, more so on a
        # loaded machine, and a pass that began before it ended may still publish that. After
        # one more pass, sleep infinity never wakes: nothing more of it while the waker's count
        # grows by hundreds.
        first = waits(koordlet, busy)
        koordlet.wait_until(lambda: waits(koordlet, busy) > first, 30, "one more sampling pass")
        quiet_before, busy_before = waits(koordlet, quiet), waits(koordlet, busy)
        koordlet.wait_until(
            lambda: waits(koordlet, busy) > busy_before + 500, 30, "more waits of the waking pod"
        )
        assert waits(koordlet, quiet) == quiet_before
        p99 = series(koordlet, "pod_runq_latency_p99", busy, "1h", "last")
        assert p99 is not None and p99 > 0
        # What a user runs: koordctl inspect --once lists both pods, the waker with waits.
        koordctl = Path(sys.executable).parent / "koordctl"
        shown = subprocess.run(
            [str(koordctl), "inspect", "--once", "--addr", f"127.0.0.1:{koordlet.port}"],
            capture_output=True,
            text=True,
            timeout=scaled(30),
            check=True,
        ).stdout
        rows = {line.split()[0]: line.split() for line in shown.splitlines() if line.strip()}
        busy_row = rows[f"default/{node.pods[busy_id].name}"]
        quiet_row = rows[f"default/{node.pods[quiet_id].name}"]
        assert busy_row[1] == "LS" and busy_row[2] != "-"  # a run-queue p50 is shown
        assert quiet_row[2] == "-"  # nothing measured for the sleeper


def test_a_be_hog_on_the_same_cpu_raises_the_lsr_pods_wait(node: Node) -> None:
    # CPU suppress would move the BE container off CPU 0 (it owns BE cpusets): off here, so
    # that the BE container stays on CPU 0, the LSR pod's CPU, as the runtime was asked.
    args = (*FAST, "--feature-gates", "BECPUSuppress=false")
    # Group identity 0 for BE, written by koordlet down to the besteffort QoS cgroup: the hog
    # competes by CFS weight alone. (With BE's usual -1 its cgroups are cpu.idle and the LS
    # pod barely waits, which is what group identity is for; a node whose besteffort cgroup
    # kept cpu.idle=1 from earlier work would hide the interference this test looks for.)
    slo = "resourceQOSStrategy:\n  beClass: {cpuQOS: {enable: true, groupIdentity: 0}}\n"
    with KoordletProcess(node, node_slo=slo, args=args) as koordlet:
        # An LSR pod pinned to CPU 0 the Koordinator way (the scheduler's resource-status):
        # the cpuset hook gives its container exactly that CPU.
        pinned = PodSpec.new(
            qos="guaranteed",
            labels={keys.LABEL_QOS_CLASS: "LSR"},
            annotations={keys.ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": "0"})},
        )
        ls_id = node.run_pod(pinned)
        ls_cid = node.run_container(ls_id, ContainerSpec("service", command=SERVICE))
        assert node.container_values(ls_id, ls_cid).cpuset_cpus == "0"
        uid = node.pods[ls_id].uid
        # The LS pod alone on CPU 0: its waits are wake-up latencies of an idle CPU.
        koordlet.wait_until(lambda: waits(koordlet, uid, "8s") > 1000, 30, "LS waits alone")
        time.sleep(8)
        alone = series(koordlet, "pod_runq_latency_p50", uid, "8s", "avg")
        alone99 = series(koordlet, "pod_runq_latency_p99", uid, "8s", "avg")
        alone_mean = series(koordlet, "pod_runq_latency_mean", uid, "8s", "avg")
        alone_waits = waits(koordlet, uid, "8s")

        be_id = node.run_pod(pod("besteffort", "BE"))
        hog = ["/bin/sh", "-c", "while :; do :; done"]
        hog_cid = node.run_container(be_id, ContainerSpec("hog", command=hog, cpuset_cpus="0"))
        assert node.container_values(be_id, hog_cid).cpuset_cpus == "0"
        assert node.pod_values(be_id).cpu_idle == 0
        assert node.reader.values(node.layout.qos_dir("besteffort")).cpu_idle == 0
        time.sleep(10)  # the 8 s window below holds only passes with the hog running
        shared = series(koordlet, "pod_runq_latency_p50", uid, "8s", "avg")
        shared99 = series(koordlet, "pod_runq_latency_p99", uid, "8s", "avg")
        shared_mean = series(koordlet, "pod_runq_latency_mean", uid, "8s", "avg")
        shared_waits = waits(koordlet, uid, "8s")
        screen = api(koordlet, "/api/v1/inspect")
        print("\n" + render_inspect(screen))  # the koordctl inspect screen in docs/ebpf.md
        assert {p["uid"] for p in screen["pods"]} >= {uid, node.pods[be_id].uid}

        print(f"\nLS run-queue wait (us) alone -> beside the BE hog: p50 {alone} -> {shared}, "
              f"p99 {alone99} -> {shared99}, mean {alone_mean} -> {shared_mean}; waits "
              f"{alone_waits:.0f} -> {shared_waits:.0f}")  # fmt: skip
        assert alone_waits > 500 and shared_waits > 500, (alone_waits, shared_waits)
        assert alone99 is not None and shared99 is not None
        assert alone_mean is not None and shared_mean is not None
        # Sharing CPU 0 with a busy BE container, the LS threads queue for their share: the long
        # waits (the tail, and with it the mean) grow; the median of many short wake-ups (the
        # shell forking usleep) need not.
        assert shared99 > 2 * alone99
        assert shared_mean > alone_mean


def test_without_bcc_koordlet_runs_and_says_why(node: Node, tmp_path: Path) -> None:
    shadow = tmp_path / "no-bcc"
    (shadow / "bcc").mkdir(parents=True)
    (shadow / "bcc" / "__init__.py").write_text('raise ImportError("bcc removed for this test")\n')
    with KoordletProcess(node, args=FAST, python_path=(shadow,)) as koordlet:
        pod_id = node.run_pod(pod("burstable", "LS"))
        node.run_container(pod_id, ContainerSpec("app", cpu_shares=512))

        def said() -> bool:
            health = api(koordlet, "/api/v1/node")["collectors"].get("schedlat", {})
            return "bcc is not installed" in health.get("unavailable", "")

        koordlet.wait_until(said, 20, "the reason in /api/v1/node")
        assert "collector schedlat is off: run-queue latency off: bcc is not installed" in (
            koordlet.log_text()
        )
        assert koordlet.metric("koordlet_collector_up", collector="schedlat") == 0
        assert koordlet.alive  # and the rest works: the pod's usage is still collected
        uid = node.pods[pod_id].uid

        def usage_without_latency() -> bool:
            usage = series(koordlet, "pod_cpu_usage", uid, "1h", "count")
            return usage is not None and waits(koordlet, uid) == 0

        koordlet.wait_until(usage_without_latency, 20, "pod usage without bcc")
