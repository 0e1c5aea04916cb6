"""The harness against the real thing: containerd 1.7 with NRI, runc, cgroups, driven by CRI."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.e2e.harness.cgroups import allowed_cpus
from tests.e2e.harness.cri import ContainerSpec, PodSpec
from tests.e2e.harness.node import Node

MiB = 1 << 20


def test_container_gets_exactly_the_requested_cgroup_values(node: Node) -> None:
    pod = PodSpec.new(qos="burstable")
    pod_id = node.run_pod(pod)
    spec = ContainerSpec(
        "app",
        cpu_shares=512,
        cpu_quota=50000,
        cpu_period=100000,
        memory_limit=64 * MiB,
        cpuset_cpus=allowed_cpus(1),
    )
    cid = node.run_container(pod_id, spec)

    values = node.container_values(pod_id, cid)

    assert values.cpu_quota == 50000
    assert values.cpu_period == 100000
    assert values.memory_limit == 64 * MiB
    assert values.cpuset_cpus == allowed_cpus(1)
    if node.reader.version == 1:
        assert values.cpu_shares == 512
    else:
        assert values.cpu_weight == 20  # runc's conversion of 512 shares: 1 + 510 * 9999 // 262142


def test_update_container_resources_changes_the_cgroup_values(node: Node) -> None:
    pod_id = node.run_pod(PodSpec.new(qos="burstable"))
    cid = node.run_container(
        pod_id, ContainerSpec("app", cpu_shares=512, cpu_quota=50000, memory_limit=64 * MiB)
    )

    update = ContainerSpec(
        "app",
        cpu_shares=256,
        cpu_quota=20000,
        cpu_period=100000,
        memory_limit=32 * MiB,
        cpuset_cpus=allowed_cpus(2),
    )
    node.cri.update_resources(cid, update)
    values = node.container_values(pod_id, cid)

    assert (values.cpu_quota, values.cpu_period) == (20000, 100000)
    assert values.memory_limit == 32 * MiB
    assert values.cpuset_cpus is not None
    assert _cpu_list(values.cpuset_cpus) == _cpu_list(allowed_cpus(2))
    if node.reader.version == 1:
        assert values.cpu_shares == 256
    else:
        assert values.cpu_weight == 10  # 1 + 254 * 9999 // 262142


@pytest.mark.parametrize("qos", ["guaranteed", "burstable", "besteffort"])
def test_pod_cgroups_follow_the_kubelet_layout_of_the_driver(node: Node, qos: str) -> None:
    pod = PodSpec.new(qos=qos)
    pod_id = node.run_pod(pod)
    cid = node.run_container(pod_id, ContainerSpec("app"))

    if node.layout.systemd:
        level = {"guaranteed": "", "burstable": "-burstable", "besteffort": "-besteffort"}[qos]
        top = "/kubepods.slice" + ("" if qos == "guaranteed" else f"/kubepods{level}.slice")
        pod_dir = f"{top}/kubepods{level}-pod{pod.uid.replace('-', '_')}.slice"
        container_dir = f"{pod_dir}/cri-containerd-{cid}.scope"
    else:
        pod_dir = {
            "guaranteed": f"/kubepods/pod{pod.uid}",
            "burstable": f"/kubepods/burstable/pod{pod.uid}",
            "besteffort": f"/kubepods/besteffort/pod{pod.uid}",
        }[qos]
        container_dir = f"{pod_dir}/{cid}"
    assert node.container_cgroup(pod_id, cid) == container_dir
    assert node.cri.container_pid(cid) in node.reader.procs(container_dir)
    assert node.reader.values(pod_dir).memory_limit == -1  # nobody limits the pod here


def test_teardown_leaves_no_sandbox_process_or_cgroup_behind(fresh_node: Node) -> None:
    node = fresh_node
    pods = [PodSpec.new(qos=q) for q in ("burstable", "besteffort")]
    pids, cgroups = [], []
    for pod in pods:
        pod_id = node.run_pod(pod)
        cid = node.run_container(pod_id, ContainerSpec("app", cpu_quota=30000))
        pids.append(node.cri.container_pid(cid))
        cgroups += [pod.cgroup_dir, node.container_cgroup(pod_id, cid)]
    assert len(node.cri.list_pods()) == 2
    assert all(Path(f"/proc/{pid}").exists() for pid in pids)
    base = node.containerd.layout.base

    problems = node.teardown()

    assert problems == []
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not [c for c in cgroups if node.reader.exists(c)]
    assert not base.exists()
    assert node.containerd.pid is None


def test_containerd_restart_keeps_containers_and_the_cri_client_reconnects(
    fresh_node: Node,
) -> None:
    node = fresh_node
    pod = PodSpec.new(qos="burstable")
    pod_id = node.run_pod(pod)
    cid = node.run_container(pod_id, ContainerSpec("before", cpu_quota=40000))
    old_pid = node.containerd.pid

    node.restart_containerd()

    assert node.containerd.pid not in (None, old_pid)
    running = {c.id for c in node.cri.list_containers(pod_id)}
    assert cid in running  # the same client object, a new containerd behind it
    after = node.run_container(pod_id, ContainerSpec("after", cpu_quota=30000))
    assert node.container_values(pod_id, after).cpu_quota == 30000
    assert node.container_values(pod_id, cid).cpu_quota == 40000


def test_nri_socket_is_served_in_the_private_folder(node: Node) -> None:
    nri_socket = node.containerd.layout.nri_socket
    assert nri_socket.is_socket()
    assert nri_socket.is_relative_to(node.containerd.layout.base)
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(nri_socket))  # accepted: NRI is enabled and listening


def _cpu_list(cpuset: str) -> set[int]:
    cpus: set[int] = set()
    for part in cpuset.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus
