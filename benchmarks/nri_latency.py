"""What an NRI plugin adds to CRI CreateContainer, ours next to containerd's own Go stub.

On one private containerd 1.7.24, in one run, CreateContainer is timed (client side) in three
modes: no plugin, our Python plugin (tests/e2e/plugins/shares.py: cpu shares 1024 and one
annotation), and, when available, the reference Go plugin built on containerd's NRI stub
(../shared/tools/nri-ref: the same adjustment). Modes alternate in blocks (A B C, C B A, ...)
so that drift of the machine hits them alike; each plugin connects before its block and leaves
after it. Every trial checks the container's cpu.shares so a plugin that is not in the path
cannot pass for a fast one. Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/nri_latency.py -n 100 [--go-plugin PATH | --build-go]
        [--koordlet] [--background 200]

``--background N`` first starts N long-running containers (half LS, half BE pods) that stay
for the whole run: koordlet's collectors and strategies then work on them while it answers
(every mode sees the same node). The ratios of koordlet's and our plugin's added latency to
the Go plugin's are printed at p50 and p90.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.procstats import percentile, summary
from koordapi import keys
from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.node import Node
from tests.e2e.harness.plugin import shares_plugin_command

NRI_REF_TOOL = paths.REPO_ROOT.parent / "shared" / "tools" / "nri-ref"
GO_PLUGIN_DEFAULT = paths.CACHE / "nri-ref" / "refplugin"
REQUESTED_SHARES = 512
PLUGIN_SHARES = 1024
ALL_HOOK_GATES = (
    "GroupIdentity",
    "CPUSetAllocator",
    "BatchResource",
    "CPUNormalization",
    "CoreSched",
    "Resctrl",
    "OOMScoreAdj",
    "MemoryQOS",
    "TCNetworkQoS",
    "GPUEnvInject",
    "RDMADeviceInject",
)
ALL_CLASSES_ON = """
resourceQOSStrategy:
  lsrClass: {cpuQOS: {enable: true}, memoryQOS: {enable: true}}
  lsClass: {cpuQOS: {enable: true}, memoryQOS: {enable: true}}
  beClass: {cpuQOS: {enable: true}, memoryQOS: {enable: true}}
"""


@dataclass
class Mode:
    name: str
    command: list[str] | None  # None: no plugin
    plugin_id: str = ""  # "<idx>-<name>" as containerd logs it
    expected_shares: int = PLUGIN_SHARES
    create_ms: list[float] = field(default_factory=list)
    self_us: dict[str, list[float]] = field(default_factory=dict)
    connects: int = 0


def go_plugin(args: argparse.Namespace) -> Path | None:
    if args.go_plugin:
        return Path(args.go_plugin)
    if GO_PLUGIN_DEFAULT.exists():
        return GO_PLUGIN_DEFAULT
    if args.build_go and (NRI_REF_TOOL / "build.sh").exists():
        env = dict(os.environ, WORK=str(GO_PLUGIN_DEFAULT.parent))
        subprocess.run([str(NRI_REF_TOOL / "build.sh")], check=True, env=env, capture_output=True)
        return GO_PLUGIN_DEFAULT
    return None


def bench_pod() -> PodSpec:
    """A BE pod asking for 1000 milli batch-cpu: koordlet's BatchResource gives it 1024 shares,
    the value the plain plugins set, so every mode can be checked the same way."""
    resources = {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(256 << 20)}
    spec = {"containers": {"bench": {"requests": resources, "limits": resources}}}
    return PodSpec.new(
        qos="besteffort",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
    )


def added_ratio(ours: list[float], go: list[float], base: list[float], q: float) -> float | None:
    """(ours - none) / (go - none) at percentile ``q``; None when Go added nothing measurable."""
    go_added = percentile(go, q) - percentile(base, q)
    if go_added <= 0:
        return None
    return round((percentile(ours, q) - percentile(base, q)) / go_added, 2)


def koordlet_mode(base: Path) -> Mode:
    """koordlet with every runtime-hook gate on and every class's CPU QoS enabled."""
    slo = base / "bench-nodeslo.yaml"
    slo.write_text(ALL_CLASSES_ON)
    gates = ",".join(f"{g}=true" for g in ALL_HOOK_GATES)
    command = [
        str(Path(sys.executable).parent / "koordlet"),
        "--var-run-root-dir",
        str(base),
        "--node-slo-file",
        str(slo),
        "--addr",
        "",
        "--tsdb-path",
        "",
        "--node-metric-file",
        "",
        "--feature-gates",
        gates,
        "--log-level",
        "warning",
    ]
    return Mode("koordlet", command, "00-koordlet_nri", PLUGIN_SHARES)


