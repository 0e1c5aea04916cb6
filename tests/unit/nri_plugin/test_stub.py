"""The plugin stub against a fake runtime speaking the real wire protocol."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import tracemalloc
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from nri_plugin import Stub, api, events, mux, status, ttrpc
from nri_plugin.errors import NriError, RegistrationError, RpcError
from nri_plugin.stub import MAX_SYNC_OBJECTS, identity_from_env
from nri_plugin.testing import FakeRuntime, PluginSession


def run(coro: Coroutine[Any, Any, None], timeout: float = 20) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout))


def pod(name: str = "p1") -> api.PodSandbox:
    return api.PodSandbox(id=f"id-{name}", name=name, uid=f"uid-{name}", namespace="default")


def container(name: str = "c1", pod_name: str = "p1") -> api.Container:
    return api.Container(id=f"id-{name}", pod_sandbox_id=f"id-{pod_name}", name=name)


class Recorder:
    """A plugin that records what it sees and adjusts cpu shares on creation."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    async def synchronize(
        self, pods: list[api.PodSandbox], containers: list[api.Container]
    ) -> list[api.ContainerUpdate]:
        self.calls.append(
            ("synchronize", *[p.name for p in pods], "|", *[c.name for c in containers])
        )
        update = api.ContainerUpdate(container_id="id-c0")
        update.linux.resources.cpu.shares.value = 2
        return [update]

    async def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        self.calls.append(("create_container", pod.name, ctr.name))
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = 512
        return adjust, []

    def run_pod_sandbox(self, pod: api.PodSandbox) -> None:  # a plain function works too
        self.calls.append(("run_pod_sandbox", pod.name))


async def start(
    tmp_path: Path, plugin: object, runtime: FakeRuntime | None = None, **stub_args: Any
) -> tuple[FakeRuntime, Stub, PluginSession, asyncio.Task[None]]:
    runtime = runtime or FakeRuntime()
    sock = tmp_path / "nri.sock"
    await runtime.listen(sock)
    stub = Stub(
        plugin, name="test", index="10", socket_path=sock, backoff_initial=0.01, **stub_args
    )
    task = asyncio.create_task(stub.run())
    session = await runtime.next_session()
    return runtime, stub, session, task


async def finish(runtime: FakeRuntime, stub: Stub, task: asyncio.Task[None]) -> None:
    stub.stop()
    await asyncio.wait_for(task, 5)
    await runtime.close()


def test_registers_configures_and_synchronizes(tmp_path: Path) -> None:
    async def scenario() -> None:
        plugin = Recorder()
        runtime = FakeRuntime(pods=[pod("p1"), pod("p2")], containers=[container("c0")])
        runtime, stub, session, task = await start(tmp_path, plugin, runtime)

        assert session.registration is not None
        assert (session.registration.plugin_name, session.registration.plugin_idx) == ("test", "10")
        assert session.events == events.mask_bit(api.CREATE_CONTAINER) | events.mask_bit(
            api.RUN_POD_SANDBOX
        )
        assert plugin.calls == [("synchronize", "p1", "p2", "|", "c0")]
        assert [u.container_id for u in session.sync_responses[-1].update] == ["id-c0"]
        assert stub.runtime_name == "fake-runtime" and stub.registrations == 1
        await finish(runtime, stub, task)

    run(scenario())


def test_create_container_answers_with_the_plugins_adjustment(tmp_path: Path) -> None:
    async def scenario() -> None:
        plugin = Recorder()
        served: list[tuple[str, float]] = []
        runtime, stub, session, task = await start(
            tmp_path, plugin, on_served=lambda m, s: served.append((m, s))
        )

        reply = await session.create_container(pod(), container())

        assert reply.adjust.linux.resources.cpu.shares.value == 512
        assert plugin.calls[-1] == ("create_container", "p1", "c1")
        assert [m for m, _ in served] == ["Configure", "Synchronize", "CreateContainer"]
        assert all(0 < s < 1 for _, s in served)
        await finish(runtime, stub, task)

    run(scenario())


