"""The plugin stub: it owns the NRI connection so that a plugin is just an object with handlers.

A plugin is any object with some of these (async or plain) methods, named after NRI's events:

    configure(config, runtime_name, runtime_version) -> int | None   (events mask, or None)
    synchronize(pods, containers) -> list[ContainerUpdate] | None
    shutdown() -> None
    run_pod_sandbox(pod), stop_pod_sandbox(pod), remove_pod_sandbox(pod),
    post_update_pod_sandbox(pod) -> None
    update_pod_sandbox(pod, overhead_resources, resources) -> None
    create_container(pod, container) -> (ContainerAdjustment | None, list[ContainerUpdate]) | None
    update_container(pod, container, resources) -> list[ContainerUpdate] | None
    stop_container(pod, container) -> list[ContainerUpdate] | None
    post_create_container, start_container, post_start_container, post_update_container,
    remove_container (pod, container) -> None
    validate_container_adjustment(request) -> str | None   (a rejection reason, or None)

The stub derives the subscription from the methods present (capped to what the runtime
knows), registers, answers Configure and Synchronize (reassembling split synchronization),
dispatches events whether they come as per-event RPCs (NRI v0.12) or StateChange (older), and
in external mode reconnects the moment the runtime's socket is created again (inotify on its
folder), with an exponential backoff for a socket that stays but refuses. A handler that
raises fails the runtime operation; one that overruns its time budget is answered with "no
change" so that a slow rule never gets the plugin dropped by the runtime's request timeout.

Plain (synchronous) handlers run in the stub's own handler thread, one at a time and in the
order the runtime sent the events, so that the budget holds for them too: the event loop keeps
serving while a handler runs, and answers "no change" when the budget is spent. An abandoned
handler still runs to its end (Python cannot stop a thread), and the handlers queued behind it
wait for it, each within its own budget. Async handlers run on the event loop as before.

Usage::

    class Shares:
        async def create_container(self, pod, container):
            adjust = api.ContainerAdjustment()
            adjust.linux.resources.cpu.shares.value = 512
            return adjust, []

    await Stub(Shares(), name="shares", index="10").run()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import logging
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from nri_plugin import api, events, mux, status, ttrpc
from nri_plugin.errors import ConnectionClosed, NriError, RegistrationError, RpcError
from nri_plugin.sockwatch import SocketWatch

log = logging.getLogger(__name__)

RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"
PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
DEFAULT_SOCKET_PATH = Path("/var/run/nri/nri.sock")
ENV_PLUGIN_NAME = "NRI_PLUGIN_NAME"
ENV_PLUGIN_IDX = "NRI_PLUGIN_IDX"
ENV_PLUGIN_SOCKET = "NRI_PLUGIN_SOCKET"
NRI_VERSION = "v0.12.2"  # the newest API this stub speaks (sent in RegisterPlugin)
DEFAULT_REQUEST_TIMEOUT = 2.0  # the runtime's default when Configure does not say (NRI < 0.7)
REGISTER_TIMEOUT = 2.0
_INDEX = re.compile(r"^[0-9]{2}\Z")
_NAME = re.compile(r"^[a-zA-Z0-9_.+-]+\Z")

# Set while a handler runs: update_containers() from there would deadlock the runtime.
_in_handler: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "nri_handler", default=None
)

# (event or handler name, seconds, outcome: "ok" | "error" | "overrun")
OnHandled = Callable[[str, float, str], None]


def identity_from_env(argv0: str | None = None) -> tuple[str | None, str | None]:
    """Plugin name and index from NRI_PLUGIN_NAME/IDX, else from a binary named ``NN-name``."""
    name, index = os.environ.get(ENV_PLUGIN_NAME), os.environ.get(ENV_PLUGIN_IDX)
    if name and index:
        return name, index
    base = Path(argv0 if argv0 is not None else sys.argv[0]).name
    head, sep, tail = base.partition("-")
    if sep and _INDEX.match(head) and tail:
        return name or tail, index or head
    return name, index


def check_identity(name: str | None, index: str | None) -> tuple[str, str]:
    if not name or not _NAME.match(name):
        raise RegistrationError(f"invalid plugin name {name!r}: letters, digits and _.+- only")
    if not index or not _INDEX.match(index):
        raise RegistrationError(f"invalid plugin index {index!r}: two digits, 00..99")
    return name, index


# Pods and containers one chunked Synchronize may hold before its last chunk. A node runs at
# most a few hundred pods (the kubelet's default is 110); 100,000 objects were 200 MiB.
MAX_SYNC_OBJECTS = 20_000


def _log_abandoned(name: str, done: asyncio.Future[Any]) -> None:
    """The end of a handler whose wait was abandoned: its error is logged here, where it would
    otherwise be lost."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("NRI handler %s failed after its budget: %s", name, done.exception())


