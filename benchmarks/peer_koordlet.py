"""Our koordlet beside Koordinator v1.8's own, on the same node of a real cluster, in one run.

The cluster tier's single node (tests/cluster/cluster.py: kube-apiserver, kubelet, a private
containerd with NRI) runs N long-lived pods (half LS burstable, half BE). Then, in blocks whose
order alternates (none, ours, theirs; theirs, ours, none; ...), one koordlet at a time runs on
the node as a host process in the node's namespaces, each with its own defaults:

- CPU (user + system, every thread) and RSS of the koordlet process over ``--seconds``, after
  ``--settle`` seconds from the moment its NRI plugin connected;
- CreateContainer as the kubelet drives it: ``--creates`` BE pods made one after another
  through the API server, each timed by containerd itself (from its log line "CreateContainer
  within sandbox ... for container" to "... returns container id", nanosecond timestamps), and
  each container's cpu.shares read back: 1024 means the koordlet's BatchResource hook
  answered (the pods carry Koordinator's extended-resource-spec annotation asking for 1000
  milli batch-cpu), 2 is the kubelet's value for a BestEffort pod. The "none" block, with no
  koordlet, is the baseline of the added latency.

Theirs needs what their DaemonSet has: Koordinator's CRDs (the chart's, plus a minimal
NodeResourceTopology CRD, which their koordlet lists), a NodeMetric and a NodeSLO for the node,
the kubelet's pods (HTTPS on the node's kubelet port, with the admin's credentials),
``agent_mode=hostMode`` and ``NODE_NAME``. Its writable paths go to a scratch folder.
Koordinator's koordlet has no flag for the kubelet's cgroup root (it looks for ``kubepods`` at
the top of each hierarchy); the cluster's kubelet keeps its pods under ``/koordk8s``, so theirs
is given, as its cgroup root, a folder of links ``<hierarchy> ->
/sys/fs/cgroup/<hierarchy>/koordk8s``; ours is told ``--cgroup-kube-dir koordk8s/kubepods/``.
Build theirs outside this repository (the steps are in docs/performance.md). Prints one JSON
line; nothing is asserted.

    PYTHONPATH=. .venv/bin/python benchmarks/peer_koordlet.py --peer /work/peers/bin/koordlet \
        [-n 200] [--seconds 60] [--rounds 2] [--creates 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.procstats import cpu_seconds, percentile, rss_bytes, summary
from koordapi import keys
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.e2e.harness import images
from tests.unit.charts import helm

PLUGIN_ID = "00-koordlet_nri"  # both koordlets' default NRI index and name
BATCH_SHARES, KUBELET_BE_SHARES = 1024, 2
CGROUP = Path("/sys/fs/cgroup")
NAMESPACE_PODS = "/api/v1/namespaces/default/pods"
# The NodeResourceTopology CRD, only as much as an API server needs to serve the kind that
# Koordinator's koordlet lists and writes (topology.node.k8s.io/v1alpha1, cluster-scoped).
NRT_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "noderesourcetopologies.topology.node.k8s.io",
        # a *.k8s.io group: the API server wants this annotation (KEP 1111)
        "annotations": {"api-approved.kubernetes.io": "unapproved, a benchmark's stand-in"},
    },
    "spec": {
        "group": "topology.node.k8s.io",
        "scope": "Cluster",
        "names": {
            "kind": "NodeResourceTopology",
            "listKind": "NodeResourceTopologyList",
            "plural": "noderesourcetopologies",
            "singular": "noderesourcetopology",
        },
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
CREATE_START = re.compile(
    r'time="([^"]+)" level=info msg="CreateContainer within sandbox \\"\w+\\" for container '
    r"&ContainerMetadata\{Name:([\w-]+),"
)
CREATE_END = re.compile(
    r'time="([^"]+)" level=info msg="CreateContainer within sandbox \\"\w+\\" for '
    r'&ContainerMetadata\{Name:([\w-]+),Attempt:\d+,\} returns container id \\"(\w+)\\"'
)


@dataclass
class Mode:
    name: str
    command: list[str] | None  # None: no koordlet
    env: dict[str, str] = field(default_factory=dict)
    cpu_percent: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    create_ms: list[float] = field(default_factory=list)
    shares: dict[int, int] = field(default_factory=dict)  # cpu.shares seen -> trials


def pod(name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": extra.pop("container", "app"),
        "image": images.WORKLOAD.ref,
        "imagePullPolicy": "Never",
    }
    if "resources" in extra:
        container["resources"] = extra.pop("resources")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, **extra},
        "spec": {
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        },
    }


def background_pods(count: int) -> list[dict[str, Any]]:
    """Half LS (burstable: 1m cpu, 4 MiB), half BE (BestEffort), as koordlet_load.py runs."""
    pods = []
    for i in range(count):
        if i % 2:
            pods.append(pod(f"bg-{i}", {"bench": "bg", keys.LABEL_QOS_CLASS: "BE"}))
        else:
            small = {"requests": {"cpu": "1m", "memory": "4Mi"}}
            pods.append(
                pod(f"bg-{i}", {"bench": "bg", keys.LABEL_QOS_CLASS: "LS"}, resources=small)
            )
    return pods


def trial_pod(name: str) -> dict[str, Any]:
    """A BE pod whose extended-resource-spec asks for 1000 milli batch-cpu (what koord-manager's
    webhook would write): either koordlet's BatchResource hook gives its container 1024 shares."""
    batch = {keys.BATCH_CPU: "1000", keys.BATCH_MEMORY: str(256 << 20)}
    spec = {"containers": {name: {"requests": batch, "limits": batch}}}
    return pod(
        name,
        {"bench": "trial", keys.LABEL_QOS_CLASS: "BE"},
        annotations={keys.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec)},
        container=name,
    )


