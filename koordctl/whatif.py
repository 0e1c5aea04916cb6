"""``koordctl whatif``: replay this node's recorded history under another NodeSLO or colocation
strategy and compare it, hour by hour, with the configuration in force.

For each hour of the window: batch and mid capacity (average and lowest), seconds in which
BE pods used more CPU than suppress would have allowed, eviction triggers, and the tail
signals the latency-sensitive pods recorded in that hour (CPU PSI, run-queue latency p99)
next to the extra batch CPU the proposal gives. The replay cannot know how those signals
would have changed; it shows where the proposal takes more room in hours that were already
under pressure. How it replays: ``whatif_replay``; what it reads: ``whatif_history``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from math import isnan
from pathlib import Path
from typing import Any

from koordapi.duration import parse_seconds
from koordapi.errors import ModelError
from koordapi.quantity import Pair, milli_value, value
from koordctl import client
from koordctl.render import cores, latency
from koordctl.whatif_config import DEFAULTS, ConfigFileError, Scenario, scenarios
from koordctl.whatif_history import History, HistoryError, load_history
from koordctl.whatif_plot import write_svg
from koordctl.whatif_replay import SYNC_SECONDS, Inputs, NodeFacts, Replay, replay
from koordlet.config import Config

HOUR = 3600
LS_QOS = ("LSE", "LSR", "LS")  # qos_runq_latency_p99 labels reported as the LS tail


def default_db() -> Path:
    """koordlet's metric cache file at its default --tsdb-path."""
    folder = next(f.default for f in fields(Config) if f.name == "tsdb_path")
    return Path(str(folder)) / "metrics.db"


class UsageError(Exception):
    """A bad command line or an input that cannot be used (one line; exit code 2)."""


@dataclass
class Side:
    """One scenario's figures for one hour."""

    batch_cpu_avg: float = 0.0  # cores
    batch_cpu_min: float = 0.0
    batch_memory_avg: float = 0.0  # bytes
    batch_memory_min: float = 0.0
    mid_cpu_avg: float = 0.0
    mid_memory_avg: float = 0.0
    suppress_seconds: int = 0
    cpu_evictions: int = 0
    memory_evictions: int = 0


@dataclass
class Hour:
    start: float
    seconds: int  # seconds of history in the hour
    node_cpu: float  # average cores (NaN: none)
    node_memory: float
    be_cpu: float
    psi_some: float  # average of the highest non-BE pod's cpu some avg10, % (NaN: not recorded)
    psi_full: float
    runq_p99: float  # highest LS run-queue latency p99 window, µs (NaN: not recorded)
    sides: dict[str, Side] = field(default_factory=dict)

    @property
    def extra_batch_cpu(self) -> float:
        return self.sides["proposed"].batch_cpu_avg - self.sides["baseline"].batch_cpu_avg


def _mean(values: Sequence[float]) -> float:
    present = [v for v in values if not isnan(v)]
    return sum(present) / len(present) if present else math.nan


def _top(values: Sequence[float]) -> float:
    present = [v for v in values if not isnan(v)]
    return max(present) if present else math.nan


