"""koordlet under faults and hostile input, on the real containerd: it keeps applying QoS.

* A metric-cache disk that is full at start-up: koordlet starts with the cache in memory, says
  so, and the hooks still give a BE pod its batch values.
* A batch-memory limit past int64 in a pod's annotation: the container runs with the other
  hooks' values, and the BatchResource failure is counted.
* A NodeSLO file that is not UTF-8, then a valid one: the bad one is refused with its reason
  and counted, the watcher goes on, and the valid one applies.
* Fifteen containerd restarts, a BE pod created right after each re-registration: koordlet
  reconnects as the new socket appears (no backoff), and the pod gets its values.
* A slowloris of 1,000 idle connections to koordlet's HTTP server: new pods still get their
  values, and the server refuses what it cannot serve instead of running out of descriptors.
* A runtime that gives a BE pod a cgroup path climbing out of the cgroup root with ``..``: no
  containerd here, the test plays the runtime (``nri_plugin.testing.FakeRuntime``) for a
  koordlet whose cgroup root is a fake v1 tree in a temporary folder; the files planted next to
  the root keep their values, the refusals are counted, the container is still created, and the
  same pod with a normal path gets its values.

The behaviour does not depend on the cgroup version or the runtime, so these run in the host
tier only (tests/e2e/tiers.py).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from koordapi import keys
from nri_plugin import api
from nri_plugin.testing import FakeRuntime, PluginSession
from tests.e2e.harness import paths
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import PLUGIN_ID, KoordletProcess, free_port
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled
from tests.e2e.test_koordlet import (
    GROUP_IDENTITY_ON,
    MiB,
    assert_batch_values_applied,
    be_pod,
)


@pytest.fixture
def full_disk(node: Node) -> Iterator[Path]:
    """A 64 KiB tmpfs under the node's private folder, filled up."""
    mount = node.containerd.layout.base / "full-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        try:
            with (mount / "filler").open("wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError as err:  # full (the open itself may already be refused)
            assert err.errno == errno.ENOSPC
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
        mount.rmdir()


def test_a_full_metric_cache_disk_does_not_stop_koordlet_or_its_hooks(
    node: Node, full_disk: Path
) -> None:
    args = ("--tsdb-path", str(full_disk / "metric-data"))
    with KoordletProcess(node, args=args) as koordlet:
        assert_batch_values_applied(node)
        assert "metric cache degraded: cannot open" in koordlet.log_text()
        assert koordlet.alive


def test_a_batch_memory_limit_past_int64_fails_only_its_hook(node: Node) -> None:
    spec = {
        "batch": {
            "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: "1Gi"},
            "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: "1e400"},
        }
    }
    pod = PodSpec.new(
        qos="besteffort",
        labels={keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps({"containers": spec})},
    )
    with KoordletProcess(node, node_slo=GROUP_IDENTITY_ON) as koordlet:
        pod_id = node.run_pod(pod)
        cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))
        assert node.cri.container_pid(cid) > 0  # created and started
        # group identity (another hook) still made the BE pod idle; no batch limit was set
        assert node.pod_values(pod_id).cpu_idle == 1
        assert node.container_values(pod_id, cid).memory_limit == -1
        failures = koordlet.metric(
            "koordlet_runtime_hook_failures_total",
            hook="BatchResource",
            cause=f"AnnotationError:{keys.ANNOTATION_EXTENDED_RESOURCE_SPEC}",
        )
        assert failures >= 2  # the pod and the container stage
        assert "past int64" in koordlet.log_text()


def test_a_nodeslo_that_is_not_utf8_is_refused_and_the_next_valid_one_applies(
    node: Node,
) -> None:
    with KoordletProcess(node) as koordlet:
        errors = "koordlet_node_config_errors_total"
        koordlet.slo_file.write_bytes(b"resourceQOSStrategy: {beClass: \xff\xfe}\n")
        koordlet.wait_until(lambda: koordlet.metric(errors) == 1, 20, "the error counted")
        assert "not UTF-8" in koordlet.log_text()

        mark = len(koordlet.log_text())
        koordlet.slo_file.write_text(GROUP_IDENTITY_ON)
        koordlet.wait_until(
            lambda: "node config loaded from" in koordlet.log_text()[mark:],
            20,
            "the valid NodeSLO loaded",
        )
        pod_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
        node.run_container(pod_id, ContainerSpec("batch"))
        assert node.pod_values(pod_id).cpu_idle == 1  # the valid file's group identity


