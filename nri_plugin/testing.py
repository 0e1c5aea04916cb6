"""A fake NRI runtime for testing plugins: the runtime side of the real wire protocol.

It listens on a Unix socket (or hands out one end of a socket pair, as a runtime launching a
pre-installed plugin does), speaks the same mux and ttrpc as containerd, and runs containerd's
handshake: RegisterPlugin, then Configure, then Synchronize (optionally split into chunks, as
NRI v0.7+ runtimes do). Tests then drive events through the session.

Usage::

    runtime = FakeRuntime(pods=[pod])
    await runtime.listen(tmp_path / "nri.sock")
    task = asyncio.create_task(Stub(plugin, name="p", index="10",
                                    socket_path=tmp_path / "nri.sock").run())
    session = await runtime.next_session()
    reply = await session.create_container(pod, container)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message

from nri_plugin import api, mux, ttrpc
from nri_plugin.errors import NriError
from nri_plugin.stub import PLUGIN_SERVICE, RUNTIME_SERVICE

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)


class PluginSession:
    """One connected plugin, seen from the runtime."""

    def __init__(self, runtime: FakeRuntime, connection: mux.Mux) -> None:
        self.runtime = runtime
        self.connection = connection
        self.client = ttrpc.Client(lambda m: self.connection.send(mux.PLUGIN_SERVICE_CONN, m))
        self.server = ttrpc.Server(
            {
                RUNTIME_SERVICE: {
                    "RegisterPlugin": self._register_plugin,
                    "UpdateContainers": self._update_containers,
                }
            },
            lambda m: self.connection.send(mux.RUNTIME_SERVICE_CONN, m),
        )
        self.connection.register(mux.PLUGIN_SERVICE_CONN, self.client.feed)
        self.connection.register(mux.RUNTIME_SERVICE_CONN, self.server.feed)
        self.registration: api.RegisterPluginRequest | None = None
        self.configure_response: api.ConfigureResponse | None = None
        self.sync_requests: list[api.SynchronizeRequest] = []
        self.sync_responses: list[api.SynchronizeResponse] = []
        self.error: Exception | None = None  # why the handshake failed, if it did
        self.closed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._spawn(self._read())

    @property
    def events(self) -> int:
        """The plugin's subscription mask from its Configure reply."""
        return self.configure_response.events if self.configure_response else 0

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self) -> None:
        try:
            await self.connection.run()
        except NriError as err:
            self.error = self.error or err
        finally:
            self.client.close(NriError("plugin connection closed"))
            self.closed.set()

    async def _register_plugin(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.RegisterPluginRequest()
        request.ParseFromString(payload)
        self.registration = request
        self.runtime.registrations.append(request)
        # containerd sends Configure from another goroutine, possibly before this reply.
        self._spawn(self._handshake())
        return b""

    async def _handshake(self) -> None:
        rt = self.runtime
        try:
            self.configure_response = await self.call(
                "Configure",
                api.ConfigureRequest(
                    config=rt.config,
                    runtime_name=rt.runtime_name,
                    runtime_version=rt.runtime_version,
                    NRI_version=rt.nri_version,
                    request_timeout=int(rt.request_timeout * 1000) if rt.nri_version else 0,
                ),
                api.ConfigureResponse,
            )
            if self.events & ~rt.valid_events or self.events == 0:
                raise NriError(f"invalid plugin events: {self.events:#x}")
            if rt.synchronize:
                await self._synchronize()
        except Exception as err:  # what containerd would log before dropping the plugin
            self.error = err
            self.close()
            return
        await rt.sessions.put(self)

    async def _synchronize(self) -> None:
        rt = self.runtime
        pods, containers = list(rt.pods), list(rt.containers)
        chunk = rt.sync_chunk or max(1, len(pods) + len(containers))
        while True:
            part_pods, pods = pods[:chunk], pods[chunk:]
            part_containers, containers = (
                containers[: chunk - len(part_pods)],
                containers[chunk - len(part_pods) :],
            )
            more = bool(pods or containers)
            request = api.SynchronizeRequest(pods=part_pods, containers=part_containers, more=more)
            self.sync_requests.append(request)
            response = await self.call("Synchronize", request, api.SynchronizeResponse)
            self.sync_responses.append(response)
            if response.more != more or (more and response.update):
                raise NriError("plugin does not handle split sync requests")
            if not more:
                return

    async def _update_containers(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.UpdateContainersRequest()
        request.ParseFromString(payload)
        self.runtime.updates.extend(request.update)
        failed = [u for u in request.update if u.container_id in self.runtime.failing_containers]
        return api.UpdateContainersResponse(failed=failed).SerializeToString()

    async def call(
        self, method: str, request: Message, response_type: type[M], timeout: float | None = None
    ) -> M:
        """Call a Plugin service method and decode its reply."""
        payload = await self.client.call(
            PLUGIN_SERVICE,
            method,
            request.SerializeToString(),
            timeout or self.runtime.request_timeout,
        )
        response = response_type()
        response.ParseFromString(payload)
        return response

    async def create_container(
        self, pod: api.PodSandbox, container: api.Container
    ) -> api.CreateContainerResponse:
        return await self.call(
            "CreateContainer",
            api.CreateContainerRequest(pod=pod, container=container),
            api.CreateContainerResponse,
        )

    async def update_container(
        self, pod: api.PodSandbox, container: api.Container, resources: api.LinuxResources
    ) -> api.UpdateContainerResponse:
        request = api.UpdateContainerRequest(
            pod=pod, container=container, linux_resources=resources
        )
        return await self.call("UpdateContainer", request, api.UpdateContainerResponse)

    async def state_change(
        self, event: api.Event, pod: api.PodSandbox, container: api.Container | None = None
    ) -> None:
        request = api.StateChangeEvent(event=event, pod=pod)
        if container is not None:
            request.container.CopyFrom(container)
        await self.call("StateChange", request, api.Empty)

    def send_raw(self, data: bytes) -> None:
        """Write bytes to the socket as they are, bypassing the mux (for bad-input tests)."""
        self.connection.send_raw(data)

    def close(self) -> None:
        self.connection.close()

    async def aclose(self) -> None:
        self.close()
        await self.closed.wait()
        await self.server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class FakeRuntime:
    """The runtime end of NRI connections; see the module docstring."""

    def __init__(
        self,
        *,
        pods: list[api.PodSandbox] | None = None,
        containers: list[api.Container] | None = None,
        runtime_name: str = "fake-runtime",
        runtime_version: str = "1.7.24",
        nri_version: str = "",
        request_timeout: float = 2.0,
        config: str = "",
        sync_chunk: int = 0,
        synchronize: bool = True,
        valid_events: int = 0x07FF,
    ) -> None:
        self.pods = pods or []
        self.containers = containers or []
        self.runtime_name = runtime_name
        self.runtime_version = runtime_version
        self.nri_version = nri_version
        self.request_timeout = request_timeout
        self.config = config
        self.sync_chunk = sync_chunk
        self.synchronize = synchronize
        self.valid_events = valid_events
        self.registrations: list[api.RegisterPluginRequest] = []
        self.updates: list[api.ContainerUpdate] = []
        self.failing_containers: set[str] = set()
        self.sessions: asyncio.Queue[PluginSession] = asyncio.Queue()
        self.all_sessions: list[PluginSession] = []
        self._server: asyncio.Server | None = None

    async def listen(self, path: Path) -> None:
        """Accept plugins on a Unix socket at ``path``."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(self._accept, path=str(path))

    def stop_listening(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def _accept(self) -> mux.Mux:
        session = PluginSession(self, mux.Mux())  # receivers in place before any byte arrives
        self.all_sessions.append(session)
        return session.connection

    async def adopt(self, sock: socket.socket) -> PluginSession:
        """Serve a plugin on our end of a socket pair (a pre-installed plugin's fd 3)."""
        session = PluginSession(self, mux.Mux())
        await asyncio.get_running_loop().create_unix_connection(
            lambda: session.connection, sock=sock
        )
        self.all_sessions.append(session)
        return session

    async def next_session(self, timeout: float = 5.0) -> PluginSession:
        """The next plugin that got through registration, configuration and synchronization."""
        return await asyncio.wait_for(self.sessions.get(), timeout)

    def live_sessions(self) -> list[PluginSession]:
        return [s for s in self.all_sessions if not s.closed.is_set()]

    async def close(self) -> None:
        self.stop_listening()
        for session in self.all_sessions:
            with contextlib.suppress(Exception):
                await session.aclose()
