"""The peak predictor's cost: CPU time per training pass, per prodReclaimable answer, and the
memory its models hold, at 50, 200 and 1,000 pods. Prints a table; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/prediction.py [--pods 50 200 1000] [--passes 5]

A metric cache in a temporary SQLite file (as koordlet keeps it, 10 s write batches) holds a
minute of one-second cpu and memory samples for each pod, the node and the system before each
pass, as the collectors would have written them (the writing is not timed). Pods are 70 % prod
(LS) and 30 % batch (BE), with kubelet spec facts (requests, creation two hours ago). Timed with
``time.process_time`` (this process' CPU, all threads):

* ``pass_ms``: one training pass (``PeakPredictor.run_pass``: the p90 of the last minute for
  each pod and node part, the models' update, expiry, the checkpoints due), median of
  ``--passes``; the first pass saves 12 checkpoints (the per-step limit), later ones the same;
* ``predict_ms``: one ``prod_reclaimable`` answer for all pods (what each NodeMetric report adds);
* ``models_kib``: what the models hold once trained (tracemalloc, allocations made in
  koordlet/prediction/), in a separate run so tracing does not slow the timings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from koordapi import keys
from koordlet.metriccache import MetricCache, Sample
from koordlet.prediction.peak import PeakPredictor
from koordlet.prediction.server import ServerSettings
from koordlet.states.nodeconfig import NodeConfig
from koordlet.states.pods import PodStore
from nri_plugin import api
from runtimehooks.request import PodSpecFacts

START = 1_800_000_000.0
INTERVAL = 60.0
SETTINGS = ServerSettings(INTERVAL, 12 * 3600.0, 24 * 3600.0, 1800.0, 600.0, 12)


def make_pods(count: int) -> PodStore:
    pods = PodStore()
    specs = {}
    for i in range(count):
        uid = f"pod-{i:05d}"
        sandbox = api.PodSandbox(id=uid, name=uid, uid=uid, namespace="bench")
        sandbox.labels[keys.LABEL_QOS_CLASS] = "LS" if i % 10 < 7 else "BE"
        sandbox.linux.cgroup_parent = f"/kubepods/burstable/pod{uid}"
        pods.put_pod(sandbox)
        specs[uid] = PodSpecFacts(cpu_request=1000, memory_request=2 << 30, created=START - 7200)
    pods.put_specs(specs)
    return pods


def fill(cache: MetricCache, count: int, end: float) -> None:
    """A minute of samples up to ``end``, one a second, for every series the predictor reads."""
    samples = []
    for second in range(int(INTERVAL)):
        ts = end - INTERVAL + 1 + second
        wave = (second % 7) / 7
        samples += [
            Sample("node_cpu_usage", {}, ts, 20 + 10 * wave),
            Sample("node_memory_usage", {}, ts, float(96 << 30)),
            Sample("sys_cpu_usage", {}, ts, 1.5),
            Sample("sys_memory_usage", {}, ts, float(4 << 30)),
        ]
        for i in range(count):
            labels = {"pod_uid": f"pod-{i:05d}"}
            samples.append(Sample("pod_cpu_usage", labels, ts, 0.2 + 0.5 * wave + i % 5 / 10))
            samples.append(Sample("pod_memory_usage", labels, ts, float((300 + i % 50) << 20)))
    cache.append(samples)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def run(count: int, passes: int, *, trace: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        cache = MetricCache(Path(folder) / "metrics.db", flush_seconds=10.0)
        pods = make_pods(count)
        clock = Clock()
        if trace:
            tracemalloc.start()
        predictor = PeakPredictor(
            cache,
            Path(folder),
            SETTINGS,
            cold_start=3600.0,
            safety_margin_percent=10,
            node=lambda: NodeConfig(allocatable={"cpu": 96_000, "memory": 384 << 30}),
            clock=clock,
        )
        pass_times, predict_times = [], []
        for _ in range(passes):
            clock.now += INTERVAL
            fill(cache, count, clock.now)  # traced too, but counted only in the cache's files
            # any read writes the pending samples first: done here, since in koordlet the
            # collectors' writes are flushed every 10 s whether or not a pass reads
            cache.aggregate("node_cpu_usage", {}, 0.0, 0.0)
            snapshot = pods.snapshot()
            began = time.process_time()
            predictor.run_pass(snapshot)
            pass_times.append(time.process_time() - began)
            began = time.process_time()
            found = predictor.prod_reclaimable(snapshot, clock.now)
            predict_times.append(time.process_time() - began)
            assert found is not None  # trained: every pod has a model
        result = {
            "pass_ms": statistics.median(pass_times) * 1000,
            "predict_ms": statistics.median(predict_times) * 1000,
        }
        if trace:
            held = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(True, "*koordlet/prediction/*")]
            )
            result["models_kib"] = sum(s.size for s in held.statistics("filename")) / 1024
            tracemalloc.stop()
        predictor.close()
        cache.close()
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'pods':>6} {'pass_ms':>9} {'per_pod_us':>11} {'predict_ms':>11} {'models_kib':>11}")
    for count in args.pods:
        timed = run(count, args.passes, trace=False)
        held = run(count, 2, trace=True)
        per_pod = timed["pass_ms"] * 1000 / count
        print(
            f"{count:>6} {timed['pass_ms']:>9.1f} {per_pod:>11.0f} "
            f"{timed['predict_ms']:>11.2f} {held['models_kib']:>11.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