def test_a_slowloris_on_the_http_server_leaves_the_hooks_working(node: Node) -> None:
    count = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 200:  # this test process's own limit, for its client sockets
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 200), hard))
    with KoordletProcess(node) as koordlet:
        conns: list[socket.socket] = []
        try:
            for _ in range(count):
                conns.append(socket.create_connection(("127.0.0.1", koordlet.port), timeout=10))
            assert_batch_values_applied(node)
            assert koordlet.alive
        finally:
            for conn in conns:
                conn.close()

        # Once the idle ones are let go, the server answers again and says what it refused.
        def refused() -> float:
            try:
                return koordlet.metric("koordlet_http_connections_refused_total")
            except OSError:  # still refused: every slot taken
                return -1.0

        koordlet.wait_until(lambda: refused() >= count - 40, 30, "the refused connections counted")


def test_fifteen_containerd_restarts_each_followed_by_a_be_pod_with_its_values(
    node: Node,
) -> None:
    """After every restart koordlet registers again (at once: it watches the socket's folder)
    and a BE pod created right after gets its batch values from the hooks."""
    with KoordletProcess(node) as koordlet:
        connected = f'plugin \\"{PLUGIN_ID}\\" connected'
        for _ in range(15):
            node.restart_containerd()
            node.containerd.wait_for_log(connected, timeout=5)
            assert_batch_values_applied(node)
        assert koordlet.alive
        assert koordlet.metric("koordlet_nri_connected") == 1


# -- a cgroup path from the runtime that climbs out of the cgroup root (no containerd) -----------

ESCAPE_UID = "3f2c9d4e-0000-4000-8000-00000000e5ca"
CONTROL_UID = "3f2c9d4e-0000-4000-8000-0000000c0a7f"
ESCAPE_CID = "c-escape"
CONTROL_CID = "c-control"
# The files the hooks write for a BE pod with batch resources, with a kubelet's values (which
# koordlet would change); koordlet's values for 500m/1000m batch-cpu and 256Mi/512Mi memory.
SENTINELS = {
    "cpu.shares": "2",
    "cpu.cfs_quota_us": "-1",
    "memory.limit_in_bytes": "9223372036854771712",
}
BATCH_VALUES = {
    "cpu.shares": "512",
    "cpu.cfs_quota_us": "100000",
    "memory.limit_in_bytes": str(512 * MiB),
}


def make_escape_sandbox(base: Path) -> None:
    """``base/cgroup``: a cgroup v1 tree (cgroupfs layout) with the control pod and its container;
    ``base/escape``: what "/../../escape/..." reaches from any hierarchy of that root, holding the
    escaping pod's and container's files; ``base/state``: koordlet's own files and NRI socket."""
    root = base / "cgroup"
    control = f"kubepods/besteffort/pod{CONTROL_UID}"
    files: dict[str, dict[str, str]] = {
        "cpu": {
            "cpu.shares": SENTINELS["cpu.shares"],
            "cpu.cfs_quota_us": SENTINELS["cpu.cfs_quota_us"],
            "cpu.cfs_period_us": "100000",
        },
        "cpuacct": {},
        "cpuset": {"cpuset.cpus": f"0-{(os.cpu_count() or 1) - 1}", "cpuset.mems": "0"},
        "memory": {"memory.limit_in_bytes": SENTINELS["memory.limit_in_bytes"]},
    }
    for controller, values in files.items():
        for sub in (
            "kubepods",
            "kubepods/burstable",
            "kubepods/besteffort",
            control,
            f"{control}/{CONTROL_CID}",
        ):
            folder = root / controller / sub
            folder.mkdir(parents=True)
            for name, value in values.items():
                (folder / name).write_text(value + "\n")
    escape = base / "escape" / "kubepods" / "besteffort" / f"pod{ESCAPE_UID}"
    for folder in (escape, escape / ESCAPE_CID):
        folder.mkdir(parents=True)
        for name, value in SENTINELS.items():
            (folder / name).write_text(value + "\n")
    state = base / "state"
    (state / "nri").mkdir(parents=True)
    (state / "sysfs").mkdir()  # no resctrl/ in it
    (state / "nodeslo.yaml").write_text("")


