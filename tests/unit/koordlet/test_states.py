"""Node config file, pod store and cgroup paths, and the rules snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from koordapi import keys
from koordapi.errors import ModelError
from koordapi.features import FeatureGates
from koordapi.qos import KubeQoS, QoSClass
from koordlet.states.nodeconfig import NodeConfigFile, parse_node_config
from koordlet.states.pods import (
    KUBE_QOS_DIRS_CGROUPFS,
    KUBE_QOS_DIRS_SYSTEMD,
    PodStore,
    cgroup_dir,
    driver_of_tree,
    drivers_in_tree,
    kube_qos_dirs,
    parse_kube_dir,
)
from koordlet.states.snapshot import build_rules
from koordlet.states.topology import Topology, has_cpu_idle, kernel_release, read_topology
from nri_plugin import api
from runtimehooks.request import PodSpecFacts
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


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param(
            b"resourceQOSStrategy: {lsClass: \xff\xfe}\n", "not UTF-8 (byte 31)", id="latin"
        ),
        pytest.param(b"", "empty (being rewritten?)", id="empty"),
        pytest.param(b"  \n\n", "empty (being rewritten?)", id="blank"),
        pytest.param(b"#" * ((1 << 20) + 1), "more than 1048576 bytes", id="too-big"),
    ],
)
def test_unreadable_content_keeps_the_last_good_config_and_says_why(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(SLO_FILE)
    loader = NodeConfigFile(path)
    assert loader.reload_if_changed() is True
    good = loader.current

    path.write_bytes(content)
    os.utime(path, ns=(7, 7))
    assert loader.reload_if_changed() is False
    assert loader.current is good
    assert loader.error == f"{path}: file: {reason}"

    path.write_text("resourceQOSStrategy: {lsClass: {cpuQOS: {enable: true}}}")  # then fixed
    assert loader.reload_if_changed() is True
    assert loader.current.spec.cpu_qos(QoSClass.LS).enable and loader.error is None


def test_only_regular_files_are_read_though_a_symlink_to_one_is(tmp_path: Path) -> None:
    # A ConfigMap mount's file is a symlink to a regular file; /dev/zero would never end.
    target = tmp_path / "..data" / "slo.yaml"
    target.parent.mkdir()
    target.write_text(SLO_FILE)
    link = tmp_path / "slo.yaml"
    link.symlink_to(target)
    loader = NodeConfigFile(link)
    assert loader.reload_if_changed() is True
    good = loader.current

    link.unlink()
    link.symlink_to("/dev/zero")
    assert loader.reload_if_changed() is False
    assert loader.current is good
    assert loader.error == f"{link}: file: not a regular file"

    link.unlink()
    os.mkfifo(link)  # no writer: opening must not block
    assert loader.reload_if_changed() is False
    assert loader.error == f"{link}: file: not a regular file"


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


def test_a_snapshot_is_copied_once_per_change_and_shows_every_change() -> None:
    pods = PodStore()
    pods.put_pod(_pod("a", "LS"))
    first, again = pods.snapshot(), pods.snapshot()
    assert first == again and first is not again  # each caller gets its own list
    assert first[0] is again[0]  # of the same copies while nothing changed
    container = api.Container(id="c1", pod_sandbox_id="a", name="app")
    pods.put_container(_pod("a", "LS"), container)
    (with_container,) = pods.snapshot()
    assert list(with_container.containers) == ["c1"]
    assert not first[0].containers  # an earlier snapshot is not changed under its reader
    pods.remove_container("a", "c1")
    assert not pods.snapshot()[0].containers
    pods.put_specs({"uid-a": PodSpecFacts(priority=7)})
    assert pods.snapshot()[0].request.spec == PodSpecFacts(priority=7)
    pods.remove_pod("a")
    assert pods.snapshot() == []


def test_synchronize_leaves_out_stopped_containers() -> None:
    pods = PodStore()
    running = api.Container(id="c1", pod_sandbox_id="a", name="app", state=api.CONTAINER_RUNNING)
    stopped = api.Container(id="c2", pod_sandbox_id="a", name="old", state=api.CONTAINER_STOPPED)
    pods.replace_all([_pod("a", "BE")], [running, stopped])
    (known,) = list(pods)
    assert list(known.containers) == ["c1"]


def _sandbox(pod_id: str, parent: str) -> api.PodSandbox:
    return api.PodSandbox(
        id=pod_id, uid=f"u-{pod_id}", linux=api.LinuxPodSandbox(cgroup_parent=parent)
    )


def test_cgroup_driver_is_the_flag_then_the_pods_then_the_tree(tmp_path: Path) -> None:
    (tmp_path / "cpu" / "kubepods.slice").mkdir(parents=True)  # a v1 tree laid out by systemd
    tree = PodStore(cgroup_root=tmp_path)
    assert tree.cgroup_driver() == "systemd"
    assert tree.kube_qos_dirs()[KubeQoS.BESTEFFORT] == "kubepods.slice/kubepods-besteffort.slice"
    # a pod's NRI path is the runtime's own word, and wins over the tree
    tree.put_pod(_sandbox("a", "/kubepods/besteffort/podu-a"))
    assert tree.cgroup_driver() == "cgroupfs"
    assert tree.kube_qos_dirs()[KubeQoS.BESTEFFORT] == "kubepods/besteffort"
    # --cgroup-driver wins over both
    flagged = PodStore("systemd", tmp_path)
    flagged.put_pod(_sandbox("a", "/kubepods/besteffort/podu-a"))
    assert flagged.cgroup_driver() == "systemd"
    # nothing to go by: cgroupfs, as the kubelet's own default
    assert PodStore(cgroup_root=tmp_path / "empty").cgroup_driver() == "cgroupfs"
    with pytest.raises(ValueError, match="unknown cgroup driver 'openrc'"):
        PodStore("openrc")


def test_a_v2_tree_with_only_kubepods_is_cgroupfs(tmp_path: Path) -> None:
    (tmp_path / "kubepods" / "besteffort").mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    store = PodStore(cgroup_root=tmp_path)
    assert store.cgroup_driver() == "cgroupfs"
    store.put_pod(_sandbox("s", "kubepods-besteffort-podu_s.slice"))
    assert store.cgroup_driver() == "systemd"


def test_the_default_kube_dir_keeps_the_kubelets_usual_dirs() -> None:
    assert KUBE_QOS_DIRS_CGROUPFS == {
        KubeQoS.GUARANTEED: "kubepods",
        KubeQoS.BURSTABLE: "kubepods/burstable",
        KubeQoS.BESTEFFORT: "kubepods/besteffort",
    }
    assert KUBE_QOS_DIRS_SYSTEMD == {
        KubeQoS.GUARANTEED: "kubepods.slice",
        KubeQoS.BURSTABLE: "kubepods.slice/kubepods-burstable.slice",
        KubeQoS.BESTEFFORT: "kubepods.slice/kubepods-besteffort.slice",
    }
    assert PodStore().kube_qos_dirs() == KUBE_QOS_DIRS_CGROUPFS
    assert PodStore("systemd").kube_qos_dirs() == KUBE_QOS_DIRS_SYSTEMD


@pytest.mark.parametrize(
    ("flag", "directory"),
    [
        pytest.param("kubepods/", "kubepods", id="koordinators-default"),
        pytest.param("koordk8s/kubepods/", "koordk8s/kubepods", id="cgroup-root"),
        pytest.param("/koordk8s/kubepods", "koordk8s/kubepods", id="as-the-kubelet-writes-it"),
        pytest.param("a//b.c/kube-pods_2/", "a/b.c/kube-pods_2", id="doubled-slash"),
        pytest.param(" deep/er/kubepods ", "deep/er/kubepods", id="spaces-around"),
    ],
)
def test_cgroup_kube_dir_is_a_path_below_the_root(flag: str, directory: str) -> None:
    assert parse_kube_dir(flag) == directory
    assert kube_qos_dirs("cgroupfs", flag) == {
        KubeQoS.GUARANTEED: directory,
        KubeQoS.BURSTABLE: f"{directory}/burstable",
        KubeQoS.BESTEFFORT: f"{directory}/besteffort",
    }


@pytest.mark.parametrize("flag", ["", "/", " // ", "../kubepods", "koordk8s/./kubepods", ".."])
def test_cgroup_kube_dir_must_name_a_directory_below_the_root(flag: str) -> None:
    with pytest.raises(ValueError, match="not a cgroup directory below the hierarchy root"):
        parse_kube_dir(flag)
    with pytest.raises(ValueError, match="not a cgroup directory"):
        PodStore(kube_dir=flag)


def test_the_kube_dir_moves_the_cgroupfs_qos_dirs_not_the_systemd_slices(tmp_path: Path) -> None:
    """Koordinator's systemd formatter is always kubepods.slice/, whatever its CgroupKubePath."""
    moved = PodStore(cgroup_root=tmp_path, kube_dir="koordk8s/kubepods/")
    assert moved.kube_qos_dirs() == {
        KubeQoS.GUARANTEED: "koordk8s/kubepods",
        KubeQoS.BURSTABLE: "koordk8s/kubepods/burstable",
        KubeQoS.BESTEFFORT: "koordk8s/kubepods/besteffort",
    }
    assert PodStore("systemd", kube_dir="koordk8s/kubepods/").kube_qos_dirs() == (
        KUBE_QOS_DIRS_SYSTEMD
    )
    assert kube_qos_dirs("systemd", "koordk8s/kubepods/") == KUBE_QOS_DIRS_SYSTEMD


