"""koordlet's own CPU and memory against the number of containers: 50, 200 and 1,000.

For each size a fake cgroup v1 tree of N one-container pods (half BE, from
``tests.unit.koordlet.test_whole_koordlet.node_of_pods``) gets the counter files the
collectors read (cpuacct.usage, cpu.stat, memory.stat with a real kernel's 42 lines,
cpu.cfs_burst_us); the whole koordlet, with its defaults (collectors every 1 s, the default QoS
strategies, the reconciler every 10 s), runs in a subprocess of its own, and this process plays
containerd (``nri_plugin.testing.FakeRuntime``: the Synchronize hands koordlet the pods); the
metric cache is a file in the tree's folder, as koordlet's default --tsdb-path. After
the Synchronize and ``--settle`` seconds, koordlet's CPU time (utime + stime of the child,
from /proc) is taken over ``--seconds``: nothing of this process and nothing of koordlet's
start-up counts. Every second this process moves the CPU counter (cpuacct.usage) and the
memory (memory.stat's total_active_anon) of ``--moving`` of the pods and their containers, in
place, as running containers do; the rest stay as they are, as idle ones do. Every cgroup's
cgroup.procs holds this process's pid: a process on the host network, so the network collector
checks each pod's namespace and reads no per-pod counters.

"The floor" is what only reading those files costs at each size: the CPU time of one pass of
reads of every pod's and container's cpuacct.usage, cpu.stat and memory.stat on the same tree,
both opened, read and closed, and with pread on descriptors kept open (what the pods collector
does), as % of one core at one pass a second. ``floor_kernel`` is the same pread pass priced
with this host's real cgroup v1 files (the root cgroup's three files, read 2N times each), as
the fake tree's files are plain page-cache files that cost the kernel less to produce.

Prints one JSON line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/koordlet_scaling.py [--sizes 50,200,1000] \
        [--seconds 30] [--settle 10] [--moving 1.0] [--lag-seconds 20] \
        [--flame /tmp/flame-200.svg [--flame-size 200]]

``--flame`` records koordlet with py-spy for 20 s after the measurement at ``--flame-size``
(py-spy's cost never enters the measured window): an SVG flame graph, or py-spy's raw
collapsed stacks when the name does not end in .svg.

After the CPU window (and the flame), for ``--lag-seconds``, a probe in koordlet's event loop
(the loop that answers NRI) measures how late a 10 ms sleep wakes while the collectors and
strategies run, and this process, as containerd, sends a CreateContainer every 50 ms for a
container of the first (BE) pod and times each reply: ``loop_lag_ms`` and
``create_container_ms``. The probe is not in the CPU window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from benchmarks.procstats import cpu_seconds, record_flame, rss_bytes, strategy_times, summary
from nri_plugin import api
from nri_plugin.testing import FakeRuntime, PluginSession
from tests.unit.koordlet.test_whole_koordlet import node_of_pods, standalone_config

MIB = 1 << 20
LAG_PROBE_S = 0.010
# A container's memory.stat on cgroup v1, as this host's kernel writes it (42 lines).
MEMORY_STAT = """cache 10977280
rss 3776512
rss_huge 0
shmem 10551296
mapped_file 8712192
dirty 20480
writeback 0
workingset_refault_anon 0
workingset_refault_file 10674
swap 0
swapcached 0
pgpgin 55083
pgpgout 51481
pgfault 94554
pgmajfault 0
inactive_anon 0
active_anon {anon}
inactive_file 8192
active_file 417792
unevictable 0
hierarchical_memory_limit 9223372036854771712
hierarchical_memsw_limit 9223372036854771712
total_cache 10977280
total_rss 3776512
total_rss_huge 0
total_shmem 10551296
total_mapped_file 8712192
total_dirty 20480
total_writeback 0
total_workingset_refault_anon 0
total_workingset_refault_file 10674
total_swap 0
total_swapcached 0
total_pgpgin 55083
total_pgpgout 51481
total_pgfault 94554
total_pgmajfault 0
total_inactive_anon 0
total_active_anon {anon}
total_inactive_file 8192
total_active_file 417792
total_unevictable 0
"""
ANON = "total_active_anon "  # the line the ticker moves
CPU_STAT = "nr_periods 0\nnr_throttled 0\nthrottled_time 0\nnr_bursts 0\nburst_time 0\n"
WIDTH = 20  # moving values are written zero-padded in place: a reader never sees one half-done
COUNTERS = (("cpuacct", "cpuacct.usage"), ("cpu", "cpu.stat"), ("memory", "memory.stat"))


def cgroup_dirs(root: Path) -> list[str]:
    """Every pod and container cgroup node_of_pods made (relative to a hierarchy root)."""
    base = root / "memory"
    return sorted(str(p.relative_to(base)) for p in base.glob("kubepods/*/pod*/**") if p.is_dir())


def add_counters(root: Path, dirs: list[str]) -> None:
    """The files the collectors read, on every pod and container cgroup and the QoS levels."""
    levels = ["kubepods", "kubepods/besteffort", "kubepods/burstable"]
    for rel in levels + dirs:
        for controller in ("cpu", "cpuacct", "memory", "cpuset"):
            (root / controller / rel).mkdir(parents=True, exist_ok=True)
        (root / "cpuacct" / rel / "cpuacct.usage").write_text(f"{0:0{WIDTH}d}\n")
        (root / "cpu" / rel / "cpu.stat").write_text(CPU_STAT)
        (root / "cpu" / rel / "cpu.cfs_burst_us").write_text("0\n")
        if rel in levels:  # node_of_pods writes these for pods and containers only
            for name, value in (("cpu.shares", "2"), ("cpu.cfs_quota_us", "-1"),
                                ("cpu.cfs_period_us", "100000")):  # fmt: skip
                (root / "cpu" / rel / name).write_text(value + "\n")
            limit = "9223372036854771712\n"
            (root / "memory" / rel / "memory.limit_in_bytes").write_text(limit)
        (root / "memory" / rel / "memory.stat").write_text(memory_stat(3776512))
        # a process of this benchmark's, on the host network: the network collector finds
        # its namespace once, then only checks that it is still the pod's
        (root / "cpu" / rel / "cgroup.procs").write_text(f"{os.getpid()}\n")
        cpus = f"0-{(os.cpu_count() or 1) - 1}"
        (root / "cpuset" / rel / "cpuset.cpus").write_text(cpus + "\n")
        (root / "cpuset" / rel / "cpuset.mems").write_text("0\n")


def memory_stat(anon: int) -> str:
    return MEMORY_STAT.format(anon=f"{anon:0{WIDTH}d}")


class Ticker:
    """Every tick, ``fraction`` of the cgroups use 10 ms more CPU and change their anonymous
    memory by a page, written in place."""

    def __init__(self, root: Path, dirs: list[str], fraction: float) -> None:
        moving = dirs[: round(len(dirs) * fraction)]
        self.usage = [os.open(root / "cpuacct" / d / "cpuacct.usage", os.O_WRONLY) for d in moving]
        self.memory = [os.open(root / "memory" / d / "memory.stat", os.O_WRONLY) for d in moving]
        self.anon_at = memory_stat(0).index(ANON) + len(ANON)
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1
        usage = f"{10_000_000 * self.ticks:0{WIDTH}d}\n".encode()
        anon = f"{3776512 + 4096 * (self.ticks % 2):0{WIDTH}d}".encode()
        for fd in self.usage:
            os.pwrite(fd, usage, 0)
        for fd in self.memory:
            os.pwrite(fd, anon, self.anon_at)

    def close(self) -> None:
        for fd in self.usage + self.memory:
            os.close(fd)


async def measure(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """koordlet on a fresh tree of ``size`` pods, in a subprocess, measured from outside."""
    folder = Path(tempfile.mkdtemp(prefix=f"koordlet-scaling-{size}-"))
    pods, containers = node_of_pods(folder / "cgroup", size)
    dirs = cgroup_dirs(folder / "cgroup")
    add_counters(folder / "cgroup", dirs)
    # the metric cache in a file, as koordlet's default --tsdb-path has it (in memory it would
    # hold every sample of the run, and RSS would grow with the run's length)
    config = replace(standalone_config(folder), tsdb_path=folder / "metric-data")
    (folder / "config.pickle").write_bytes(pickle.dumps(config))
    runtime = FakeRuntime(pods=pods, containers=containers, nri_version="v0.9.0")
    await runtime.listen(config.nri_socket)
    ticker = Ticker(folder / "cgroup", dirs, args.moving)
    child = await asyncio.create_subprocess_exec(sys.executable, __file__, "--child", str(folder))
    out: dict[str, Any] = {"pods": size, "containers": size}
    try:
        session = await runtime.next_session(timeout=120)  # koordlet started and synchronized

        async def ticking(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                ticker.tick()
                await asyncio.sleep(1.0)

        await ticking(args.settle)
        cpu0, wall0 = cpu_seconds(child.pid), time.monotonic()
        await ticking(args.seconds)
        cpu1, wall1 = cpu_seconds(child.pid), time.monotonic()
        percent = 100 * (cpu1 - cpu0) / (wall1 - wall0)
        out["cpu_percent_of_one_core"] = round(percent, 2)
        out["cpu_percent_per_100_containers"] = round(100 * percent / size, 3)
        out["rss_mib"] = round(rss_bytes(child.pid) / MIB, 1)
        if args.flame and size == args.flame_size:
            flame = asyncio.create_task(asyncio.to_thread(record_flame, child.pid, args.flame))
            while not flame.done():
                ticker.tick()
                await asyncio.wait([flame], timeout=1.0)
            flame.result()
        if args.lag_seconds > 0:
            child.send_signal(signal.SIGUSR1)  # the lag probe starts
            replies, _ = await asyncio.gather(
                creating(session, pods[0], args.lag_seconds), ticking(args.lag_seconds)
            )
            out["create_container_ms"] = summary(replies)
    finally:
        child.send_signal(signal.SIGTERM)  # koordlet's own handler: a clean stop
        await asyncio.wait_for(child.wait(), 60)
        ticker.close()
        await runtime.close()
    out.update(child_report(folder / "health.json"))
    out["floor"] = floor(folder / "cgroup", dirs)
    shutil.rmtree(folder)
    return out


def child_report(path: Path) -> dict[str, Any]:
    """What the child wrote as it stopped: collectors' pass times and problems, strategies'
    times, the event loop's lag (when probed)."""
    report = json.loads(path.read_text())
    health = report["collectors"]
    out = {
        "collector_pass_ms": {k: v.pop("ms") for k, v in health.items()},
        "collector_problems": {k: v for k, v in health.items() if any(v.values())},
        "qos_strategy_ms_per_run": report["qos"],
    }
    if report["loop_lag_ms"]:
        out["loop_lag_ms"] = summary(report["loop_lag_ms"])
    return out


