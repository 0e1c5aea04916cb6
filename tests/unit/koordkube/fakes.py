"""Shared helpers for the kube I/O tests: an asyncio runner, polling, a manual clock, objects."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def eventually(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    """Poll until ``predicate()`` holds; fail the test after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.005)


async def settle(seconds: float = 0.05) -> None:
    await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told: ``monotonic`` for expiry, ``now`` for MicroTimes."""

    def __init__(self) -> None:
        self.offset = 0.0

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def monotonic(self) -> float:
        return 1000.0 + self.offset

    def now(self) -> datetime:
        # Wall time moves on so successive renewals write different renewTimes, as live.
        return datetime.now(UTC) + timedelta(seconds=self.offset)


def node(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    if labels:
        obj["metadata"]["labels"] = labels
    obj.update(extra)
    return obj


def pod(
    name: str, namespace: str = "default", node_name: str | None = None, **extra: Any
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    if node_name:
        obj["spec"]["nodeName"] = node_name
    obj.update(extra)
    return obj


def write_kubeconfig(path: Path, server: str = "https://10.0.0.1:6443") -> Path:
    """A kubeconfig with one context, "dev", on ``server`` with a bearer token."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "dev",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    return path
