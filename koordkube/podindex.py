"""Pods by the node they are bound to, kept up to date from a pod informer's events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordkube.resources import object_key

Object = Mapping[str, Any]


class PodsByNode:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Object]] = {}
        self._node_of: dict[str, str] = {}

    def apply(self, event: str, pod: Object) -> tuple[str | None, str | None]:
        """Index one informer event; (the node the pod was on before, the node it is on now),
        either None when there is none (unbound, or deleted)."""
        key = object_key(pod)
        old = self._node_of.pop(key, None)
        if old is not None:
            self._by_node.get(old, {}).pop(key, None)
        node = (pod.get("spec") or {}).get("nodeName")
        if event == "DELETED" or not node:
            return old, None
        self._node_of[key] = node
        self._by_node.setdefault(node, {})[key] = pod
        return old, node

    def on(self, node: str) -> Mapping[str, Object]:
        """The pods on ``node`` by key (namespace/name); empty for a node with none."""
        return self._by_node.get(node, {})

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)
