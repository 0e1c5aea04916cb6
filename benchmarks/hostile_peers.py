"""What a hostile peer costs koordlet: its memory, its descriptors, and the wait of good requests.

koordlet runs as users start it (its console script, standalone: a NodeSLO file, no cluster),
with its cgroup root, resctrl, NRI socket, metric cache and NodeMetric file in a temporary
folder; this process plays containerd on the NRI socket (``nri_plugin.testing.FakeRuntime``) and
the clients of koordlet's metrics server. Each scenario gets a fresh koordlet, so that its peak
RSS (VmHWM) belongs to that scenario:

- ``nri_frame``: on a registered connection, one 16 MiB mux frame (the largest koordlet takes)
  packed with 1.68 million empty ttrpc requests;
- ``nri_sync``: a chunked Synchronize of 100,000 pods whose last chunk never comes;
- ``http_slowloris``: 1,000 connections to the metrics server that send nothing, while a client
  scrapes /metrics and the runtime creates containers, against the same without them; then the
  same attacker again, reopening every connection koordlet closes (``--quick`` skips that).

koordlet dials the runtime and holds one NRI connection at a time, so a well-behaved runtime
cannot call it in parallel with a flood on another connection. For the NRI scenarios, "during"
is a CreateContainer sent right behind the flood on the same connection, "outage" the time from
the flood's first byte to koordlet's next registration, and "after" CreateContainer on that new
connection. Latencies are measured here, at the caller. Prints one JSON object; nothing is
asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/hostile_peers.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordapi import keys
from nri_plugin import api, mux, ttrpc
from nri_plugin.errors import NriError
from nri_plugin.stub import MAX_SYNC_OBJECTS
from nri_plugin.testing import FakeRuntime, PluginSession

MiB = 1 << 20
POD_DIR = "kubepods/besteffort/podu-bench"
SLOWLORIS_CONNECTIONS = 1000
REFUSED = "koordlet_http_connections_refused_total"


# -- koordlet in a sandbox ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_sandbox(base: Path) -> None:
    """A cgroup v1 tree with one BE pod, and the folders koordlet writes to."""
    for controller in ("cpu", "cpuacct", "cpuset", "memory"):
        for sub in ("kubepods", "kubepods/besteffort", "kubepods/burstable", POD_DIR):
            (base / "cgroup" / controller / sub).mkdir(parents=True, exist_ok=True)
    files = {
        "cpu": {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"},
        "cpuset": {"cpuset.cpus": f"0-{(os.cpu_count() or 1) - 1}", "cpuset.mems": "0"},
        "memory": {"memory.limit_in_bytes": "9223372036854771712"},
    }
    for controller, values in files.items():
        for sub in ("kubepods/besteffort", POD_DIR):
            for name, value in values.items():
                (base / "cgroup" / controller / sub / name).write_text(value + "\n")
    (base / "sysfs").mkdir()  # no resctrl/ in it
    (base / "nri").mkdir()
    (base / "nodeslo.yaml").write_text("")


class Koordlet:
    """One koordlet process in ``base``; stopped by its pid (SIGTERM, then SIGKILL)."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.log = base / "koordlet.log"
        command = [
            str(Path(sys.executable).parent / "koordlet"),
            "--var-run-root-dir",
            str(base),
            "--cgroup-root-dir",
            str(base / "cgroup"),
            "--sys-fs-root-dir",
            str(base / "sysfs"),
            "--node-slo-file",
            str(base / "nodeslo.yaml"),
            "--addr",
            f"127.0.0.1:{self.port}",
            "--tsdb-path",
            str(base / "metric-data"),
            "--node-metric-file",
            str(base / "nodemetric.json"),
            "--containerd-endpoint",
            str(base / "no-containerd.sock"),
            # no eBPF compile at start; nothing written under /proc or /sys
            "--feature-gates",
            "SchedLatencyCollector=false,SystemConfig=false",
        ]
        repo = Path(__file__).resolve().parent.parent
        env = dict(os.environ, PYTHONPATH=str(repo), NODE_NAME="bench-node")
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)

    def status_kib(self, key: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def rss_mib(self) -> float:
        return round(self.status_kib("VmRSS") / 1024, 1)

    def hwm_mib(self) -> float:
        return round(self.status_kib("VmHWM") / 1024, 1)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def fds(self) -> int:
        return sum(1 for _ in Path(f"/proc/{self.pid}/fd").iterdir())

    def get(self, path: str, timeout: float = 5.0) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                raise OSError(f"GET {path}: HTTP {response.status}")
            return body
        finally:
            conn.close()

    def metric(self, name: str) -> float:
        total = 0.0
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith((name + "{", name + " ")):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_http(self, timeout: float = 30.0) -> None:
        end = time.monotonic() + timeout
        while True:
            try:
                self.get("/healthz", timeout=1)
                return
            except OSError:
                if time.monotonic() > end or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)

    def log_count(self, text: str) -> int:
        return self.log.read_text(errors="replace").count(text)


