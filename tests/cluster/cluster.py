"""A single-node Kubernetes on this machine, from the binary kubebuild.py makes.

What runs, each a process of the binary (``kube COMPONENT``) in a network namespace of the
cluster's own, with its log in the cluster's folder:

- etcd (embedded from the module the API server is built against; no fsync: a test cluster);
- kube-apiserver with ``Node,RBAC`` authorization, NodeRestriction, service-account tokens,
  and aggregator routing (webhook Services are dialled at their endpoints);
- kube-controller-manager with its per-controller service accounts (garbage collection,
  disruption budgets, Jobs, DaemonSets, Deployments, ...);
- kube-scheduler (the default profile);
- kube-proxy (iptables, inside the namespace only), so Service addresses answer, and CoreDNS
  (built beside it) on the node's address, the pods' nameserver, so Service names resolve;
- kubelet on a private containerd (tests/e2e/harness/containerd.py) with NRI on, the cgroupfs
  driver, its own cgroup root and folders, a CNI bridge, and the cluster's CA.

The namespace has the node's address on a dummy link, the pods' bridge, and loopback; nothing
is routed out of it. The harness and tests reach the API server from a thread that entered the
namespace (``Cluster.api``) or with ``kubectl`` run inside it (``Cluster.kubectl``).

``Cluster.start(node=False)`` runs only what scheduling needs: etcd, kube-apiserver and
kube-scheduler, no controller manager, proxy, DNS, containerd or kubelet; the caller makes the
Node objects (benchmarks/kube_scheduler_extender.py, with 1,000 kubelet-less nodes). It touches
nothing of the machine's own (no NRI socket, no /var/lib/koordlet), so it takes no START_LOCK.

Every file is under one temporary folder; teardown stops every process it started (by pid),
removes the pods containerd still has through CRI, releases the kubelet's mounts, removes the
cgroups under the kubelet's root, the namespaces and the folder, and returns what it could not
remove.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import logging
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
import yaml

from tests.cluster import audit, kubebuild, pki
from tests.e2e.harness import containerd as ctrd
from tests.e2e.harness import paths
from tests.e2e.harness.cri import CriClient
from tests.e2e.harness.kubelet import KubeletLayout
from tests.e2e.harness.podnet import PLUGINS, plugin_dir
from tests.e2e.harness.timing import deadline, scaled

log = logging.getLogger(__name__)
T = TypeVar("T")

NODE_NAME = "koord-node"
NODE_IP = "10.250.0.10"
NODE_PREFIX = 24
POD_CIDR = "10.251.0.0/24"
SERVICE_CIDR = "10.96.0.0/16"
API_SERVICE_IP = "10.96.0.1"
API_PORT = 6443
# The kubelet's cgroup root, its own: it removes pod cgroups under it that it does not know.
CGROUP_ROOT = "koordk8s"
# koordlet's DaemonSet mounts the host's /var/run/nri: the node's containerd serves NRI there.
NRI_SOCKET = Path("/var/run/nri/nri.sock")
KOORDLET_DIR = Path("/var/lib/koordlet")
CLONE_NEWNET = 0x40000000
# One cluster at a time on a machine (the host's NRI socket, /var/lib/koordlet, the node's
# address): a second test session waits here for the first one's teardown.
START_LOCK = Path("/run/lock/koordk8s.lock")


# What kubeadm grants CoreDNS (its ClusterRole system:coredns), bound to CoreDNS's user.
COREDNS_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:coredns"}]
"""


class ClusterError(RuntimeError):
    """The cluster did not come up or answer; the message names the component and its log."""


@dataclass(frozen=True)
class NodeLayout(ctrd.Layout):
    """The node's containerd: private folders, NRI on the socket a DaemonSet finds."""

    @property
    def nri_socket(self) -> Path:
        return NRI_SOCKET


