"""Draws docs/architecture.svg, the README's picture of the architecture (standard library only).

    python3 docs/architecture.py            # rewrite docs/architecture.svg
    python3 docs/architecture.py --check    # exit 1 when the committed SVG is stale

The boxes are the packages of this repository and the processes they talk to; the text version
of the same picture is in docs/architecture.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

OUTPUT = Path(__file__).with_name("architecture.svg")
WIDTH, HEIGHT = 1000, 690

INK = "#1f2933"
MUTED = "#52606d"
OURS = "#e3f0ff"  # this repository's components
THEIRS = "#f4f5f7"  # Kubernetes, containerd and the kernel
GROUP = "#9aa5b1"


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int

    @property
    def cx(self) -> int:
        return self.x + self.w // 2

    @property
    def cy(self) -> int:
        return self.y + self.h // 2

    @property
    def top(self) -> int:
        return self.y

    @property
    def bottom(self) -> int:
        return self.y + self.h

    @property
    def left(self) -> int:
        return self.x

    @property
    def right(self) -> int:
        return self.x + self.w


def text(
    x: int,
    y: int,
    s: str,
    size: int = 12,
    *,
    bold: bool = False,
    anchor: str = "middle",
    fill: str = INK,
    italic: bool = False,
) -> str:
    weight = ' font-weight="bold"' if bold else ""
    style = ' font-style="italic"' if italic else ""
    return (
        f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"'
        f"{weight}{style}>{escape(s)}</text>"
    )


def box(b: Box, title: str, lines: tuple[str, ...] = (), *, fill: str = OURS) -> str:
    out = [
        f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" rx="6" fill="{fill}" '
        f'stroke="{INK}" stroke-width="1.2"/>'
    ]
    height = 16 + 14 * len(lines)
    y = b.cy - height // 2 + 12
    out.append(text(b.cx, y, title, 13, bold=True))
    for line in lines:
        y += 14
        out.append(text(b.cx, y, line, 11, fill=MUTED))
    return "\n".join(out)


def group(b: Box, label: str) -> str:
    return "\n".join(
        [
            f'<rect x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" rx="10" fill="none" '
            f'stroke="{GROUP}" stroke-width="1.5" stroke-dasharray="6 4"/>',
            text(b.x + 12, b.y + 18, label, 13, bold=True, anchor="start", fill=MUTED),
        ]
    )


def arrow(points: list[tuple[int, int]], *, both: bool = False, dashed: bool = False) -> str:
    path = " ".join(f"{x},{y}" for x, y in points)
    start = ' marker-start="url(#tail)"' if both else ""
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return (
        f'<polyline points="{path}" fill="none" stroke="{INK}" stroke-width="1.4"'
        f'{dash} marker-end="url(#head)"{start}/>'
    )


def label(x: int, y: int, s: str, *, anchor: str = "middle") -> str:
    return text(x, y, s, 11, anchor=anchor, fill=MUTED, italic=True)


def render() -> str:
    # The control plane.
    kube_sched = Box(25, 50, 150, 60)
    koord_sched = Box(225, 40, 210, 80)
    apiserver = Box(520, 40, 170, 80)
    manager = Box(770, 40, 200, 80)
    # The node.
    kubelet = Box(40, 200, 150, 50)
    containerd = Box(40, 300, 150, 70)
    koordctl = Box(80, 470, 130, 60)
    kernel = Box(40, 595, 920, 50)
    koordlet = Box(230, 190, 740, 370)
    nri = Box(250, 235, 180, 70)
    hooks = Box(470, 235, 200, 70)
    states = Box(710, 235, 240, 70)
    collectors = Box(250, 355, 180, 70)
    cache = Box(470, 355, 200, 70)
    qos = Box(710, 355, 240, 70)
    serving = Box(250, 470, 420, 60)
    executor = Box(710, 470, 240, 60)

    parts = [
        group(Box(15, 10, 970, 135), "control plane"),
        group(Box(15, 155, 970, 510), "node"),
        box(kube_sched, "kube-scheduler", ("stock, unchanged",), fill=THEIRS),
        box(
            koord_sched,
            "koord-scheduler",
            ("HTTPS extender: LoadAware", "filter and score, CPU binding"),
        ),
        box(
            apiserver,
            "kube-apiserver",
            ("Node, Pod, NodeMetric,", "NodeSLO, profiles"),
            fill=THEIRS,
        ),
        box(
            manager, "koord-manager", ("batch and mid resources,", "NodeSLO, NodeMetric, webhooks")
        ),
        box(kubelet, "kubelet", fill=THEIRS),
        box(containerd, "containerd", ("NRI on, runc",), fill=THEIRS),
        box(koordctl, "koordctl", ("top, explain, inspect,", "doctor, install")),
        box(
            kernel,
            "Linux",
            (
                "cgroups v1 and v2, resctrl, tc and BPF, sysctls, /proc, PSI, "
                "perf counters, sched tracepoints",
            ),
            fill=THEIRS,
        ),
        group(koordlet, "koordlet"),
        box(nri, "nri_plugin", ("mux, ttrpc, NRI API, stub",)),
        box(hooks, "runtimehooks", ("Koordinator's QoS rules", "as pure functions")),
        box(states, "states", ("pods, NodeSLO, node,", "CPU topology")),
        box(collectors, "collectors", ("node, pods, BE, PSI, CPI,", "eBPF run-queue latency")),
        box(cache, "metric cache", ("SQLite, retention,", "percentiles")),
        box(qos, "qosmanager", ("CPU suppress and burst, memory", "QoS, resctrl, eviction")),
        box(serving, "/metrics, /healthz, JSON status API, NodeMetric report"),
        box(executor, "executor", ("the only writer: cgroups,", "resctrl, tc; CRI evictions")),
        # kube-scheduler calls the extender; the control plane talks through the API server.
        arrow([(kube_sched.right, 80), (koord_sched.left, 80)]),
        label(200, 72, "HTTPS"),
        arrow([(koord_sched.right, 80), (apiserver.left, 80)], both=True),
        label(477, 72, "watch, bind"),
        arrow([(manager.left, 80), (apiserver.right, 80)], both=True),
        label(730, 72, "watch, write"),
        # koordlet in cluster mode: reports NodeMetric, watches NodeSLO and Node, evicts.
        arrow(
            [(apiserver.cx, koordlet.top), (apiserver.cx, apiserver.bottom)], both=True, dashed=True
        ),
        label(
            apiserver.cx + 8,
            176,
            "NodeMetric, NodeSLO, Node, evictions (cluster mode)",
            anchor="start",
        ),
        # The kubelet, containerd and runc.
        arrow([(kubelet.cx, kubelet.bottom), (containerd.cx, containerd.top)]),
        label(kubelet.cx + 8, 280, "CRI", anchor="start"),
        arrow([(kubelet.right, 218), (states.cx, 218), (states.cx, states.top)], dashed=True),
        label(hooks.cx, 213, "pod list (cluster mode)"),
        arrow([(containerd.right, 320), (212, 320), (212, 270), (nri.left, 270)], both=True),
        label(206, 290, "NRI (ttrpc)", anchor="end"),
        arrow([(60, containerd.bottom), (60, kernel.top)]),
        label(66, 450, "runc", anchor="start"),
        # Inside koordlet.
        arrow([(nri.right, 270), (hooks.left, 270)], both=True),
        arrow([(states.left, 270), (hooks.right, 270)]),
        arrow([(states.cx, states.bottom), (states.cx, qos.top)]),
        arrow([(collectors.right, 390), (cache.left, 390)]),
        arrow([(cache.right, 390), (qos.left, 390)]),
        arrow([(qos.cx, qos.bottom), (qos.cx, executor.top)]),
        arrow([(cache.cx, cache.bottom), (cache.cx, serving.top)]),
        arrow([(executor.cx, executor.bottom), (executor.cx, kernel.top)]),
        arrow([(koordctl.right, 500), (serving.left, 500)]),
        label(230, 492, "HTTP"),
        text(
            WIDTH // 2,
            HEIGHT - 10,
            "All components share koordapi: QoS and priority classes, "
            "label, annotation and resource keys, the NodeSLO spec.",
            11,
            fill=MUTED,
        ),
    ]
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif">\n'
        "<title>koordinator-py architecture</title>\n"
        "<defs>\n"
        '<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker>\n'
        '<marker id="tail" viewBox="0 0 10 10" refX="1" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto"><path d="M10,0 L0,5 L10,10 z" fill="{INK}"/></marker>\n'
        "</defs>\n"
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>\n'
    )
    return head + "\n".join(parts) + "\n</svg>\n"


def main(argv: list[str]) -> int:
    svg = render()
    if argv[1:] == ["--check"]:
        if OUTPUT.read_text() != svg:
            print(f"{OUTPUT} is stale: run python3 docs/architecture.py")
            return 1
        return 0
    OUTPUT.write_text(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