class Sampler:
    """koordlet's RSS (and open descriptors) every few milliseconds, in a thread."""

    def __init__(self, koordlet: Koordlet, period: float = 0.005, fds: bool = False) -> None:
        self.koordlet = koordlet
        self.period = period
        self.count_fds = fds
        self.peak_rss_kib = 0
        self.peak_fds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak_rss_kib = max(self.peak_rss_kib, self.koordlet.status_kib("VmRSS"))
                if self.count_fds:
                    self.peak_fds = max(self.peak_fds, self.koordlet.fds())
            self._stop.wait(self.period)

    @property
    def peak_rss_mib(self) -> float:
        return round(self.peak_rss_kib / 1024, 1)


# -- what the runtime sends -----------------------------------------------------------------------


def be_pod() -> api.PodSandbox:
    pod = api.PodSandbox(id="p-bench", name="bench", uid="u-bench", namespace="jobs")
    pod.labels[keys.LABEL_QOS_CLASS] = "BE"
    pod.linux.cgroup_parent = "/" + POD_DIR
    spec = {
        "containers": {
            "main": {
                "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: str(256 * MiB)},
                "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(512 * MiB)},
            }
        }
    }
    pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(spec)
    return pod


class Containers:
    """A new container of the BE pod for each CreateContainer, as a runtime sends them."""

    def __init__(self) -> None:
        self.pod = be_pod()
        self.next = 0

    def create_request(self) -> tuple[api.PodSandbox, api.Container]:
        self.next += 1
        cid = f"c-{self.next}"
        c = api.Container(id=cid, pod_sandbox_id=self.pod.id, name="main")
        c.linux.cgroups_path = f"/{POD_DIR}/{cid}"
        return self.pod, c


def flood_frame() -> tuple[bytes, int]:
    """One mux frame of exactly 16 MiB on the Plugin connection: empty ttrpc requests."""
    size = mux.MAX_FRAME_PAYLOAD
    count = size // ttrpc.HEADER.size
    first = 1 << 20  # odd stream ids above the handshake's, increasing: each a valid request
    pack = ttrpc.HEADER.pack
    body = b"".join(pack(0, first + 2 * i, ttrpc.TYPE_REQUEST, 0) for i in range(count))
    body += bytes(size - len(body))  # the start of one more header
    return mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, size) + body, count


def flood_pods(total: int, chunk: int) -> Iterator[list[api.PodSandbox]]:
    """Pods shaped like a kubelet's (labels, annotations, a cgroup parent), ``chunk`` at a time."""
    for start in range(0, total, chunk):
        pods = []
        for i in range(start, min(total, start + chunk)):
            uid = f"00000000-0000-4000-8000-{i:012d}"
            pod = api.PodSandbox(id=f"{i:064x}", name=f"flood-{i}", uid=uid, namespace="flood")
            pod.labels.update(
                {
                    "io.kubernetes.pod.name": f"flood-{i}",
                    "io.kubernetes.pod.namespace": "flood",
                    "io.kubernetes.pod.uid": uid,
                    "app": "flood",
                }
            )
            pod.annotations["kubernetes.io/config.source"] = "api"
            pod.linux.cgroup_parent = f"/kubepods/besteffort/pod{uid}"
            pods.append(pod)
        yield pods


# -- measuring ------------------------------------------------------------------------------------


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def summary(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"n": 0}
    return {
        "n": len(samples),
        "p50_ms": ms(statistics.median(samples)),
        "max_ms": ms(max(samples)),
    }