def create_all(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl("create", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1",
                                                           "items": objects}))  # fmt: skip


def pods_with(cluster: Cluster, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.get(f"{NAMESPACE_PODS}?labelSelector={selector}")["items"]
    return items


def wait_running(cluster: Cluster, selector: str, count: int, timeout: float) -> None:
    def running() -> bool:
        pods = pods_with(cluster, selector)
        return [p["status"].get("phase") for p in pods].count("Running") >= count

    cluster.wait_for(f"{count} pods {selector} Running", running, timeout)


def delete_all(cluster: Cluster, selector: str) -> None:
    cluster.kubectl("delete", "pods", "-l", selector, "--grace-period=0", "--force", "--wait=false")
    cluster.wait_for(f"pods {selector} gone", lambda: not pods_with(cluster, selector), 300)


def prepare(cluster: Cluster) -> None:
    """Koordinator's CRDs (the chart's and NodeResourceTopology), the node's NodeMetric and
    NodeSLO."""
    crds = helm.render(helm.CHART).all("CustomResourceDefinition")
    create_all(cluster, [*crds, NRT_CRD])
    for crd in [*crds, NRT_CRD]:
        name = crd["metadata"]["name"]
        path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        cluster.wait_for(
            f"{name} established",
            lambda path=path: any(  # type: ignore[misc]
                c["type"] == "Established" and c["status"] == "True"
                for c in cluster.get(path).get("status", {}).get("conditions", [])
            ),
        )
    create_all(cluster, [{
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
        "metadata": {"name": NODE_NAME},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300,
                                         "reportIntervalSeconds": 60}},
    }, {
        # koord-manager would make it; Koordinator's koordlet merges its defaults into an empty
        # spec (ours too), and without one its host-application collector never syncs, so
        # its runtime hooks never start
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
        "metadata": {"name": NODE_NAME}, "spec": {},
    }])  # fmt: skip


def cgroup_view(folder: Path) -> Path:
    """A cgroup root for Koordinator's koordlet whose hierarchies are the kubelet's cgroup root."""
    folder.mkdir(parents=True)
    for hierarchy in CGROUP.iterdir():
        if (hierarchy / CGROUP_ROOT).is_dir():
            (folder / hierarchy.name).symlink_to(hierarchy / CGROUP_ROOT)
    return folder


def modes(cluster: Cluster, peer: Path, scratch: Path) -> list[Mode]:
    node = {"NODE_NAME": NODE_NAME}
    ours = [
        str(Path(sys.executable).parent / "koordlet"),
        f"--kubeconfig={cluster.admin_kubeconfig}",
        f"--cgroup-kube-dir={CGROUP_ROOT}/kubepods/",
        f"--tsdb-path={scratch / 'ours-tsdb'}/",
    ]
    theirs = [
        str(peer),
        f"-kubeconfig={cluster.admin_kubeconfig}",
        f"-cgroup-root-dir={cgroup_view(scratch / 'cgroup-view')}/",
        f"-var-lib-kubelet-dir={cluster.kubelet_dir}/",
        f"-tsdb-path={scratch / 'theirs-tsdb'}/",
        f"-audit-log-dir={scratch / 'theirs-audit'}",
        f"-runtime-hooks-addr={scratch / 'koordlet.sock'}",
        f"-runtime-hooks-config-path={scratch / 'hookserver'}/",
        f"-prediction-checkpoint-filepath={scratch / 'prediction-checkpoints'}",
        f"-pod-resources-proxy-path={scratch / 'pod-resources'}",
        f"-xpu-device-infos-dir={scratch / 'xpu-device-infos'}/",
    ]
    for folder in ("hookserver", "prediction-checkpoints", "xpu-device-infos", "theirs-audit"):
        (scratch / folder).mkdir()  # theirs writes into them and does not make them
    return [
        Mode("none", None),
        Mode("ours", ours, dict(node, PYTHONPATH=str(Path(__file__).parents[1]))),
        Mode("theirs", theirs, dict(node, agent_mode="hostMode")),
    ]


