"""The whole koordlet in this process: its real Koordlet object on a fake cgroup v1 tree,
driven over the NRI socket by a fake runtime, stopped the way systemd stops it (SIGTERM).

What is faked is only the boundary: the cgroup tree is plain folders and files under the
test's own directory, and ``nri_plugin.testing.FakeRuntime`` plays containerd on a socket
there. Everything between (the stub, the hook server, the hooks, the executor, the pod store,
the reconciler, the collectors and the QoS manager) is the daemon's own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from koordapi import keys
from koordapi.features import FeatureGates
from koordapi.qos import KubeQoS
from koordlet.collectors.be import BECollector
from koordlet.config import Config
from koordlet.daemon import Koordlet
from nri_plugin import api
from nri_plugin.testing import FakeRuntime

UID = "0f0e0d0c-1111-2222-3333-444455556666"
POD_DIR = f"kubepods/besteffort/pod{UID}"
MIB = 1 << 20
# One container's batch resources: 716 shares and a 130000 quota, a 700 MiB limit
BATCH_SPEC = json.dumps(
    {
        "containers": {
            "main": {
                "requests": {keys.BATCH_CPU: "700", keys.BATCH_MEMORY: str(300 * MIB)},
                "limits": {keys.BATCH_CPU: "1300", keys.BATCH_MEMORY: str(700 * MIB)},
            }
        }
    }
)


def fake_tree(root: Path) -> None:
    """The kubelet's cgroupfs layout on cgroup v1, with one BE pod and its container."""
    values = {
        "cpu": {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"},
        "cpuacct": {"cpuacct.usage": "0"},
        "cpuset": {"cpuset.cpus": f"0-{(os.cpu_count() or 1) - 1}", "cpuset.mems": "0"},
        "memory": {"memory.limit_in_bytes": "9223372036854771712", "memory.usage_in_bytes": "0"},
    }
    for controller, files in values.items():
        for sub in ("kubepods", "kubepods/besteffort", "kubepods/burstable", POD_DIR,
                    f"{POD_DIR}/c-1"):  # fmt: skip
            folder = root / controller / sub
            folder.mkdir(parents=True, exist_ok=True)
            for name, value in files.items():
                (folder / name).write_text(value + "\n")


def node_of_pods(
    root: Path, count: int, *, batch: bool = True
) -> tuple[list[api.PodSandbox], list[api.Container]]:
    """``count`` running pods of one container each under ``root`` (cgroup v1 folders with their
    cpu and memory files): the odd ones LS, the even ones BE with BATCH_SPEC (LS too when not
    ``batch``: no strategy then has BE pods to work on)."""
    files = {
        "cpu": {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000"},
        "memory": {"memory.limit_in_bytes": "9223372036854771712"},
    }
    pods, containers = [], []
    for i in range(count):
        be = batch and i % 2 == 0
        uid = f"b0b0b0b0-0000-4000-8000-{i:012d}"
        folder = f"kubepods/{'besteffort' if be else 'burstable'}/pod{uid}"
        for controller, values in files.items():
            for sub in (folder, f"{folder}/c{i}"):
                (root / controller / sub).mkdir(parents=True, exist_ok=True)
                for name, value in values.items():
                    (root / controller / sub / name).write_text(value + "\n")
        pod = api.PodSandbox(id=f"load-{i}", name=f"p{i}", uid=uid, namespace="load")
        pod.labels[keys.LABEL_QOS_CLASS] = "BE" if be else "LS"
        if be:
            pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = BATCH_SPEC
        pod.linux.cgroup_parent = "/" + folder
        container = api.Container(
            id=f"c{i}", pod_sandbox_id=pod.id, name="main", state=api.CONTAINER_RUNNING
        )
        container.linux.cgroups_path = f"/{folder}/c{i}"
        pods.append(pod)
        containers.append(container)
    return pods, containers


def standalone_config(folder: Path) -> Config:
    """koordlet standalone on ``folder``: the cgroup tree in cgroup/, the NRI socket under run/,
    an empty NodeSLO file, no resctrl, no metrics server, no metric cache file."""
    (folder / "run" / "nri").mkdir(parents=True)
    (folder / "sys").mkdir()  # no resctrl in it
    (folder / "nodeslo.yaml").write_text("")
    return Config(
        node_name="unit-node",
        cgroup_root=folder / "cgroup",
        cgroup_driver="cgroupfs",
        var_run_root=folder / "run",
        resctrl_root=folder / "sys" / "resctrl",
        node_slo_file=folder / "nodeslo.yaml",
        metrics_addr="",
        tsdb_path=None,
        node_metric_file=None,
        # the eBPF collector would compile and attach probes: not a unit test's business
        feature_gates=FeatureGates.parse("SchedLatencyCollector=false"),
    )


def be_pod() -> tuple[api.PodSandbox, api.Container]:
    pod = api.PodSandbox(id="sandbox-1", name="batch", uid=UID, namespace="jobs")
    pod.labels[keys.LABEL_QOS_CLASS] = "BE"
    pod.linux.cgroup_parent = "/" + POD_DIR
    pod.annotations[keys.ANNOTATION_EXTENDED_RESOURCE_SPEC] = BATCH_SPEC
    container = api.Container(id="c-1", pod_sandbox_id=pod.id, name="main")
    container.linux.cgroups_path = f"/{POD_DIR}/c-1"
    return pod, container


def test_the_whole_koordlet_applies_batch_values_over_nri_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    cgroup = tmp_path / "cgroup"
    fake_tree(cgroup)
    config = standalone_config(tmp_path)
    pod, container = be_pod()

    async def scenario() -> tuple[api.CreateContainerResponse, bool]:
        runtime = FakeRuntime()
        await runtime.listen(config.nri_socket)
        daemon = Koordlet(config)
        running = asyncio.create_task(daemon.run())
        try:
            session = await runtime.next_session(timeout=20)
            await session.state_change(api.RUN_POD_SANDBOX, pod)
            reply = await session.create_container(pod, container)
            # the pod-level values are written by the executor while the runtime waits
            os.kill(os.getpid(), signal.SIGTERM)  # koordlet's own handler: a clean stop
            await asyncio.wait_for(running, 20)
            return reply, running.done() and running.exception() is None
        finally:
            running.cancel()
            await runtime.close()

    reply, stopped_cleanly = asyncio.run(scenario())

    resources = reply.adjust.linux.resources
    # BatchResource: shares from the 700m request, quota from the 1300m limit, the memory limit
    assert resources.cpu.shares.value == 716
    assert resources.cpu.quota.value == 130000
    assert resources.memory.limit.value == 700 * MIB
    # the pod's own cgroup holds the sum of its containers' batch values
    assert (cgroup / "cpu" / POD_DIR / "cpu.shares").read_text().strip() == "716"
    assert (cgroup / "cpu" / POD_DIR / "cpu.cfs_quota_us").read_text().strip() == "130000"
    assert (cgroup / "memory" / POD_DIR / "memory.limit_in_bytes").read_text().strip() == str(
        700 * MIB
    )
    assert stopped_cleanly


def test_the_daemon_gives_cgroup_kube_dir_to_the_store_the_be_collector_and_the_qos_manager(
    tmp_path: Path,
) -> None:
    """A kubelet with cgroupRoot /koordk8s (cgroupfs): every place that names its QoS dirs."""
    (tmp_path / "cgroup" / "cpu" / "koordk8s" / "kubepods").mkdir(parents=True)
    (tmp_path / "nodeslo.yaml").write_text("")
    config = Config(
        node_name="unit-node",
        cgroup_root=tmp_path / "cgroup",
        cgroup_kube_dir="koordk8s/kubepods/",
        resctrl_root=tmp_path / "sys" / "resctrl",
        node_slo_file=tmp_path / "nodeslo.yaml",
        metrics_addr="",
        tsdb_path=None,
        node_metric_file=None,
        feature_gates=FeatureGates.parse("SchedLatencyCollector=false"),
    )
    daemon = Koordlet(config)
    assert daemon.pods.cgroup_driver() == "cgroupfs"  # found at /koordk8s/kubepods
    assert daemon.qos_context().qos_dirs == {
        KubeQoS.GUARANTEED: "koordk8s/kubepods",
        KubeQoS.BURSTABLE: "koordk8s/kubepods/burstable",
        KubeQoS.BESTEFFORT: "koordk8s/kubepods/besteffort",
    }
    (be,) = [c for c in daemon._collectors() if isinstance(c, BECollector)]
    assert be.be_dirs == (
        "koordk8s/kubepods/besteffort",
        "kubepods.slice/kubepods-besteffort.slice",
    )
