"""The NodeSLO file of standalone mode: Koordinator's NodeSLO spec plus the node's inputs.

The file is YAML or JSON, either a NodeSLO object (``kind: NodeSLO``, ``spec: ...``) or a bare
spec, optionally with a ``node`` section holding what Koordinator reads from the Node object:
``annotations`` (``node.koordinator.sh/cpu-normalization-ratio``, ``.../reservation``,
``.../system-qos-resource``, ``kubelet.koordinator.sh/cpu-manager-policy``), ``labels`` and
``allocatable`` (the Node's status.allocatable: ``cpu``, ``memory``,
``kubernetes.io/batch-cpu``, ... as quantities; without it the node's capacity is used).
It is re-read when it changes; invalid content keeps the last good configuration.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from koordapi import annotation, keys
from koordapi.errors import ModelError, NodeSLOError
from koordapi.nodeslo import NodeSLOSpec
from koordapi.quantity import milli_value, value

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 1 << 20
NODE_ANNOTATION_PARSERS = {
    keys.ANNOTATION_CPU_NORMALIZATION_RATIO: annotation.parse_cpu_normalization_ratio,
    keys.ANNOTATION_NODE_RESERVATION: annotation.parse_node_reservation,
    keys.ANNOTATION_SYSTEM_QOS_RESOURCE: annotation.parse_system_qos_resource,
    keys.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: annotation.parse_kubelet_cpu_manager_policy,
}


@dataclass(frozen=True)
class NodeConfig:
    spec: NodeSLOSpec = field(default_factory=NodeSLOSpec)
    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    # cpu in milli-cores, batch-cpu and mid-cpu as given (milli-cores), the rest in units.
    allocatable: Mapping[str, int] = field(default_factory=dict)

    def parsed(self, key: str) -> Any:
        """A known node annotation, parsed (None when absent)."""
        text = self.annotations.get(key)
        return None if text is None else NODE_ANNOTATION_PARSERS[key](text)


def parse_node_config(text: str) -> NodeConfig:
    """Parse the file's text; raises ModelError with the path of what is wrong."""
    if len(text) > MAX_FILE_BYTES:
        raise NodeSLOError("file", f"{len(text)} bytes is more than {MAX_FILE_BYTES}")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise NodeSLOError("file", f"not valid YAML or JSON: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise NodeSLOError("file", f"must be an object, got {type(data).__name__}")
    node = data.pop("node", None) or {}
    if not isinstance(node, dict):
        raise NodeSLOError("node", "must be an object with annotations and labels")
    spec_data = data.get("spec", {}) if data.get("kind") == "NodeSLO" or "spec" in data else data
    return build_node_config(
        spec_data, node.get("annotations"), node.get("labels"), node.get("allocatable")
    )


def build_node_config(
    spec: object, annotations: object, labels: object, allocatable: object
) -> NodeConfig:
    """A NodeConfig from a NodeSLO spec and the Node's inputs; raises ModelError naming the
    bad field. The file and the API source both come through here."""
    if spec is not None and not isinstance(spec, dict):
        raise NodeSLOError("spec", f"must be an object, got {type(spec).__name__}")
    config = NodeConfig(
        NodeSLOSpec.parse(spec),
        _strings("node.annotations", annotations),
        _strings("node.labels", labels),
        parse_resources(allocatable),
    )
    for key in NODE_ANNOTATION_PARSERS:
        config.parsed(key)  # validate now, so a bad value never becomes the live config
    return config


def _strings(where: str, data: object) -> dict[str, str]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise NodeSLOError(where, "must be an object of strings")
    return {str(k): str(v) for k, v in data.items()}


def parse_resources(data: object) -> dict[str, int]:
    """A resource list ({"cpu": "8", "memory": "16Gi"}): cpu in milli-cores, others rounded up."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise NodeSLOError("node.allocatable", "must be an object of resource quantities")
    resources = {}
    for name, amount in data.items():
        try:
            resources[str(name)] = milli_value(amount) if name == "cpu" else value(amount)
        except ModelError as err:
            raise NodeSLOError(f"node.allocatable.{name}", str(err)) from None
        if resources[str(name)] < 0:
            raise NodeSLOError(f"node.allocatable.{name}", "must not be negative")
    return resources


def read_config_text(path: Path) -> str:
    """The file's text, refused (NodeSLOError) unless it is a regular file (a symlink to one,
    as a ConfigMap mount has, is fine) of at most MAX_FILE_BYTES, not empty (a writer may be
    between truncating and writing) and UTF-8."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NodeSLOError("file", "not a regular file")
        data = b""
        while len(data) <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise NodeSLOError("file", f"more than {MAX_FILE_BYTES} bytes")
    if not data.strip():
        raise NodeSLOError("file", "empty (being rewritten?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NodeSLOError("file", f"not UTF-8 (byte {err.start})") from None


class NodeConfigFile:
    """Loads ``path`` and re-loads it when it changes; ``current`` is the last good config."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.current = NodeConfig()
        self.error: str | None = None  # why the file's content is not in use
        self.loads = 0
        self._seen: tuple[int, int, int] | None = None

    def reload_if_changed(self) -> bool:
        """Re-read the file if its identity or size or mtime changed; True if config changed."""
        if self.path is None:
            return False
        try:
            st = self.path.stat()
        except FileNotFoundError:
            if self._seen is not None or self.error is None:
                self.error = f"{self.path} does not exist: using the last good NodeSLO"
                log.warning("node config: %s", self.error)
                self._seen = None
            return False
        except OSError as err:
            self.error = f"cannot stat {self.path}: {err.strerror}"
            return False
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return False
        self._seen = seen
        try:
            config = parse_node_config(read_config_text(self.path))
        except (OSError, ModelError) as err:
            self.error = f"{self.path}: {err.strerror if isinstance(err, OSError) else err}"
            log.warning("node config not loaded, keeping the last good one: %s", self.error)
            return False
        self.error = None
        for unknown in config.spec.unknown_keys:
            log.info("node config: ignoring unknown key %s", unknown)
        changed = config != self.current
        self.current = config
        self.loads += 1
        log.info("node config loaded from %s", self.path)
        return changed