def test_events_arrive_as_state_change_or_per_event_rpc(tmp_path: Path) -> None:
    async def scenario() -> None:
        plugin = Recorder()
        runtime, stub, session, task = await start(tmp_path, plugin)

        await session.state_change(api.RUN_POD_SANDBOX, pod("a"))
        await session.call(
            "RunPodSandbox", api.RunPodSandboxRequest(pod=pod("b")), api.RunPodSandboxResponse
        )
        with pytest.raises(RpcError) as err:  # no handler: the v0.12 runtime falls back
            await session.call(
                "StartContainer", api.StartContainerRequest(), api.StartContainerResponse
            )

        assert plugin.calls[-2:] == [("run_pod_sandbox", "a"), ("run_pod_sandbox", "b")]
        assert err.value.code == status.UNIMPLEMENTED
        assert err.value.message == "method StartContainer"
        await finish(runtime, stub, task)

    run(scenario())


def test_unknown_service_is_unimplemented(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Recorder())
        with pytest.raises(RpcError) as err:
            await session.client.call("no.such.Service", "X", b"", 2)
        assert (err.value.code, err.value.message) == (
            status.UNIMPLEMENTED,
            "service no.such.Service",
        )
        await finish(runtime, stub, task)

    run(scenario())


class Everything:
    """Handlers for every event, including those of NRI v0.10+."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[None]]:
        if name in {spec.method for spec in events.EVENTS}:

            async def handler(*args: Any) -> None:
                return None

            return handler
        raise AttributeError(name)


@pytest.mark.parametrize(
    ("nri_version", "valid", "expected"),
    [
        pytest.param("", 0x07FF, 0x07FF, id="containerd-1.7-caps-to-0x7ff"),
        pytest.param("v0.12.2", 0x3FFF, 0x3FFF, id="nri-0.12-gets-all"),
    ],
)
def test_subscription_is_capped_to_what_the_runtime_knows(
    tmp_path: Path, nri_version: str, valid: int, expected: int
) -> None:
    async def scenario() -> None:
        runtime = FakeRuntime(nri_version=nri_version, valid_events=valid)
        runtime, stub, session, task = await start(tmp_path, Everything(), runtime)
        assert session.events == expected
        await finish(runtime, stub, task)

    run(scenario())


def test_split_synchronize_is_reassembled_before_the_handler_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        plugin = Recorder()
        runtime = FakeRuntime(
            pods=[pod("p1"), pod("p2"), pod("p3")],
            containers=[container("c1"), container("c2")],
            sync_chunk=2,
            nri_version="v0.12.0",
        )
        runtime, stub, session, task = await start(tmp_path, plugin, runtime)

        assert [r.more for r in session.sync_requests] == [True, True, False]
        assert [(r.more, len(r.update)) for r in session.sync_responses] == [
            (True, 0),
            (True, 0),
            (False, 1),
        ]
        assert plugin.calls == [("synchronize", "p1", "p2", "p3", "|", "c1", "c2")]
        await finish(runtime, stub, task)

    run(scenario())


class Slow:
    async def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        await asyncio.sleep(5)
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = 2
        return adjust, []


def test_a_handler_that_overruns_its_budget_is_answered_with_no_change(tmp_path: Path) -> None:
    async def scenario() -> None:
        seen: list[tuple[str, str]] = []
        runtime, stub, session, task = await start(
            tmp_path, Slow(), handler_budget=0.05, on_handled=lambda n, s, o: seen.append((n, o))
        )
        loop = asyncio.get_running_loop()
        started = loop.time()

        reply = await session.create_container(pod(), container())

        assert loop.time() - started < 1.0
        assert not reply.HasField("adjust")
        assert seen == [("create_container", "overrun")]
        assert stub.overruns == 1
        assert not session.closed.is_set()  # still connected
        await finish(runtime, stub, task)

    run(scenario())


class Sleepy:
    """create_container answers after ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        await asyncio.sleep(self.seconds)
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = 2
        return adjust, []


