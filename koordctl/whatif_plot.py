"""``koordctl whatif --plot``: an SVG of both configurations' batch capacity against usage.

Two panels, CPU (cores) and memory (GiB), over the window: the node's capacity, the node's,
the non-BE pods' and (CPU) the BE pods' usage as per-minute averages, and the batch capacity
each configuration would have published (its 60 s steps). Plain SVG text: no plotting
library is needed on a node.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from math import isnan
from pathlib import Path
from xml.sax.saxutils import escape

from koordctl.whatif_history import History
from koordctl.whatif_replay import SYNC_SECONDS, Inputs, Replay

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, GAP = 960, 260, 64, 170, 28, 56
COLOURS = {
    "capacity": "#000000",
    "node usage": "#7f7f7f",
    "BE usage": "#ff7f0e",
    "LS usage": "#d62728",
    "batch (baseline)": "#1f77b4",
    "batch (proposed)": "#2ca02c",
}

Line = tuple[str, list[tuple[float, float]]]  # (legend, points (time, value))


def _minutes(history: History, values: Sequence[float], scale: float) -> list[tuple[float, float]]:
    points = []
    for first in range(0, len(values), SYNC_SECONDS):
        chunk = [v for v in values[first : first + SYNC_SECONDS] if not isnan(v)]
        if chunk:
            points.append(
                (history.start + first + SYNC_SECONDS / 2, sum(chunk) / len(chunk) * scale)
            )
    return points


def _steps(replay: Replay, values: Sequence[int], scale: float) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    for time, value in zip(replay.step_times, values, strict=True):
        if points:
            points.append((time, points[-1][1]))  # hold the previous value until this step
        points.append((time, value * scale))
    if points:
        points.append((points[-1][0] + SYNC_SECONDS, points[-1][1]))
    return points


def _scale(top: float) -> tuple[float, float]:
    """(axis top, tick step): a step of 1, 2 or 5 x 10^k giving about four ticks."""
    if top <= 0:
        return 1.0, 0.25
    raw = top / 4
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(f * magnitude for f in (1.0, 2.0, 5.0, 10.0) if raw <= f * magnitude)
    return math.ceil(top / step - 1e-9) * step, step


def _panel(title: str, lines: Sequence[Line], span_of: tuple[float, float], y0: float) -> list[str]:
    start, end = span_of
    width = WIDTH - LEFT - RIGHT
    top, tick_step = _scale(max((v for _, pts in lines for _, v in pts), default=1.0))
    span = max(end - start, 1.0)

    def x(t: float) -> float:
        return LEFT + (t - start) / span * width

    def y(v: float) -> float:
        return y0 + PANEL_HEIGHT - v / top * PANEL_HEIGHT

    out = [
        f'<text x="{LEFT}" y="{y0 - 8}" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{y0}" width="{width}" height="{PANEL_HEIGHT}" fill="none" '
        'stroke="#ccc"/>',
    ]
    for k in range(round(top / tick_step) + 1):
        value = k * tick_step
        out.append(
            f'<line x1="{LEFT}" y1="{y(value):.1f}" x2="{LEFT + width}" y2="{y(value):.1f}" '
            'stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" font-size="11" text-anchor="end">'
            f"{value:g}</text>"
        )
    hours = max(1, round(span / 3600 / 12))  # about a dozen time marks
    tick = math.ceil(start / 3600) * 3600
    while tick <= end:
        label = datetime.datetime.fromtimestamp(tick, datetime.UTC).strftime("%H:%M")
        out.append(
            f'<text x="{x(tick):.1f}" y="{y0 + PANEL_HEIGHT + 16}" font-size="11" '
            f'text-anchor="middle">{label}</text>'
        )
        tick += 3600 * hours
    for index, (name, points) in enumerate(lines):
        colour = COLOURS.get(name, "#000")
        if points:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
            dash = ' stroke-dasharray="6 3"' if name in ("batch (proposed)", "capacity") else ""
            out.append(
                f'<polyline class="series" data-name="{escape(name)}" fill="none" '
                f'stroke="{colour}" stroke-width="1.5"{dash} points="{path}"/>'
            )
        ly = y0 + 14 + 18 * index
        out.append(
            f'<line x1="{WIDTH - RIGHT + 12}" y1="{ly - 4}" x2="{WIDTH - RIGHT + 32}" '
            f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{WIDTH - RIGHT + 38}" y="{ly}" font-size="12">{escape(name)}</text>'
        )
    return out


def svg(inputs: Inputs, replays: Sequence[Replay], capacity: tuple[int, int]) -> str:
    """The SVG document (replays: baseline, then proposed; capacity in milli-cores, bytes)."""
    history = inputs.history
    start, end = history.start, history.start + len(history)
    cpu_cap, memory_cap = capacity[0] / 1000, capacity[1] / (1 << 30)
    cpu: list[Line] = [
        ("capacity", [(start, cpu_cap), (end, cpu_cap)]),
        ("node usage", _minutes(history, history.node_cpu, 1.0)),
        ("LS usage", _minutes(history, inputs.hp_cpu, 1.0)),
        ("BE usage", _minutes(history, history.be_cpu_usage, 1.0)),
    ]
    memory: list[Line] = [
        ("capacity", [(start, memory_cap), (end, memory_cap)]),
        ("node usage", _minutes(history, history.node_memory, 1 / (1 << 30))),
        ("LS usage", _minutes(history, inputs.hp_memory, 1 / (1 << 30))),
    ]
    for rep in replays:
        name = f"batch ({rep.scenario.name})"
        cpu.append((name, _steps(rep, rep.batch_cpu, 1e-3)))
        memory.append((name, _steps(rep, rep.batch_memory, 1 / (1 << 30))))
    height = TOP + 2 * PANEL_HEIGHT + GAP + 40
    body = _panel("CPU (cores)", cpu, (start, end), TOP)
    body += _panel("Memory (GiB)", memory, (start, end), TOP + PANEL_HEIGHT + GAP)
    sources = " vs ".join(escape(r.scenario.source) for r in replays)
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">',
            f"<title>koordctl whatif: {sources}</title>",
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def write_svg(
    path: Path, inputs: Inputs, replays: Sequence[Replay], capacity: tuple[int, int]
) -> None:
    path.write_text(svg(inputs, replays, capacity))
