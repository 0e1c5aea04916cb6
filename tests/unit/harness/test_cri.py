from __future__ import annotations

import pytest

from tests.e2e.harness import paths
from tests.e2e.harness.cri import (
    ContainerSpec,
    PodSpec,
    linux_resources,
    load_stubs,
)
from tests.e2e.harness.kubelet import KubeletLayout


def test_new_pods_get_fresh_uids_and_their_drivers_parents() -> None:
    cgroupfs, systemd = KubeletLayout("cgroupfs"), KubeletLayout("systemd")
    a = PodSpec.new(qos="besteffort", layout=cgroupfs)
    b = PodSpec.new(qos="besteffort", layout=systemd)
    assert a.uid != b.uid
    assert a.cgroup_parent == a.cgroup_dir == f"/kubepods/besteffort/pod{a.uid}"
    escaped = b.uid.replace("-", "_")
    assert b.cgroup_parent == f"kubepods-besteffort-pod{escaped}.slice"
    assert b.cgroup_dir.endswith(f"/kubepods-besteffort.slice/{b.cgroup_parent}")


def test_linux_resources_sets_only_the_requested_fields() -> None:
    if not (paths.CRI_STUBS_DIR / "gen" / "cri_v1" / "api_pb2.py").exists():
        pytest.skip(f"CRI stubs not generated: {paths.SETUP_HINT}")
    pb, _ = load_stubs()

    res = linux_resources(pb, ContainerSpec("c", cpu_quota=50000, cpuset_cpus="0"))

    assert res.cpu_quota == 50000
    assert res.cpuset_cpus == "0"
    assert res.cpu_shares == 0 and res.memory_limit_in_bytes == 0  # proto3 "unset"
    assert {f.name for f, _ in res.ListFields()} == {"cpu_quota", "cpuset_cpus"}