@dataclass
class Process:
    """One component's process; ``proc`` is None for one started by an earlier run (the
    cluster of ``make cluster``, stopped by ``make cluster-down``), known by its pid and by the
    cluster's folder in its command line (so a reused pid is never signalled)."""

    name: str
    pid: int
    log: Path
    marker: str
    proc: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return self.marker.encode() in cmdline and state != "Z"

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM to its process group, SIGKILL after ``timeout`` seconds."""
        for sig, wait in ((signal.SIGTERM, scaled(timeout)), (signal.SIGKILL, 10.0)):
            if not self.alive():
                return
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            end = time.monotonic() + wait
            while self.alive() and time.monotonic() < end:
                time.sleep(0.1)

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise ClusterError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def kubeconfig(server: str, ca: Path, pair: pki.Pair, user: str) -> str:
    cluster = {"server": server, "certificate-authority": str(ca)}
    credentials = {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "koord", "cluster": cluster}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "koord", "context": {"cluster": "koord", "user": user}}],
            "current-context": "koord",
        },
        sort_keys=False,
    )


def scheduler_healthy() -> bool:
    """kube-scheduler's /healthz (or that of a build of it) answers ok on its secure port;
    called in the cluster's network namespace."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # its own self-signed serving certificate
    url = "https://127.0.0.1:10259/healthz"
    with urllib.request.urlopen(url, context=context, timeout=5) as r:
        return bool(r.read() == b"ok")