def hours(history: History, replays: Sequence[Replay]) -> list[Hour]:
    """The per-hour figures (UTC hours; the first and last may be partial)."""
    out: list[Hour] = []
    n = len(history)
    first = int(history.start // HOUR) * HOUR
    for begin in range(first, int(history.start) + n, HOUR):
        lo = max(0, int(begin - history.start))
        hi = min(n, int(begin + HOUR - history.start))
        if hi <= lo:
            continue
        hour = Hour(
            start=float(begin),
            seconds=hi - lo,
            node_cpu=_mean(history.node_cpu[lo:hi]),
            node_memory=_mean(history.node_memory[lo:hi]),
            be_cpu=_mean(history.be_cpu_usage[lo:hi]),
            psi_some=_mean(history.psi_some[lo:hi]),
            psi_full=_mean(history.psi_full[lo:hi]),
            runq_p99=_top(history.runq_p99[lo:hi]),
        )
        for rep in replays:
            steps = [k for k, t in enumerate(rep.step_times) if begin <= t < begin + HOUR]
            side = Side(
                suppress_seconds=sum(rep.suppressed[lo:hi]),
                cpu_evictions=sum(
                    1 for t, f in rep.evictions if begin <= t < begin + HOUR and f != "MemoryEvict"
                ),
                memory_evictions=sum(
                    1 for t, f in rep.evictions if begin <= t < begin + HOUR and f == "MemoryEvict"
                ),
            )
            if steps:
                bc = [rep.batch_cpu[k] / 1000 for k in steps]
                bm = [float(rep.batch_memory[k]) for k in steps]
                side.batch_cpu_avg, side.batch_cpu_min = sum(bc) / len(bc), min(bc)
                side.batch_memory_avg, side.batch_memory_min = sum(bm) / len(bm), min(bm)
                side.mid_cpu_avg = sum(rep.mid_cpu[k] for k in steps) / len(steps) / 1000
                side.mid_memory_avg = sum(rep.mid_memory[k] for k in steps) / len(steps)
            hour.sides[rep.scenario.name] = side
        out.append(hour)
    return out


def gib(amount: float) -> str:
    return "-" if isnan(amount) else f"{amount / (1 << 30):.1f}Gi"


def _pct(amount: float) -> str:
    return "-" if isnan(amount) else f"{amount:.1f}%"


def _stamp(seconds: float, fmt: str = "%Y-%m-%d %H:%M") -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(fmt)


def render_table(rows: Sequence[Hour], pressure_psi: float) -> str:
    """Two lines per hour (baseline, proposed); the hour's usage and LS signals on the first,
    the proposal's extra batch CPU on the second, marked where the hour showed pressure."""
    head = (
        f"{'HOUR (UTC)':17}{'CONFIG':9}{'BATCH-CPU avg/min':>19}{'BATCH-MEM avg/min':>19}"
        f"{'MID-CPU':>9}{'MID-MEM':>9}{'SUPPRESS':>10}{'EVICT cpu/mem':>14}"
        f"  {'NODE-CPU':>8}{'PSI some/full':>15}{'RUNQ-p99':>10}"
    )
    lines = [head]
    for row in rows:
        for name in ("baseline", "proposed"):
            s = row.sides[name]
            label = _stamp(row.start) if name == "baseline" else ""
            line = (
                f"{label:17}{name:9}"
                f"{cores(s.batch_cpu_avg) + '/' + cores(s.batch_cpu_min):>19}"
                f"{gib(s.batch_memory_avg) + '/' + gib(s.batch_memory_min):>19}"
                f"{cores(s.mid_cpu_avg):>9}{gib(s.mid_memory_avg):>9}"
                f"{str(s.suppress_seconds) + 's':>10}"
                f"{f'{s.cpu_evictions}/{s.memory_evictions}':>14}"
            )
            if name == "baseline":
                psi = f"{_pct(row.psi_some)}/{_pct(row.psi_full)}"
                runq = latency(None if row.runq_p99 != row.runq_p99 else row.runq_p99)
                line += f"  {cores(_none(row.node_cpu)):>8}{psi:>15}{runq:>10}"
            else:
                extra = row.extra_batch_cpu
                line += f"  {'room ' + f'{extra:+.2f}':>8}"
                if extra > 0.005 and row.psi_some == row.psi_some and row.psi_some >= pressure_psi:
                    line += f"  <- more batch CPU in an hour with LS PSI >= {pressure_psi:g}%"
            lines.append(line.rstrip())
    return "\n".join(lines)


def _none(amount: float) -> float | None:
    return None if isnan(amount) else amount


def _pair_arg(text: str, what: str) -> Pair:
    """``cpu=QTY,memory=QTY`` as (milli-cores, bytes)."""
    got: dict[str, str] = {}
    for part in text.split(","):
        key, sep, qty = part.partition("=")
        if not sep or key.strip() not in ("cpu", "memory"):
            raise UsageError(f"{what} {text!r}: expected cpu=QUANTITY,memory=QUANTITY")
        got[key.strip()] = qty.strip()
    if set(got) != {"cpu", "memory"}:
        raise UsageError(f"{what} {text!r}: both cpu= and memory= are needed")
    try:
        pair = milli_value(got["cpu"]), value(got["memory"])
    except ModelError as err:
        raise UsageError(f"{what} {text!r}: {err}") from None
    if pair[0] < 0 or pair[1] < 0:
        raise UsageError(f"{what} {text!r}: must not be negative")
    return pair


def node_facts(args: argparse.Namespace) -> tuple[NodeFacts, str]:
    """Capacity from --capacity, else from koordlet's API (the node's CPUs and memory)."""
    reserved = _pair_arg(args.reserved, "--reserved") if args.reserved else (0, 0)
    requests = _pair_arg(args.prod_requests, "--prod-requests") if args.prod_requests else None
    if args.capacity:
        cpu, memory = _pair_arg(args.capacity, "--capacity")
        if cpu <= 0 or memory <= 0:
            raise UsageError(f"--capacity {args.capacity!r}: cpu and memory must be above 0")
        return NodeFacts(cpu, memory, reserved, 0, requests), "--capacity"
    try:
        node = client.fetch(args.addr, "/api/v1/node")
        cpus, memory = int(node["cpus"]), int(node["memory_bytes"])
    except (client.KoordletUnreachable, KeyError, TypeError, ValueError) as err:
        raise UsageError(f"no --capacity and koordlet's node API is not usable: {err}") from None
    return NodeFacts(cpus * 1000, memory, reserved, cpus, requests), f"koordlet at {args.addr}"


@dataclass
class Outcome:
    history: History
    baseline: Scenario
    proposed: Scenario
    replays: list[Replay]
    hours: list[Hour]
    node: NodeFacts
    capacity_from: str
    inputs: Inputs


def compute(args: argparse.Namespace) -> Outcome:
    since: float | None = None
    if args.since != "all":
        try:
            since = parse_seconds(args.since)
        except ValueError as err:
            raise UsageError(f"--since: {err}") from None
        if since <= 0:
            raise UsageError(f"--since {args.since!r}: must be above 0 (or 'all')")
    labels: dict[str, str] = {}
    for item in args.node_label:
        key, sep, val = item.partition("=")
        if not sep:
            raise UsageError(f"--node-label {item!r} is not KEY=VALUE")
        labels[key] = val
    base, proposed = scenarios(args.baseline, args.nodeslo, args.colocation, labels)
    node, capacity_from = node_facts(args)
    db = Path(args.db) if args.db else default_db()
    history = load_history(db, since, set(args.be_pod), LS_QOS)
    if all(isnan(v) for v in history.node_cpu):
        raise HistoryError("no node samples in the window")
    inputs = Inputs.of(history)
    replays = [replay(inputs, node, s) for s in (base, proposed)]
    rows = hours(history, replays)
    return Outcome(history, base, proposed, replays, rows, node, capacity_from, inputs)


def _describe(scenario: Scenario) -> str:
    strategy, threshold = scenario.strategy, scenario.slo.threshold
    parts = [
        f"colocation {'enabled' if strategy.enable else 'disabled'}"
        + (
            f" (cpuReclaimThresholdPercent {strategy.cpu_reclaim_threshold_percent},"
            f" memoryReclaimThresholdPercent {strategy.memory_reclaim_threshold_percent})"
            if strategy.enable
            else ""
        ),
        f"resourceUsedThresholdWithBE {'enabled' if threshold.get('enable') else 'disabled'}"
        + (
            f" (cpuSuppressThresholdPercent {threshold.get('cpuSuppressThresholdPercent')},"
            f" {threshold.get('cpuSuppressPolicy')})"
            if threshold.get("enable")
            else ""
        ),
    ]
    return f"{scenario.source}: " + "; ".join(parts)


def render(outcome: Outcome, db: str, pressure_psi: float) -> str:
    h = outcome.history
    node = outcome.node
    samples = f"{h.samples / 1e6:.1f}M" if h.samples >= 1e6 else str(h.samples)
    base_note = " (no --baseline: the configuration in force is not known)"
    lines = [
        f"history {_stamp(h.start, '%Y-%m-%d %H:%M:%S')} - {_stamp(h.end, '%H:%M:%S')} UTC"
        f" ({len(h)} s, {samples} samples, {h.series} series) from {db}",
        f"node: {node.cpu_milli / 1000:g} cores, {gib(node.memory)}"
        f" (from {outcome.capacity_from}); reserved {node.reserved[0] / 1000:g} cores,"
        f" {gib(node.reserved[1])}",
        "baseline: "
        + _describe(outcome.baseline)
        + (base_note if outcome.baseline.source == DEFAULTS else ""),
        "proposed: " + _describe(outcome.proposed),
        f"replayed: batch/mid every {SYNC_SECONDS} s (koord-manager's sync) from averages over"
        " metricAggregateDurationSeconds; suppress and eviction every 1 s (koordlet's"
        " intervals, cool-downs 20 s CPU / 4 s memory)",
    ]
    notes = list(h.notes)
    if node.prod_requests is None:
        notes.append(
            "prod requests unknown (--prod-requests): request-based policies and mid's"
            " unallocated share count them as 0"
        )
    if all(isnan(v) for v in h.prod_reclaimable_cpu):
        notes.append(
            "no prodReclaimable recorded (koordlet's peak prediction): dynamic mid counts it"
            " as 0 (its unallocated share only)"
        )
    lines += [f"note: {n}" for n in notes]
    lines += ["", render_table(outcome.hours, pressure_psi), ""]
    totals = []
    for rep in outcome.replays:
        batch = [v / 1000 for v in rep.batch_cpu]
        avg = sum(batch) / len(batch) if batch else 0.0
        cpu_ev = sum(1 for _, f in rep.evictions if f != "MemoryEvict")
        mem_ev = len(rep.evictions) - cpu_ev
        totals.append(
            f"{rep.scenario.name:9}batch CPU avg {avg:.2f} cores, suppress {sum(rep.suppressed)} s,"
            f" evictions {cpu_ev} cpu / {mem_ev} memory"
        )
    return "\n".join([*lines, "total:", *totals])


def to_json(outcome: Outcome) -> dict[str, Any]:
    def clean(obj: Any) -> Any:
        if isinstance(obj, float) and isnan(obj):
            return None
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    h = outcome.history
    return {
        "start": h.start,
        "end": h.end,
        "baseline": outcome.baseline.source,
        "proposed": outcome.proposed.source,
        "hours": [clean(asdict(row)) for row in outcome.hours],
        "notes": h.notes,
    }


def run(args: argparse.Namespace) -> int:
    try:
        outcome = compute(args)
        if args.plot:
            write_svg(
                Path(args.plot),
                outcome.inputs,
                outcome.replays,
                (outcome.node.cpu_milli, outcome.node.memory),
            )
    except (UsageError, ConfigFileError, HistoryError) as err:
        print(f"koordctl whatif: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"koordctl whatif: --plot {args.plot}: {err.strerror or err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(outcome)))
    else:
        print(render(outcome, str(args.db or default_db()), args.pressure_psi))
    return 0
