"""What the kubelet passes to CRI for a Kubernetes pod spec (a DaemonSet's or a Deployment's).

The e2e test of the chart plays the kubelet: it renders the chart, takes a workload's pod
template and runs it here. The translation follows kuberuntime (kubelet/kuberuntime:
generateContainerConfig, makeMounts, the QoS cgroup parent) and does nothing the kubelet would
not do:

- the pod's QoS class picks its cgroup parent; requests and limits become CPU shares
  (milli-cores * 1024 / 1000, at least 2), a CFS quota for the 100 ms period (at least 1 ms)
  and the memory limit;
- env values and downward-API field references (spec.nodeName, metadata.*) are resolved,
  ``$(VAR)`` in command and args expanded from them, as the kubelet does;
- hostPath volumes are bind-mounted with the mount's readOnly and mountPropagation after the
  kubelet's type check (Directory must exist, DirectoryOrCreate is made 0755); emptyDir volumes
  get a fresh folder; secret and configMap volumes get the object's keys as files with the
  volume's defaultMode, owned by the pod's fsGroup; the kubelet's /dev/termination-log file is
  mounted too;
- securityContext (pod and container, the container's winning) becomes privileged, user,
  group, read-only root, dropped capabilities, no_new_privs (allowPrivilegeEscalation: false)
  and containerd's default seccomp profile (RuntimeDefault); fsGroup and supplementalGroups
  become the container's supplemental groups; runAsNonRoot refuses user 0; hostPID and
  hostNetwork the namespaces;
- with a ``service_account`` (a test's API server) the kubelet's service-account projection:
  token, ca.crt and namespace under /var/run/secrets/kubernetes.io/serviceaccount, and
  KUBERNETES_SERVICE_HOST/PORT in the environment.

Two things differ, both because this machine has no cluster, and both are said where they
apply: without a ``service_account`` nothing is projected and no KUBERNETES_SERVICE_* variables
are set (koordlet then runs standalone, on its default NodeSLO), and ``host_paths`` may move a
host path into the test's own folders (the harness's containerd keeps its NRI and CRI sockets
in a private folder, never in the host's /var/run, which tests must not touch). Secret and
configMap files are written in place, without the kubelet's ``..data`` symlink swap.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from koordapi.pod import compute_kube_qos
from koordapi.quantity import milli_value, value
from tests.e2e.harness.cri import ContainerSpec, Mount, PodSpec

CFS_PERIOD_US = 100_000
MIN_SHARES = 2
MIN_QUOTA_US = 1_000
TERMINATION_LOG = "/dev/termination-log"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_MODE = 0o644  # a secret's, configMap's and projected volume's files unless told
READ_MASK = 0o440  # what the kubelet adds for fsGroup on a read-only volume


class KubeletRefused(RuntimeError):
    """The kubelet would not start this pod (a hostPath type check failed, an unknown field
    reference); the message is the kubelet's reason."""


@dataclass(frozen=True)
class HttpProbe:
    """An httpGet probe, its named port resolved to the container's port number."""

    path: str
    port: int


@dataclass(frozen=True)
class ServiceAccount:
    """The API server a pod's service account talks to, and its credentials."""

    host: str
    port: int
    ca_pem: bytes
    token: str


@dataclass
class KubeletPod:
    """A pod spec translated for CRI: the sandbox, its containers, and their probes."""

    pod: PodSpec
    containers: list[ContainerSpec]
    probes: dict[str, dict[str, HttpProbe]] = field(default_factory=dict)  # name → kind → probe


