"""A diagnostic NRI plugin: every message the runtime sends, as one JSON object per line.

It handles every event (so it subscribes to all the runtime supports) and changes nothing: it
answers with no adjustment and no update. ``koordctl nri-events`` runs it; it is also the
smallest complete example of a plugin with every handler.

Each line has the handler name under "event" ("configure", "synchronize", "create_container",
...), the pod (id, name, namespace, uid) and the container (id, name, state) where the event has
them; "synchronize" lists all pods and containers, "update_container" adds the new resources.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from google.protobuf.json_format import MessageToDict

from nri_plugin import api


def pod_summary(pod: api.PodSandbox) -> dict[str, str]:
    return {"id": pod.id, "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}


def container_summary(container: api.Container) -> dict[str, str]:
    return {
        "id": container.id,
        "name": container.name,
        "pod_sandbox_id": container.pod_sandbox_id,
        "state": api.ContainerState.Name(container.state),
    }


class EventLog:
    """Writes each NRI message to ``out`` as a JSON line; see the module docstring."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.count = 0

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "time": round(time.time(), 6), **fields}
        self.out.write(json.dumps(record, sort_keys=False) + "\n")
        self.out.flush()
        self.count += 1

    def configure(self, config: str, runtime_name: str, runtime_version: str) -> None:
        self.emit(
            "configure", runtime_name=runtime_name, runtime_version=runtime_version, config=config
        )

    def synchronize(self, pods: list[api.PodSandbox], containers: list[api.Container]) -> None:
        self.emit(
            "synchronize",
            pods=[pod_summary(p) for p in pods],
            containers=[container_summary(c) for c in containers],
        )

    def shutdown(self) -> None:
        self.emit("shutdown")

    def _pod_event(self, event: str, pod: api.PodSandbox) -> None:
        self.emit(event, pod=pod_summary(pod))

    def _container_event(self, event: str, pod: api.PodSandbox, container: api.Container) -> None:
        self.emit(event, pod=pod_summary(pod), container=container_summary(container))

    def run_pod_sandbox(self, pod: api.PodSandbox) -> None:
        self._pod_event("run_pod_sandbox", pod)

    def stop_pod_sandbox(self, pod: api.PodSandbox) -> None:
        self._pod_event("stop_pod_sandbox", pod)

    def remove_pod_sandbox(self, pod: api.PodSandbox) -> None:
        self._pod_event("remove_pod_sandbox", pod)

    def post_update_pod_sandbox(self, pod: api.PodSandbox) -> None:
        self._pod_event("post_update_pod_sandbox", pod)

    def update_pod_sandbox(
        self, pod: api.PodSandbox, overhead: api.LinuxResources, resources: api.LinuxResources
    ) -> None:
        self.emit("update_pod_sandbox", pod=pod_summary(pod), resources=MessageToDict(resources))

    def create_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("create_container", pod, container)

    def post_create_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("post_create_container", pod, container)

    def start_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("start_container", pod, container)

    def post_start_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("post_start_container", pod, container)

    def update_container(
        self, pod: api.PodSandbox, container: api.Container, resources: api.LinuxResources
    ) -> None:
        self.emit(
            "update_container",
            pod=pod_summary(pod),
            container=container_summary(container),
            resources=MessageToDict(resources),
        )

    def post_update_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("post_update_container", pod, container)

    def stop_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("stop_container", pod, container)

    def remove_container(self, pod: api.PodSandbox, container: api.Container) -> None:
        self._container_event("remove_container", pod, container)

    def validate_container_adjustment(
        self, request: api.ValidateContainerAdjustmentRequest
    ) -> None:
        self._container_event("validate_container_adjustment", request.pod, request.container)
