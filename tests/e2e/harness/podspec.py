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
  get a fresh folder; the kubelet's /dev/termination-log file is mounted too;
- securityContext (pod and container, the container's winning) becomes privileged, user,
  group, read-only root and dropped capabilities; hostPID and hostNetwork the namespaces.

Two things differ, both because this machine has no API server, and both are said where they
apply: no service-account token is projected and no KUBERNETES_SERVICE_* variables are set (so
koordlet runs standalone, on its default NodeSLO), and ``host_paths`` may move a host path
into the test's own folders (the harness's containerd keeps its NRI and CRI sockets in a
private folder, never in the host's /var/run, which tests must not touch).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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


class KubeletRefused(RuntimeError):
    """The kubelet would not start this pod (a hostPath type check failed, an unknown field
    reference); the message is the kubelet's reason."""


@dataclass(frozen=True)
class HttpProbe:
    """An httpGet probe, its named port resolved to the container's port number."""

    path: str
    port: int


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
) -> KubeletPod:
    """Translate a pod template for CRI; ``name`` is the pod's (a controller's name and a
    suffix), ``pod_dir`` plays /var/lib/kubelet/pods/<uid>."""
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
    volumes = _volumes(spec, pod_dir, host_paths or {})
    out = KubeletPod(pod, [])
    for container in containers:
        env = _env(container, fields)
        security = _security(spec, container)
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        term = pod_dir / "containers" / container["name"] / "termination-log"
        term.parent.mkdir(parents=True, exist_ok=True)
        term.touch()
        mounts = [_mount(m, volumes) for m in container.get("volumeMounts") or []]
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
                cpu_shares=_shares(requests.get("cpu", limits.get("cpu"))),
                cpu_quota=_quota(limits.get("cpu")),
                cpu_period=CFS_PERIOD_US if "cpu" in limits else None,
                memory_limit=value(limits["memory"]) if "memory" in limits else None,
            )
        )
        out.probes[container["name"]] = _probes(container)
    return out


def _security(spec: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's securityContext over the pod's (runAsUser, runAsGroup)."""
    pod_level = spec.get("securityContext") or {}
    merged = {k: pod_level[k] for k in ("runAsUser", "runAsGroup") if k in pod_level}
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
    spec: Mapping[str, Any], pod_dir: Path, host_paths: Mapping[str, Path]
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
        else:
            raise KubeletRefused(f"volume {name!r}: only hostPath and emptyDir are played here")
    return out


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