class Stub:
    """Connects a plugin object to the runtime; see the module docstring.

    ``socket_path`` is dialled in external mode (the default). When the runtime launched this
    process (NRI_PLUGIN_SOCKET names an inherited socket fd) that socket is used instead, and
    ``run`` returns when it closes. ``handler_budget`` caps each handler (seconds); by default
    it is a quarter of the runtime's request timeout: what its Configure says (NRI v0.7+), else
    ``request_timeout`` (default 2 s, containerd's; containerd 1.7 does not say).
    ``on_handled(name, seconds, outcome)`` reports each handler run ("ok", "error" or "overrun") and
    ``on_served(method, seconds)`` each whole RPC, from request decoding to reply written.
    """

    def __init__(
        self,
        plugin: object,
        *,
        name: str | None = None,
        index: str | None = None,
        socket_path: str | Path | None = None,
        handler_budget: float | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        reconnect: bool = True,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        on_handled: OnHandled | None = None,
        on_served: ttrpc.OnServed | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.plugin = plugin
        self.handled = events.handled_mask(plugin)
        if not self.handled and not callable(getattr(plugin, "synchronize", None)):
            raise NriError(f"{type(plugin).__name__} has no NRI event handler methods")
        env_name, env_index = identity_from_env()
        self.name, self.index = check_identity(name or env_name, index or env_index)
        self.socket_path = Path(socket_path) if socket_path else DEFAULT_SOCKET_PATH
        self.inherited_fd = os.environ.get(ENV_PLUGIN_SOCKET)
        self.reconnect = reconnect and self.inherited_fd is None
        self._budget_override = handler_budget
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.on_handled = on_handled
        self.on_served = on_served
        self.on_close = on_close
        self.runtime_name = ""
        self.runtime_version = ""
        self.nri_version = ""
        self._request_timeout_unsaid = request_timeout
        self.request_timeout = request_timeout  # each runtime's Configure may say otherwise
        self.events_mask = 0
        self.registrations = 0  # sessions that got through Configure
        self.overruns = 0  # handler runs answered with "no change" for overrunning the budget
        self.configured = asyncio.Event()
        self.synchronized = asyncio.Event()
        self._client: ttrpc.Client | None = None
        self._stop = asyncio.Event()
        self._watch: SocketWatch | None = None  # the socket's folder, while reconnecting
        self._connection: mux.Mux | None = None
        self._sync_pods: list[api.PodSandbox] = []
        self._sync_containers: list[api.Container] = []
        self._handler_thread: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def handler_budget(self) -> float:
        if self._budget_override is not None:
            return self._budget_override
        # A quarter: the answer leaves the handler thread, crosses the event loop and the socket
        # within the rest. No fixed cap: under a runtime given more time (a slow or emulated
        # machine) a cap would answer "no change" where the runtime would still have waited.
        return self.request_timeout / 4

    @property
    def connected(self) -> bool:
        return self._client is not None

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the runtime until ``stop`` (external mode) or until the socket closes."""
        if self.reconnect:
            self._watch = SocketWatch(self.socket_path)
        try:
            await self._serve()
        finally:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self._handler_thread is not None:
                self._handler_thread.shutdown(wait=False)
                self._handler_thread = None

    async def _serve(self) -> None:
        backoff = self.backoff_initial
        while not self._stop.is_set():
            started = time.monotonic()
            if self._watch is not None:  # from here on, a new socket wakes the wait below
                self._watch.start()
                self._watch.created.clear()
            connection = mux.Mux()
            server, client = self._wire(connection)  # before any byte can arrive
            try:
                await self._connect(connection)
            except OSError as err:
                if not self.reconnect:
                    raise ConnectionClosed(f"cannot use the NRI socket: {err}") from err
                log.warning(
                    "connect NRI socket %s failed: %s; retry in %.1fs",
                    self.socket_path,
                    err,
                    backoff,
                )
            else:
                try:
                    await self._session(connection, server, client)
                    log.info("NRI connection closed (plugin %s-%s)", self.index, self.name)
                except (NriError, OSError) as err:
                    log.warning(
                        "NRI connection ended (plugin %s-%s): %s", self.index, self.name, err
                    )
                if self.on_close is not None:
                    self.on_close()
                if time.monotonic() - started > 10 * backoff:
                    backoff = self.backoff_initial  # it ran for a while: start over
            if not self.reconnect or self._watch is None:
                return
            # The runtime's new socket ends the wait at once (a restart); the timer covers a
            # socket that stays but refuses, and a folder inotify cannot watch.
            await self._watch.wait(backoff)
            if self._watch.created.is_set() and not self._stop.is_set():
                backoff = self.backoff_initial
                log.info("NRI socket %s created: connecting", self.socket_path)
            else:
                backoff = min(backoff * 2, self.backoff_max)

    def stop(self) -> None:
        """Close the connection and stop reconnecting; ``run`` then returns."""
        self._stop.set()
        if self._watch is not None:
            self._watch.created.set()  # ends a wait for the socket
        if self._connection is not None:
            self._connection.close()

    async def _connect(self, connection: mux.Mux) -> None:
        loop = asyncio.get_running_loop()
        if self.inherited_fd is not None:
            sock = socket.socket(fileno=int(self.inherited_fd))
            self.inherited_fd = None  # the fd is consumed; a closed socket is the end
            await loop.create_unix_connection(lambda: connection, sock=sock)
        else:
            await loop.create_unix_connection(lambda: connection, str(self.socket_path))

    def _wire(self, connection: mux.Mux) -> tuple[ttrpc.Server, ttrpc.Client]:
        """Our Plugin service on connection 1, a Runtime client on connection 2."""
        server = ttrpc.Server(
            {PLUGIN_SERVICE: self._plugin_methods()},
            lambda message: connection.send(mux.PLUGIN_SERVICE_CONN, message),
            self.on_served,
        )
        client = ttrpc.Client(lambda message: connection.send(mux.RUNTIME_SERVICE_CONN, message))
        connection.register(mux.PLUGIN_SERVICE_CONN, server.feed)
        connection.register(mux.RUNTIME_SERVICE_CONN, client.feed)
        return server, client

    async def _session(
        self, connection: mux.Mux, server: ttrpc.Server, client: ttrpc.Client
    ) -> None:
        """One connection: register, then serve until it closes. Never two at once."""
        self._connection = connection
        self.configured.clear()
        self.synchronized.clear()
        self._sync_pods, self._sync_containers = [], []
        reading = asyncio.create_task(connection.run())
        ended: Exception = ConnectionClosed("session ended")
        try:
            request = api.RegisterPluginRequest(
                plugin_name=self.name, plugin_idx=self.index, NRI_version=NRI_VERSION
            )
            register = asyncio.create_task(
                client.call(
                    RUNTIME_SERVICE, "RegisterPlugin", request.SerializeToString(), REGISTER_TIMEOUT
                )
            )
            # Configure may arrive before RegisterPlugin's answer: the read path serves it.
            done, _ = await asyncio.wait({register, reading}, return_when=asyncio.FIRST_COMPLETED)
            if register in done:
                try:
                    register.result()
                except RpcError as err:
                    raise RegistrationError(f"RegisterPlugin refused: {err}") from err
                log.info("registered NRI plugin %s-%s", self.index, self.name)
                self._client = client
                await reading
            else:
                register.cancel()
                await reading  # re-raises a protocol error
                raise RegistrationError("runtime closed the connection during registration")
        except (NriError, OSError) as err:
            ended = err
            raise
        finally:
            self._client = self._connection = None
            client.close(ended)
            connection.close()
            if not reading.done():
                reading.cancel()
            await asyncio.wait({reading})  # its outcome was handled above; ours may be a cancel
            await server.close()

    # -- updates ------------------------------------------------------------------------------

    async def update_containers(
        self, updates: list[api.ContainerUpdate]
    ) -> list[api.ContainerUpdate]:
        """Send unsolicited updates; return the ones the runtime could not apply.

        Not from inside an event handler: the runtime holds its lock while it waits for the
        handler, so the call would block until the plugin is dropped. Return the updates from
        the handler instead.
        """
        handler = _in_handler.get()
        if handler is not None:
            raise NriError(
                f"update_containers() inside the {handler} handler would deadlock the runtime; "
                "return the updates from the handler instead"
            )
        client = self._client
        if client is None:
            raise ConnectionClosed("not connected to the runtime")
        request = api.UpdateContainersRequest(update=updates)
        payload = await client.call(
            RUNTIME_SERVICE, "UpdateContainers", request.SerializeToString(), self.request_timeout
        )
        response = api.UpdateContainersResponse()
        response.ParseFromString(payload)
        return list(response.failed)

    # -- serving the Plugin service -----------------------------------------------------------

    def _plugin_methods(self) -> dict[str, ttrpc.Handler]:
        methods: dict[str, ttrpc.Handler] = {
            "Configure": self._configure,
            "Synchronize": self._synchronize,
            "Shutdown": self._shutdown,
            "StateChange": self._state_change,
            "CreateContainer": self._create_container,
            "UpdateContainer": self._update_container,
            "StopContainer": self._stop_container,
            "UpdatePodSandbox": self._update_pod_sandbox,
            "ValidateContainerAdjustment": self._validate,
        }
        for spec in events.EVENTS:
            if spec.rpc not in methods and callable(getattr(self.plugin, spec.method, None)):
                methods[spec.rpc] = self._notify_rpc(spec)
        # A per-event RPC the plugin has no handler for is answered UNIMPLEMENTED (not in the
        # table), which makes a v0.12 runtime fall back to StateChange.
        return methods

    async def _call(self, name: str, *args: Any, budget: float | None = None) -> tuple[bool, Any]:
        """Run plugin method ``name`` within the time budget: (finished, result).

        (False, None) when it overran: the caller answers "no change". Exceptions propagate
        (as an error status to the runtime).
        """
        method = getattr(self.plugin, name)
        limit = self.handler_budget if budget is None else budget
        token = _in_handler.set(name)
        start = time.perf_counter()
        outcome = "ok"
        running: asyncio.Future[Any] | None = None  # a plain handler, in the handler thread
        try:
            # asyncio.timeout runs an async handler in this task (wait_for would start another).
            async with asyncio.timeout(limit):
                if inspect.iscoroutinefunction(method):
                    result = await method(*args)
                else:
                    running = self._in_thread(method, args)
                    # shielded: an overrun abandons the wait, never the handler (a plugin's own
                    # state, such as its record of a container, must not depend on its speed)
                    result = await asyncio.shield(running)
                    if inspect.isawaitable(result):
                        result = await result
            return True, result
        except TimeoutError:
            outcome = "overrun"
            self.overruns += 1
            log.warning(
                "NRI handler %s overran its %.3fs budget: answered with no change", name, limit
            )
            if running is not None:
                running.add_done_callback(lambda done: _log_abandoned(name, done))
            return False, None
        except Exception:
            outcome = "error"
            log.exception("NRI handler %s failed", name)
            raise
        finally:
            _in_handler.reset(token)
            if self.on_handled is not None:
                self.on_handled(name, time.perf_counter() - start, outcome)

    def _in_thread(self, method: Callable[..., Any], args: tuple[Any, ...]) -> asyncio.Future[Any]:
        """``method(*args)`` in the handler thread, after the handlers before it."""
        if self._handler_thread is None:
            self._handler_thread = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix=f"nri-{self.name}"
            )
        context = contextvars.copy_context()  # carries _in_handler into the thread
        return asyncio.get_running_loop().run_in_executor(
            self._handler_thread, context.run, method, *args
        )

    async def _configure(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.ConfigureRequest()
        request.ParseFromString(payload)
        self.runtime_name, self.runtime_version = request.runtime_name, request.runtime_version
        self.nri_version = request.NRI_version
        self.request_timeout = (
            request.request_timeout / 1000
            if request.request_timeout > 0
            else self._request_timeout_unsaid
        )
        valid = events.valid_events(request.NRI_version)
        mask = self.handled & valid
        if self.handled & ~valid:
            log.info(
                "runtime %s %s does not know events %s: not subscribing to them",
                request.runtime_name,
                request.runtime_version,
                events.names(self.handled & ~valid),
            )
        if callable(getattr(self.plugin, "configure", None)):
            _, chosen = await self._call(
                "configure", request.config, request.runtime_name, request.runtime_version
            )
            if chosen:
                if chosen & ~mask:
                    unhandled = events.names(chosen & ~mask)
                    raise RpcError(
                        status.INVALID_ARGUMENT,
                        f"configure subscribed to events without handlers: {unhandled}",
                    )
                mask = int(chosen)
        if not mask:
            # 0 would mean "everything" to the runtime, including events we cannot handle.
            raise RpcError(
                status.FAILED_PRECONDITION, "no events this runtime supports are handled"
            )
        self.events_mask = mask
        self.registrations += 1
        self.configured.set()
        log.info(
            "configured by %s %s (NRI %s): events %s",
            request.runtime_name,
            request.runtime_version,
            request.NRI_version or "<0.12",
            events.names(mask),
        )
        return api.ConfigureResponse(events=mask).SerializeToString()

    async def _synchronize(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.SynchronizeRequest()
        request.ParseFromString(payload)
        self._sync_pods.extend(request.pods)
        self._sync_containers.extend(request.containers)
        held = len(self._sync_pods) + len(self._sync_containers)
        if held > MAX_SYNC_OBJECTS:  # no node holds that many: a peer growing our memory
            self._sync_pods, self._sync_containers = [], []
            if self._connection is not None:
                self._connection.close()
            raise RpcError(
                status.RESOURCE_EXHAUSTED,
                f"Synchronize of {held} pods and containers, more than {MAX_SYNC_OBJECTS}",
            )
        if request.more:
            return api.SynchronizeResponse(more=True).SerializeToString()
        pods, containers = self._sync_pods, self._sync_containers
        self._sync_pods, self._sync_containers = [], []
        updates: list[api.ContainerUpdate] = []
        if callable(getattr(self.plugin, "synchronize", None)):
            _, result = await self._call("synchronize", pods, containers)
            updates = list(result or [])
        self.synchronized.set()
        return api.SynchronizeResponse(update=updates).SerializeToString()

    async def _shutdown(self, payload: bytes, remaining: float | None) -> bytes:
        if callable(getattr(self.plugin, "shutdown", None)):
            await self._call("shutdown")
        return b""

    async def _create_container(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.CreateContainerRequest()
        request.ParseFromString(payload)
        response = api.CreateContainerResponse()
        if callable(getattr(self.plugin, "create_container", None)):
            _, result = await self._call("create_container", request.pod, request.container)
            if result is not None:
                adjust, updates = result
                if adjust is not None:
                    response.adjust.CopyFrom(adjust)
                response.update.extend(updates or [])
        return response.SerializeToString()

    async def _update_container(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.UpdateContainerRequest()
        request.ParseFromString(payload)
        response = api.UpdateContainerResponse()
        if callable(getattr(self.plugin, "update_container", None)):
            _, updates = await self._call(
                "update_container", request.pod, request.container, request.linux_resources
            )
            response.update.extend(updates or [])
        return response.SerializeToString()

    async def _stop_container(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.StopContainerRequest()
        request.ParseFromString(payload)
        response = api.StopContainerResponse()
        if callable(getattr(self.plugin, "stop_container", None)):
            _, updates = await self._call("stop_container", request.pod, request.container)
            response.update.extend(updates or [])
        return response.SerializeToString()

    async def _update_pod_sandbox(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.UpdatePodSandboxRequest()
        request.ParseFromString(payload)
        if callable(getattr(self.plugin, "update_pod_sandbox", None)):
            await self._call(
                "update_pod_sandbox",
                request.pod,
                request.overhead_linux_resources,
                request.linux_resources,
            )
        return b""

    async def _validate(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.ValidateContainerAdjustmentRequest()
        request.ParseFromString(payload)
        response = api.ValidateContainerAdjustmentResponse()
        if callable(getattr(self.plugin, "validate_container_adjustment", None)):
            _, reason = await self._call("validate_container_adjustment", request)
            if reason:
                response.reject, response.reason = True, str(reason)
        return response.SerializeToString()

    async def _state_change(self, payload: bytes, remaining: float | None) -> bytes:
        request = api.StateChangeEvent()
        request.ParseFromString(payload)
        spec = events.BY_EVENT.get(request.event)
        if spec is not None and callable(getattr(self.plugin, spec.method, None)):
            args = (request.pod, request.container) if spec.with_container else (request.pod,)
            await self._call(spec.method, *args)
        return b""

    def _notify_rpc(self, spec: events.EventSpec) -> ttrpc.Handler:
        """A handler for a v0.12 per-event RPC whose reply is empty."""
        request_type = getattr(api, f"{spec.rpc}Request")

        async def handle(payload: bytes, remaining: float | None) -> bytes:
            request: Message = request_type()
            request.ParseFromString(payload)
            pod = getattr(request, "pod")  # noqa: B009 - every per-event request has it
            args = (pod, getattr(request, "container")) if spec.with_container else (pod,)  # noqa: B009
            await self._call(spec.method, *args)
            return b""

        return handle