def run_block(node: Node, mode: Mode, trials: int, out_dir: Path) -> None:
    proc = None
    out_path = out_dir / f"{mode.name}.out"
    if mode.command is not None:
        with out_path.open("ab") as out:
            proc = subprocess.Popen(
                mode.command,
                stdout=out,
                stderr=subprocess.STDOUT,  # plugin logs beside its timings: JSON lines are picked
                env=dict(os.environ, PYTHONPATH=str(paths.REPO_ROOT)),
            )
        mode.connects += 1
        node.containerd.wait_for_log(f'plugin \\"{mode.plugin_id}\\" connected', mode.connects, 30)
    expected = REQUESTED_SHARES if proc is None else mode.expected_shares
    try:
        for _ in range(trials):
            pod_id = node.run_pod(bench_pod())
            spec = ContainerSpec("bench", cpu_shares=REQUESTED_SHARES)
            t0 = time.perf_counter()
            cid = node.create_container(pod_id, spec)
            mode.create_ms.append((time.perf_counter() - t0) * 1000)
            node.cri.start_container(cid)  # the cgroup exists once the task runs
            shares = node.container_values(pod_id, cid).cpu_shares
            node.remove_pod(pod_id)
            if node.reader.version == 1 and shares != expected:
                raise RuntimeError(f"{mode.name}: cpu.shares {shares}, expected {expected}")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
            node.containerd.wait_for_log(
                f'connection to plugin \\"{mode.plugin_id}\\" closed', mode.connects, 30
            )


def read_self_times(mode: Mode, out_dir: Path) -> None:
    path = out_dir / f"{mode.name}.out"
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") != "CreateContainer":
            continue
        for key in ("handler_us", "rpc_us", "unmarshal_us"):
            if isinstance(record.get(key), int | float) and record[key] >= 0:
                mode.self_us.setdefault(key, []).append(float(record[key]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--trials", type=int, default=100, help="trials per mode")
    parser.add_argument("--blocks", type=int, default=10, help="blocks per mode")
    parser.add_argument("--go-plugin", help="the reference Go plugin binary")
    parser.add_argument("--build-go", action="store_true", help="build it from ../shared/tools")
    parser.add_argument(
        "--koordlet", action="store_true", help="also measure koordlet with every hook on"
    )
    parser.add_argument(
        "--background", type=int, default=0, help="long-running containers to start first"
    )
    args = parser.parse_args()

    node = Node.start()
    out_dir = node.containerd.layout.base / "bench"
    out_dir.mkdir()
    socket = str(node.containerd.layout.nri_socket)
    modes = [
        Mode("none", None),
        Mode(
            "python",
            shares_plugin_command(
                "--socket",
                socket,
                "--shares",
                str(PLUGIN_SHARES),
                "--name",
                "py",
                "--idx",
                "50",
                "--timings",
            ),
            "50-py",
        ),
    ]
    go = go_plugin(args)
    if go is not None:
        modes.append(Mode("go", [str(go), "-socket", socket, "-name", "go", "-idx", "50"], "50-go"))
    if args.koordlet:
        modes.append(koordlet_mode(node.containerd.layout.base))
    per_block = max(1, args.trials // args.blocks)
    try:
        for i in range(args.background):
            qos, label = ("besteffort", "BE") if i % 2 else ("burstable", "LS")
            pod_id = node.run_pod(PodSpec.new(qos=qos, labels={keys.LABEL_QOS_CLASS: label}))
            node.run_container(pod_id, ContainerSpec("app", cpu_shares=64))
        for _ in range(2):  # warm-up: caches, first-connection costs
            pod_id = node.run_pod(PodSpec.new())
            node.create_container(pod_id, ContainerSpec("warm"))
            node.remove_pod(pod_id)
        for block in range(args.blocks):
            for mode in modes if block % 2 == 0 else reversed(modes):
                run_block(node, mode, per_block, out_dir)
        for mode in modes:
            read_self_times(mode, out_dir)
    finally:
        problems = node.teardown()

    result: dict[str, object] = {
        "benchmark": "nri_latency",
        "trials_per_mode": per_block * args.blocks,
        "background_containers": args.background,
    }
    base = modes[0].create_ms
    for mode in modes:
        entry: dict[str, object] = {"create_container_ms": summary(mode.create_ms)}
        if mode.command is not None:
            entry["added_ms"] = {
                q: round(percentile(mode.create_ms, v) - percentile(base, v), 3)
                for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
            }
            entry["plugin_self_us"] = {k: summary(v, 1) for k, v in mode.self_us.items()}
        result[mode.name] = entry
    go_mode = next((m for m in modes if m.name == "go"), None)
    if go_mode is None:
        result["go"] = "reference plugin not available (--go-plugin PATH or --build-go)"
    else:
        for mode in modes:
            if mode.command is not None and mode is not go_mode:
                result[f"{mode.name}_vs_go_added"] = {
                    q: added_ratio(mode.create_ms, go_mode.create_ms, base, v)
                    for q, v in (("p50", 0.5), ("p90", 0.9))
                }
    result["teardown_problems"] = problems
    print(json.dumps(result))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
