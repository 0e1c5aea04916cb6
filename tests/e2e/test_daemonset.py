"""The chart's koordlet DaemonSet, run from the image set-up built, as the kubelet would run it.

The chart is rendered with Helm's own engine; the koordlet pod template is translated for CRI
the kubelet's way (harness/podspec.py) and run on the harness's containerd from the image
built from the Containerfile (scripts/setup.sh, .cache/images/koordlet.tar). Nothing in the pod
is adapted for the test but three things this machine lacks: an API server (so koordlet runs
standalone, on its default NodeSLO), a containerd whose sockets live in the host's /var/run
(the NRI and containerd hostPath volumes point at the harness's private folder) and shared
host mounts (``shared_copy``).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from tests.e2e.harness import paths
from tests.e2e.harness.chartpods import (
    container_log,
    http_get,
    image_present,
    import_image,
    wait_for,
)
from tests.e2e.harness.cri import ContainerSpec
from tests.e2e.harness.koordlet import PLUGIN_ID, free_port
from tests.e2e.harness.node import Node
from tests.e2e.harness.podspec import KubeletPod, run_as_kubelet
from tests.e2e.test_koordlet import MiB, assert_batch_values_applied, be_pod
from tests.unit.charts import helm

NODE_NAME = "e2e-node"
LOOPBACK = "127.0.0.1"  # where a host-network pod listens
REGISTERED = f'plugin \\"{PLUGIN_ID}\\" connected'


def metric(port: int, name: str, **labels: str) -> float | None:
    """The sample of ``name`` whose labels include ``labels``; None while there is none."""
    for line in http_get(LOOPBACK, port, "/metrics")[1].splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def shared_copy(node: Node, host_path: str) -> Path:
    """``host_path`` bound (with everything mounted below it) into the node's folder and made
    shared.

    The chart mounts /sys, /sys/fs/cgroup, /dev and tracefs with HostToContainer propagation,
    which containerd grants only from a shared or slave mount ("is mounted on ... but it is not
    a shared or slave mount"). On a systemd node every mount is shared; here the host's are
    private, and tests must not change them, so the pod gets a shared copy of its own (new
    mount objects: the host's stay private). Containerd's clean-up unmounts it.
    """
    copy = node.containerd.layout.base / "host" / host_path.strip("/")
    copy.mkdir(parents=True)
    for args in (["--rbind", host_path], ["--make-rshared"]):
        subprocess.run(["mount", *args, str(copy)], check=True, capture_output=True)
    return copy


def mount_at(pid: int, target: str) -> tuple[set[str], str]:
    """(optional fields, filesystem type) of the mount at ``target`` in ``pid``'s namespace
    (the last one there: what is seen); ``(set(), "")`` if nothing is mounted there."""
    found: tuple[set[str], str] = (set(), "")
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fields = before.split()
        if fields[4] == target:
            found = (set(fields[6:]), after.split()[0])
    return found


def koordlet_pod(node: Node, port: int, pod_dir: Path) -> KubeletPod:
    """The chart's koordlet pod template for this node (metrics on ``port``)."""
    release = helm.render(helm.CHART, {"koordlet": {"metrics": {"port": port}}})
    daemonset = release.find("DaemonSet")
    base = node.containerd.layout.base
    return run_as_kubelet(
        daemonset["spec"]["template"],
        name=f"{daemonset['metadata']['name']}-{uuid.uuid4().hex[:5]}",
        namespace=daemonset["metadata"]["namespace"],
        node_name=NODE_NAME,
        pod_dir=pod_dir,
        host_paths={
            "/sys": shared_copy(node, "/sys"),
            "/dev": shared_copy(node, "/dev"),
            "/var/run/nri": base / "nri",
            "/var/run/containerd": base,  # holds containerd.sock, as /var/run/containerd does
            "/var/lib/koordlet": base / "koordlet-state",
        },
    )


def test_chart_daemonset_runs_koordlet_from_the_image_and_it_applies_qos(
    fresh_node: Node, tmp_path: Path
) -> None:
    node = fresh_node
    port = free_port()
    kubelet_pod = koordlet_pod(node, port, tmp_path / "pod")
    (koordlet,) = kubelet_pod.containers
    import_image(node)
    assert image_present(node, koordlet.image), f"{koordlet.image} is not on the node"

    pod_id = node.run_pod(kubelet_pod.pod)
    first = node.run_container(pod_id, koordlet)
    log = container_log(node, kubelet_pod.pod.uid, koordlet)
    try:
        node.containerd.wait_for_log(REGISTERED, 1, timeout=60)
    except Exception as err:
        raise AssertionError(f"koordlet did not register; its log:\n{log.read_text()}") from err

    # koordlet's /dev is the host's, a slave mount of it: nodes a driver makes later show up
    propagation, filesystem = mount_at(node.cri.container_pid(first), "/dev")
    assert filesystem == "devtmpfs" and any(f.startswith("master:") for f in propagation)

    # a BE pod created now gets its batch values from koordlet in the container
    be_values = assert_batch_values_applied(node)

    # /metrics on the host network, labelled with the node name from the downward API
    wait_for(
        lambda: metric(port, "koordlet_start_time", node=NODE_NAME) is not None,
        30,
        "koordlet_start_time{node=e2e-node}",
        log,
    )
    # every probe the chart gives the container answers
    probes = kubelet_pod.probes[koordlet.name]
    assert "livenessProbe" in probes and "readinessProbe" in probes
    for kind, probe in probes.items():
        assert http_get(LOOPBACK, probe.port, probe.path)[0] == 200, kind

    # the run-queue latency probes compile and load through the chart's eBPF mounts
    wait_for(
        lambda: metric(port, "koordlet_collector_up", collector="schedlat") == 1,
        90,
        "koordlet_collector_up{collector=schedlat} 1",
        log,
    )

    # killed: containerd goes on without it; a BE pod made meanwhile gets the kubelet's values
    node.cri.stop_container(first, timeout_s=0)
    be_id = node.run_pod(be_pod({"batch": (500, 1000, 256 * MiB, 512 * MiB)}))
    be_container = node.run_container(be_id, ContainerSpec("batch", cpu_shares=2))
    assert node.container_values(be_id, be_container).memory_limit != 512 * MiB

    # the kubelet starts the container again (restart count 1) in the same sandbox; the new
    # koordlet registers and puts the BE container right through Synchronize
    again = replace(koordlet, attempt=1)
    node.run_container(pod_id, again)
    node.containerd.wait_for_log(REGISTERED, 2, timeout=60)
    wanted = (node.reader.cpu_share(512), 100000, 512 * MiB)

    def put_right() -> bool:
        values = node.container_values(be_id, be_container)
        return (values.cpu_share, values.cpu_quota, values.memory_limit) == wanted

    wait_for(
        put_right,
        30,
        "the BE container's batch values after Synchronize",
        container_log(node, kubelet_pod.pod.uid, again),
    )
    second_log = container_log(node, kubelet_pod.pod.uid, again).read_text()
    assert "registered NRI plugin 00-koordlet_nri" in second_log
    # both containers' logs (CRI format) and a summary stay in .cache/e2e-logs (the README
    # quotes them)
    keep = paths.CACHE / "e2e-logs"
    keep.mkdir(parents=True, exist_ok=True)
    prefix = f"daemonset-{paths.CONTAINERD_VERSION}"
    for spec in (koordlet, again):
        source = container_log(node, kubelet_pod.pod.uid, spec)
        shutil.copyfile(source, keep / f"{prefix}-{source.name}")
    (keep / f"{prefix}-summary.txt").write_text(
        f"image {koordlet.image}, command {koordlet.command + koordlet.args}\n"
        f"pod {kubelet_pod.pod.namespace}/{kubelet_pod.pod.name}: {kubelet_pod.pod.qos}, "
        f"privileged, hostPID, hostNetwork, {len(koordlet.mounts)} mounts\n"
        f"containerd: {REGISTERED.replace(chr(92), '')} (twice: started, restarted)\n"
        "BE pod (batch-cpu 500m/1000m, batch-memory 256Mi/512Mi): "
        f"cpu.shares {be_values.cpu_shares}, cfs quota {be_values.cpu_quota} per "
        f"{be_values.cpu_period} us, memory limit {be_values.memory_limit}\n"
    )


@pytest.fixture(autouse=True)
def _needs_helm() -> None:
    if not helm.available():
        pytest.skip(helm.INSTALL_HINT)
