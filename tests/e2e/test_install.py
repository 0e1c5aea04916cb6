"""koordlet installed as node software: systemd readiness, and the plugin containerd launches."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from koordapi import keys
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess, free_port
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import scaled
from tests.e2e.test_koordlet import assert_batch_values_applied

KOORDCTL = Path(sys.executable).parent / "koordctl"
REGISTERED = 'registered as \\"00-koordlet\\"'


def test_koordlet_tells_systemd_it_is_ready_after_registering_and_feeds_the_watchdog(
    node: Node,
) -> None:
    path = node.containerd.layout.base / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(path))
        systemd.settimeout(15)
        env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1000000"}
        try:
            with KoordletProcess(node, env=env) as koordlet:  # returns once registered
                ready = systemd.recv(4096).decode()
                pings = [systemd.recv(64) for _ in range(2)]  # every half second
                assert koordlet.alive
            stopping = systemd.recv(64)
        finally:
            path.unlink()
    assert ready.startswith("READY=1\nSTATUS=ready: NRI plugin 00-koordlet_nri")
    assert pings == [b"WATCHDOG=1", b"WATCHDOG=1"]
    # The last pings may still be queued ahead of the goodbye.
    assert stopping in (b"STOPPING=1", b"WATCHDOG=1")


def test_koordlet_is_not_ready_while_it_cannot_register(node: Node) -> None:
    base = node.containerd.layout.base
    path = base / "notify-unready.sock"
    nowhere = base / "no-runtime"
    nowhere.mkdir()
    koordlet = KoordletProcess(node)
    command = list(koordlet.command)
    command[command.index("--var-run-root-dir") + 1] = str(nowhere)  # no NRI socket there
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind(str(path))
        systemd.settimeout(4)
        proc = subprocess.Popen(
            command,
            env=dict(os.environ, NOTIFY_SOCKET=str(path)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            try:
                message = systemd.recv(4096)
            except TimeoutError:
                message = b""
            assert proc.poll() is None  # running, retrying the socket
        finally:
            proc.terminate()
            proc.wait(10)
            path.unlink()
            nowhere.rmdir()
    assert b"READY=1" not in message


def plugin_pids(containerd_pid: int) -> list[int]:
    """containerd's children that run the koordlet launcher (Python, after the sh exec)."""
    pids = []
    for task in Path(f"/proc/{containerd_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"koordlet.preinstalled" in cmdline:
                pids.append(int(child))
    return pids


def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.1)
    return False


def install_plugin(node: Node, koordlet_args: str) -> tuple[Path, Path]:
    """`koordctl install --nri-plugin` against this node's containerd; (env file, log file)."""
    layout = node.containerd.layout
    config_dir = layout.base / "etc-koordlet"
    done = subprocess.run(
        [str(KOORDCTL), "install", "--nri-plugin",
         "--containerd-config", str(layout.config),
         "--containerd-bin", str(node.containerd.bin_dir / "containerd"),
         "--config-dir", str(config_dir),
         f"--koordlet-args={koordlet_args}"],  # "=": the value starts with "--"
        capture_output=True, text=True, timeout=scaled(60), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"wrote {layout.nri_plugin_path / '00-koordlet'}" in done.stdout
    env_file, log = config_dir / "koordlet.env", layout.base / "koordlet-plugin.log"
    with env_file.open("a") as f:  # what an operator edits: where the plugin logs, the node
        f.write(f"KOORDLET_LOG_FILE={log}\nNODE_NAME=e2e-node\n")
    return env_file, log


def test_containerd_launches_the_installed_koordlet_which_adjusts_containers(
    fresh_node: Node,
) -> None:
    node, layout = fresh_node, fresh_node.containerd.layout
    port = free_port()
    args = (
        f"--addr=127.0.0.1:{port} --tsdb-path={layout.base / 'plugin-metrics'} "
        f"--node-metric-file= --containerd-endpoint={layout.address} "
        "--feature-gates=SchedLatencyCollector=false "
        f"--runtime-hooks-nri-request-timeout={node.containerd.settings.nri_request_timeout}"
    )
    _, log = install_plugin(node, args)

    node.restart_containerd()  # containerd launches its plugins when it starts
    node.containerd.wait_for_log(REGISTERED)
    assert node.containerd.pid is not None
    first = plugin_pids(node.containerd.pid)
    assert len(first) == 1

    assert_batch_values_applied(node)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=scaled(5)) as reply:
        assert 'node="e2e-node"' in reply.read().decode()  # NODE_NAME from koordlet.env

    node.restart_containerd()  # the old plugin ends with the socket; a new one registers
    assert gone(first[0], 15)
    node.containerd.wait_for_log(REGISTERED)
    assert node.containerd.pid is not None
    second = plugin_pids(node.containerd.pid)
    assert len(second) == 1 and second != first
    assert "started by containerd as NRI plugin 00-koordlet" in log.read_text()

    assert node.teardown() == []
    assert gone(second[0], 15)


def test_a_koordlet_plugin_that_cannot_start_leaves_containerd_running(fresh_node: Node) -> None:
    node = fresh_node
    _, log = install_plugin(node, "--no-such-flag")

    node.restart_containerd()  # containerd 1.7 would exit if the plugin did not register
    node.containerd.wait_for_log(REGISTERED)
    pod_id = node.run_pod(PodSpec.new(qos="besteffort", labels={keys.LABEL_QOS_CLASS: "BE"}))
    cid = node.run_container(pod_id, ContainerSpec("batch", cpu_shares=2))
    # nobody adjusted it
    assert node.container_values(pod_id, cid).cpu_share == node.reader.cpu_share(2)
    text = log.read_text()
    assert "unrecognized arguments: --no-such-flag" in text
    assert "registering a plugin that does nothing" in text
    assert node.containerd.pid is not None
