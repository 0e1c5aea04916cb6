from __future__ import annotations

import pytest

from tests.e2e.harness import paths
from tests.e2e.harness.cri import (
    ContainerSpec,
    PodSpec,
    linux_resources,
    load_stubs,
    pod_cgroup_parent,
)


@pytest.mark.parametrize(
    ("qos", "parent"),
    [
        pytest.param("guaranteed", "/kubepods/podU", id="guaranteed"),
        pytest.param("burstable", "/kubepods/burstable/podU", id="burstable"),
        pytest.param("besteffort", "/kubepods/besteffort/podU", id="besteffort"),
    ],
)
def test_pod_cgroup_parent_follows_the_kubelet_layout(qos: str, parent: str) -> None:
    assert pod_cgroup_parent(qos, "U") == parent


def test_unknown_qos_class_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown Kubernetes QoS class 'gold'.*besteffort"):
        pod_cgroup_parent("gold", "U")


def test_new_pods_get_fresh_uids_and_matching_parents() -> None:
    a, b = PodSpec.new(qos="besteffort"), PodSpec.new(qos="besteffort")
    assert a.uid != b.uid
    assert a.cgroup_parent == f"/kubepods/besteffort/pod{a.uid}"


def test_linux_resources_sets_only_the_requested_fields() -> None:
    if not (paths.CRI_STUBS_DIR / "gen" / "cri_v1" / "api_pb2.py").exists():
        pytest.skip(f"CRI stubs not generated: {paths.SETUP_HINT}")
    pb, _ = load_stubs()

    res = linux_resources(pb, ContainerSpec("c", cpu_quota=50000, cpuset_cpus="0"))

    assert res.cpu_quota == 50000
    assert res.cpuset_cpus == "0"
    assert res.cpu_shares == 0 and res.memory_limit_in_bytes == 0  # proto3 "unset"
    assert {f.name for f, _ in res.ListFields()} == {"cpu_quota", "cpuset_cpus"}
