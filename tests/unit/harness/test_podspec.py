from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness.podspec import (
    SERVICE_ACCOUNT_DIR,
    HttpProbe,
    KubeletRefused,
    ServiceAccount,
    run_as_kubelet,
)


def template(tmp_path: Path, **spec: Any) -> dict[str, Any]:
    container = {
        "name": "agent",
        "image": "example.com/agent:1",
        "command": ["agent"],
        "args": ["--node=$(NODE_NAME)", "--literal=$$(NODE_NAME)", "--unknown=$(NOPE)"],
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "GREETING", "value": "on $(NODE_NAME)"},
        ],
        "ports": [{"name": "metrics", "containerPort": 9316}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}},
        "resources": {
            "requests": {"cpu": "150m", "memory": "96Mi"},
            "limits": {"cpu": "1500m", "memory": "300Mi"},
        },
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "run", "mountPath": "/host-run", "mountPropagation": "HostToContainer"},
            {"name": "state", "mountPath": "/state", "readOnly": True},
        ],
    }
    volumes = [
        {"name": "run", "hostPath": {"path": "/var/run/thing", "type": "DirectoryOrCreate"}},
        {"name": "state", "hostPath": {"path": str(tmp_path), "type": "Directory"}},
    ]
    return {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {
            "hostPID": True,
            "hostNetwork": True,
            "containers": [container],
            "volumes": volumes,
            **spec,
        },
    }


def translate(tmp_path: Path, tpl: dict[str, Any]) -> Any:
    return run_as_kubelet(
        tpl,
        name="agent-x7k2p",
        namespace="ns",
        node_name="node-7",
        pod_dir=tmp_path / "pod",
        host_paths={"/var/run/thing": tmp_path / "moved"},
    )


def test_resources_become_the_kubelets_cgroup_values(tmp_path: Path) -> None:
    pod = translate(tmp_path, template(tmp_path))
    (c,) = pod.containers
    assert (pod.pod.name, pod.pod.namespace, pod.pod.qos) == ("agent-x7k2p", "ns", "burstable")
    assert (c.cpu_shares, c.cpu_quota, c.cpu_period) == (153, 150000, 100000)
    assert c.memory_limit == 300 * (1 << 20)


def test_tiny_and_missing_cpu_get_the_kubelets_floors(tmp_path: Path) -> None:
    tpl = template(tmp_path)
    tpl["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1m", "memory": "1Gi"}}
    (c,) = translate(tmp_path, tpl).containers
    # no request: the limit stands for it (API defaulting); 1m → 1 share → the floor of 2
    assert (c.cpu_shares, c.cpu_quota) == (2, 1000)
    tpl["spec"]["containers"][0]["resources"] = {}
    pod = translate(tmp_path, tpl)
    assert pod.pod.qos == "besteffort"
    assert (pod.containers[0].cpu_shares, pod.containers[0].cpu_quota) == (2, None)


def test_env_from_the_downward_api_and_expansion(tmp_path: Path) -> None:
    (c,) = translate(tmp_path, template(tmp_path)).containers
    assert c.envs == {"NODE_NAME": "node-7", "GREETING": "on node-7"}
    assert c.args == ["--node=node-7", "--literal=$(NODE_NAME)", "--unknown=$(NOPE)"]


def test_mounts_follow_volumes_with_moved_host_paths(tmp_path: Path) -> None:
    pod = translate(tmp_path, template(tmp_path))
    (c,) = pod.containers
    by_path = {m.container_path: m for m in c.mounts}
    assert by_path["/host-run"].host_path == tmp_path / "moved"
    assert (tmp_path / "moved").is_dir()  # DirectoryOrCreate made it
    assert by_path["/host-run"].propagation == "HostToContainer"
    assert by_path["/state"].readonly and by_path["/state"].host_path == tmp_path
    assert by_path["/dev/termination-log"].host_path.is_file()
    assert pod.pod.host_pid and pod.pod.host_network and pod.pod.privileged
    assert c.privileged


def test_a_missing_directory_stops_the_pod_as_the_kubelet_would(tmp_path: Path) -> None:
    tpl = template(tmp_path)
    tpl["spec"]["volumes"][1]["hostPath"]["path"] = str(tmp_path / "absent")
    with pytest.raises(KubeletRefused, match="is not a directory"):
        translate(tmp_path, tpl)


def test_probes_resolve_named_ports(tmp_path: Path) -> None:
    pod = translate(tmp_path, template(tmp_path))
    assert pod.probes["agent"] == {
        "livenessProbe": HttpProbe("/healthz", 9316),
        "readinessProbe": HttpProbe("/readyz", 8080),
    }


