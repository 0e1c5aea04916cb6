"""The kubelet's part of a node, as far as the e2e suite needs it: its cgroup driver's layout.

There is no kubelet here; the harness plays its role towards CRI. With the cgroupfs driver a pod's
cgroup parent is a path (``/kubepods/burstable/pod<uid>``) and containerd's runc puts each
container in ``<parent>/<container id>``. With the systemd driver the kubelet passes a slice
name (``kubepods-burstable-pod<uid with _>.slice``, whose cgroup is
``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``), containerd runs
with ``SystemdCgroup = true`` and runc asks systemd for a ``cri-containerd-<id>.scope`` in it.
As the kubelet does, the harness creates the QoS slices once and each pod's slice before its
sandbox, through systemd, and stops them (systemd then removes their cgroups) when done.

``KOORD_E2E_CGROUP_DRIVER`` (``cgroupfs`` unless set) chooses the driver for a run; ``systemd``
needs systemd as PID 1 (the VM tier, tests/e2e/harness/vm.py).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

DRIVER_ENV = "KOORD_E2E_CGROUP_DRIVER"
DRIVERS = ("cgroupfs", "systemd")
KUBE_QOS = ("guaranteed", "burstable", "besteffort")


class KubeletLayoutError(RuntimeError):
    """The chosen cgroup driver cannot work on this machine."""


@dataclass(frozen=True)
class KubeletLayout:
    """Pod and container cgroups as the kubelet's ``driver`` lays them out."""

    driver: str = "cgroupfs"

    def __post_init__(self) -> None:
        if self.driver not in DRIVERS:
            raise ValueError(f"unknown cgroup driver {self.driver!r}; one of {DRIVERS}")

    @property
    def systemd(self) -> bool:
        return self.driver == "systemd"

    def qos_dir(self, qos: str) -> str:
        """The QoS-level cgroup, e.g. ``/kubepods/besteffort`` or its systemd slice path."""
        _check_qos(qos)
        if self.systemd:
            top = "/kubepods.slice"
            return top if qos == "guaranteed" else f"{top}/kubepods-{qos}.slice"
        return "/kubepods" if qos == "guaranteed" else f"/kubepods/{qos}"

    def qos_dirs(self) -> list[str]:
        """Every QoS-level cgroup, children before their parent (the order to remove them)."""
        return [self.qos_dir(q) for q in ("burstable", "besteffort", "guaranteed")]

    def pod_slice(self, qos: str, uid: str) -> str:
        """The pod's systemd slice unit (the kubelet escapes "-" in the uid as "_")."""
        _check_qos(qos)
        level = "" if qos == "guaranteed" else f"-{qos}"
        return f"kubepods{level}-pod{uid.replace('-', '_')}.slice"

    def pod_parent(self, qos: str, uid: str) -> str:
        """What the kubelet passes to CRI as the sandbox's cgroup parent."""
        return self.pod_slice(qos, uid) if self.systemd else f"{self.qos_dir(qos)}/pod{uid}"

    def pod_dir(self, qos: str, uid: str) -> str:
        """The pod's cgroup, relative to a hierarchy root."""
        if self.systemd:
            return f"{self.qos_dir(qos)}/{self.pod_slice(qos, uid)}"
        return self.pod_parent(qos, uid)

    def container_dir(self, pod_dir: str, container_id: str) -> str:
        """The cgroup runc gives a container of the pod whose cgroup is ``pod_dir``."""
        if self.systemd:
            return f"{pod_dir}/cri-containerd-{container_id}.scope"
        return f"{pod_dir}/{container_id}"


def _check_qos(qos: str) -> None:
    if qos not in KUBE_QOS:
        raise ValueError(f"unknown Kubernetes QoS class {qos!r}; one of {sorted(KUBE_QOS)}")


def layout_from_env() -> KubeletLayout:
    return KubeletLayout(os.environ.get(DRIVER_ENV, "cgroupfs"))


def systemd_is_pid1() -> bool:
    return Path("/run/systemd/system").is_dir()


class Slices:
    """Starts and stops the systemd slices the harness creates, as the kubelet would.

    The QoS slices are shared by every Node of the process: started by the first user if they
    were not active, stopped when the last user is done (stopping a slice stops all in it).
    A pod's slice is started before its sandbox and stopped with the node.
    """

    QOS = ("kubepods.slice", "kubepods-burstable.slice", "kubepods-besteffort.slice")
    _users = 0
    _qos_started: list[str] = []  # noqa: RUF012 - process-wide on purpose

    def __init__(self) -> None:
        if not systemd_is_pid1():
            raise KubeletLayoutError(
                "the systemd cgroup driver needs systemd as PID 1 (run the VM tier: make e2e-v2)"
            )
        if Slices._users == 0:
            Slices._qos_started = [s for s in self.QOS if not _active(s)]
            _systemctl("start", *self.QOS[1:])  # kubepods.slice comes with its children
        Slices._users += 1
        self.pods: list[str] = []
        self._done = False

    def start_pod(self, unit: str) -> None:
        _systemctl("start", unit)
        if unit not in self.pods:
            self.pods.append(unit)

    def stop_all(self) -> list[str]:
        """Stop the pod slices started here, and the QoS slices with the last user."""
        if self._done:
            return []
        self._done = True
        problems = _stop(self.pods)
        Slices._users -= 1
        if Slices._users == 0:
            problems += _stop(list(reversed(Slices._qos_started)))
        return problems


def _stop(units: list[str]) -> list[str]:
    problems = []
    for unit in units:
        try:
            _systemctl("stop", unit)
        except KubeletLayoutError as err:
            problems.append(str(err))
    return problems


def _active(unit: str) -> bool:
    done = subprocess.run(
        ["systemctl", "is-active", "--quiet", unit], check=False, capture_output=True
    )
    return done.returncode == 0


def _systemctl(*args: str) -> None:
    done = subprocess.run(
        ["systemctl", *args], check=False, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise KubeletLayoutError(f"systemctl {' '.join(args)}: {done.stderr.strip()}")