def run_as_kubelet(
    template: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    node_name: str,
    pod_dir: Path,
    host_paths: Mapping[str, Path] | None = None,
    objects: Iterable[Mapping[str, Any]] = (),
    service_account: ServiceAccount | None = None,
) -> KubeletPod:
    """Translate a pod template for CRI; ``name`` is the pod's (a controller's name and a
    suffix), ``pod_dir`` plays /var/lib/kubelet/pods/<uid>, ``objects`` are the Secrets and
    ConfigMaps its volumes may name."""
    meta = template.get("metadata") or {}
    spec = template["spec"]
    qos = compute_kube_qos(spec).value.lower()
    containers = list(spec.get("containers") or [])
    privileged = any(_security(spec, c).get("privileged") for c in containers)
    pod = PodSpec.new(
        name,
        namespace=namespace,
        qos=qos,
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        host_network=bool(spec.get("hostNetwork")),
        host_pid=bool(spec.get("hostPID")),
        privileged=privileged,
    )
    fields = {
        "spec.nodeName": node_name,
        "metadata.name": pod.name,
        "metadata.namespace": namespace,
        "metadata.uid": pod.uid,
    }
    pod_security = spec.get("securityContext") or {}
    fs_group = pod_security.get("fsGroup")
    groups = [g for g in (fs_group, *(pod_security.get("supplementalGroups") or [])) if g]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    volumes = _volumes(spec, pod_dir, host_paths or {}, by_name, fs_group)
    account_env: dict[str, str] = {}
    account_mounts: list[Mount] = []
    if service_account is not None and spec.get("automountServiceAccountToken", True):
        account_env = {
            "KUBERNETES_SERVICE_HOST": service_account.host,
            "KUBERNETES_SERVICE_PORT": str(service_account.port),
        }
        files = {
            "token": service_account.token.encode(),
            "ca.crt": service_account.ca_pem,
            "namespace": namespace.encode(),
        }
        folder = pod_dir / "volumes" / "kubernetes.io~projected" / "kube-api-access"
        _write_files(folder, files, DEFAULT_MODE, fs_group)
        account_mounts.append(Mount(folder, SERVICE_ACCOUNT_DIR, readonly=True))
    out = KubeletPod(pod, [])
    for container in containers:
        env = account_env | _env(container, fields)
        security = _security(spec, container)
        if security.get("runAsNonRoot") and not security.get("runAsUser"):
            raise KubeletRefused(
                f"container {container['name']}: runAsNonRoot and the user is root or not "
                "given (this harness does not read the image's user)"
            )
        seccomp = (security.get("seccompProfile") or {}).get("type", "Unconfined")
        if seccomp not in ("RuntimeDefault", "Unconfined"):
            raise KubeletRefused(f"seccompProfile {seccomp} not played here")
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        term = pod_dir / "containers" / container["name"] / "termination-log"
        term.parent.mkdir(parents=True, exist_ok=True)
        term.touch()
        mounts = [_mount(m, volumes) for m in container.get("volumeMounts") or []]
        mounts += account_mounts
        mounts.append(Mount(term, container.get("terminationMessagePath") or TERMINATION_LOG))
        out.containers.append(
            ContainerSpec(
                container["name"],
                image=container["image"],
                command=[_expand(a, env) for a in container.get("command") or []],
                args=[_expand(a, env) for a in container.get("args") or []],
                envs=env,
                mounts=mounts,
                privileged=bool(security.get("privileged")),
                run_as_user=security.get("runAsUser"),
                run_as_group=security.get("runAsGroup"),
                readonly_rootfs=bool(security.get("readOnlyRootFilesystem")),
                drop_capabilities=list((security.get("capabilities") or {}).get("drop") or []),
                supplemental_groups=groups,
                no_new_privs=security.get("allowPrivilegeEscalation") is False,
                seccomp_runtime_default=seccomp == "RuntimeDefault",
                cpu_shares=_shares(requests.get("cpu", limits.get("cpu"))),
                cpu_quota=_quota(limits.get("cpu")),
                cpu_period=CFS_PERIOD_US if "cpu" in limits else None,
                memory_limit=value(limits["memory"]) if "memory" in limits else None,
            )
        )
        out.probes[container["name"]] = _probes(container)
    return out


