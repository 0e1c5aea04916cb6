"""The NVIDIA device nodes of this node, as GPU env inject adds them to a container.

Under koordlet's dev root (``--dev-root-dir``, /dev) the character devices ``nvidia<minor>``
(one per GPU, NVIDIA's major 195) and the control nodes ``nvidiactl``, ``nvidia-uvm`` and
``nvidia-uvm-tools`` (those that exist; nvidia-uvm's major is dynamic), each with the major,
minor and permission bits of a stat of the node: the nodes the NVIDIA container toolkit gives a
container with those GPUs. The container sees them at /dev/..., whatever the dev root is.

Nodes appear when the driver loads (nvidia-uvm when a CUDA program first needs it), so the
reader looks again once its last look is ``max_age`` seconds old; koordlet asks when it builds
the hooks' snapshot.

Usage::

    nodes = NvidiaDeviceNodes(Path("/dev"))
    found = nodes.current()      # NvidiaNodes(gpus={0: Device("/dev/nvidia0", "c", 195, 0)}, ...)
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runtimehooks.patch import Device

DEV = "/dev"  # where the container sees the nodes, whatever the dev root is
NVIDIA_MAJOR = 195  # the NVIDIA driver's character major (nvidia<minor>, nvidiactl 255)
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
_GPU_NODE = re.compile(r"^nvidia(\d+)\Z")


@dataclass(frozen=True)
class NvidiaNodes:
    """GPU minor → its /dev/nvidia<minor>, and the control nodes present, in CONTROL_NODES order."""

    gpus: Mapping[int, Device] = field(default_factory=dict)
    control: tuple[Device, ...] = ()


def _char_device(path: Path, name: str) -> Device | None:
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    return Device(f"{DEV}/{name}", "c", major, minor, stat.S_IMODE(st.st_mode))


def nvidia_nodes(dev_root: Path = Path(DEV)) -> NvidiaNodes:
    """What the dev root holds now (an unreadable or missing root: nothing)."""
    gpus: dict[int, Device] = {}
    try:
        names = sorted(entry.name for entry in os.scandir(dev_root))
    except OSError:
        names = []
    for name in names:
        match = _GPU_NODE.match(name)
        if match is None:
            continue
        device = _char_device(dev_root / name, name)
        if device is not None:
            gpus[int(match.group(1))] = device
    control = (_char_device(dev_root / name, name) for name in CONTROL_NODES)
    return NvidiaNodes(
        gpus=dict(sorted(gpus.items())), control=tuple(d for d in control if d is not None)
    )


class NvidiaDeviceNodes:
    """``nvidia_nodes(dev_root)``, read again once the last read is ``max_age`` seconds old."""

    def __init__(
        self,
        dev_root: Path = Path(DEV),
        *,
        max_age: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dev_root = dev_root
        self.max_age = max_age
        self.clock = clock
        self._found = NvidiaNodes()
        self._read_at: float | None = None

    def current(self) -> NvidiaNodes:
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.max_age:
            found = nvidia_nodes(self.dev_root)
            if found != self._found:
                self._found = found  # unchanged: the same object, so the snapshot stays
            self._read_at = now
        return self._found