async def create_latencies(
    session: PluginSession, containers: Containers, n: int, interval: float = 0.0
) -> tuple[list[float], int]:
    """CreateContainer ``n`` times, one after the other: the latencies and the failures (an
    error, or an answer without the BE container's batch CPU limit: the hooks did not run)."""
    seen: list[float] = []
    failed = 0
    for _ in range(n):
        started = time.perf_counter()
        try:
            reply = await session.create_container(*containers.create_request())
        except (NriError, TimeoutError):
            failed += 1
        else:
            seen.append(time.perf_counter() - started)
            failed += reply.adjust.linux.resources.cpu.quota.value != 100000
        if interval:
            await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))
    return seen, failed


async def creates_for(
    session: PluginSession, containers: Containers, seconds: float, interval: float
) -> tuple[list[float], int]:
    """CreateContainer every ``interval`` for ``seconds``: the latencies and the failures."""
    end = time.perf_counter() + seconds
    seen: list[float] = []
    failed = 0
    while time.perf_counter() < end:
        part, bad = await create_latencies(session, containers, 1, interval)
        seen += part
        failed += bad
    return seen, failed


@dataclass
class Scrapes:
    """A well-behaved client's GET /metrics, a new connection each (as a probe makes them)."""

    ok: list[tuple[float, float]] = field(default_factory=list)  # (when, latency)
    refused: list[float] = field(default_factory=list)  # when

    def report(self, start: float, end: float) -> dict[str, Any]:
        moments = sorted([start] + [t for t, _ in self.ok] + [end])
        out = summary([latency for _, latency in self.ok])
        out["refused"] = len(self.refused)
        out["longest_without_an_answer_s"] = round(
            max(b - a for a, b in itertools.pairwise(moments)), 2
        )
        return out


def scrape_until(koordlet: Koordlet, stop: threading.Event, interval: float, into: Scrapes) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            koordlet.get("/metrics")
        except (OSError, http.client.HTTPException):
            into.refused.append(started)
        else:
            into.ok.append((started, time.perf_counter() - started))
        stop.wait(max(0.0, interval - (time.perf_counter() - started)))


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Slowloris:
    """Connections that send nothing; with ``reopen`` each one koordlet closes is made again."""

    def __init__(self, port: int, count: int, reopen: bool) -> None:
        self.port = port
        self.count = count
        self.reopen = reopen
        self.socks: list[socket.socket | None] = []
        self.opened = 0
        self.seconds_to_open = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)

    def _connect(self) -> socket.socket | None:
        sock = socket.socket()
        sock.settimeout(5)
        try:
            sock.connect(("127.0.0.1", self.port))
        except OSError:
            sock.close()
            return None
        self.opened += 1
        return sock

    def start(self) -> None:
        started = time.perf_counter()
        self.socks = [self._connect() for _ in range(self.count)]
        self.seconds_to_open = time.perf_counter() - started
        if self.reopen:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            for i, sock in enumerate(self.socks):
                if sock is None or closed_by_peer(sock):
                    with self._lock:
                        if sock is not None:
                            sock.close()
                        self.socks[i] = None if self._stop.is_set() else self._connect()

    def still_open(self) -> int:
        with self._lock:
            return sum(s is not None and not closed_by_peer(s) for s in self.socks)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for sock in self.socks:
            if sock is not None:
                sock.close()
        self.socks = []


# -- the scenarios --------------------------------------------------------------------------------


