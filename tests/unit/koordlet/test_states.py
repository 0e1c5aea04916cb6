"""Node config file, pod store and cgroup paths, and the rules snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koordapi import keys
from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordapi.qos import QoSClass
from koordlet.states.nodeconfig import NodeConfigFile, parse_node_config
from koordlet.states.pods import PodStore, cgroup_dir
from koordlet.states.snapshot import build_rules
from koordlet.states.topology import Topology, read_topology
from nri_plugin import api
from runtimehooks.rules import KernelFeatures


@pytest.mark.parametrize(
    ("nri_path", "directory"),
    [
        pytest.param("/kubepods/burstable/podU", "kubepods/burstable/podU", id="cgroupfs-pod"),
        pytest.param("/kubepods/podU/abc", "kubepods/podU/abc", id="cgroupfs-container"),
        pytest.param(
            "kubepods-burstable-podU.slice",
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podU.slice",
            id="systemd-pod-slice",
        ),
        pytest.param(
            "kubepods-besteffort-podU.slice:cri-containerd:abc",
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podU.slice/cri-containerd-abc.scope",
            id="systemd-container-scope",
        ),
    ],
)
def test_nri_cgroup_paths_become_directories(nri_path: str, directory: str) -> None:
    assert cgroup_dir(nri_path) == directory


SLO_FILE = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeSLO
metadata: {name: node-1}
spec:
  resourceQOSStrategy:
    beClass: {cpuQOS: {enable: true}}
node:
  annotations:
    node.koordinator.sh/cpu-normalization-ratio: "1.2"
    node.koordinator.sh/reservation: '{"reservedCPUs": "0"}'
"""


def test_a_nodeslo_object_with_node_inputs_parses() -> None:
    config = parse_node_config(SLO_FILE)
    assert config.spec.cpu_qos(QoSClass.BE).group_identity == -1
    assert config.spec.cpu_qos(QoSClass.LS).group_identity == 0  # disabled: the None value
    assert config.parsed(keys.ANNOTATION_CPU_NORMALIZATION_RATIO) == 1.2
    assert config.parsed(keys.ANNOTATION_NODE_RESERVATION).reserved_cpus == "0"


def test_a_bare_spec_in_json_parses() -> None:
    config = parse_node_config('{"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": true}}}}')
    assert config.spec.cpu_qos(QoSClass.LS).enable


def test_node_allocatable_parses_cpu_in_milli_cores_and_the_rest_in_units() -> None:
    text = "node: {allocatable: {cpu: '7500m', memory: 16Gi, kubernetes.io/batch-cpu: 3000}}"
    config = parse_node_config(text)
    assert config.allocatable == {
        "cpu": 7500,
        "memory": 16 << 30,
        "kubernetes.io/batch-cpu": 3000,
    }
    assert parse_node_config("{}").allocatable == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("resourceQOSStrategy: [1, 2]", "resourceQOSStrategy", id="wrong-type"),
        pytest.param("key: [unclosed", "not valid YAML", id="bad-yaml"),
        pytest.param(
            "node: {annotations: {node.koordinator.sh/reservation: '{bad'}}",
            "node.koordinator.sh/reservation",
            id="bad-node-annotation",
        ),
        pytest.param("node: {allocatable: {cpu: lots}}", "node.allocatable.cpu", id="bad-qty"),
        pytest.param("node: {allocatable: {memory: -1Gi}}", "must not be negative", id="neg"),
        pytest.param("node: {allocatable: [cpu]}", "node.allocatable", id="not-a-map"),
        pytest.param(
            "resourceQOSStrategy: {beClass: {cpuQOS: {groupIdentity: 7}}}",
            "spec.resourceQOSStrategy.beClass.cpuQOS.groupIdentity",
            id="out-of-range",
        ),
    ],
)
def test_invalid_files_are_refused_with_the_path(text: str, message: str) -> None:
    with pytest.raises(ModelError, match=message.replace(".", r"\.")):
        parse_node_config(text)


def test_the_file_is_reloaded_on_change_and_bad_content_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(SLO_FILE)
    loader = NodeConfigFile(path)
    assert loader.reload_if_changed() is True
    good = loader.current
    assert loader.reload_if_changed() is False  # nothing changed

    path.write_text("resourceQOSStrategy: {beClass: {cpuQOS: {groupIdentity: 9}}}")
    os.utime(path, ns=(1, 1))
    assert loader.reload_if_changed() is False
    assert loader.current is good
    assert loader.error is not None and "groupIdentity" in loader.error

    path.write_text("resourceQOSStrategy: {lsClass: {cpuQOS: {enable: true}}}")
    assert loader.reload_if_changed() is True
    assert loader.current.spec.cpu_qos(QoSClass.LS).enable
    assert loader.error is None