@pytest.mark.parametrize("v1", [True, False], ids=["v1-cpu", "v2"])
def test_driver_detection_finds_the_kubelets_dir_below_its_cgroup_root(
    tmp_path: Path, v1: bool
) -> None:
    top = tmp_path / "cpu" if v1 else tmp_path
    (top / "koordk8s" / "kubepods" / "besteffort").mkdir(parents=True)
    # the default kube dir sees no kubelet here; the flag's finds it
    assert drivers_in_tree(top) == set()
    assert driver_of_tree(tmp_path) is None
    assert drivers_in_tree(top, "koordk8s/kubepods/") == {"cgroupfs"}
    assert driver_of_tree(tmp_path, "/koordk8s/kubepods") == "cgroupfs"
    # a kubepods.slice beside it is both, and systemd wins, as Koordinator guesses
    (top / "kubepods.slice").mkdir()
    assert drivers_in_tree(top, "koordk8s/kubepods/") == {"cgroupfs", "systemd"}
    assert PodStore(cgroup_root=tmp_path, kube_dir="koordk8s/kubepods/").cgroup_driver() == (
        "systemd"
    )
    # a /kubepods the flag does not name is not the kubelet's
    (top / "kubepods.slice").rmdir()
    (top / "kubepods").mkdir()
    assert drivers_in_tree(top, "elsewhere/kubepods/") == set()
    assert drivers_in_tree(top) == {"cgroupfs"}