async def creating(session: PluginSession, pod: api.PodSandbox, seconds: float) -> list[float]:
    """CreateContainer for a container of ``pod`` every 50 ms for ``seconds``; each reply's
    milliseconds."""
    container = api.Container(id="lag-probe", pod_sandbox_id=pod.id, name="main")
    container.linux.cgroups_path = f"{pod.linux.cgroup_parent}/lag-probe"
    replies: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        reply = await session.create_container(pod, container)
        replies.append(1000 * (time.perf_counter() - started))
        if not reply.adjust.linux.resources.cpu.HasField("shares"):
            raise RuntimeError("koordlet's answer has no cpu shares: no hook answered")
        await asyncio.sleep(0.05)
    return replies


def floor(root: Path, dirs: list[str], passes: int = 20) -> dict[str, float]:
    """% of one core at one pass a second of only reading the counters of ``dirs``."""
    paths = [str(root / c / d / name) for d in dirs for c, name in COUNTERS]

    def plain() -> None:
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            os.read(fd, 1 << 16)
            os.close(fd)

    fds = [os.open(path, os.O_RDONLY) for path in paths]

    def kept() -> None:
        for fd in fds:
            os.pread(fd, 1 << 16, 0)

    real = [f"/sys/fs/cgroup/{c}/{name}" for c, name in COUNTERS]
    real_fds = [os.open(path, os.O_RDONLY) for path in real] * len(dirs)

    def kernel() -> None:
        for fd in real_fds:
            os.pread(fd, 1 << 16, 0)

    def percent(one_pass: Any) -> float:
        one_pass()  # warm
        start = time.process_time()
        for _ in range(passes):
            one_pass()
        return round(100 * (time.process_time() - start) / passes, 3)

    try:
        return {
            "files_per_pass": len(paths),
            "open_read_close": percent(plain),
            "pread_kept_open": percent(kept),
            "pread_kept_open_kernel": percent(kernel),
        }
    finally:
        for fd in fds + real_fds[: len(real)]:
            os.close(fd)


