"""Koordinator v1.8's own koordlet DaemonSet, run with only its image replaced by ours.

The pod below is Koordinator's (koordinator-sh/charts, versions/v1.8.0/templates/koordlet.yaml,
rendered with that chart's default values.yaml), written out here as data: command /koordlet,
its args, NODE_NAME from the downward API, its mounts at Koordinator's DaemonSet-mode places
(/host-cgroup/, /host-sys-fs/, /host-var-run/, /host-run/, /host-var-run-koordlet/, /host-sys/,
/metric-data/, ...), hostPID, hostNetwork, privileged, 200m CPU and 256Mi. It runs on the
harness's containerd the kubelet's way (harness/podspec.py). As in test_daemonset.py, the
host's folders are moved into the test's own (this machine's containerd keeps its sockets in a
private folder, and tests never touch the host's /var/run or /etc), and no API server answers,
so koordlet runs standalone on its default NodeSLO.

It checks what a Koordinator user would see: the container keeps running, koordlet finds the
NRI socket under /host-var-run/ by itself and registers once (containerd's log and its own),
a BE pod created afterwards gets its batch values, and its log holds no retry loop.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path
from typing import Any

from tests.e2e.harness.chartpods import IMAGE_ARCHIVE, OCI_REF_NAME, container_log, import_image
from tests.e2e.harness.chartpods import wait_for as wait_for_in_log
from tests.e2e.harness.node import Node
from tests.e2e.harness.podspec import run_as_kubelet
from tests.e2e.test_daemonset import REGISTERED, shared_copy
from tests.e2e.test_koordlet import assert_batch_values_applied

NODE_NAME = "koord-e2e-node"


def _host_path(path: str, kind: str = "") -> dict[str, Any]:
    return {"path": path, "type": kind}


# Koordinator v1.8.0's koordlet DaemonSet pod template with its chart's default values
# (koordlet.features "", log.level "4", metrics.port 9316, hostDirs.* and resources as in its
# values.yaml; koordletTSDBDir "": a memory emptyDir). Only "image" is ours (set below).
KOORDINATOR_V18_KOORDLET_POD: dict[str, Any] = {
    "metadata": {
        "labels": {"koord-app": "koordlet", "runtimeproxy.koordinator.sh/skip-hookserver": "true"}
    },
    "spec": {
        "containers": [
            {
                "name": "koordlet",
                "command": ["/koordlet"],
                "args": [
                    "-addr=:9316",
                    "-cgroup-root-dir=/host-cgroup/",
                    "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,"
                    "Accelerators=true",
                    "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
                    "--logtostderr=true",
                    "--v=4",
                ],
                "image": None,
                "imagePullPolicy": "Always",
                "env": [
                    {
                        "name": "NODE_NAME",
                        "valueFrom": {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
                        },
                    }
                ],
                "resources": {
                    "limits": {"cpu": "200m", "memory": "256Mi"},
                    "requests": {"cpu": "0", "memory": "0"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": True,
                    "capabilities": {"add": ["SYS_ADMIN"]},
                    "privileged": True,
                },
                "volumeMounts": [
                    {"mountPath": "/etc/localtime", "name": "host-time", "readOnly": True},
                    {"mountPath": "/host-cgroup/", "name": "host-cgroup-root"},
                    {
                        "mountPath": "/host-sys-fs/",
                        "name": "host-sys-fs",
                        "mountPropagation": "Bidirectional",
                    },
                    {"mountPath": "/host-var-run/", "name": "host-var-run", "readOnly": True},
                    {"mountPath": "/host-run/", "name": "host-run", "readOnly": True},
                    {
                        "mountPath": "/host-var-run-koordlet/",
                        "name": "host-var-run-koordlet",
                        "mountPropagation": "Bidirectional",
                    },
                    {
                        "mountPath": "/prediction-checkpoints",
                        "name": "host-koordlet-checkpoint-dir",
                        "mountPropagation": "Bidirectional",
                    },
                    {"mountPath": "/host-sys/", "name": "host-sys", "readOnly": True},
                    {"mountPath": "/etc/kubernetes/", "name": "host-kubernetes", "readOnly": True},
                    {
                        "mountPath": "/host-etc-hookserver/",
                        "name": "host-etc-hookserver",
                        "mountPropagation": "Bidirectional",
                    },
                    {
                        "mountPath": "/var/lib/kubelet",
                        "name": "host-kubelet-rootdir",
                        "readOnly": True,
                        "mountPropagation": "HostToContainer",
                    },
                    {
                        "mountPath": "/var/run/koordlet/pod-resources/",
                        "mountPropagation": "Bidirectional",
                        "name": "pod-resources-proxy",
                    },
                    {
                        "mountPath": "/dev",
                        "name": "host-dev",
                        "mountPropagation": "HostToContainer",
                    },
                    {"mountPath": "/metric-data/", "name": "metric-db-path"},
                    {
                        "mountPath": "/var/run/koordlet/xpu-device-infos/",
                        "mountPropagation": "Bidirectional",
                        "name": "xpu-device-infos",
                    },
                    {"mountPath": "/usr/local/vgpu/containers", "name": "host-vgpu-containers"},
                ],
            }
        ],
        "tolerations": [{"operator": "Exists"}],
        "hostNetwork": True,
        "hostPID": True,
        "terminationGracePeriodSeconds": 10,
        "serviceAccountName": "koordlet",
        "volumes": [
            {"name": "host-time", "hostPath": _host_path("/etc/localtime")},
            {"name": "host-cgroup-root", "hostPath": _host_path("/sys/fs/cgroup/")},
            {"name": "host-sys-fs", "hostPath": _host_path("/sys/fs/")},
            {"name": "host-var-run", "hostPath": _host_path("/var/run/")},
            {"name": "host-run", "hostPath": _host_path("/run/")},
            {
                "name": "host-var-run-koordlet",
                "hostPath": _host_path("/var/run/koordlet", "DirectoryOrCreate"),
            },
            {
                "name": "host-koordlet-checkpoint-dir",
                "hostPath": _host_path(
                    "/var/run/koordlet/prediction-checkpoints", "DirectoryOrCreate"
                ),
            },
            {"name": "host-sys", "hostPath": _host_path("/sys/")},
            {"name": "host-kubernetes", "hostPath": _host_path("/etc/kubernetes/")},
            {"name": "host-etc-hookserver", "hostPath": _host_path("/etc/runtime/hookserver.d/")},
            {"name": "host-kubelet-rootdir", "hostPath": _host_path("/var/lib/kubelet/")},
            {"name": "host-dev", "hostPath": _host_path("/dev")},
            {
                "name": "pod-resources-proxy",
                "hostPath": _host_path("/var/run/koordlet/pod-resources/", "DirectoryOrCreate"),
            },
            {"name": "metric-db-path", "emptyDir": {"medium": "Memory", "sizeLimit": "150Mi"}},
            {
                "name": "xpu-device-infos",
                "hostPath": _host_path("/var/run/koordlet/xpu-device-infos/", "DirectoryOrCreate"),
            },
            {
                "name": "host-vgpu-containers",
                "hostPath": _host_path("/usr/local/vgpu/containers", "DirectoryOrCreate"),
            },
        ],
    },
}


def archive_image() -> str:
    """The image set-up built (the name inside .cache/images/koordlet.tar)."""
    with tarfile.open(IMAGE_ARCHIVE) as tar:
        index = tar.extractfile("index.json")
        assert index is not None
        (manifest,) = json.load(index)["manifests"]
    return str(manifest["annotations"][OCI_REF_NAME])


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


def fake_host(node: Node) -> Path:
    """A folder that plays the host's / for the volumes not under /sys or /dev: a shared
    mount (the DaemonSet's Bidirectional and HostToContainer mounts need one), with the
    harness's NRI socket folder and containerd socket where a host keeps them (var/run/nri,
    var/run/containerd/containerd.sock), the folders of the volumes of type "" that a node has
    (/etc/kubernetes, /var/lib/kubelet, /etc/runtime/hookserver.d) and /etc/localtime. The
    node's teardown unmounts it."""
    layout = node.containerd.layout
    root = layout.base / "fakehost"
    for folder in ("var/run/nri", "var/run/containerd", "run", "etc/kubernetes",
                   "etc/runtime/hookserver.d", "var/lib/kubelet"):  # fmt: skip
        (root / folder).mkdir(parents=True)
    shutil.copyfile("/etc/localtime", root / "etc" / "localtime")
    (root / "var/run/containerd/containerd.sock").touch()
    _mount("--bind", str(root), str(root))
    _mount("--make-rshared", str(root))
    _mount("--bind", str(layout.nri_socket.parent), str(root / "var/run/nri"))
    _mount("--bind", str(layout.address), str(root / "var/run/containerd/containerd.sock"))
    return root


