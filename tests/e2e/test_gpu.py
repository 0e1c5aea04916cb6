"""GPU env inject on the real containerd: the GPU the scheduler's bind gave a pod reaches its
container as NVIDIA_VISIBLE_DEVICES and as that GPU's device nodes.

No GPU is needed: the node's /dev is a fake tree in the test's own tmp folder (character
devices with NVIDIA's major 195: nvidia0, nvidia1 and nvidiactl at 255), which koordlet reads
through --dev-root-dir. The allocation is the extender's own: its bind decision on an in-memory
cluster whose node has a Device of those two GPUs, card 0 already held by another pod, for a
pod asking for one whole GPU (nvidia.com/gpu: 1). The pod then runs through CRI with the
device-allocated annotation the bind writes, and its container prints what it sees.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordapi import annotation, keys
from scheduler.extender import StaticClusterView, bind_decision
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.koordlet import KoordletProcess
from tests.e2e.harness.node import Node
from tests.e2e.harness.timing import deadline, scaled

NODE = "e2e-node"
NVIDIA_MAJOR = 195
FAKE_DEV = {"nvidia0": 0, "nvidia1": 1, "nvidiactl": 255}
# What the container prints: the variable, then each /dev/nvidia* node as "name type major minor"
# (busybox stat: %t and %T are hex), then a last line to wait for.
REPORT = r"""
echo "visible=${NVIDIA_VISIBLE_DEVICES-unset}"
for f in /dev/nvidia*; do
  [ -e "$f" ] && stat -c 'node=%n|%F|%t|%T' "$f"
done
echo end
exec sleep infinity
"""


def fake_dev(root: Path) -> Path:
    root.mkdir()
    for name, minor in FAKE_DEV.items():
        path = root / name
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(NVIDIA_MAJOR, minor))
    return root


def gpu_entry(minor: int) -> dict[str, Any]:
    """One GPU of the node's Device, as koordlet reports it."""
    return {
        "type": "gpu",
        "id": f"GPU-e2e-{minor}",
        "minor": minor,
        "health": True,
        "resources": {keys.GPU_CORE: "100", keys.GPU_MEMORY: "16Gi", keys.GPU_MEMORY_RATIO: "100"},
    }


def k8s_pod(name: str, *, node: str | None = None, **resources: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": resources}]}
    if node is not None:
        spec["nodeName"] = node
    metadata = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    return {"metadata": metadata, "spec": spec, "status": {"phase": "Running"}}


def extender_allocation() -> str:
    """The device-allocated annotation the extender's bind writes for a pod asking for one
    whole GPU, on a node with two GPUs of which card 0 is held whole by another pod."""
    whole = {keys.GPU_CORE: "100", keys.GPU_MEMORY_RATIO: "100", keys.GPU_MEMORY: "16Gi"}
    holder = k8s_pod("holder", node=NODE)
    holder["metadata"]["annotations"] = {
        keys.ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": 0, "resources": whole}]})
    }
    view = StaticClusterView(
        nodes=[
            {
                "metadata": {"name": NODE, "labels": {}, "annotations": {}},
                "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
            }
        ],
        pods=[holder],
        devices=[
            {
                "apiVersion": "scheduling.koordinator.sh/v1alpha1",
                "kind": "Device",
                "metadata": {"name": NODE},
                "spec": {"devices": [gpu_entry(0), gpu_entry(1)]},
            }
        ],
    )
    one_gpu = {keys.NVIDIA_GPU: "1"}
    plan = bind_decision(k8s_pod("cuda", requests=one_gpu, limits=one_gpu), NODE, view)
    assert (plan.error, plan.gpus) == ("", "1")
    return plan.annotations[keys.ANNOTATION_DEVICE_ALLOCATED]


def run_reporter(node: Node, allocated: str) -> tuple[str, dict[str, tuple[str, int, int]]]:
    """Run an LS pod with ``allocated`` and a container printing what it sees; returns
    NVIDIA_VISIBLE_DEVICES (or "unset") and /dev/nvidia* as name → (type, major, minor)."""
    pod = PodSpec.new(
        labels={keys.LABEL_QOS_CLASS: "LS"},
        annotations={keys.ANNOTATION_DEVICE_ALLOCATED: allocated},
    )
    spec = ContainerSpec("cuda", command=["/bin/sh", "-c", REPORT])
    node.run_container(node.run_pod(pod), spec)
    log = node.log_dir / pod.uid / spec.log_name
    lines = wait_for_report(log)
    visible = next(line.removeprefix("visible=") for line in lines if line.startswith("visible="))
    nodes: dict[str, tuple[str, int, int]] = {}
    for line in lines:
        if line.startswith("node="):
            name, kind, major, minor = line.removeprefix("node=").split("|")
            nodes[name] = (kind, int(major, 16), int(minor, 16))
    return visible, nodes


def wait_for_report(log: Path, timeout: float = 20) -> list[str]:
    """The container's stdout lines (CRI log: "time stream tag text") once it printed "end"."""
    end = deadline(timeout)
    lines: list[str] = []
    while time.monotonic() < end:
        if log.exists():
            lines = [
                parts[3]
                for parts in (line.split(" ", 3) for line in log.read_text().splitlines())
                if len(parts) == 4
            ]
            if "end" in lines:
                return lines
        time.sleep(0.1)
    raise TimeoutError(f"the container did not report in {scaled(timeout):g}s: {lines}")


@pytest.fixture
def koordlet(node: Node, tmp_path: Path) -> Iterator[KoordletProcess]:
    dev = fake_dev(tmp_path / "dev")
    args = ("--feature-gates", "GPUEnvInject=true", "--dev-root-dir", str(dev))
    with KoordletProcess(node, args=args) as running:
        yield running


def test_the_gpu_the_extender_bound_reaches_the_container_with_its_device_nodes(
    node: Node, koordlet: KoordletProcess
) -> None:
    allocated = extender_allocation()
    assert [g.minor for g in annotation.parse_device_allocated(allocated)["gpu"]] == [1]

    visible, nodes = run_reporter(node, allocated)

    assert visible == "1"
    assert nodes == {
        "/dev/nvidia1": ("character special file", NVIDIA_MAJOR, 1),
        "/dev/nvidiactl": ("character special file", NVIDIA_MAJOR, 255),
    }  # and not /dev/nvidia0, the other pod's card
    assert koordlet.metric("koordlet_runtime_hook_failures_total") == 0


def test_a_gpu_this_node_does_not_have_fails_the_hook_and_the_container_still_starts(
    node: Node, koordlet: KoordletProcess
) -> None:
    missing = json.dumps({"gpu": [{"minor": 5, "resources": {keys.GPU_CORE: 100}}]})

    visible, nodes = run_reporter(node, missing)

    assert (visible, nodes) == ("unset", {})
    cause = f"AnnotationError:{keys.ANNOTATION_DEVICE_ALLOCATED}"
    assert koordlet.metric("koordlet_runtime_hook_failures_total", cause=cause) == 1
    assert "GPU minor 5 is not on this node (no /dev/nvidia5)" in koordlet.log_text()