def child(folder: Path) -> int:
    """koordlet itself; on SIGTERM, its collectors' health goes to health.json."""
    from koordlet.daemon import Koordlet  # noqa: PLC0415 - only the child needs it

    config = pickle.loads((folder / "config.pickle").read_bytes())  # noqa: S301 - ours
    daemon = Koordlet(config)
    lag_ms: list[float] = []

    async def run() -> None:
        probing = asyncio.Event()  # SIGUSR1: after the CPU window
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, probing.set)

        async def probe() -> None:
            await probing.wait()
            while True:
                started = time.perf_counter()
                await asyncio.sleep(LAG_PROBE_S)
                lag_ms.append(1000 * (time.perf_counter() - started - LAG_PROBE_S))

        probing_task = asyncio.create_task(probe())
        await daemon.run()
        probing_task.cancel()

    asyncio.run(run())
    health = {
        c.name: {
            "ms": round(1000 * daemon.collectors.health[c.name].seconds, 2),
            "errors": daemon.collectors.health[c.name].errors,
            "unavailable": daemon.collectors.health[c.name].unavailable,
            "skipped": dict(c.skipped),
        }
        for c in daemon.collectors.collectors
    }
    strategies = strategy_times(generate_latest(daemon.metrics.registry).decode())
    report = {"collectors": health, "qos": strategies, "loop_lag_ms": lag_ms}
    (folder / "health.json").write_text(json.dumps(report))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--moving", type=float, default=1.0, help="fraction of busy cgroups")
    parser.add_argument("--flame", type=Path, help="py-spy output (SVG or raw stacks)")
    parser.add_argument("--flame-size", type=int, default=200)
    parser.add_argument("--lag-seconds", type=float, default=20.0, help="0: no lag window")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [asyncio.run(measure(size, args)) for size in sizes]
    result: dict[str, Any] = {"benchmark": "koordlet_scaling", "seconds": args.seconds,
                              "moving": args.moving, "runs": runs}  # fmt: skip
    first, last = runs[0], runs[-1]
    if len(runs) > 1 and first["cpu_percent_per_100_containers"] > 0:
        result[f"per_container_cost_ratio_{last['pods']}_to_{first['pods']}"] = round(
            last["cpu_percent_per_100_containers"] / first["cpu_percent_per_100_containers"], 2
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