def test_the_budget_is_a_quarter_of_the_runtimes_timeout_else_of_the_one_the_plugin_was_given(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        seen: list[tuple[str, str]] = []
        # a runtime that does not say (NRI before v0.7, containerd 1.7) configured with 4 s, as
        # the plugin was told: 1 s, so a 0.7 s handler is answered in full (no fixed cap)
        (tmp_path / "a").mkdir()
        runtime, stub, session, task = await start(
            tmp_path / "a",
            Sleepy(0.7),
            request_timeout=4.0,
            on_handled=lambda n, s, o: seen.append((n, o)),
        )
        reply = await session.create_container(pod(), container())
        assert reply.adjust.linux.resources.cpu.shares.value == 2
        assert stub.handler_budget == 1.0
        await finish(runtime, stub, task)

        # a runtime that says 1 s is believed over the plugin's 4 s: 0.25 s, overrun
        (tmp_path / "b").mkdir()
        says = FakeRuntime(nri_version="v0.9.0", request_timeout=1.0)
        runtime, stub, session, task = await start(
            tmp_path / "b",
            Sleepy(0.7),
            says,
            request_timeout=4.0,
            on_handled=lambda n, s, o: seen.append((n, o)),
        )
        reply = await session.create_container(pod(), container())
        assert not reply.HasField("adjust")
        assert stub.handler_budget == 0.25
        assert seen == [("create_container", "ok"), ("create_container", "overrun")]
        await finish(runtime, stub, task)

    run(scenario())


class Blocking:
    """Plain handlers: create_container blocks until released (a rule stuck in a syscall or a
    long computation, which no event loop can interrupt); each handler records its end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended: list[str] = []
        self.threads: set[str] = set()

    def create_container(
        self, pod: api.PodSandbox, ctr: api.Container
    ) -> tuple[api.ContainerAdjustment, list[api.ContainerUpdate]]:
        self.threads.add(threading.current_thread().name)
        self.release.wait(10)
        self.ended.append(ctr.name)
        adjust = api.ContainerAdjustment()
        adjust.linux.resources.cpu.shares.value = 2
        return adjust, []

    def update_container(
        self, pod: api.PodSandbox, ctr: api.Container, resources: api.LinuxResources
    ) -> list[api.ContainerUpdate]:
        self.threads.add(threading.current_thread().name)
        self.ended.append(f"update {ctr.name}")
        return []


def test_a_plain_handler_over_budget_is_abandoned_and_the_runtime_answered_in_time(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        seen: list[tuple[str, str]] = []
        plugin = Blocking()
        runtime, stub, session, task = await start(
            tmp_path, plugin, handler_budget=0.2, on_handled=lambda n, s, o: seen.append((n, o))
        )
        loop = asyncio.get_running_loop()
        started = loop.time()

        reply = await session.create_container(pod(), container("c1"))
        # the next event waits behind the stuck handler, within its own budget
        update = await session.update_container(pod(), container("c2"), api.LinuxResources())

        # answered (no change) while the handler was still stuck: the budget held
        assert loop.time() - started < 2.0
        assert not reply.HasField("adjust") and not update.update
        assert plugin.ended == []
        assert seen == [("create_container", "overrun"), ("update_container", "overrun")]
        assert stub.overruns == 2
        assert not session.closed.is_set()
        # abandoned, not cancelled: both handlers still run to their end, in the runtime's order
        plugin.release.set()
        for _ in range(200):
            if len(plugin.ended) == 2:
                break
            await asyncio.sleep(0.01)
        assert plugin.ended == ["c1", "update c2"]
        assert len(plugin.threads) == 1 and threading.current_thread().name not in plugin.threads
        await finish(runtime, stub, task)

    run(scenario())


class Failing:
    async def create_container(self, pod: api.PodSandbox, ctr: api.Container) -> None:
        raise ValueError("bad label koordinator.sh/qosClass=GOLD")


def test_a_handler_error_becomes_an_error_status_and_the_plugin_stays(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Failing())
        with pytest.raises(RpcError) as err:
            await session.create_container(pod(), container())
        assert err.value.code == status.UNKNOWN
        assert "qosClass=GOLD" in err.value.message
        assert not session.closed.is_set()
        await finish(runtime, stub, task)

    run(scenario())


class Updater:
    def __init__(self) -> None:
        self.stub: Stub | None = None
        self.error: Exception | None = None

    async def create_container(self, pod: api.PodSandbox, ctr: api.Container) -> None:
        assert self.stub is not None
        try:
            await self.stub.update_containers([])
        except NriError as err:
            self.error = err


def test_update_containers_reaches_the_runtime_and_reports_failures(tmp_path: Path) -> None:
    async def scenario() -> None:
        plugin = Updater()
        runtime, stub, session, task = await start(tmp_path, plugin)
        runtime.failing_containers.add("gone")
        updates = [api.ContainerUpdate(container_id=cid) for cid in ("id-c1", "gone")]
        updates[0].linux.resources.cpu.quota.value = 20000

        failed = await stub.update_containers(updates)

        assert [u.container_id for u in runtime.updates] == ["id-c1", "gone"]
        assert runtime.updates[0].linux.resources.cpu.quota.value == 20000
        assert [u.container_id for u in failed] == ["gone"]
        plugin.stub = stub
        await session.create_container(pod(), container())
        assert plugin.error is not None and "deadlock" in str(plugin.error)
        await finish(runtime, stub, task)

    run(scenario())


def test_reconnects_after_the_runtime_drops_it_and_keeps_one_registration(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime, stub, first, task = await start(tmp_path, Recorder())
        for _ in range(3):
            first.close()
            second = await runtime.next_session()
            assert len(runtime.live_sessions()) == 1
            assert runtime.live_sessions() == [second]
            first = second
        assert stub.registrations == 4
        assert len(runtime.registrations) == 4
        await finish(runtime, stub, task)

    run(scenario())


def test_a_restarted_runtime_is_reached_as_its_socket_appears_not_after_the_backoff(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        sock = tmp_path / "nri.sock"
        runtime = FakeRuntime()
        await runtime.listen(sock)
        # A backoff far longer than the test may wait: only the socket's creation can wake it.
        stub = Stub(Recorder(), name="test", index="10", socket_path=sock,
                    backoff_initial=30, backoff_max=60)  # fmt: skip
        task = asyncio.create_task(stub.run())
        await runtime.next_session()
        for _ in range(3):  # the runtime exits (its socket goes) and starts again
            runtime.stop_listening()
            sock.unlink()
            await runtime.close()
            runtime = FakeRuntime()
            await runtime.listen(sock)
            await runtime.next_session(timeout=10)
        assert stub.registrations == 4
        await finish(runtime, stub, task)

    run(scenario())


def test_without_a_folder_to_watch_the_timer_still_reconnects(tmp_path: Path) -> None:
    async def scenario() -> None:
        sock = tmp_path / "later" / "nri.sock"  # the runtime has not made its folder yet
        stub = Stub(Recorder(), name="test", index="10", socket_path=sock, backoff_initial=0.01,
                    backoff_max=0.05)  # fmt: skip
        task = asyncio.create_task(stub.run())
        await asyncio.sleep(0.1)  # a few refused tries; the stub keeps going
        sock.parent.mkdir()
        runtime = FakeRuntime()
        await runtime.listen(sock)
        await runtime.next_session(timeout=10)
        await finish(runtime, stub, task)

    run(scenario())


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(mux.HEADER.pack(7, 3) + b"abc", id="unknown-connection"),
        pytest.param(mux.HEADER.pack(1, mux.MAX_FRAME_PAYLOAD + 1), id="oversized-frame"),
        pytest.param(mux.HEADER.pack(1, 100) + b"trunc", id="closed-mid-frame"),
        pytest.param(
            mux.encode_frames(
                mux.PLUGIN_SERVICE_CONN,
                b"".join(
                    ttrpc.HEADER.pack(0, 2 * i + 1, ttrpc.TYPE_REQUEST, 0) for i in range(1000)
                ),
            ),
            id="a-frame-of-1000-empty-requests",
        ),
    ],
)
def test_bad_input_closes_the_connection_and_the_stub_reconnects(
    tmp_path: Path, garbage: bytes
) -> None:
    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Recorder())
        session.send_raw(garbage)
        if garbage.endswith(b"trunc"):
            session.close()
        again = await runtime.next_session()
        await asyncio.wait_for(session.closed.wait(), 5)
        assert runtime.live_sessions() == [again]
        reply = await again.create_container(pod(), container())
        assert reply.adjust.linux.resources.cpu.shares.value == 512
        await finish(runtime, stub, task)

    run(scenario())


def test_garbage_inside_a_request_is_an_error_status_not_a_crash(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Recorder())
        with pytest.raises(RpcError) as err:
            await session.client.call(
                "nri.pkg.api.v1alpha1.Plugin", "CreateContainer", b"\xff\xff\xff", 2
            )
        assert err.value.code == status.INTERNAL
        reply = await session.create_container(pod(), container())  # still serving
        assert reply.adjust.linux.resources.cpu.shares.value == 512
        await finish(runtime, stub, task)

    run(scenario())


def test_pre_installed_mode_uses_the_inherited_socket_and_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        monkeypatch.setenv("NRI_PLUGIN_NAME", "koordlet")
        monkeypatch.setenv("NRI_PLUGIN_IDX", "00")
        monkeypatch.setenv("NRI_PLUGIN_SOCKET", str(theirs.detach()))  # now the stub's fd
        runtime = FakeRuntime(synchronize=False, config="some: config")
        await runtime.adopt(ours)
        stub = Stub(Recorder())
        task = asyncio.create_task(stub.run())
        session = await runtime.next_session()

        assert session.registration is not None
        assert (session.registration.plugin_name, session.registration.plugin_idx) == (
            "koordlet",
            "00",
        )
        assert not stub.reconnect
        session.close()
        await asyncio.wait_for(task, 5)  # run() returns when the runtime closes the socket
        await runtime.close()

    run(scenario())


def test_identity_comes_from_the_environment_or_the_binary_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NRI_PLUGIN_NAME", raising=False)
    monkeypatch.delenv("NRI_PLUGIN_IDX", raising=False)
    assert identity_from_env("/opt/nri/plugins/00-koordlet") == ("koordlet", "00")
    assert identity_from_env("/usr/bin/koordlet") == (None, None)
    monkeypatch.setenv("NRI_PLUGIN_NAME", "x")
    monkeypatch.setenv("NRI_PLUGIN_IDX", "42")
    assert identity_from_env("/opt/nri/plugins/00-koordlet") == ("x", "42")


@pytest.mark.parametrize(
    ("name", "index", "match"),
    [
        pytest.param("", "10", "invalid plugin name", id="empty-name"),
        pytest.param("bad name", "10", "invalid plugin name", id="space-in-name"),
        pytest.param("ok", "1", "invalid plugin index", id="one-digit-index"),
        pytest.param("ok", "100", "invalid plugin index", id="three-digit-index"),
    ],
)
def test_invalid_identity_is_refused_before_connecting(
    name: str, index: str, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NRI_PLUGIN_NAME", raising=False)
    monkeypatch.delenv("NRI_PLUGIN_IDX", raising=False)
    with pytest.raises(RegistrationError, match=match):
        Stub(Recorder(), name=name, index=index)


def test_a_plugin_without_handlers_is_refused() -> None:
    with pytest.raises(NriError, match="no NRI event handler"):
        Stub(object(), name="x", index="10")


class Narrow(Recorder):
    def configure(self, config: str, runtime_name: str, runtime_version: str) -> int:
        return events.mask_bit(api.CREATE_CONTAINER)


class Greedy(Recorder):
    def configure(self, config: str, runtime_name: str, runtime_version: str) -> int:
        return events.mask_bit(api.STOP_CONTAINER)  # no handler for it


def test_configure_may_narrow_the_subscription_but_not_widen_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Narrow())
        assert session.events == events.mask_bit(api.CREATE_CONTAINER)
        await finish(runtime, stub, task)

        runtime = FakeRuntime()
        await runtime.listen(tmp_path / "greedy.sock")
        greedy = Stub(
            Greedy(), name="g", index="11", socket_path=tmp_path / "greedy.sock", reconnect=False
        )
        await greedy.run()  # configure fails: the runtime drops the plugin and run() returns
        (session,) = runtime.all_sessions
        assert isinstance(session.error, RpcError) and "without handlers" in session.error.message
        await runtime.close()

    run(scenario())


def test_connecting_to_a_missing_socket_retries_until_stopped(tmp_path: Path) -> None:
    async def scenario() -> None:
        stub = Stub(
            Recorder(),
            name="x",
            index="10",
            socket_path=tmp_path / "none.sock",
            backoff_initial=0.01,
        )
        task = asyncio.create_task(stub.run())
        await asyncio.sleep(0.1)
        assert not task.done()
        stub.stop()
        await asyncio.wait_for(task, 2)

    run(scenario())


def test_unused_fds_are_not_leaked(tmp_path: Path) -> None:
    before = len(list(Path("/proc/self/fd").iterdir()))

    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Recorder())
        session.close()
        await runtime.next_session()
        await finish(runtime, stub, task)

    run(scenario())
    assert len(list(Path("/proc/self/fd").iterdir())) <= before


@pytest.mark.parametrize("index", ["10\n", "1\n0"])
def test_a_trailing_newline_does_not_pass_for_a_valid_index(
    index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NRI_PLUGIN_NAME", raising=False)
    monkeypatch.delenv("NRI_PLUGIN_IDX", raising=False)
    with pytest.raises(RegistrationError, match="invalid plugin index"):
        Stub(Recorder(), name="ok", index=index)


def test_a_synchronize_past_the_bound_closes_the_connection_before_it_grows(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        pods = [api.PodSandbox(id=f"p{i}", name=f"p{i}") for i in range(MAX_SYNC_OBJECTS + 1)]
        runtime = FakeRuntime(pods=pods, sync_chunk=5000)  # never finishes within the bound
        sock = tmp_path / "nri.sock"
        await runtime.listen(sock)
        stub = Stub(Recorder(), name="test", index="10", socket_path=sock, reconnect=False)
        task = asyncio.create_task(stub.run())
        await asyncio.wait_for(task, 10)  # the session ends: the stub closed the connection
        assert not stub.synchronized.is_set()
        assert (stub._sync_pods, stub._sync_containers) == ([], [])  # nothing held on to
        await runtime.close()

    run(scenario())


def test_a_flooding_connection_leaves_no_buffers_behind_for_the_garbage_collector(
    tmp_path: Path,
) -> None:
    # A 4 MiB frame of empty requests, three times. The stub drops each connection at the
    # first requests past the bound and reconnects; what that connection had received (the
    # frame, the buffers holding its undecoded rest) must be freed when it ends: the
    # collector of reference cycles may not run for a long while (koordlet grew by 32 MiB
    # per 16 MiB flood until it did).
    size = 4 << 20
    body = ttrpc.encode_message(1, ttrpc.TYPE_REQUEST, b"") * (size // ttrpc.HEADER.size)
    frame = mux.HEADER.pack(mux.PLUGIN_SERVICE_CONN, len(body)) + body
    held: list[int] = []

    async def scenario() -> None:
        runtime, stub, session, task = await start(tmp_path, Recorder())
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(3):
                session.send_raw(frame)
                await asyncio.wait_for(session.closed.wait(), 5)
                session = await runtime.next_session()
            held.append(tracemalloc.get_traced_memory()[0] - before)
        finally:
            tracemalloc.stop()
        await finish(runtime, stub, task)

    gc.disable()
    try:
        run(scenario())
    finally:
        gc.enable()
    assert held[0] < size  # before the fix: about 3 x 2 x 4 MiB
