"""The device nodes koordlet reads under its dev root, and what the hooks get of them.

The dev tree is the test's own: character devices made with mknod in tmp_path (root only).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from koordapi import keys
from koordapi.features import FeatureGates
from koordlet.config import Config
from koordlet.daemon import Koordlet
from koordlet.states.devnodes import NvidiaDeviceNodes, NvidiaNodes, nvidia_nodes
from runtimehooks.hooks import gpu
from runtimehooks.patch import Device
from runtimehooks.request import Stage
from runtimehooks.rules import NodeState, Rules
from tests.unit.runtimehooks.builders import container, pod

NVIDIA0 = Device("/dev/nvidia0", "c", 195, 0)
NVIDIA1 = Device("/dev/nvidia1", "c", 195, 1)
NVIDIACTL = Device("/dev/nvidiactl", "c", 195, 255)
NVIDIA_UVM = Device("/dev/nvidia-uvm", "c", 508, 0)
NVIDIA_UVM_TOOLS = Device("/dev/nvidia-uvm-tools", "c", 508, 1, 0o660)


def char_device(root: Path, name: str, major: int, minor: int, mode: int = 0o666) -> None:
    path = root / name
    os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
    path.chmod(mode)  # whatever the umask took away


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    """Two GPUs, nvidiactl and nvidia-uvm, and what must not count: nvidia-modeset, the
    nvidia-caps folder, a regular file and a block device named like GPUs."""
    if os.geteuid() != 0:
        pytest.skip("mknod of character devices needs root")
    root = tmp_path / "dev"
    root.mkdir()
    char_device(root, "nvidia0", 195, 0)
    char_device(root, "nvidia1", 195, 1)
    char_device(root, "nvidiactl", 195, 255)
    char_device(root, "nvidia-uvm", 508, 0)
    char_device(root, "nvidia-modeset", 195, 254)
    (root / "nvidia-caps").mkdir()
    (root / "nvidia2").write_text("not a device\n")
    os.mknod(root / "nvidia3", stat.S_IFBLK | 0o660, os.makedev(8, 0))
    char_device(root, "null", 1, 3)
    return root


def test_gpus_and_control_nodes_with_their_numbers(dev: Path) -> None:
    assert nvidia_nodes(dev) == NvidiaNodes(
        gpus={0: NVIDIA0, 1: NVIDIA1}, control=(NVIDIACTL, NVIDIA_UVM)
    )


def test_control_nodes_in_toolkit_order_with_the_hosts_mode(dev: Path) -> None:
    char_device(dev, "nvidia-uvm-tools", 508, 1, 0o660)
    assert nvidia_nodes(dev).control == (NVIDIACTL, NVIDIA_UVM, NVIDIA_UVM_TOOLS)


def test_gpu_minors_sort_numerically(dev: Path) -> None:
    char_device(dev, "nvidia10", 195, 10)
    assert list(nvidia_nodes(dev).gpus) == [0, 1, 10]


def test_a_missing_dev_root_is_no_node(tmp_path: Path) -> None:
    assert nvidia_nodes(tmp_path / "absent") == NvidiaNodes()
    assert nvidia_nodes(tmp_path) == NvidiaNodes()


def test_the_reader_looks_again_only_after_max_age(dev: Path) -> None:
    now = [100.0]
    reader = NvidiaDeviceNodes(dev, max_age=1.0, clock=lambda: now[0])
    first = reader.current()
    char_device(dev, "nvidia-uvm-tools", 508, 1, 0o660)
    now[0] += 0.5
    assert reader.current() is first  # not read again yet
    now[0] += 0.5
    assert reader.current().control[-1] == NVIDIA_UVM_TOOLS
    now[0] += 1
    again = reader.current()
    now[0] += 1
    assert reader.current() is again  # unchanged: the same object (the snapshot stays)


def test_the_hook_adds_the_nodes_koordlet_read(dev: Path) -> None:
    """nvidia_nodes → the node state → GPU env inject, as koordlet wires them."""
    found = nvidia_nodes(dev)
    rules = Rules(node=NodeState(nvidia_gpus=found.gpus, nvidia_control=found.control))
    text = json.dumps({"gpu": [{"minor": 1, "resources": {keys.GPU_CORE: 100}}]})
    owner = pod("LS", annotations={keys.ANNOTATION_DEVICE_ALLOCATED: text})
    patch = gpu.container(container(owner), rules, Stage.PRE_CREATE_CONTAINER)
    assert patch is not None
    assert patch.devices == (NVIDIA1, NVIDIACTL, NVIDIA_UVM)


def config(tmp_path: Path, dev_root: Path, gates: str) -> Config:
    (tmp_path / "nodeslo.yaml").write_text("")
    return Config(
        node_name="unit-node",
        cgroup_root=tmp_path / "cgroup",
        var_run_root=tmp_path / "run",
        resctrl_root=tmp_path / "resctrl",
        dev_root=dev_root,
        node_slo_file=tmp_path / "nodeslo.yaml",
        metrics_addr="",
        tsdb_path=None,
        node_metric_file=None,
        feature_gates=FeatureGates.parse(f"SchedLatencyCollector=false,{gates}"),
    )


def test_koordlet_puts_the_dev_roots_nodes_in_the_hooks_snapshot(dev: Path, tmp_path: Path) -> None:
    base = config(tmp_path, dev, "GPUEnvInject=true")
    node = Koordlet(base).rules().node
    assert (dict(node.nvidia_gpus), node.nvidia_control) == (
        {0: NVIDIA0, 1: NVIDIA1},
        (NVIDIACTL, NVIDIA_UVM),
    )
    off = replace(base, feature_gates=FeatureGates.parse("SchedLatencyCollector=false"))
    assert Koordlet(off).rules().node.nvidia_gpus == {}  # the gate off: /dev is not read


def test_koordlet_puts_the_rdma_collectors_nodes_in_the_hooks_snapshot(tmp_path: Path) -> None:
    daemon = Koordlet(config(tmp_path, tmp_path / "dev", "RDMADevices=true"))
    assert daemon.rdma is not None
    assert daemon.rdma.dev_root == tmp_path / "dev"
    assert daemon.rules().node.rdma_verbs == {}
    uverbs = Device("/dev/infiniband/uverbs0", "c", 231, 192)
    rdma_cm = Device("/dev/infiniband/rdma_cm", "c", 10, 58)
    daemon.rdma.verbs_devices = {"0000:3b:00.0": (uverbs,)}  # what a collect pass found
    daemon.rdma.rdma_cm = rdma_cm
    node = daemon.rules().node
    assert (dict(node.rdma_verbs), node.rdma_cm) == ({"0000:3b:00.0": (uverbs,)}, rdma_cm)