class Bench:
    def __init__(self, base: Path, quick: bool) -> None:
        self.base = base
        self.quick = quick
        self.requests = 20 if quick else 100
        self.rounds = 2 if quick else 3  # the same flood again: does memory keep growing?
        self.runs = 0

    async def start(self, runtime: FakeRuntime) -> tuple[Koordlet, PluginSession]:
        self.runs += 1
        base = self.base / f"run{self.runs}"
        base.mkdir()
        make_sandbox(base)
        await runtime.listen(base / "nri" / "nri.sock")
        koordlet = Koordlet(base)
        try:
            session = await runtime.next_session(timeout=60)
            await asyncio.to_thread(koordlet.wait_http)
        except BaseException:
            koordlet.stop()
            raise
        await asyncio.sleep(2)  # the collectors' first passes, the QoS manager's first runs
        return koordlet, session

    async def nri_frame(self, koordlet: Koordlet, session: PluginSession) -> dict[str, Any]:
        runtime = session.runtime
        containers = Containers()
        frame, count = await asyncio.to_thread(flood_frame)
        before, _ = await create_latencies(session, containers, self.requests)
        rss_before, hwm_before = koordlet.rss_mib(), koordlet.hwm_mib()
        rounds: list[dict[str, Any]] = []
        with Sampler(koordlet) as sampler:
            for _ in range(self.rounds):
                started = time.perf_counter()
                session.send_raw(frame)
                during: dict[str, Any]
                try:  # right behind the flood, on the same connection
                    await session.create_container(*containers.create_request())
                    during = {"answered_ms": ms(time.perf_counter() - started)}
                except (NriError, TimeoutError) as err:
                    during = {
                        "failed_after_ms": ms(time.perf_counter() - started),
                        "error": type(err).__name__,
                    }
                await asyncio.wait_for(session.closed.wait(), 60)
                closed_after = time.perf_counter() - started
                closed = session.closed.is_set()
                session = await runtime.next_session(timeout=60)
                rounds.append(
                    {
                        "connection_closed": closed,
                        "closed_after_ms": ms(closed_after),
                        "create_container_behind_the_flood": during,
                        "outage_ms": ms(time.perf_counter() - started),
                        "rss_mib_after": koordlet.rss_mib(),
                    }
                )
            after, after_failed = await create_latencies(session, containers, self.requests)
            await asyncio.sleep(1)
        return {
            "frame_bytes": len(frame) - mux.HEADER.size,
            "requests_in_frame": count,
            "rounds": rounds,
            "log_lines": koordlet.log_count("requests at once"),
            "rss_mib": {
                "before": rss_before,
                "peak_sampled": sampler.peak_rss_mib,
                "hwm_before": hwm_before,
                "hwm_after": koordlet.hwm_mib(),
                "after": koordlet.rss_mib(),
            },
            "create_container": {
                "before": summary(before),
                "after": summary(after) | {"failed": after_failed},
            },
        }

    async def nri_sync(self, koordlet: Koordlet, session: PluginSession) -> dict[str, Any]:
        runtime = session.runtime
        containers = Containers()
        before, _ = await create_latencies(session, containers, self.requests)
        total, chunk = 100_000, 2_000
        rss_before, hwm_before = koordlet.rss_mib(), koordlet.hwm_mib()
        rounds: list[dict[str, Any]] = []
        chunk_bytes = 0
        with Sampler(koordlet) as sampler:
            for i in range(self.rounds):
                # the connection koordlet makes after the last round synchronizes normally
                runtime.synchronize = i == self.rounds - 1
                sent = answered = 0
                error = ""
                started = time.perf_counter()
                for pods in flood_pods(total, chunk):
                    request = api.SynchronizeRequest(pods=pods, more=True)
                    chunk_bytes = max(chunk_bytes, request.ByteSize())
                    sent += len(pods)
                    try:
                        await session.call("Synchronize", request, api.SynchronizeResponse)
                    except (NriError, TimeoutError) as err:
                        error = f"{type(err).__name__}: {err}"
                        break
                    answered += len(pods)
                await asyncio.wait_for(session.closed.wait(), 60)
                closed_after = time.perf_counter() - started
                closed = session.closed.is_set()
                session = await runtime.next_session(timeout=60)
                rounds.append(
                    {
                        "pods_sent": sent,
                        "pods_acknowledged": answered,
                        "error": error,
                        "connection_closed": closed,
                        "closed_after_ms": ms(closed_after),
                        "outage_ms": ms(time.perf_counter() - started),
                        "rss_mib_after": koordlet.rss_mib(),
                    }
                )
            after, after_failed = await create_latencies(session, containers, self.requests)
            await asyncio.sleep(1)
        return {
            "pods_offered": total,
            "chunk_pods": chunk,
            "chunk_bytes": chunk_bytes,
            "limit": MAX_SYNC_OBJECTS,
            "rounds": rounds,
            "rss_mib": {
                "before": rss_before,
                "peak_sampled": sampler.peak_rss_mib,
                "hwm_before": hwm_before,
                "hwm_after": koordlet.hwm_mib(),
                "after": koordlet.rss_mib(),
            },
            "create_container": {
                "before": summary(before),
                "after": summary(after) | {"failed": after_failed},
            },
        }

    async def http_window(
        self,
        koordlet: Koordlet,
        session: PluginSession,
        containers: Containers,
        seconds: float,
        attacker: Slowloris | None,
    ) -> dict[str, Any]:
        """/metrics every 0.2 s and CreateContainer every 0.05 s for ``seconds``."""
        refused_before = koordlet.metric(REFUSED)
        scrapes = Scrapes()
        stop_scraping = threading.Event()
        scraper = threading.Thread(
            target=scrape_until, args=(koordlet, stop_scraping, 0.2, scrapes), daemon=True
        )
        rss_before, fds_before = koordlet.rss_mib(), koordlet.fds()
        cpu_before = koordlet.cpu_seconds()
        opening = threading.Thread(
            target=attacker.start if attacker is not None else lambda: None, daemon=True
        )
        try:
            with Sampler(koordlet, period=0.02, fds=True) as sampler:
                start = time.perf_counter()
                opening.start()  # the attack, the scrapes and the requests all from now on
                scraper.start()
                created, create_failed = await creates_for(
                    session, containers, seconds - (time.perf_counter() - start), 0.05
                )
                stop_scraping.set()
                await asyncio.to_thread(scraper.join)
                await asyncio.to_thread(opening.join)
                end = time.perf_counter()
                cpu = koordlet.cpu_seconds() - cpu_before
                fds_end = koordlet.fds()
                still_open = attacker.still_open() if attacker is not None else 0
        finally:
            stop_scraping.set()
            if opening.is_alive():
                await asyncio.to_thread(opening.join)
            if attacker is not None:
                attacker.stop()
        out: dict[str, Any] = {
            "seconds": round(end - start, 1),
            "cpu_percent_of_one_core": round(100 * cpu / (end - start), 1),
            "rss_mib": {"before": rss_before, "peak_sampled": sampler.peak_rss_mib},
            "fds": {"before": fds_before, "peak_sampled": sampler.peak_fds, "end": fds_end},
            "metrics_scrape": scrapes.report(start, end),
            "create_container": summary(created) | {"failed": create_failed},
        }
        if attacker is not None:
            await asyncio.sleep(0.5)
            out["attacker"] = {
                "connections_opened": attacker.opened,
                "seconds_to_open_first_1000": round(attacker.seconds_to_open, 2),
                "open_at_the_end": still_open,
            }
        out["refused_total_delta"] = koordlet.metric(REFUSED) - refused_before
        return out

    async def http_slowloris(self, koordlet: Koordlet, session: PluginSession) -> dict[str, Any]:
        containers = Containers()
        await create_latencies(session, containers, 10)  # warm
        window = 4.0 if self.quick else 6.0
        attack = 13.0  # past the server's 10 s idle limit
        out = {
            "connections": SLOWLORIS_CONNECTIONS,
            "without": await self.http_window(koordlet, session, containers, window, None),
            "idle": await self.http_window(
                koordlet,
                session,
                containers,
                attack,
                Slowloris(koordlet.port, SLOWLORIS_CONNECTIONS, reopen=False),
            ),
        }
        if not self.quick:
            out["idle_reopened"] = await self.http_window(
                koordlet,
                session,
                containers,
                attack,
                Slowloris(koordlet.port, SLOWLORIS_CONNECTIONS, reopen=True),
            )
        out["hwm_mib"] = koordlet.hwm_mib()
        out["after"] = {"rss_mib": koordlet.rss_mib(), "fds": koordlet.fds()}
        return out


