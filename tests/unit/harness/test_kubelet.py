"""The kubelet's cgroup layouts the harness plays, checked against what the kubelet writes.

Expected paths are the kubelet's own (pkg/kubelet/cm: cgroupfs ``/kubepods/burstable/pod<uid>``;
systemd slices with "-" in the uid escaped as "_"), with a uid that has dashes to escape.
"""

from __future__ import annotations

import pytest

from tests.e2e.harness.kubelet import KubeletLayout

UID = "5f0c-7a1e-49b2"


@pytest.mark.parametrize(
    ("qos", "parent", "pod_dir"),
    [
        ("guaranteed", f"/kubepods/pod{UID}", f"/kubepods/pod{UID}"),
        ("burstable", f"/kubepods/burstable/pod{UID}", f"/kubepods/burstable/pod{UID}"),
        ("besteffort", f"/kubepods/besteffort/pod{UID}", f"/kubepods/besteffort/pod{UID}"),
    ],
)
def test_cgroupfs_parents_are_the_pod_directories(qos: str, parent: str, pod_dir: str) -> None:
    layout = KubeletLayout("cgroupfs")
    assert layout.pod_parent(qos, UID) == parent
    assert layout.pod_dir(qos, UID) == pod_dir
    assert layout.container_dir(pod_dir, "c0ffee") == f"{pod_dir}/c0ffee"


@pytest.mark.parametrize(
    ("qos", "parent", "pod_dir"),
    [
        (
            "guaranteed",
            "kubepods-pod5f0c_7a1e_49b2.slice",
            "/kubepods.slice/kubepods-pod5f0c_7a1e_49b2.slice",
        ),
        (
            "burstable",
            "kubepods-burstable-pod5f0c_7a1e_49b2.slice",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c_7a1e_49b2.slice",
        ),
        (
            "besteffort",
            "kubepods-besteffort-pod5f0c_7a1e_49b2.slice",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod5f0c_7a1e_49b2.slice",
        ),
    ],
)
def test_systemd_parents_are_slices_and_containers_scopes(
    qos: str, parent: str, pod_dir: str
) -> None:
    layout = KubeletLayout("systemd")
    assert layout.pod_parent(qos, UID) == parent
    assert layout.pod_dir(qos, UID) == pod_dir
    assert layout.container_dir(pod_dir, "c0ffee") == f"{pod_dir}/cri-containerd-c0ffee.scope"


def test_qos_directories_come_children_first() -> None:
    assert KubeletLayout("cgroupfs").qos_dirs() == [
        "/kubepods/burstable",
        "/kubepods/besteffort",
        "/kubepods",
    ]
    assert KubeletLayout("systemd").qos_dirs()[-1] == "/kubepods.slice"


def test_unknown_driver_and_qos_are_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown cgroup driver 'openrc'"):
        KubeletLayout("openrc")
    with pytest.raises(ValueError, match=r"unknown Kubernetes QoS class 'gold'.*besteffort"):
        KubeletLayout().pod_parent("gold", UID)
