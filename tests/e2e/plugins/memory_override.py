"""An NRI plugin for the e2e suite that gives BE containers a memory limit of its own.

NRI refuses two plugins adjusting the same field of one CreateContainer (the container then
fails to create), so this plugin does what such a plugin can still do: when a container of a
pod labelled ``koordinator.sh/qosClass: BE`` has been created (PostCreateContainer), its worker
sends an unsolicited UpdateContainers with this plugin's limit, and the container starts with
it instead of the limit an earlier plugin (koordlet) asked for.

The handler only queues the container: the update must not be sent from inside a handler
(the runtime holds its lock until the handler answers), so ``run(stub)`` sends it, started on
the plugin's loop from outside any handler::

    override = MemoryOverride(256 << 20)
    with PluginThread(override, name="memory-override", index="20", socket_path=...) as running:
        asyncio.run_coroutine_threadsafe(override.run(running.stub), running.loop)
        ...
        failed = override.wait_overridden(container_id)   # [] once applied
"""

from __future__ import annotations

import asyncio
import threading

from koordapi import keys
from nri_plugin import Stub, api
from tests.e2e.harness.timing import scaled


class MemoryOverride:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.queue: asyncio.Queue[str] = asyncio.Queue()  # bound to the plugin's loop on use
        self.results: dict[str, list[str]] = {}  # container id → ids the runtime refused
        self._changed = threading.Condition()

    def post_create_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        if pod.labels.get(keys.LABEL_QOS_CLASS) == "BE":
            self.queue.put_nowait(container.id)

    async def run(self, stub: Stub) -> None:
        """Send each queued container its update, one at a time, until cancelled."""
        while True:
            container_id = await self.queue.get()
            update = api.ContainerUpdate(container_id=container_id)
            update.linux.resources.memory.limit.value = self.limit
            failed = await stub.update_containers([update])
            with self._changed:
                self.results[container_id] = [u.container_id for u in failed]
                self._changed.notify_all()

    def wait_overridden(self, container_id: str, timeout: float = 10) -> list[str]:
        """Wait until the update for ``container_id`` was answered; the ids it failed for."""
        with self._changed:
            if not self._changed.wait_for(lambda: container_id in self.results, scaled(timeout)):
                raise TimeoutError(f"no memory override sent for {container_id} in {timeout}s")
            return self.results[container_id]