def test_a_pod_under_the_kube_dir_tells_cgroupfs_over_a_systemd_tree(tmp_path: Path) -> None:
    (tmp_path / "kubepods.slice").mkdir()
    store = PodStore(cgroup_root=tmp_path, kube_dir="koordk8s/kubepods/")
    assert store.cgroup_driver() == "systemd"
    store.put_pod(_sandbox("a", "/koordk8s/kubepods/besteffort/podu-a"))
    assert store.cgroup_driver() == "cgroupfs"
    assert store.kube_qos_dirs()[KubeQoS.BESTEFFORT] == "koordk8s/kubepods/besteffort"
    (known,) = list(store)
    assert known.request.cgroup_dir == "koordk8s/kubepods/besteffort/podu-a"


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


@pytest.mark.parametrize(
    ("release", "parsed"),
    [
        ("6.12.117+deb12-amd64", (6, 12)),
        ("5.15.0-91-generic", (5, 15)),
        ("5.14.21-150500.55-default", (5, 14)),
        ("6.18.44-fc-v669", (6, 18)),
        ("garbage", (0, 0)),
    ],
)
def test_kernel_releases_parse_to_major_and_minor(release: str, parsed: tuple[int, int]) -> None:
    assert kernel_release(release) == parsed


def test_cpu_idle_before_any_cgroup_has_the_cpu_controller(tmp_path: Path) -> None:
    # A systemd node at koordlet's start: kubepods.slice exists but nobody asked for CPU yet.
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "kubepods.slice").mkdir()
    assert has_cpu_idle(tmp_path, "6.12.117+deb12-amd64")
    assert not has_cpu_idle(tmp_path, "5.10.0-26-amd64")  # no cpu.idle before 5.15
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    assert not has_cpu_idle(tmp_path, "6.12.117+deb12-amd64")  # no cpu controller at all
    (tmp_path / "kubepods.slice" / "cpu.idle").write_text("0\n")
    assert has_cpu_idle(tmp_path, "5.10.0-26-amd64")  # a cgroup that shows it wins