def test_pod_security_context_is_the_default_for_containers(tmp_path: Path) -> None:
    tpl = template(tmp_path, securityContext={"runAsUser": 65532, "runAsGroup": 65533})
    tpl["spec"]["containers"][0]["securityContext"] = {
        "runAsGroup": 7,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    pod = translate(tmp_path, tpl)
    (c,) = pod.containers
    assert (c.run_as_user, c.run_as_group) == (65532, 7)
    assert c.readonly_rootfs and c.drop_capabilities == ["ALL"]
    assert not c.privileged and not pod.pod.privileged


def test_fs_group_seccomp_and_no_new_privs(tmp_path: Path) -> None:
    pod_security = {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "fsGroup": 2001,
        "supplementalGroups": [3003],
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    tpl = template(tmp_path, securityContext=pod_security)
    tpl["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False}
    (c,) = translate(tmp_path, tpl).containers
    assert c.supplemental_groups == [2001, 3003]
    assert c.seccomp_runtime_default and c.no_new_privs
    tpl["spec"]["containers"][0]["securityContext"] = {}
    tpl["spec"]["securityContext"] = {"runAsUser": 5}
    (plain,) = translate(tmp_path, tpl).containers
    # nothing asked: unconfined and privilege escalation allowed, as the kubelet passes it
    assert not plain.seccomp_runtime_default and not plain.no_new_privs
    assert plain.supplemental_groups == []


def test_run_as_non_root_refuses_root_and_an_unknown_user(tmp_path: Path) -> None:
    for user in ({"runAsUser": 0}, {}):
        tpl = template(tmp_path, securityContext={"runAsNonRoot": True, **user})
        with pytest.raises(KubeletRefused, match="runAsNonRoot"):
            translate(tmp_path, tpl)


def with_object_volumes(tmp_path: Path) -> dict[str, Any]:
    tpl = template(tmp_path, securityContext={"runAsUser": 65532, "fsGroup": 2001})
    tpl["spec"]["volumes"] += [
        {"name": "certs", "secret": {"secretName": "tls", "defaultMode": 0o440}},
        {"name": "conf", "configMap": {"name": "settings"}},
    ]
    tpl["spec"]["containers"][0]["volumeMounts"] += [
        {"name": "certs", "mountPath": "/certs", "readOnly": True},
        {"name": "conf", "mountPath": "/conf", "readOnly": True},
    ]
    return tpl


SECRET = {"kind": "Secret", "metadata": {"name": "tls"}, "data": {"tls.key": "a2V5LWJ5dGVz"}}
CONFIG_MAP = {"kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a.yaml": "x: 1"}}


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to the fsGroup takes root")
def test_secret_and_config_map_volumes_hold_their_keys_for_the_fs_group(tmp_path: Path) -> None:
    pod = run_as_kubelet(
        with_object_volumes(tmp_path),
        name="agent-x7k2p",
        namespace="ns",
        node_name="node-7",
        pod_dir=tmp_path / "pod",
        host_paths={"/var/run/thing": tmp_path / "moved"},
        objects=[SECRET, CONFIG_MAP],
    )
    mounts = {m.container_path: m for m in pod.containers[0].mounts}
    key = mounts["/certs"].host_path / "tls.key"
    assert key.read_bytes() == b"key-bytes"  # base64-decoded
    assert (key.stat().st_mode & 0o777, key.stat().st_gid) == (0o440, 2001)
    conf = mounts["/conf"].host_path / "a.yaml"
    assert conf.read_text() == "x: 1"
    # the default 0644, plus group read for the fsGroup (already there)
    assert (conf.stat().st_mode & 0o777, conf.stat().st_gid) == (0o644, 2001)
    assert mounts["/certs"].readonly


def test_a_missing_secret_stops_the_pod(tmp_path: Path) -> None:
    with pytest.raises(KubeletRefused, match="secret 'tls' not found"):
        run_as_kubelet(
            with_object_volumes(tmp_path),
            name="agent-x7k2p",
            namespace="ns",
            node_name="node-7",
            pod_dir=tmp_path / "pod",
            host_paths={"/var/run/thing": tmp_path / "moved"},
            objects=[CONFIG_MAP],
        )


def test_the_service_account_is_projected_with_the_api_servers_address(tmp_path: Path) -> None:
    account = ServiceAccount("10.44.3.1", 6443, b"-----BEGIN CERTIFICATE-----\n", "t0k3n")
    tpl = template(tmp_path)
    pod = run_as_kubelet(
        tpl,
        name="agent-x7k2p",
        namespace="ns",
        node_name="node-7",
        pod_dir=tmp_path / "pod",
        host_paths={"/var/run/thing": tmp_path / "moved"},
        service_account=account,
    )
    (c,) = pod.containers
    assert c.envs["KUBERNETES_SERVICE_HOST"] == "10.44.3.1"
    assert c.envs["KUBERNETES_SERVICE_PORT"] == "6443"
    (mount,) = [m for m in c.mounts if m.container_path == SERVICE_ACCOUNT_DIR]
    assert mount.readonly
    files = {p.name: p.read_bytes() for p in mount.host_path.iterdir()}
    assert files == {"token": b"t0k3n", "ca.crt": account.ca_pem, "namespace": b"ns"}
    # automountServiceAccountToken: false: nothing projected
    tpl["spec"]["automountServiceAccountToken"] = False
    pod = run_as_kubelet(
        tpl,
        name="agent-x7k2p",
        namespace="ns",
        node_name="node-7",
        pod_dir=tmp_path / "pod2",
        host_paths={"/var/run/thing": tmp_path / "moved"},
        service_account=account,
    )
    assert "KUBERNETES_SERVICE_HOST" not in pod.containers[0].envs
    assert SERVICE_ACCOUNT_DIR not in {m.container_path for m in pod.containers[0].mounts}