@dataclass
class Cluster:
    """See the module docstring; ``Cluster.start()`` brings one up."""

    base: Path
    binary: Path
    netns: str
    containerd_version: str = paths.CONTAINERD_VERSION
    processes: list[Process] = field(default_factory=list)
    containerd: ctrd.Containerd | None = None
    made_nri_dir: bool = False
    # koordlet's DaemonSet keeps its data in the host's /var/lib/koordlet (DirectoryOrCreate).
    made_koordlet_dir: bool = False
    # the kubelet's maxPods (None: its default, 110); benchmarks/peer_koordlet.py runs 200
    max_pods: int | None = None
    _pool: ThreadPoolExecutor | None = None
    _lock: int | None = None  # the fd holding START_LOCK
    _torn_down: list[str] | None = None

    # -- paths ------------------------------------------------------------------------------

    @property
    def pki_dir(self) -> Path:
        return self.base / "pki"

    @property
    def kubelet_dir(self) -> Path:
        return self.base / "kubelet"

    @property
    def netns_path(self) -> Path:
        return Path("/run/netns") / self.netns

    @property
    def server(self) -> str:
        return f"https://{NODE_IP}:{API_PORT}"

    def config_path(self, user: str) -> Path:
        return self.base / f"{user}.kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.config_path("admin")

    # -- start ------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        binary: Path | None = None,
        timeout: float = 180.0,
        node: bool = True,
        max_pods: int | None = None,
    ) -> Cluster:
        """Bring a cluster up: everything above running and the node Ready; with ``node``
        false, the control plane for scheduling alone (see the module docstring)."""
        binary = binary or kubebuild.ensure()
        lock = None
        if node:
            lock = os.open(START_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("cluster: waiting for the other cluster on this machine (%s)", START_LOCK)
                fcntl.flock(lock, fcntl.LOCK_EX)
        base = Path(tempfile.mkdtemp(prefix="koord-k8s-", dir="/tmp"))
        netns = f"koordk8s-{base.name[-8:]}"
        cluster = cls(base=base, binary=binary, netns=netns, _lock=lock, max_pods=max_pods)
        try:
            cluster._start(timeout, node)
        except BaseException:
            problems = cluster.teardown()
            if problems:
                log.warning("cluster teardown after a failed start: %s", problems)
            raise
        return cluster

    def _start(self, timeout: float, node: bool = True) -> None:
        started = time.monotonic()
        self.made_koordlet_dir = node and not KOORDLET_DIR.exists()
        self._namespaces()
        self._pki()
        self.spawn("etcd", [
            "etcd", "--name=koord-node", f"--data-dir={self.base / 'etcd'}",
            "--listen-client-urls=http://127.0.0.1:2379",
            "--advertise-client-urls=http://127.0.0.1:2379",
            "--listen-peer-urls=http://127.0.0.1:2380",
            "--initial-advertise-peer-urls=http://127.0.0.1:2380",
            "--initial-cluster=koord-node=http://127.0.0.1:2380",
            "--unsafe-no-fsync", "--log-level=warn",
        ])  # fmt: skip
        self.spawn("kube-apiserver", self._apiserver_args())
        self.wait("the API server's /readyz", lambda: self.get("/readyz") == "ok", timeout)
        if not node:
            self.spawn("kube-scheduler", self._scheduler_args())
            log.info("cluster: control plane up in %.0f s (%s)", time.monotonic() - started,
                     self.base)  # fmt: skip
            return
        self.spawn("kube-controller-manager", self._controller_manager_args())
        self.spawn("kube-scheduler", self._scheduler_args())
        self.spawn("kube-proxy", ["kube-proxy", f"--config={self._kube_proxy_config()}"])
        self.apply(COREDNS_RBAC)
        self.spawn(
            "coredns", ["-conf", str(self._corefile())], binary=self.binary.parent / "coredns"
        )
        self._start_containerd()
        self._make_cgroup_root()
        self.spawn("kubelet", [
            "kubelet", f"--config={self._kubelet_config()}",
            f"--kubeconfig={self.config_path('kubelet')}",
            f"--root-dir={self.kubelet_dir}", f"--cert-dir={self.base / 'kubelet-pki'}",
            f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}", "--v=1",
        ], enter=self.node_enter)  # fmt: skip
        self.wait("the node Ready", self.node_ready, timeout)
        log.info("cluster: up in %.0f s (%s)", time.monotonic() - started, self.base)

    @property
    def mount_ns(self) -> Path:
        """Where the node's mount namespace is kept (a bind mount of its nsfs file)."""
        return self.base / "mountns"

    @property
    def node_enter(self) -> tuple[str, ...]:
        """nsenter into the node's namespaces: containerd's and the kubelet's."""
        return ("nsenter", f"--net={self.netns_path}", f"--mount={self.mount_ns}")

    def _namespaces(self) -> None:
        """The cluster's network namespace, and the node's mount namespace: a copy of this
        machine's mounts in which they are shared, as on a node whose init is systemd, so the
        kubelet may give containers mounts with propagation (koordlet's /sys/fs/cgroup is
        HostToContainer); this machine's own stay private. The kubelet's volume mounts live
        there too and go with it."""
        self.mount_ns.touch()
        _run("unshare", f"--mount={self.mount_ns}", "--propagation=private",
             "mount", "--make-rshared", "/")  # fmt: skip
        _run("ip", "netns", "add", self.netns)
        inside = ("ip", "-n", self.netns)
        _run(*inside, "link", "set", "lo", "up")
        # The node's interface: one end of a veth pair whose ends both stay inside (this
        # kernel has no dummy links).
        _run(*inside, "link", "add", "node0", "type", "veth", "peer", "name", "node0-peer")
        _run(*inside, "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", "node0")
        _run(*inside, "link", "set", "node0-peer", "up")
        _run(*inside, "link", "set", "node0", "up")
        # Service addresses are answered by kube-proxy's rules; routes make them leave lo.
        _run(*inside, "route", "add", SERVICE_CIDR, "dev", "node0")

    def _pki(self) -> None:
        ca = pki.Authority(self.pki_dir)
        self.ca = ca
        names = [NODE_IP, API_SERVICE_IP, "127.0.0.1", "localhost", "kubernetes",
                 "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local"]  # fmt: skip
        ca.issue("apiserver", "kube-apiserver", server_names=names)
        ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                 ["system:masters"], client=True)  # fmt: skip
        ca.issue("kubelet-serving", NODE_NAME, server_names=[NODE_IP, NODE_NAME])
        pki.service_account_keys(self.pki_dir)
        users = {
            "admin": ("kubernetes-admin", ["system:masters"]),
            "kube-controller-manager": ("system:kube-controller-manager", []),
            "kube-scheduler": ("system:kube-scheduler", []),
            "kube-proxy": ("system:kube-proxy", []),
            "coredns": ("system:coredns", []),
            "kubelet": (f"system:node:{NODE_NAME}", ["system:nodes"]),
        }
        for user, (common_name, groups) in users.items():
            pair = ca.issue(f"{user}-client", common_name, groups, client=True)
            self.config_path(user).write_text(kubeconfig(self.server, ca.pair.cert, pair, user))

    @property
    def audit_log(self) -> Path:
        return self.base / "logs" / "audit.log"

    def _apiserver_args(self) -> list[str]:
        p = self.pki_dir
        policy = self.base / "audit-policy.yaml"
        policy.write_text(audit.policy(NODE_NAME))
        self.audit_log.parent.mkdir(parents=True, exist_ok=True)
        return [
            "kube-apiserver",
            "--etcd-servers=http://127.0.0.1:2379",
            f"--advertise-address={NODE_IP}", f"--secure-port={API_PORT}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--enable-aggregator-routing=true",
            "--allow-privileged=true",
            "--profiling=false",
            f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-mode=blocking",
            "--v=1",
        ]  # fmt: skip

    def _controller_manager_args(self) -> list[str]:
        p, config = self.pki_dir, self.config_path("kube-controller-manager")
        return [
            "kube-controller-manager", f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p / 'sa.key'}",
            f"--root-ca-file={p / 'ca.crt'}",
            f"--cluster-signing-cert-file={p / 'ca.crt'}",
            f"--cluster-signing-key-file={p / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--v=1",
        ]  # fmt: skip

    def _scheduler_args(self, *extra: str) -> list[str]:
        config = self.config_path("kube-scheduler")
        return [
            "kube-scheduler", f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}", f"--authorization-kubeconfig={config}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--v=1", *extra,
        ]  # fmt: skip

    def restart_scheduler(self, *extra: str, timeout: float = 60.0) -> None:
        """Stop kube-scheduler and start it again with ``extra`` flags after its own (a
        ``--config`` file, say); return once its /healthz answers."""
        for old in [p for p in self.processes if p.name == "kube-scheduler"]:
            old.stop()
            self.processes.remove(old)
        self.spawn("kube-scheduler", self._scheduler_args(*extra))
        self.wait("kube-scheduler's /healthz", lambda: self.in_netns(scheduler_healthy), timeout)

    def _kube_proxy_config(self) -> Path:
        path = self.base / "kube-proxy.yaml"
        path.write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.config_path("kube-proxy"))},
            "hostnameOverride": NODE_NAME,
            "mode": "iptables",
            "clusterCIDR": POD_CIDR,
            # No conntrack table sizing: the namespace's sysctls are not ours to change.
            "conntrack": {"maxPerCore": 0, "min": 0},
            "metricsBindAddress": "127.0.0.1:10249",
            "healthzBindAddress": "127.0.0.1:10256",
        }))  # fmt: skip
        return path

    def _corefile(self) -> Path:
        path = self.base / "Corefile"
        path.write_text(
            textwrap.dedent(f"""\
            .:53 {{
                bind {NODE_IP}
                errors
                health 127.0.0.1:8080
                ready 127.0.0.1:8181
                kubernetes cluster.local in-addr.arpa ip6.arpa {{
                    kubeconfig {self.config_path("coredns")} koord
                    pods insecure
                    fallthrough in-addr.arpa ip6.arpa
                }}
                cache 30
                loadbalance
            }}
            """)
        )
        return path

    def _kubelet_config(self) -> Path:
        path = self.base / "kubelet.yaml"
        resolv = self.base / "resolv.conf"
        resolv.write_text("search cluster.local\noptions ndots:5\n")
        path.write_text(yaml.safe_dump({
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE_IP,
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.pki_dir / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(self.pki_dir / "kubelet-serving.crt"),
            "tlsPrivateKeyFile": str(self.pki_dir / "kubelet-serving.key"),
            "containerRuntimeEndpoint": f"unix://{self.node_containerd.layout.address}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": f"/{CGROUP_ROOT}",
            "failCgroupV1": False,
            "failSwapOn": False,
            "podLogsDir": str(self.base / "pod-logs"),
            "resolvConf": str(resolv),
            "clusterDomain": "cluster.local",
            "clusterDNS": [NODE_IP],
            "staticPodPath": "",
            # A test machine: evict only when truly short, never collect images (none could
            # be pulled back).
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "syncFrequency": "10s",
            "nodeStatusUpdateFrequency": "10s",
            **({"maxPods": self.max_pods} if self.max_pods else {}),
        }))  # fmt: skip
        return path

    @property
    def node_containerd(self) -> ctrd.Containerd:
        if self.containerd is None:
            raise ClusterError("the node's containerd has not been made")
        return self.containerd

    def _start_containerd(self) -> None:
        if ctrd.accepting(NRI_SOCKET):
            raise ClusterError(
                f"{NRI_SOCKET} answers: another containerd serves NRI on this machine; "
                "the cluster's node must (koordlet's DaemonSet mounts /var/run/nri)"
            )
        NRI_SOCKET.unlink(missing_ok=True)  # a socket left by a containerd that was killed
        self.made_nri_dir = not NRI_SOCKET.parent.exists()
        NRI_SOCKET.parent.mkdir(parents=True, exist_ok=True)
        settings = ctrd.Settings(layout=KubeletLayout("cgroupfs"), enter=self.node_enter)
        self.containerd = ctrd.Containerd(NodeLayout(self.base / "containerd"), settings)
        self.containerd.start()
        pid = self.containerd.pid
        assert pid is not None  # start() waited for its socket
        self.processes.append(
            Process("containerd", pid, self.containerd.layout.log, str(self.base))
        )
        plugins = plugin_dir()
        if plugins is None:
            raise ClusterError(
                f"no CNI plugins {', '.join(PLUGINS)}: scripts/setup.sh installs them"
            )
        cni = self.containerd.layout.base / "cni"
        for name in PLUGINS:
            (cni / "bin" / name).symlink_to(plugins / name)
        (cni / "conf" / "10-koord-cluster.conflist").write_text(json.dumps({
            "cniVersion": "0.4.0",
            "name": "koord-cluster",
            "plugins": [{
                "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": str(cni / "ipam"),
                         "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]},
            }],
        }, indent=2))  # fmt: skip
        self.containerd.ctr("images", "import", str(kubebuild.scheduler_image(self.binary)))

    def _make_cgroup_root(self) -> None:
        """The kubelet's cgroup root in every hierarchy (the kubelet wants it there before it
        starts); cpuset's with its parent's CPUs and memory nodes, as v1 starts it empty."""
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            if not (hierarchy / "cgroup.procs").exists():
                continue
            top = hierarchy / CGROUP_ROOT
            top.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (hierarchy / name).exists():
                    (top / name).write_text((hierarchy / name).read_text())

    def spawn(
        self, name: str, args: list[str], enter: tuple[str, ...] = (), binary: Path | None = None
    ) -> None:
        """``binary`` (the Kubernetes binary by default) with ``args``, in the cluster's network
        namespace unless ``enter`` says otherwise, logged to logs/NAME.log; the teardown stops
        it by its pid (a benchmark's scheduler too)."""
        logfile = self.base / "logs" / f"{name}.log"
        logfile.parent.mkdir(exist_ok=True)
        enter = enter or ("nsenter", f"--net={self.netns_path}")
        with logfile.open("ab") as out:
            proc = subprocess.Popen(
                [*enter, str(binary or self.binary), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        self.processes.append(Process(name, proc.pid, logfile, str(self.base), proc))

    def wait(self, what: str, ready: Callable[[], bool], timeout: float) -> None:
        """Until ``ready()``; ClusterError with the logs when a process exits or ``timeout``
        passes first."""
        end = deadline(timeout)
        while time.monotonic() < end:
            for p in self.processes:
                if not p.alive():
                    raise ClusterError(
                        f"{p.name} exited ({p.returncode}) while waiting for {what}; "
                        f"its log {p.log}:\n{p.tail()}"
                    )
            try:
                if ready():
                    return
            except (OSError, ClusterError):
                pass
            time.sleep(0.5)
        logs = "\n".join(f"--- {p.name}\n{p.tail(8)}" for p in self.processes)
        raise ClusterError(f"{what}: not reached in {scaled(timeout):g} s\n{logs}")

    # -- kept between runs (make cluster, make cluster-down) -----------------------------------

    def save(self, path: Path) -> None:
        """What ``load`` needs to find this cluster again from another process."""
        state = {
            "base": str(self.base), "binary": str(self.binary), "netns": self.netns,
            "containerd_version": self.containerd_version,
            "made_nri_dir": self.made_nri_dir, "made_koordlet_dir": self.made_koordlet_dir,
            "processes": [
                {"name": p.name, "pid": p.pid, "log": str(p.log)} for p in self.processes
            ],
        }  # fmt: skip
        path.write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls, path: Path) -> Cluster:
        state = json.loads(path.read_text())
        base = Path(state["base"])
        cluster = cls(
            base=base, binary=Path(state["binary"]), netns=state["netns"],
            containerd_version=state["containerd_version"],
            made_nri_dir=state["made_nri_dir"], made_koordlet_dir=state["made_koordlet_dir"],
        )  # fmt: skip
        cluster.processes = [
            Process(p["name"], p["pid"], Path(p["log"]), str(base)) for p in state["processes"]
        ]
        settings = ctrd.Settings(layout=KubeletLayout("cgroupfs"), enter=cluster.node_enter)
        cluster.containerd = ctrd.Containerd(NodeLayout(base / "containerd"), settings)
        return cluster

    # -- talking to it ----------------------------------------------------------------------

    def in_netns(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a thread inside the cluster's network namespace."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, initializer=self.enter_netns)
        return self._pool.submit(fn).result()

    def enter_netns(self) -> None:
        """Move the calling thread into the cluster's network namespace (for a thread pool's
        initializer: each of its threads may then dial the API server)."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(self.netns_path, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the cluster's network namespace")
        finally:
            os.close(fd)

    def _ssl(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        context.load_cert_chain(
            self.pki_dir / "admin-client.crt", self.pki_dir / "admin-client.key"
        )
        return context

    def api(self, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> Any:  # fmt: skip
        """One request as the cluster's admin; the decoded JSON answer."""

        def call() -> Any:
            data = None if body is None else json.dumps(body).encode()
            request = urllib.request.Request(  # noqa: S310 - the cluster's own https URL
                self.server + path, data=data, method=method
            )
            request.add_header("Content-Type", content_type)
            request.add_header("Accept", "application/json")
            try:
                with urllib.request.urlopen(  # noqa: S310
                    request, context=self._ssl(), timeout=scaled(10)
                ) as r:
                    text = r.read().decode()
            except urllib.error.HTTPError as err:
                raise ClusterError(
                    f"{method} {path}: {err.code} {err.read().decode()[:4000]}"
                ) from err
            return json.loads(text) if text.startswith(("{", "[")) else text

        return self.in_netns(call)

    def get(self, path: str) -> Any:
        return self.api("GET", path)

    def delete(self, path: str) -> None:
        """DELETE ``path``; one already gone (404) is no error: a cleanup races the controllers
        that remove objects with their owners (a PodMigrationJob's Reservation, say)."""
        try:
            self.api("DELETE", path)
        except ClusterError as err:
            if ": 404 " not in str(err):
                raise

    def node_ready(self) -> bool:
        node = self.get(f"/api/v1/nodes/{NODE_NAME}")
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None,
                timeout: float = 120) -> str:  # fmt: skip
        """``kubectl ARGS`` as the admin, run inside the namespace; its output."""
        command = ["nsenter", f"--net={self.netns_path}", str(self.binary), "kubectl",
                   f"--kubeconfig={self.admin_kubeconfig}", *args]  # fmt: skip
        done = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=scaled(timeout),
            check=False,
        )
        if check and done.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json"))

    def apply(self, manifest: str) -> str:
        return self.kubectl("apply", "-f", "-", stdin=textwrap.dedent(manifest))

    def wait_for(self, what: str, check: Callable[[], T | None], timeout: float = 120) -> T:
        """Poll ``check`` until it returns something true; fail naming ``what``."""
        end = deadline(timeout)
        last: Exception | None = None
        while time.monotonic() < end:
            try:
                found = check()
                if found:
                    return found
            except (ClusterError, KeyError, IndexError) as err:
                last = err
            time.sleep(1)
        raise ClusterError(f"{what}: not seen in {scaled(timeout):g} s (last error: {last})")

    def log_of(self, component: str) -> str:
        path = self.base / "logs" / f"{component}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- disturbances ---------------------------------------------------------------------------

    def etcd(self, call: str, body: dict[str, Any]) -> Any:
        """One call to etcd's v3 JSON gateway (``kv/range``, ``kv/compaction``, ...)."""

        def post() -> Any:
            request = urllib.request.Request(
                f"http://127.0.0.1:2379/v3/{call}", data=json.dumps(body).encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=scaled(10)) as r:  # noqa: S310
                return json.loads(r.read())

        return self.in_netns(post)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (what etcd does on its own every
        few minutes in a real cluster): a watch from an older resourceVersion gets 410 Gone."""
        revision = int(self.etcd("kv/range", {"key": "AA=="})["header"]["revision"])
        self.etcd("kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def restart_apiserver(self, timeout: float = 120.0) -> None:
        """Stop kube-apiserver (SIGTERM) and start it again with the same arguments; every
        client's connection and watch breaks."""
        (old,) = [p for p in self.processes if p.name == "kube-apiserver"]
        old.stop()
        self.processes.remove(old)
        self.spawn("kube-apiserver", self._apiserver_args())
        self.wait("the API server's /readyz again", lambda: self.get("/readyz") == "ok", timeout)

    # -- teardown ---------------------------------------------------------------------------

    def teardown(self) -> list[str]:
        """Remove everything the cluster made; what could not be removed (empty: all gone)."""
        if self._torn_down is not None:
            return self._torn_down
        problems: list[str] = []
        for p in reversed(self.processes):
            if p.name != "containerd":
                p.stop()
        if self._pool is not None:
            self._pool.shutdown()
        if self.containerd is not None:
            problems += self._remove_sandboxes()
            for p in self.processes:
                if p.name == "containerd":
                    p.stop()
            problems += self.containerd.cleanup()
            # only a cluster with a node made the kubelet's cgroup root: a control plane alone
            # (node=False) leaves it to the cluster whose node may be running beside it
            problems += self._remove_cgroups()
        for point in ctrd.mounts_under(self.base):
            ctrd._umount(point)
        left = ctrd.mounts_under(self.base)
        if left:
            problems.append(f"mounts left under {self.base}: {left}")
        if (
            _run("ip", "netns", "del", self.netns, check=False).returncode != 0
            and Path(self.netns_path).exists()
        ):
            problems.append(f"network namespace {self.netns} left")
        if NRI_SOCKET.exists() and self.containerd is not None:
            NRI_SOCKET.unlink(missing_ok=True)
        if self.made_nri_dir:
            with contextlib.suppress(OSError):
                NRI_SOCKET.parent.rmdir()
        if self.made_koordlet_dir and KOORDLET_DIR.exists():
            shutil.rmtree(KOORDLET_DIR, ignore_errors=True)
        if not left:
            shutil.rmtree(self.base, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)  # releases START_LOCK
        self._torn_down = problems
        return problems

    def _remove_sandboxes(self) -> list[str]:
        """Stop and remove the pods containerd still has (the kubelet is gone) through CRI, as
        the kubelet would: CNI's DEL runs, the pod's network namespace goes, runc removes each
        container's cgroups."""
        cri = CriClient(self.node_containerd.layout.address)
        pb = cri.pb
        try:
            sandboxes = cri.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=30).items
            for sandbox in sandboxes:
                cri.runtime.StopPodSandbox(
                    pb.StopPodSandboxRequest(pod_sandbox_id=sandbox.id), timeout=60
                )
                cri.runtime.RemovePodSandbox(
                    pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox.id), timeout=60
                )
            left = cri.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=30).items
        except grpc.RpcError as err:
            return [f"the node's containerd: {err}"]
        finally:
            cri.close()
        return (
            [f"pods left in the node's containerd: {[s.metadata.name for s in left]}"]
            if left
            else []
        )

    def _remove_cgroups(self) -> list[str]:
        """The kubelet's cgroup tree under its root, in every hierarchy, deepest first."""
        problems = []
        for hierarchy in Path("/sys/fs/cgroup").iterdir():
            top = hierarchy / CGROUP_ROOT
            if not top.is_dir():
                continue
            for folder in sorted(
                (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            try:
                top.rmdir()
            except OSError as err:
                problems.append(f"cgroup {top}: {err}")
        return problems