def _pod(pid: str, qos: str, cpuset: str | None = None) -> api.PodSandbox:
    pod = api.PodSandbox(id=pid, name=pid, uid=f"uid-{pid}", namespace="default")
    pod.labels[keys.LABEL_QOS_CLASS] = qos
    pod.linux.cgroup_parent = f"/kubepods/pod{pid}"
    if cpuset is not None:
        pod.annotations[keys.ANNOTATION_RESOURCE_STATUS] = f'{{"cpuset": "{cpuset}"}}'
    return pod


def test_share_pools_leave_out_pinned_reserved_and_system_cpus() -> None:
    pods = PodStore()
    pods.put_pod(_pod("lse", "LSE", "6-7"))
    pods.put_pod(_pod("lsr", "LSR", "4-5"))
    pods.put_pod(_pod("ls", "LS"))
    config = parse_node_config(
        'node: {annotations: {node.koordinator.sh/reservation: \'{"reservedCPUs": "0"}\','
        ' node.koordinator.sh/system-qos-resource: \'{"cpuset": "1"}\'}}'
    )
    topo = Topology(
        frozenset(range(8)), {0: frozenset(range(4)), 1: frozenset(range(4, 8))}, {0: 0, 1: 1}
    )

    rules = build_rules(config, topo, KernelFeatures(), pods, FeatureGates())

    assert [(p.node, p.cpuset) for p in rules.node.ls_pools] == [(0, "2-3")]
    assert [(p.node, p.socket, p.cpuset) for p in rules.node.be_pools] == [
        (0, 0, "2-3"),
        (1, 1, "4-5"),
    ]


def test_pod_store_tracks_containers_and_pinned_changes() -> None:
    pods = PodStore()
    before = pods.pinned_generation
    pods.put_pod(_pod("a", "LS"))
    assert pods.pinned_generation == before
    pods.put_pod(_pod("b", "LSR", "1"))
    assert pods.pinned_generation == before + 1
    container = api.Container(id="c1", pod_sandbox_id="a", name="app")
    container.linux.cgroups_path = "/kubepods/poda/c1"
    container.linux.resources.cpu.quota.value = 50000
    request = pods.put_container(_pod("a", "LS"), container)
    assert (request.cgroup_dir, request.resources.cpu_quota) == ("kubepods/poda/c1", 50000)
    update = api.LinuxResources()
    update.cpu.quota.value = 20000
    assert pods.put_container(_pod("a", "LS"), container, update).resources.cpu_quota == 20000
    pods.remove_pod("b")
    assert pods.pinned_generation == before + 2
    assert [k.request.name for k in pods] == ["a"]


def test_synchronize_leaves_out_stopped_containers() -> None:
    pods = PodStore()
    running = api.Container(id="c1", pod_sandbox_id="a", name="app", state=api.CONTAINER_RUNNING)
    stopped = api.Container(id="c2", pod_sandbox_id="a", name="old", state=api.CONTAINER_STOPPED)
    pods.replace_all([_pod("a", "BE")], [running, stopped])
    (known,) = list(pods)
    assert list(known.containers) == ["c1"]


def test_topology_reads_cpus_numa_nodes_and_memory(tmp_path: Path) -> None:
    cpu = tmp_path / "sys" / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True)
    (cpu / "online").write_text("0-3\n")
    for n, cpus in ((0, "0-1"), (1, "2-3")):
        node = tmp_path / "sys" / "devices" / "system" / "node" / f"node{n}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
        for c in (2 * n, 2 * n + 1):
            pkg = cpu / f"cpu{c}" / "topology"
            pkg.mkdir(parents=True)
            (pkg / "physical_package_id").write_text(f"{n}\n")
            (pkg / "core_id").write_text(f"{c // 2}\n")  # two threads per core
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       2048 kB\nMemFree: 1 kB\n")

    topo = read_topology(tmp_path / "sys", tmp_path / "proc")

    assert topo.cpus == frozenset(range(4))
    assert topo.numa == {0: frozenset({0, 1}), 1: frozenset({2, 3})}
    assert topo.socket_of_node == {0: 0, 1: 1}
    assert topo.memory_bytes == 2048 * 1024
    assert [(p.cpu, p.core, p.socket, p.node) for p in topo.processors] == [
        (0, 0, 0, 0),
        (1, 0, 0, 0),
        (2, 1, 1, 1),
        (3, 1, 1, 1),
    ]


def test_unknown_topology_gives_one_core_per_cpu() -> None:
    topo = Topology(frozenset({0, 1, 2}), {0: frozenset({0, 1}), 1: frozenset({2})}, {0: 0, 1: 1})
    assert [(p.cpu, p.core, p.socket, p.node) for p in topo.processor_list()] == [
        (0, 0, 0, 0),
        (1, 1, 0, 0),
        (2, 2, 1, 1),
    ]