def outside_the_root(base: Path) -> dict[str, str | None]:
    """Every folder (None) and file (its text) under ``base`` outside the cgroup root and
    koordlet's own state: what a write climbing out of the root would change or add."""
    found: dict[str, str | None] = {}
    for top, dirs, names in os.walk(base):
        here = Path(top)
        if here == base:
            dirs[:] = [d for d in dirs if d not in ("cgroup", "state")]
        for d in dirs:
            found[str((here / d).relative_to(base))] = None
        for name in names:
            found[str((here / name).relative_to(base))] = (here / name).read_text(errors="replace")
    return found


def batch_pod(
    name: str, uid: str, cgroup_parent: str, cid: str
) -> tuple[api.PodSandbox, api.Container]:
    """A BE pod asking 500m/1000m batch-cpu and 256Mi/512Mi batch-memory, as the runtime sends
    it, with one container under ``cgroup_parent`` (cgroupfs: the parent, then the id)."""
    pod = api.PodSandbox(id=f"p-{name}", name=name, uid=uid, namespace="jobs")
    pod.labels[keys.LABEL_QOS_CLASS] = "BE"
    pod.linux.cgroup_parent = cgroup_parent
    spec = {
        "containers": {
            "main": {
                "requests": {keys.BATCH_CPU: "500", keys.BATCH_MEMORY: str(256 * MiB)},
                "limits": {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(512 * MiB)},
            }
        }
    }
    pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = json.dumps(spec)
    container = api.Container(id=cid, pod_sandbox_id=pod.id, name="main")
    container.linux.cgroups_path = f"{cgroup_parent}/{cid}"
    return pod, container


