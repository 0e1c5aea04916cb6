"""The NRI path keeps containerd's deadline whatever else koordlet is doing.

The whole daemon runs in this process on a fake cgroup tree; the fake runtime runs in a thread of
its own with its own event loop, as containerd is another process: a koordlet event loop that
stalls shows here as a late reply (the runtime's call times out), not as a runtime that stalls
with it. Two stalls are made certain rather than hoped for: the reconcile pass that follows a
Synchronize of 5,000 pods is held in the middle of its pods (spinning, holding the interpreter as
a long pass does), and a QoS strategy spins until released. While each is held, CreateContainer
must be answered within the runtime's request timeout (a deadline, not a speed).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from koordapi.features import FeatureGates
from koordlet.daemon import Koordlet
from koordlet.qosmanager.framework import Context
from koordlet.states.pods import KnownPod
from nri_plugin import api
from nri_plugin.testing import FakeRuntime
from runtimehooks.rules import Rules
from tests.unit.koordlet.test_whole_koordlet import (
    be_pod,
    fake_tree,
    node_of_pods,
    standalone_config,
)

PODS = 5000
REQUEST_TIMEOUT = 1.0  # containerd's is 2 s; the stub's budget is a quarter of it


def spin_until(released: threading.Event) -> None:
    """Python work that never blocks: the interpreter is handed round only every switch
    interval, as during a long reconcile pass or a slow strategy."""
    while not released.is_set():
        sum(range(200))


class SlowStrategy:
    name = "SlowForTest"
    interval = 0.05

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.released = threading.Event()

    def enabled(self, gates: FeatureGates) -> bool:
        return True

    def run(self, ctx: Context) -> None:
        if not self.released.is_set():
            self.inside.set()
            spin_until(self.released)


def test_create_container_is_answered_in_time_during_a_5000_pod_pass_and_a_slow_strategy(
    tmp_path: Path,
) -> None:
    cgroup = tmp_path / "cgroup"
    fake_tree(cgroup)
    pods, containers = node_of_pods(cgroup, PODS, batch=False)
    config = standalone_config(tmp_path)
    daemon = Koordlet(config)
    strategy = SlowStrategy()
    daemon.qos.strategies.append(strategy)
    daemon.qos.runs[strategy.name] = daemon.qos.failures[strategy.name] = 0

    # The pass after the Synchronize stops in the middle of its 5,000 pods until released.
    pass_inside, pass_released = threading.Event(), threading.Event()
    reconcile_pod = daemon.reconciler.reconcile_pod
    reconciled: list[str] = []

    def held_reconcile_pod(known: KnownPod, rules: Rules, only: str | None = None) -> None:
        reconcile_pod(known, rules, only)
        reconciled.append(known.request.uid)
        if only is None and len(reconciled) == PODS // 2:
            pass_inside.set()
            spin_until(pass_released)

    daemon.reconciler.reconcile_pod = held_reconcile_pod  # type: ignore[method-assign]

    answers: dict[str, Any] = {}
    pod, container = be_pod()

    async def containerd() -> None:
        runtime = FakeRuntime(
            pods=pods, containers=containers, nri_version="v0.9.0", request_timeout=REQUEST_TIMEOUT
        )
        await runtime.listen(config.nri_socket)
        try:
            session = await runtime.next_session(timeout=60)  # Synchronize answered in time
            await session.state_change(api.RUN_POD_SANDBOX, pod)
            for stall, inside in (("pass", pass_inside), ("strategy", strategy.inside)):
                assert await asyncio.to_thread(inside.wait, 60), f"{stall} never held"
                started = time.monotonic()
                # raises TimeoutError past REQUEST_TIMEOUT, as containerd drops the plugin
                reply = await session.create_container(pod, container)
                answers[stall] = (time.monotonic() - started, reply, len(reconciled))
                pass_released.set()
        finally:
            pass_released.set()
            strategy.released.set()
            await runtime.close()
            os.kill(os.getpid(), signal.SIGTERM)  # koordlet's own handler: a clean stop

    def run_containerd() -> None:
        try:
            asyncio.run(containerd())
        except BaseException as err:  # reported by the assertion below
            answers["error"] = err

    runtime_thread = threading.Thread(target=run_containerd, name="fake-containerd")
    runtime_thread.start()
    try:
        asyncio.run(asyncio.wait_for(daemon.run(), 120))
    finally:
        pass_released.set()
        strategy.released.set()
        runtime_thread.join(30)

    assert "error" not in answers, answers.get("error")
    for stall in ("pass", "strategy"):
        seconds, reply, _ = answers[stall]
        assert seconds < REQUEST_TIMEOUT
        # answered from the pod store and the hooks (716 from the pod's 700m batch request),
        # or, past the stub's budget, with no change: never left waiting
        assert reply.adjust.linux.resources.cpu.shares.value in (716, 0)
    assert answers["pass"][2] == PODS // 2  # answered while the pass was held
    assert len(daemon.pods) == PODS + 1  # the Synchronize's pods and the one created since