def test_koordinators_own_daemonset_runs_our_koordlet(fresh_node: Node, tmp_path: Path) -> None:
    node = fresh_node
    import_image(node)
    template = copy.deepcopy(KOORDINATOR_V18_KOORDLET_POD)
    template["spec"]["containers"][0]["image"] = archive_image()
    kubelet_pod = run_as_kubelet(
        template,
        name=f"koordlet-{uuid.uuid4().hex[:5]}",
        namespace="koordinator-system",
        node_name=NODE_NAME,
        pod_dir=tmp_path / "pod",
        host_paths={
            "/sys": shared_copy(node, "/sys"),
            "/dev": shared_copy(node, "/dev"),
            "/": fake_host(node),
        },
    )
    (koordlet,) = kubelet_pod.containers
    assert (koordlet.command, koordlet.envs["NODE_NAME"]) == (["/koordlet"], NODE_NAME)

    pod_id = node.run_pod(kubelet_pod.pod)
    container = node.run_container(pod_id, koordlet)
    log = container_log(node, kubelet_pod.pod.uid, koordlet)
    try:
        node.containerd.wait_for_log(REGISTERED, 1, timeout=60)
    except Exception as err:
        text = log.read_text() if log.exists() else "(no log)"
        raise AssertionError(f"koordlet did not register; its log:\n{text}") from err

    # koordlet said where it found the host: Koordinator's DaemonSet layout, chosen by itself
    wait_for_in_log(
        lambda: "registered NRI plugin 00-koordlet_nri" in log.read_text(),
        30,
        "koordlet's own log of the registration",
        log,
    )
    text = log.read_text()
    (layout,) = [line for line in text.splitlines() if "host layout" in line]
    for said in (
        "host layout dsMode (/host-cgroup/ is mounted",
        "cgroups /host-cgroup",
        "sys /host-sys,",
        "resctrl /host-sys-fs/resctrl",
        "NRI socket /host-var-run/nri/nri.sock",
        "containerd socket /host-var-run/containerd/containerd.sock",
        "metric cache /metric-data",
    ):
        assert said in layout, said
    pid = node.cri.container_pid(container)
    assert Path(f"/proc/{pid}/root/host-var-run/containerd/containerd.sock").is_socket()
    # the DaemonSet's one no-effect flag and the gates on that do nothing, in one warning
    (warning,) = [line for line in text.splitlines() if "with no effect here" in line]
    assert "--runtime-hooks-host-endpoint (" in warning
    assert "feature gate NodeTopologyReport (" in warning

    # a BE pod created now gets its batch values from koordlet in Koordinator's DaemonSet
    assert_batch_values_applied(node)

    # still running, registered once, and nothing retried
    assert node.cri.container_status(container).status.state == node.cri.pb.CONTAINER_RUNNING
    assert node.containerd.log_text(since_start=True).count(REGISTERED) == 1
    text = log.read_text()
    assert text.count("registered NRI plugin 00-koordlet_nri") == 1
    for retry in ("connect NRI socket", "retrying", "NRI connection ended", "created: connecting"):
        assert retry not in text, f"{retry!r} in koordlet's log:\n{text[-4000:]}"
