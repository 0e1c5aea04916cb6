"""Run NRI plugins for e2e tests: in this process (a thread with its own event loop) or as a
separate process (to kill it, or to have containerd launch it from its plugin folder).

Usage::

    with PluginThread(plugin, socket_path=layout.nri_socket) as running:
        running.wait_registrations(1)
        failed = running.call(running.stub.update_containers(updates))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from nri_plugin import Stub
from tests.e2e.harness import paths
from tests.e2e.harness.timing import deadline, scaled

T = TypeVar("T")


class PluginThread:
    """A Stub serving ``plugin`` in a background thread; see the module docstring."""

    def __init__(
        self, plugin: object, *, name: str = "e2e", index: str = "10", **stub_args: Any
    ) -> None:
        self.stub = Stub(
            plugin, name=name, index=index, backoff_initial=0.05, backoff_max=0.5, **stub_args
        )
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"nri-{name}", daemon=True)
        self._task: concurrent.futures.Future[None] | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> PluginThread:
        self._thread.start()
        self._task = asyncio.run_coroutine_threadsafe(self.stub.run(), self.loop)
        return self

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10) -> T:
        """Run ``coro`` on the plugin's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(scaled(timeout))

    def wait_registrations(self, count: int, timeout: float = 15) -> None:
        """Wait until the stub has been configured ``count`` times in all."""
        end = deadline(timeout)
        while self.stub.registrations < count:
            if self._task is not None and self._task.done():
                self._task.result()  # re-raise why it stopped
                raise RuntimeError("plugin stopped")
            if time.monotonic() > end:
                raise TimeoutError(
                    f"plugin registered {self.stub.registrations} times, wanted {count}"
                )
            time.sleep(0.02)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.stub.stop)
        if self._task is not None:
            try:
                self._task.result(10)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10)
                self.loop.close()

    def __enter__(self) -> PluginThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def shares_plugin_command(*args: str) -> list[str]:
    """The command line of the e2e shares plugin (tests/e2e/plugins/shares.py)."""
    return [sys.executable, "-m", "tests.e2e.plugins.shares", *args]


class PluginProcess:
    """The shares plugin as a child process of the test, ended by its pid."""

    def __init__(
        self, socket_path: Path, shares: int, *, name: str = "proc", index: str = "20", log: Path
    ) -> None:
        self.log = log
        env = dict(os.environ, PYTHONPATH=str(paths.REPO_ROOT))
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                shares_plugin_command(
                    "--socket",
                    str(socket_path),
                    "--shares",
                    str(shares),
                    "--name",
                    name,
                    "--idx",
                    index,
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=paths.REPO_ROOT,
            )

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def install_preinstalled(
    plugin_dir: Path, config_dir: Path, name: str, index: str, shares: int
) -> Path:
    """Put the shares plugin into containerd's plugin folder as ``NN-name``, with its config.

    containerd runs it with no arguments and only NRI_PLUGIN_* in the environment, so the
    executable names this interpreter and the repository explicitly.
    """
    executable = plugin_dir / f"{index}-{name}"
    executable.write_text(
        f"#!{sys.executable}\n"
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(paths.REPO_ROOT)!r})\n"
        "runpy.run_module('tests.e2e.plugins.shares', run_name='__main__')\n"
    )
    executable.chmod(0o755)
    (config_dir / f"{index}-{name}.conf").write_text(f'{{"shares": {shares}}}\n')
    return executable