class StandaloneKoordlet:
    """koordlet's console script, standalone, with its cgroup root in ``base/cgroup`` and all
    else in ``base/state``; it dials the NRI socket ``base/state/nri/nri.sock``. Stopped by its
    pid (SIGTERM, then SIGKILL)."""

    def __init__(self, base: Path) -> None:
        state = base / "state"
        self.log = state / "koordlet.log"
        self.port = free_port()
        command = [
            str(Path(sys.executable).parent / "koordlet"),
            "--var-run-root-dir",
            str(state),
            "--cgroup-root-dir",
            str(base / "cgroup"),
            "--cgroup-driver",
            "cgroupfs",
            "--sys-fs-root-dir",
            str(state / "sysfs"),
            "--node-slo-file",
            str(state / "nodeslo.yaml"),
            "--addr",
            f"127.0.0.1:{self.port}",
            "--tsdb-path",
            str(state / "metric-data"),
            "--node-metric-file",
            str(state / "nodemetric.json"),
            "--containerd-endpoint",
            str(state / "no-containerd.sock"),
            # no eBPF compile at start; nothing written under /proc or /sys
            "--feature-gates",
            "SchedLatencyCollector=false,SystemConfig=false",
        ]
        env = dict(os.environ, PYTHONPATH=str(paths.REPO_ROOT), NODE_NAME="e2e-node")
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self.pid = self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(scaled(10))
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=scaled(5)) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith((name + "{", name + " ")) and all(
                f'{k}="{v}"' in line for k, v in labels.items()
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    async def registered(self, runtime: FakeRuntime, timeout: float) -> PluginSession:
        """koordlet's NRI session once it got through the handshake; fails early if it exits."""
        end = deadline(timeout)
        while True:
            try:
                return await runtime.next_session(timeout=0.5)
            except TimeoutError:
                if not self.alive:
                    pytest.fail(f"koordlet exited ({self.proc.returncode}):\n{self.log_tail()}")
                if time.monotonic() > end:
                    pytest.fail(
                        f"koordlet did not register in {scaled(timeout):g}s:\n{self.log_tail()}"
                    )

    async def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``condition`` (in a thread: it may read files or /metrics) until it holds."""
        end = deadline(timeout)
        while True:
            try:
                if await asyncio.to_thread(condition):
                    return
            except OSError:  # the metrics server not up yet
                pass
            if not self.alive:
                pytest.fail(f"koordlet exited ({self.proc.returncode}):\n{self.log_tail()}")
            if time.monotonic() > end:
                pytest.fail(
                    f"{what}: not in {scaled(timeout):g}s; koordlet log:\n{self.log_tail()}"
                )
            await asyncio.sleep(0.1)


def batch_adjustment(reply: api.CreateContainerResponse) -> dict[str, str]:
    resources = reply.adjust.linux.resources
    return {
        "cpu.shares": str(resources.cpu.shares.value),
        "cpu.cfs_quota_us": str(resources.cpu.quota.value),
        "memory.limit_in_bytes": str(resources.memory.limit.value),
    }


def cgroup_values(root: Path, cgroup: str) -> dict[str, str]:
    """The hooks' files of a cgroup in the v1 tree (cpu and memory hierarchies)."""
    return {
        name: (root / name.split(".")[0] / cgroup / name).read_text().strip()
        for name in BATCH_VALUES
    }


@pytest.fixture
def escape_sandbox() -> Iterator[Path]:
    # a short path: the NRI socket's must fit in sun_path (108 bytes)
    base = Path(tempfile.mkdtemp(prefix="koord-escape-"))
    try:
        make_escape_sandbox(base)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_cgroup_path_climbing_out_of_the_root_gets_nothing_written_outside_it(
    escape_sandbox: Path,
) -> None:
    """A runtime's "/../../escape/kubepods/besteffort/pod<uid>" resolves, from every hierarchy
    of the cgroup root, to ``escape/`` beside the root: koordlet refuses those writes (counted as
    invalid), the planted files keep their values, nothing appears there, the container is still
    created with its adjustment, and the same pod with a normal path gets its values."""
    base = escape_sandbox
    before = outside_the_root(base)

    async def scenario() -> None:
        runtime = FakeRuntime(request_timeout=scaled(10))
        koordlet: StandaloneKoordlet | None = None
        try:
            await runtime.listen(base / "state" / "nri" / "nri.sock")
            koordlet = StandaloneKoordlet(base)
            session = await koordlet.registered(runtime, timeout=60)

            escape_parent = f"/../../escape/kubepods/besteffort/pod{ESCAPE_UID}"
            pod, container = batch_pod("escape", ESCAPE_UID, escape_parent, ESCAPE_CID)
            await session.state_change(api.RUN_POD_SANDBOX, pod)
            reply = await session.create_container(pod, container)
            await session.state_change(api.POST_START_CONTAINER, pod, container)

            def settled() -> bool:  # refused and counted, or (no guard) written out there
                refused = all(
                    koordlet.metric(
                        "koordlet_resource_updates_total", status="invalid", resource=name
                    )
                    > 0
                    for name in BATCH_VALUES
                )
                return refused or outside_the_root(base) != before

            await koordlet.wait_until(settled, 30, "the escaping pod's writes counted as invalid")
            assert outside_the_root(base) == before
            assert reply.HasField("adjust")  # answered: the runtime creates the container
            assert batch_adjustment(reply) == BATCH_VALUES
            assert "refused cgroup path" in koordlet.log_tail()

            # The control: the same pod with a normal path gets its values under the root.
            control_parent = f"/kubepods/besteffort/pod{CONTROL_UID}"
            pod, container = batch_pod("control", CONTROL_UID, control_parent, CONTROL_CID)
            await session.state_change(api.RUN_POD_SANDBOX, pod)
            reply = await session.create_container(pod, container)
            await session.state_change(api.POST_START_CONTAINER, pod, container)
            root = base / "cgroup"
            await koordlet.wait_until(
                lambda: all(
                    cgroup_values(root, cgroup.strip("/")) == BATCH_VALUES
                    for cgroup in (control_parent, f"{control_parent}/{CONTROL_CID}")
                ),
                30,
                "the control pod's and container's values written under the root",
            )
            assert batch_adjustment(reply) == BATCH_VALUES

            assert outside_the_root(base) == before  # still: nothing written out there since
            assert koordlet.alive
        finally:
            if koordlet is not None:
                await asyncio.to_thread(koordlet.stop)
            await runtime.close()

    asyncio.run(scenario())