def _security(spec: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's securityContext over the pod's (the fields both may hold)."""
    pod_level = spec.get("securityContext") or {}
    shared = ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")
    merged = {k: pod_level[k] for k in shared if k in pod_level}
    merged.update(container.get("securityContext") or {})
    return merged


def _shares(cpu: object) -> int:
    if cpu is None:
        return MIN_SHARES
    return max(MIN_SHARES, milli_value(cpu) * 1024 // 1000)


def _quota(cpu: object) -> int | None:
    if cpu is None:
        return None
    return max(MIN_QUOTA_US, milli_value(cpu) * CFS_PERIOD_US // 1000)


def _env(container: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        ref = (var.get("valueFrom") or {}).get("fieldRef")
        if ref is None:
            env[var["name"]] = _expand(str(var.get("value", "")), env)
        elif ref["fieldPath"] in fields:
            env[var["name"]] = fields[ref["fieldPath"]]
        else:
            raise KubeletRefused(f"env {var['name']}: unsupported fieldPath {ref['fieldPath']}")
    return env


def _expand(text: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` from ``env``; ``$$`` escapes; an unknown name stays as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def _volumes(
    spec: Mapping[str, Any],
    pod_dir: Path,
    host_paths: Mapping[str, Path],
    objects: Mapping[tuple[str, str], Mapping[str, Any]],
    fs_group: int | None,
) -> dict[str, Path]:
    """Each volume's folder on the host, after the kubelet's checks."""
    out: dict[str, Path] = {}
    for volume in spec.get("volumes") or []:
        name = volume["name"]
        if "hostPath" in volume:
            path = _host_path(volume["hostPath"]["path"], host_paths)
            kind = volume["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                path.mkdir(mode=0o755, parents=True, exist_ok=True)
            elif kind == "Directory" and not path.is_dir():
                raise KubeletRefused(
                    f"MountVolume.SetUp failed for volume {name!r}: "
                    f"hostPath type check failed: {path} is not a directory"
                )
            elif kind not in ("", "Directory"):
                raise KubeletRefused(f"volume {name!r}: hostPath type {kind} not played here")
            out[name] = path
        elif "emptyDir" in volume:
            path = pod_dir / "volumes" / "kubernetes.io~empty-dir" / name
            path.mkdir(mode=0o777, parents=True, exist_ok=True)
            path.chmod(0o777)  # the kubelet's emptyDir is world-writable
            out[name] = path
        elif "secret" in volume or "configMap" in volume:
            out[name] = _object_volume(volume, pod_dir, objects, fs_group)
        else:
            raise KubeletRefused(
                f"volume {name!r}: only hostPath, emptyDir, secret and configMap are played here"
            )
    return out


def _object_volume(
    volume: Mapping[str, Any],
    pod_dir: Path,
    objects: Mapping[tuple[str, str], Mapping[str, Any]],
    fs_group: int | None,
) -> Path:
    """A secret or configMap volume: the object's keys as files."""
    name = volume["name"]
    if "secret" in volume:
        kind, source, plugin = "Secret", volume["secret"], "kubernetes.io~secret"
        ref = source["secretName"]
    else:
        kind, source, plugin = "ConfigMap", volume["configMap"], "kubernetes.io~configmap"
        ref = source["name"]
    if "items" in source:
        raise KubeletRefused(f"volume {name!r}: items are not played here")
    obj = objects.get((kind, ref))
    if obj is None and not source.get("optional"):
        raise KubeletRefused(
            f"MountVolume.SetUp failed for volume {name!r}: {kind.lower()} {ref!r} not found"
        )
    files: dict[str, bytes] = {}
    for key, text in ((obj or {}).get("data") or {}).items():
        files[key] = base64.b64decode(text) if kind == "Secret" else str(text).encode()
    for key, text in ((obj or {}).get("binaryData") or {}).items():
        files[key] = base64.b64decode(text)
    folder: Path = pod_dir / "volumes" / plugin / name
    _write_files(folder, files, int(source.get("defaultMode", DEFAULT_MODE)), fs_group)
    return folder


def _write_files(folder: Path, files: Mapping[str, bytes], mode: int, fs_group: int | None) -> None:
    """Files with ``mode``; with an fsGroup owned by that group and group-readable, in a
    set-group-id folder, as the kubelet's volume ownership change leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    for key, content in files.items():
        path = folder / key
        path.write_bytes(content)
        if fs_group is not None:
            os.chown(path, 0, fs_group)
        path.chmod(mode | (READ_MASK if fs_group is not None else 0))
    if fs_group is not None:
        os.chown(folder, 0, fs_group)
        folder.chmod(0o2755)


def _host_path(path: str, host_paths: Mapping[str, Path]) -> Path:
    """``path``, or its place under the test's folders when ``host_paths`` moves a parent."""
    pure = PurePosixPath(path)
    for moved in sorted(host_paths, key=len, reverse=True):
        if pure == PurePosixPath(moved) or PurePosixPath(moved) in pure.parents:
            return host_paths[moved] / pure.relative_to(moved)
    return Path(path)


def _mount(mount: Mapping[str, Any], volumes: Mapping[str, Path]) -> Mount:
    host = volumes[mount["name"]]
    if mount.get("subPath"):
        host = host / mount["subPath"]
    return Mount(
        host,
        mount["mountPath"],
        readonly=bool(mount.get("readOnly")),
        propagation=mount.get("mountPropagation") or "None",
    )


def _probes(container: Mapping[str, Any]) -> dict[str, HttpProbe]:
    ports = {p["name"]: p["containerPort"] for p in container.get("ports") or [] if "name" in p}
    found: dict[str, HttpProbe] = {}
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        http = (container.get(kind) or {}).get("httpGet")
        if http is not None:
            port = http["port"]
            found[kind] = HttpProbe(
                http.get("path", "/"), ports[port] if isinstance(port, str) else port
            )
    return found
