"""Overhead of the run-queue latency probes on a context-switch-heavy workload. Prints one JSON
line; nothing is asserted. Needs root and what scripts/setup.sh installs for bcc.

    PYTHONPATH=. .venv/bin/python benchmarks/schedlat_overhead.py [--rounds 100000 --pairs 12]

The workload is a pipe ping-pong between two processes pinned to one CPU: every round trip is
two wake-ups and two context switches, the events the probes run on, and nothing else. The
program is loaded once, exactly as koordlet loads it; blocks then alternate with the probes
attached and detached (in ABBA order), and the slowdown is the median over the pairs of
1 - rate(attached) / rate(detached), so drift on a shared machine cancels within each pair.
An empty program on the same tracepoints gives the floor: what attaching costs at all. The
ping-pong is a small C program when a C compiler exists (the worst case), else Python.

koordlet samples: by default the probes are attached for --sched-latency-sample-seconds of
every --sched-latency-interval (2 s of 10 s), so the overhead over time is the attached figure
times that duty cycle, which is reported too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from koordlet.inspect.program import TRACEPOINTS, Probe, load

PING_PONG_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    long rounds = atol(argv[1]);
    int a[2], b[2];
    char c = 0;
    if (pipe(a) || pipe(b)) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        for (long i = 0; i < rounds; i++) {
            if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    for (long i = 0; i < rounds; i++) {
        if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
    }
    waitpid(pid, NULL, 0);
    return 0;
}
"""
EMPTY_PROGRAM = "BPF_PERCPU_HASH(hist, u64, u64, 1);\n" + "\n".join(
    f"int on_{tp}(struct bpf_raw_tracepoint_args *ctx) {{ return 0; }}" for tp in TRACEPOINTS
)
DEFAULT_DUTY = 2 / 10  # koordlet's default sample seconds / interval


def python_ping_pong(rounds: int) -> None:
    a_read, a_write = os.pipe()
    b_read, b_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        for _ in range(rounds):
            os.write(b_write, os.read(a_read, 1))
        os._exit(0)
    for _ in range(rounds):
        os.write(a_write, b"x")
        os.read(b_read, 1)
    os.waitpid(pid, 0)
    for fd in (a_read, a_write, b_read, b_write):
        os.close(fd)


def build_c(folder: Path) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    source = folder / "pingpong.c"
    source.write_text(PING_PONG_C)
    binary = folder / "pingpong"
    subprocess.run([cc, "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def round_trips_per_second(binary: Path | None, rounds: int) -> float:
    start = time.perf_counter()
    if binary is not None:
        subprocess.run(["taskset", "-c", "0", str(binary), str(rounds)], check=True)
    else:
        os.sched_setaffinity(0, {0})
        python_ping_pong(rounds)
    return rounds / (time.perf_counter() - start)


def slowdown(probe: Probe, binary: Path | None, rounds: int, pairs: int) -> list[float]:
    """Per pair, 1 - attached / detached, in ABBA order; the probe is left detached."""
    probe.detach()
    out = []
    for i in range(pairs):
        rates = {}
        for attached in (False, True) if i % 2 == 0 else (True, False):
            if attached:
                probe.attach()
            rates[attached] = round_trips_per_second(binary, rounds)
            probe.detach()
        out.append(1 - rates[True] / rates[False])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        binary = build_c(Path(tmp))
        rounds = args.rounds if binary is not None else args.rounds // 10
        round_trips_per_second(binary, rounds // 10)  # warm-up
        empty = load(EMPTY_PROGRAM)
        try:
            floor = slowdown(empty, binary, rounds, args.pairs)
        finally:
            empty.close()
        probe = load()
        try:
            full = slowdown(probe, binary, rounds, args.pairs)
            probe.attach()
            round_trips_per_second(binary, rounds)
            waits = sum(sum(h.values()) for h in probe.read().values())
        finally:
            probe.close()
    attached = statistics.median(full)
    result = {
        "benchmark": "schedlat_overhead",
        "workload": "C pipe ping-pong" if binary is not None else "Python pipe ping-pong",
        "rounds_per_block": rounds,
        "pairs": args.pairs,
        "slowdown_percent_attached": round(100 * attached, 2),
        "slowdown_percent_attached_quartiles": [
            round(100 * q, 2) for q in statistics.quantiles(full, n=4)
        ],
        "slowdown_percent_empty_program": round(100 * statistics.median(floor), 2),
        "slowdown_percent_default_sampling": round(100 * attached * DEFAULT_DUTY, 2),
        "waits_recorded": waits,
    }
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
