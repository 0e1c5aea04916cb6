"""koordlet launched the way containerd launches a pre-installed plugin: fd, bare environment."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from koordlet.preinstalled import read_env_file
from nri_plugin import api
from nri_plugin.testing import FakeRuntime


def launch(env_file: Path) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start the launcher with one end of a socket pair and only NRI_PLUGIN_* set."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(
        [sys.executable, "-m", "koordlet.preinstalled", "--env-file", str(env_file)],
        env={
            "NRI_PLUGIN_NAME": "koordlet",
            "NRI_PLUGIN_IDX": "00",
            "NRI_PLUGIN_SOCKET": str(theirs.fileno()),
        },
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    theirs.close()
    return proc, ours


def registered_events(proc: subprocess.Popen[bytes], ours: socket.socket) -> int:
    """Serve the plugin until it is configured; close the socket; its subscription mask."""

    async def serve() -> int:
        runtime = FakeRuntime(synchronize=False)  # containerd 1.7 never syncs these plugins
        await runtime.adopt(ours)
        try:
            session = await runtime.next_session(timeout=30)
            assert session.registration is not None
            assert (session.registration.plugin_name, session.registration.plugin_idx) == (
                "koordlet",
                "00",
            )
            return session.events
        finally:
            await runtime.close()

    try:
        return asyncio.run(serve())
    finally:
        proc.wait(20)  # the socket closed: the plugin ends by itself


def env_file(tmp_path: Path, args: str) -> Path:
    path = tmp_path / "koordlet.env"
    path.write_text(
        "# as koordctl install writes it, edited\n"
        f'KOORDLET_ARGS="{args}"\n'
        f"KOORDLET_LOG_FILE={tmp_path / 'plugin.log'}\n"
        "NODE_NAME=node-a\n"
    )
    return path


def test_koordlet_registers_with_its_hooks_and_exits_when_the_socket_closes(
    tmp_path: Path,
) -> None:
    args = (
        f"--addr= --tsdb-path= --node-metric-file= --cgroup-root-dir={tmp_path}/cgroup "
        "--feature-gates=SchedLatencyCollector=false"
    )
    (tmp_path / "cgroup").mkdir()
    proc, ours = launch(env_file(tmp_path, args))
    events = registered_events(proc, ours)

    assert events & (1 << (api.CREATE_CONTAINER - 1))  # koordlet's hooks, not the no-op
    assert proc.returncode == 0
    log = (tmp_path / "plugin.log").read_text()
    assert "started by containerd as NRI plugin 00-koordlet" in log
    assert "koordlet on node node-a" in log  # NODE_NAME came from the env file


def test_a_koordlet_that_cannot_start_still_registers_a_no_op_plugin(tmp_path: Path) -> None:
    proc, ours = launch(env_file(tmp_path, "--no-such-flag"))
    events = registered_events(proc, ours)

    assert events == 1 << (api.REMOVE_POD_SANDBOX - 1)  # one notification, errors only logged
    assert proc.returncode == 1
    log = (tmp_path / "plugin.log").read_text()
    assert "unrecognized arguments: --no-such-flag" in log
    assert "registering a plugin that does nothing" in log


def test_env_files_read_like_systemds(tmp_path: Path) -> None:
    path = tmp_path / "koordlet.env"
    path.write_text(
        "# comment\n"
        'KOORDLET_ARGS="--a=1 --b 2"\n'
        "PLAIN=value\n"
        "\n"
        "QUOTED='single quoted'\n"
        "#COMMENTED=out\n"
    )
    assert read_env_file(path) == {
        "KOORDLET_ARGS": "--a=1 --b 2",
        "PLAIN": "value",
        "QUOTED": "single quoted",
    }