def log_time(stamp: str) -> float:
    """Seconds since the epoch of containerd's RFC 3339 time with nanoseconds."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    start = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return start.timestamp() + float(f"0.{fraction or 0}")


def create_times(log: str, names: set[str]) -> dict[str, tuple[float, str]]:
    """Container name -> (CreateContainer milliseconds in containerd, container id)."""
    starts = {m[2]: log_time(m[1]) for m in CREATE_START.finditer(log) if m[2] in names}
    return {
        m[2]: ((log_time(m[1]) - starts[m[2]]) * 1000, m[3])
        for m in CREATE_END.finditer(log)
        if m[2] in starts
    }


def connections(cluster: Cluster) -> int:
    return cluster.node_containerd.log_text().count(f'plugin \\"{PLUGIN_ID}\\" connected')


@contextlib.contextmanager
def koordlet(cluster: Cluster, mode: Mode, logs: Path) -> Iterator[subprocess.Popen[bytes] | None]:
    """Mode's koordlet on the node (none for the baseline) until its NRI plugin connected;
    ended (SIGTERM, then SIGKILL after 30 s) whatever happens."""
    if mode.command is None:
        yield None
        return
    before = connections(cluster)
    with (logs / f"{mode.name}.log").open("ab") as log:
        proc = subprocess.Popen(
            [*cluster.node_enter, *mode.command], stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **mode.env), start_new_session=True,
        )  # fmt: skip
    try:

        def connected() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"{mode.name} exited ({proc.returncode}): see {logs}")
            return connections(cluster) > before

        cluster.wait_for(f"{mode.name}'s NRI plugin connected", connected, 180)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_block(cluster: Cluster, mode: Mode, args: argparse.Namespace, block: int) -> None:
    with koordlet(cluster, mode, args.logs) as proc:
        if proc is not None:
            time.sleep(args.settle)
            cpu0, wall0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(args.seconds)
            cpu1, wall1 = cpu_seconds(proc.pid), time.monotonic()
            mode.cpu_percent.append(round(100 * (cpu1 - cpu0) / (wall1 - wall0), 2))
            mode.rss_mib.append(round(rss_bytes(proc.pid) / (1 << 20), 1))
        names = [f"t{block}-{mode.name}-{i}" for i in range(args.creates)]
        for i, name in enumerate(names):
            create_all(cluster, [trial_pod(name)])
            wait_running(cluster, "bench=trial", i + 1, 120)
        times = create_times(cluster.node_containerd.log_text(), set(names))
        for name, (ms, container) in times.items():
            mode.create_ms.append(ms)
            shares = trial_shares(cluster, name, container)
            mode.shares[shares] = mode.shares.get(shares, 0) + 1
        delete_all(cluster, "bench=trial")


def trial_shares(cluster: Cluster, name: str, container: str) -> int:
    uid = cluster.get(f"{NAMESPACE_PODS}/{name}")["metadata"]["uid"]
    path = CGROUP / "cpu" / CGROUP_ROOT / "kubepods" / "besteffort" / f"pod{uid}" / container
    return int((path / "cpu.shares").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=Path, required=True, help="Koordinator's koordlet binary")
    parser.add_argument("-n", "--pods", type=int, default=200, help="long-lived pods")
    parser.add_argument("--seconds", type=float, default=60, help="CPU window per block")
    parser.add_argument("--settle", type=float, default=30, help="seconds before the window")
    parser.add_argument("--rounds", type=int, default=2, help="blocks per mode")
    parser.add_argument("--creates", type=int, default=20, help="pods created per block")
    parser.add_argument(
        "--logs", type=Path, default=Path("/tmp/peer-koordlet-logs"), help="each koordlet's log"
    )
    args = parser.parse_args()
    if not os.access(args.peer, os.X_OK):
        parser.error(f"{args.peer}: not an executable (build Koordinator's koordlet first)")

    args.logs.mkdir(parents=True, exist_ok=True)
    cluster = Cluster.start(max_pods=args.pods + args.creates + 20)
    result: dict[str, Any] = {"benchmark": "peer_koordlet", "pods": args.pods}
    scratch = cluster.base / "peer-bench"
    scratch.mkdir()
    try:
        prepare(cluster)
        t0 = time.monotonic()
        create_all(cluster, background_pods(args.pods))
        wait_running(cluster, "bench=bg", args.pods, 1200)
        result["background_start_seconds"] = round(time.monotonic() - t0)
        all_modes = modes(cluster, args.peer, scratch)
        for block in range(args.rounds):
            for mode in all_modes if block % 2 == 0 else reversed(all_modes):
                run_block(cluster, mode, args, block)
    finally:
        result["teardown_problems"] = cluster.teardown()
    base = all_modes[0].create_ms
    for mode in all_modes:
        entry: dict[str, Any] = {
            "create_container_ms": summary(mode.create_ms),
            "cpu_shares_seen": mode.shares,
        }
        if mode.command is not None:
            entry["cpu_percent_of_one_core"] = mode.cpu_percent
            entry["rss_mib"] = mode.rss_mib
            entry["added_ms"] = {
                q: round(percentile(mode.create_ms, v) - percentile(base, v), 3)
                for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
            }
        result[mode.name] = entry
    ours, theirs = all_modes[1], all_modes[2]
    result["ours_vs_theirs"] = {
        "cpu": round(sum(ours.cpu_percent) / max(sum(theirs.cpu_percent), 1e-9), 2),
        "rss": round(sum(ours.rss_mib) / max(sum(theirs.rss_mib), 1e-9), 2),
    }
    print(json.dumps(result))
    return 1 if result["teardown_problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