Scenario = Callable[[Bench, Koordlet, PluginSession], Any]


async def run(base: Path, quick: bool) -> dict[str, Any]:
    bench = Bench(base, quick)
    scenarios: list[tuple[str, Scenario, bool]] = [
        ("nri_frame", Bench.nri_frame, True),
        ("nri_sync", Bench.nri_sync, False),  # the hostile handshake stops after Configure
        ("http_slowloris", Bench.http_slowloris, True),
    ]
    result: dict[str, Any] = {"benchmark": "hostile_peers", "quick": quick}
    for name, scenario, synchronize in scenarios:
        runtime = FakeRuntime(pods=[be_pod()], synchronize=synchronize)
        koordlet: Koordlet | None = None
        try:
            koordlet, session = await bench.start(runtime)
            figures = await scenario(bench, koordlet, session)
            figures["koordlet_alive"] = koordlet.proc.poll() is None
            result[name] = figures
        finally:
            if koordlet is not None:
                await asyncio.to_thread(koordlet.stop)
            await runtime.close()
    return result


def interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # asyncio.run then unwinds the scenario: koordlet is stopped


def main() -> int:
    signal.signal(signal.SIGTERM, interrupted)
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests, shorter windows")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="hostile-peers-"))
    started = time.monotonic()
    try:
        result = asyncio.run(run(base, args.quick))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
