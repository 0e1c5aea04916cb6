"""koordlet as users start it, against the harness's containerd, for e2e tests and the demo.

Usage::

    with KoordletProcess(node, node_slo=SLO_YAML) as koordlet:   # waits for NRI registration
        ...
        koordlet.restart()
        koordlet.metric("koordlet_runtime_hook_failures_total")
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tests.e2e.harness import paths
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled
from tests.e2e.harness.vm import in_guest

PLUGIN_ID = "00-koordlet_nri"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def probes_off_in_vm(args: tuple[str, ...]) -> tuple[str, ...]:
    """``args``, with the run-queue probes off in the VM unless the test is about them.

    koordlet compiles its eBPF program at every start (SchedLatencyCollector, on by default):
    a second of CPU here, about 15 s under the VM's emulation, and a test starts koordlet
    once or more. The VM tier's inspection tests pass --sched-latency-* and keep them.
    """
    gate = "SchedLatencyCollector=false"
    if not in_guest() or any("SchedLatency" in a or "sched-latency" in a for a in args):
        return args
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--feature-gates" and i + 1 < len(out):
            out[i + 1] = f"{out[i + 1]},{gate}"
            return tuple(out)
        if arg.startswith("--feature-gates="):
            out[i] = f"{arg},{gate}"
            return tuple(out)
    return (*out, "--feature-gates", gate)


class KoordletProcess:
    def __init__(
        self,
        node: Node,
        *,
        node_slo: str = "",
        args: tuple[str, ...] = (),
        interval: str = "1s",
        python_path: tuple[Path, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.node = node
        self.extra_env = env or {}  # e.g. NOTIFY_SOCKET, as systemd sets it
        self.python_path = python_path  # searched before the repository (to shadow a module)
        base = node.containerd.layout.base
        self.slo_file = base / "nodeslo.yaml"
        self.slo_file.write_text(node_slo)
        self.log = base / "koordlet.log"
        self.port = free_port()
        self.command = [
            str(Path(sys.executable).parent / "koordlet"),
            "--var-run-root-dir",
            str(base),
            "--node-slo-file",
            str(self.slo_file),
            "--addr",
            f"127.0.0.1:{self.port}",
            "--runtime-hooks-reconcile-interval",
            interval,
            "--tsdb-path",
            str(base / "metric-data"),
            "--node-metric-file",
            str(base / "nodemetric.json"),
            "--node-metric-report-interval",
            "2s",
            "--containerd-endpoint",
            str(node.containerd.layout.address),
            # containerd 1.7 does not send its request timeout, stretched in the VM's emulation
            "--runtime-hooks-nri-request-timeout",
            node.containerd.settings.nri_request_timeout,
            *probes_off_in_vm(args),
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20) -> KoordletProcess:
        """Start koordlet and wait until containerd has a new registration of it."""
        needle = f'plugin \\"{PLUGIN_ID}\\" connected'
        before = self.node.containerd.log_text(since_start=True).count(needle)
        search = os.pathsep.join(str(p) for p in (*self.python_path, paths.REPO_ROOT))
        env = dict(os.environ, PYTHONPATH=search, NODE_NAME="e2e-node", **self.extra_env)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        try:
            self.node.containerd.wait_for_log(needle, before + 1, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(scaled(10))
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def metrics_text(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=scaled(5)) as response:
            return str(response.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        total = 0.0
        for line in self.metrics_text().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_until(
        self, condition: Callable[[], bool], timeout: float = 10, what: str = "condition"
    ) -> None:
        """Poll ``condition`` until it holds; else fail with the tail of koordlet's log."""
        end = deadline(timeout)
        while time.monotonic() < end:
            if condition():
                return
            time.sleep(0.2)
        raise TimeoutError(
            f"{what} not reached in {scaled(timeout):g}s; "
            f"koordlet log tail:\n{self.log_text()[-3000:]}"
        )

    def __enter__(self) -> KoordletProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
