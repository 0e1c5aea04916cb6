"""kube-scheduler with koord-scheduler's extender against kube-scheduler alone, on a real
control plane: pods/s and p99 scheduling latency of both in one run, and their ratio.

    PYTHONPATH=. .venv/bin/python benchmarks/kube_scheduler_extender.py \
        [--nodes 1000] [--pods 10000] [--logs DIR] [--peer-scheduler PATH]

The cluster tier's control plane alone (tests/cluster/cluster.py, ``Cluster.start(node=False)``:
etcd, kube-apiserver and kube-scheduler in a network namespace of their own; no kubelet, so
no pod runs) with the chart's CRDs. ``--nodes`` Node objects with the simulator's shapes
(benchmarks/scheduler_sim.py: 32-96 CPUs, cpu usage 5-75 %) and a NodeMetric each, refreshed
every 60 s as koordlets would report; every tenth node has four GPUs (a Device and
``koordinator.sh/gpu-*`` allocatable) so that DeviceShare has cards to allocate.

Run A: kube-scheduler alone (default profile). Run B: kube-scheduler restarted with the chart's
``extenders`` entry (filter, prioritize, bind; nodeCacheCapable; every pod reaches it: the
chart's allPods) calling koord-scheduler, started from its command line on this API server over
HTTPS, with the chart's LoadAware arguments and DeviceShare's. Both runs use one
KubeSchedulerConfiguration apart from ``extenders``, whose client QPS is raised (kube-scheduler's
default, 50 requests a second, would cap run A's binds, while run B's binds are koord-scheduler's
own writes).

Each run creates ``--pods`` pods (10m cpu and 16Mi each; every twentieth also asks for a
quarter of a GPU) over ``--workers`` keep-alive connections, in a namespace of its own, and
watches them until each is bound. pods/s = pods / (first create → last bind seen); creation's
own rate is printed beside it. Latency is kube-scheduler's own histogram
``scheduler_scheduling_attempt_duration_seconds{result="scheduled"}`` (from a pod's pop off the
queue to its bind, extender calls and the extender's bind included), p50 and p99 by bucket
interpolation as Prometheus' histogram_quantile; ``scheduler_pod_scheduling_sli_duration_seconds``
(queue wait included: with thousands of pods queued at once it measures the backlog) beside it.
One JSON line per run, then one with ``extender_throughput_ratio`` (B / A pods/s; the goal is
≥ 0.8). Nothing is asserted.

Run C, only with ``--peer-scheduler PATH`` (Koordinator v1.8's own koord-scheduler binary, built
outside the repository): kube-scheduler and our koord-scheduler stopped and run B's pods deleted,
theirs is the one scheduler (a kube-scheduler build with their plugins), with a
KubeSchedulerConfiguration written here (``peer_scheduler_config``): the plugins of their default
profile (their config/manager/scheduler-config.yaml) for ``default-scheduler``, LoadAwareScheduling
with the chart's LoadAware arguments as run B has them, DeviceShare with its defaults, the client
QPS of runs A and B, leader election off, kube-scheduler's kubeconfig. What it lists at start and
the harness lacks is made first: a stand-in NodeResourceTopology CRD (topology.node.k8s.io, only
served) and a ClusterRole for its user on Koordinator's groups (``PEER_RULES``; the default
system:kube-scheduler role has none of them), and the ElasticQuota plugin's namespace. Its latency
is read from its own histograms, as kube-scheduler's (it serves them on the same port). The last
line then also has ``peer_vs_kube_scheduler_extender`` (C / B pods/s) and
``peer_vs_kube_scheduler_alone`` (C / A).
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import math
import os
import re
import shutil
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import yaml

from benchmarks.peer_koordlet import NRT_CRD
from benchmarks.scheduler_sim import GI, generate_cluster
from koordapi import keys
from koordapi.device import GPUInfo, build_device
from tests.cluster.cluster import NODE_IP, Cluster, scheduler_healthy
from tests.unit.charts import helm

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "charts" / "koordinator-py" / "values.yaml"
NODE_METRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"
EXTENDER_PORT = 10443  # koord-scheduler's --secure-port default
EXTENDER_PROBES = ("127.0.0.1", 8081)  # its --metrics-addr: /readyz once its informers synced
SCHEDULER_METRICS = "https://127.0.0.1:10259/metrics"
ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"
SLI = "scheduler_pod_scheduling_sli_duration_seconds"
REPORT_PERIOD = 60.0  # Koordinator's default NodeMetric report interval
GPU_EVERY = 10  # every tenth node has GPUs
GPU_POD_EVERY = 20  # every twentieth pod asks for a quarter of one
GPUS_PER_NODE = 4
# kube-scheduler's client: its default QPS 50 and burst 100 would make run A's binds wait on
# the client's rate limiter (run B's binds are koord-scheduler's, which has none).
CLIENT_QPS, CLIENT_BURST = 5000, 10000


# -- pure parts (tests/unit/scheduler/test_kube_scheduler_benchmark.py) -----------------------

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric ``name`` in a Prometheus text exposition, with its labels."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None or match["name"] != name:
            continue
        labels = dict(_LABEL.findall(match["labels"] or ""))
        found.append((labels, float(match["value"])))
    return found


def histogram(text: str, name: str, match: Mapping[str, str]) -> list[tuple[float, float]]:
    """The cumulative buckets (upper bound, count) of histogram ``name``, summed over its
    series whose labels include ``match``, in increasing bound (+Inf last)."""
    counts: dict[float, float] = {}
    for labels, value in samples(text, f"{name}_bucket"):
        if all(labels.get(k) == v for k, v in match.items()):
            bound = float(labels["le"])  # "+Inf" reads as inf
            counts[bound] = counts.get(bound, 0.0) + value
    return sorted(counts.items())


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket where rank q falls (from 0 for
    the first one), the highest finite bound when it falls in +Inf's; None with no samples."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def extender_entry(url: str, ca_file: Path, server_name: str) -> dict[str, Any]:
    """The chart's ``extenders`` entry (templates/_helpers.tpl, its defaults: bind, allPods,
    weight 1, httpTimeout 5s, not ignorable), the CA as a file instead of caData."""
    return {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "bindVerb": "bind",
        "weight": 1,
        "nodeCacheCapable": True,
        "httpTimeout": "5s",
        "ignorable": False,
        "enableHTTPS": True,
        "tlsConfig": {"serverName": server_name, "caFile": str(ca_file)},
    }


def scheduler_config(kubeconfig: Path, extender: Mapping[str, Any] | None) -> dict[str, Any]:
    """kube-scheduler's KubeSchedulerConfiguration for a run: the default profile, the client
    QPS raised, and ``extender`` when given."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(kubeconfig),
            "qps": CLIENT_QPS,
            "burst": CLIENT_BURST,
        },
        "leaderElection": {"leaderElect": False},
    }
    if extender is not None:
        config["extenders"] = [dict(extender)]
    return config


def koord_scheduler_config() -> dict[str, Any]:
    """koord-scheduler's --config: DeviceShareArgs (Koordinator's defaults) on the default
    profile, the file the chart renders with scheduler.deviceShare."""
    args = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DeviceShareArgs"}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [{"name": "DeviceShare", "args": args}],
            }
        ],
    }


# their default profile's plugins, as config/manager/scheduler-config.yaml enables them
PEER_PLUGINS: dict[str, Any] = {
    "preEnqueue": {"enabled": ["Coscheduling"]},
    "queueSort": {"disabled": ["*"], "enabled": ["PrioritySort"]},
    "preFilter": {"enabled": ["SchedulingHint", "Reservation", "NodeNUMAResource", "DeviceShare",
                              "Coscheduling", "ElasticQuota"]},
    "filter": {"enabled": ["LoadAwareScheduling", "NodeNUMAResource", "DeviceShare",
                           "Reservation"]},
    "postFilter": {"disabled": ["*"], "enabled": ["Reservation", "Coscheduling", "ElasticQuota",
                                                  "DefaultPreemption"]},
    "preScore": {"enabled": ["Reservation", "Coscheduling"]},
    "score": {"enabled": [("LoadAwareScheduling", 1), ("NodeNUMAResource", 1),
                          ("DeviceShare", 1), ("Reservation", 5000), ("Coscheduling", 1)]},
    "reserve": {"enabled": ["LoadAwareScheduling", "NodeNUMAResource", "DeviceShare",
                            "Coscheduling", "ElasticQuota"]},
    "permit": {"enabled": ["Coscheduling"]},
    "preBind": {"enabled": ["NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling",
                            "DefaultPreBind"]},
    "bind": {"disabled": ["*"], "enabled": ["Reservation", "DefaultBinder"]},
    "postBind": {"enabled": ["Coscheduling"]},
}  # fmt: skip
PEER_QUOTA_NAMESPACE = "koordinator-system"  # their ElasticQuotaArgs' quotaGroupNamespace


def peer_scheduler_config(kubeconfig: Path, loadaware: Mapping[str, Any]) -> dict[str, Any]:
    """Koordinator v1.8's koord-scheduler's --config for run C: run A's client and leader
    election; one profile for the pods' ``default-scheduler`` with their default profile's
    plugins and arguments, except LoadAwareScheduling's, which are the chart's ``loadAware``
    values that run B's koord-scheduler reads (a node whose NodeMetric is older than
    nodeMetricExpirationSeconds filtered out, as ours does); DeviceShare with its defaults."""

    def plugins(points: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for point, sets in points.items():
            out[point] = {
                kind: [{"name": n} if isinstance(n, str) else {"name": n[0], "weight": n[1]}
                       for n in names]
                for kind, names in sets.items()
            }  # fmt: skip
        return out

    v1 = "kubescheduler.config.k8s.io/v1"
    fit = {"apiVersion": v1, "kind": "NodeResourcesFitArgs", "scoringStrategy": {
        "type": "LeastAllocated", "resources": [
            {"name": r, "weight": 1}
            for r in ("cpu", "memory", "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
        ]}}  # fmt: skip
    load = {"apiVersion": v1, "kind": "LoadAwareSchedulingArgs", "filterExpiredNodeMetrics": True,
            **loadaware}  # fmt: skip
    quota = {"apiVersion": v1, "kind": "ElasticQuotaArgs",
             "quotaGroupNamespace": PEER_QUOTA_NAMESPACE}  # fmt: skip
    config = scheduler_config(kubeconfig, None)  # run A's client and leader election
    config["profiles"] = [{
        "schedulerName": "default-scheduler",
        "plugins": plugins(PEER_PLUGINS),
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": fit},
            {"name": "LoadAwareScheduling", "args": load},
            {"name": "ElasticQuota", "args": quota},
            {"name": "DeviceShare", "args": {"apiVersion": v1, "kind": "DeviceShareArgs"}},
        ],
    }]  # fmt: skip
    return config


def pod(namespace: str, index: int) -> dict[str, Any]:
    """One pod of a run: 10m cpu and 16Mi; every GPU_POD_EVERY-th also a quarter of a GPU
    (gpu-core and gpu-memory-ratio, as koord-manager's webhook writes koordinator.sh/gpu)."""
    requests = {"cpu": "10m", "memory": "16Mi"}
    limits: dict[str, str] = {}
    if index % GPU_POD_EVERY == GPU_POD_EVERY - 1:
        limits = {keys.GPU_CORE: "25", keys.GPU_MEMORY_RATIO: "25"}
        requests |= limits  # extended resources: requests equal limits
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{index:06d}", "namespace": namespace},
        "spec": {
            "schedulerName": "default-scheduler",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": resources}],
        },
    }  # fmt: skip


def node_objects(count: int, seed: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(Node, NodeMetric status) for ``count`` nodes of the simulator's shapes; every
    GPU_EVERY-th node has GPUS_PER_NODE GPUs in its allocatable."""
    made = generate_cluster(count, seed)
    out = []
    for i, (node, sim) in enumerate(zip(made.nodes, made.sim, strict=True)):
        meta = {k: v for k, v in node["metadata"].items() if k not in ("uid", "resourceVersion")}
        status = node["status"]
        if i % GPU_EVERY == 0:
            gpus = {
                keys.GPU_CORE: str(100 * GPUS_PER_NODE),
                keys.GPU_MEMORY_RATIO: str(100 * GPUS_PER_NODE),
                keys.GPU_MEMORY: str(23 * GI * GPUS_PER_NODE),
            }
            status = {k: {**v, **gpus} for k, v in status.items()}
        usage = {"resources": {"cpu": f"{sim.base_cpu}m", "memory": str(sim.base_memory)}}
        metric = {"nodeMetric": {"nodeUsage": usage, "systemUsage": usage}, "podsMetric": []}
        out.append(({"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": status},
                    metric))  # fmt: skip
    return out


def gpus(name: str) -> list[GPUInfo]:
    return [
        GPUInfo(f"GPU-{name}-{m}", m, 23 * GI, f"0000:{0x3b + m:02x}:00.0", m // 2,
                f"pci0000:{0x3a + m // 2:02x}", "NVIDIA A10")
        for m in range(GPUS_PER_NODE)
    ]  # fmt: skip


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- talking to the API server from many threads ---------------------------------------------


class ApiError(RuntimeError):
    pass


@dataclass
class Api:
    """Keep-alive HTTPS connections to the API server as its admin, one per thread of a pool
    whose threads are in the cluster's network namespace."""

    cluster: Cluster
    workers: int
    _local: threading.local = field(default_factory=threading.local)
    _pool: ThreadPoolExecutor | None = None

    def __post_init__(self) -> None:
        p = self.cluster.pki_dir
        self.context = ssl.create_default_context(cafile=str(p / "ca.crt"))
        self.context.load_cert_chain(p / "admin-client.crt", p / "admin-client.key")
        self._pool = ThreadPoolExecutor(self.workers, initializer=self.cluster.enter_netns)

    def connection(self) -> http.client.HTTPSConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(NODE_IP, 6443, context=self.context, timeout=60)
            self._local.conn = conn
        return cast(http.client.HTTPSConnection, conn)

    def call(self, method: str, path: str, body: Any = None, content: str = "application/json",
             ok: Iterable[int] = (200, 201)) -> Any:  # fmt: skip
        """One request on this thread's connection (a thread of the pool)."""
        conn = self.connection()
        data = None if body is None else json.dumps(body)
        conn.request(method, path, data, {"Content-Type": content, "Accept": "application/json"})
        reply = conn.getresponse()
        text = reply.read()
        if reply.status not in ok:
            raise ApiError(f"{method} {path}: {reply.status} {text[:500]!r}")
        return json.loads(text) if text.startswith(b"{") else None

    def run(self, fn: Callable[[], Any]) -> Any:
        """``fn`` on one of the pool's threads."""
        assert self._pool is not None
        return self._pool.submit(fn).result()

    def each(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
        """``fn(item)`` for each item over the pool's threads; the results in order."""
        assert self._pool is not None
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()


# -- the cluster's contents ----------------------------------------------------------------


def install_crds(api: Api, crds: list[dict[str, Any]] | None = None) -> None:
    """The chart's CRDs as it renders them (or ``crds``), and wait until each is served."""
    if crds is None:
        (release,) = helm.run(helm.Render(helm.CHART))
        crds = cast(helm.Release, release).all("CustomResourceDefinition")
    api.each(lambda crd: api.call("POST", CRDS, crd), crds)

    def established(crd: dict[str, Any]) -> bool:
        got = api.call("GET", f"{CRDS}/{crd['metadata']['name']}")
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    end = time.monotonic() + 60
    while not all(api.each(established, crds)):
        if time.monotonic() > end:
            raise ApiError("the CRDs were not established in 60 s")
        time.sleep(0.5)


def create_nodes(api: Api, nodes: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Each Node with its status (as a kubelet posts it), its NodeMetric and, for GPU nodes,
    its Device (as koordlet reports them)."""

    def one(item: tuple[dict[str, Any], dict[str, Any]]) -> None:
        node, metric = item
        name = node["metadata"]["name"]
        created = api.call("POST", "/api/v1/nodes", node)
        # The API server's TaintNodesByCondition admission taints a new Node not-ready; the
        # node lifecycle controller lifts it once the node is Ready. No controller manager
        # runs here, so the Ready status is posted and the taint lifted here.
        ready = {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": now(), "lastTransitionTime": now()}  # fmt: skip
        status = {**node["status"], "conditions": [ready]}
        api.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)
        api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, MERGE)
        api.call("POST", NODE_METRICS, {
            "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
            "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": int(REPORT_PERIOD)}},
        })  # fmt: skip
        report(api, name, metric)
        if keys.GPU_CORE in node["status"]["allocatable"]:
            uid = created["metadata"]["uid"]
            api.call("POST", DEVICES, build_device(name, uid, gpus(name), []))

    api.each(one, nodes)


def report(api: Api, name: str, metric: Mapping[str, Any]) -> None:
    body = {"status": {"updateTime": now(), **metric}}
    api.call("PATCH", f"{NODE_METRICS}/{name}/status", body, MERGE)


@dataclass
class Reporter:
    """Every NodeMetric reported again each REPORT_PERIOD seconds, as 1,000 koordlets would
    (LoadAware filters out a node whose NodeMetric is older than 180 s)."""

    api: Api
    nodes: list[tuple[dict[str, Any], dict[str, Any]]]
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Reporter:
        threading.Thread(target=self._run, daemon=True, name="reporter").start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(REPORT_PERIOD):
            try:
                self.api.each(lambda item: report(self.api, item[0]["metadata"]["name"],
                                                  item[1]), self.nodes)  # fmt: skip
            except (OSError, ApiError) as err:
                print(f"NodeMetric report failed: {err}", file=sys.stderr)


# -- one run ----------------------------------------------------------------------------------


@dataclass
class Watcher:
    """Watches a namespace's pods; the moment each is first seen with a node."""

    cluster: Cluster
    api: Api
    namespace: str
    bound: dict[str, float] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)
    _conn: http.client.HTTPSConnection | None = None
    _stopped: bool = False

    def start(self) -> Watcher:
        listed = self.api.run(
            lambda: self.api.call("GET", f"/api/v1/namespaces/{self.namespace}/pods?limit=1")
        )
        version = listed["metadata"]["resourceVersion"]
        ready = threading.Event()

        def run() -> None:
            self.cluster.enter_netns()
            nonlocal version
            while not self._stopped:  # a watch the server ends is taken up again
                try:
                    version = self._watch(version, ready)
                except (OSError, http.client.HTTPException):
                    time.sleep(0.5)  # closed by stop(), or the server went away

        threading.Thread(target=run, daemon=True, name=f"watch-{self.namespace}").start()
        ready.wait(30)
        return self

    def _watch(self, version: str, ready: threading.Event) -> str:
        """One watch from ``version`` until the server ends it; the last version seen."""
        conn = http.client.HTTPSConnection(NODE_IP, 6443, context=self.api.context)
        self._conn = conn
        path = (f"/api/v1/namespaces/{self.namespace}/pods?watch=1"
                f"&resourceVersion={version}&timeoutSeconds=3600")  # fmt: skip
        conn.request("GET", path, headers={"Accept": "application/json"})
        reply = conn.getresponse()
        ready.set()
        buffer = b""
        while chunk := reply.read1(1 << 16):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                meta = event["object"]["metadata"]
                version = meta.get("resourceVersion", version)
                if event["object"].get("spec", {}).get("nodeName"):
                    seen = time.monotonic()
                    with self.changed:
                        self.bound.setdefault(meta["name"], seen)
                        self.changed.notify_all()
        return version

    def wait(self, count: int, timeout: float, progress: Callable[[int], None]) -> bool:
        end = time.monotonic() + timeout
        last = 0.0
        with self.changed:
            while len(self.bound) < count:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 5.0))
                if time.monotonic() - last >= 10:
                    last = time.monotonic()
                    progress(len(self.bound))
        return True

    def stop(self) -> None:
        self._stopped = True
        if self._conn is not None and self._conn.sock is not None:
            self._conn.sock.close()


def scheduler_metrics(api: Api) -> str:
    def get() -> str:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving pair
        p = api.cluster.pki_dir
        context.load_cert_chain(p / "admin-client.crt", p / "admin-client.key")
        conn = http.client.HTTPSConnection("127.0.0.1", 10259, context=context, timeout=30)
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()

    return cast(str, api.run(get))


def cpu_seconds(cluster: Cluster) -> dict[str, float]:
    """CPU time (user + system) so far of each component process and of this benchmark (the
    pod creator and watcher): on 2 CPUs, who takes them decides the throughput."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for p in cluster.processes:
        try:
            fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[p.name] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    times = os.times()
    out["benchmark"] = times.user + times.system
    return out


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def run(api: Api, label: str, namespace: str, count: int, timeout: float) -> dict[str, Any]:
    """Create ``count`` pods in ``namespace`` and wait for every one bound; the figures."""
    api.run(lambda: api.call("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))  # fmt: skip
    # what the controller manager's service-account controller would make: admission wants it
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    api.run(lambda: api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account))
    watcher = Watcher(api.cluster, api, namespace).start()
    cpu_before = cpu_seconds(api.cluster)
    pods = [pod(namespace, i) for i in range(count)]
    path = f"/api/v1/namespaces/{namespace}/pods"
    failed: list[str] = []

    def create(body: dict[str, Any]) -> None:
        try:
            api.call("POST", path, body)
        except (OSError, ApiError) as err:
            failed.append(str(err))

    started = time.monotonic()
    api.each(create, pods)
    created_s = time.monotonic() - started
    created = count - len(failed)

    def progress(n: int) -> None:
        print(f"{label}: {n}/{created} bound, {time.monotonic() - started:.0f} s",
              file=sys.stderr)  # fmt: skip

    complete = watcher.wait(created, timeout, progress)
    watcher.stop()
    bound = dict(watcher.bound)
    last = max(bound.values(), default=started)
    cpu_after = cpu_seconds(api.cluster)
    text = scheduler_metrics(api)
    attempts = histogram(text, ATTEMPT, {"result": "scheduled"})
    sli = histogram(text, SLI, {})
    unschedulable = sum(v for labels, v in samples(text, "scheduler_schedule_attempts_total")
                        if labels.get("result") != "scheduled")  # fmt: skip
    return {
        "run": label,
        "pods": count,
        "created": created,
        "create_failures": failed[:3],
        "create_s": round(created_s, 1),
        "create_pods_per_s": round(created / created_s, 1) if created_s else None,
        "bound": len(bound),
        "complete": complete,
        "schedule_s": round(last - started, 1),
        "pods_per_s": round(len(bound) / (last - started), 1) if last > started else None,
        "latency_metric": f'{ATTEMPT}{{result="scheduled"}}',
        "p50_ms": ms(quantile(0.5, attempts)),
        "p99_ms": ms(quantile(0.99, attempts)),
        "sli_p99_ms": ms(quantile(0.99, sli)),
        "attempts_not_scheduled": unschedulable,
        # from the first create to the last bind seen, per component
        "cpu_s": {k: round(v - cpu_before.get(k, 0.0), 1) for k, v in cpu_after.items()},
    }


def ratio(x: Mapping[str, Any], y: Mapping[str, Any]) -> float | None:
    """x's pods/s over y's, to three places; None when either has none."""
    if not x["pods_per_s"] or not y["pods_per_s"]:
        return None
    return round(float(x["pods_per_s"]) / float(y["pods_per_s"]), 3)


def delete_pods(api: Api, namespace: str, timeout: float = 600) -> None:
    """Every pod of ``namespace`` gone at once (no kubelet would confirm a graceful end)."""
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    path = f"/api/v1/namespaces/{namespace}/pods"
    api.run(lambda: api.call("DELETE", path, options))
    end = time.monotonic() + timeout
    while api.run(lambda: api.call("GET", f"{path}?limit=1"))["items"]:
        if time.monotonic() > end:
            raise ApiError(f"pods of {namespace} still there after {timeout:g} s")
        time.sleep(1)


# -- koord-scheduler ---------------------------------------------------------------------


def start_koord_scheduler(cluster: Cluster, folder: Path, timeout: float = 120) -> None:
    """koord-scheduler from its command line, as the chart runs it: a serving pair the
    cluster's CA signed, the chart's LoadAware arguments, DeviceShare's; back once its
    informers have synced (/readyz)."""
    certs = folder / "koord-scheduler-certs"
    certs.mkdir()
    pair = cluster.ca.issue("koord-scheduler", "koord-scheduler",
                            server_names=["koord-scheduler", "127.0.0.1"])  # fmt: skip
    shutil.copy(pair.cert, certs / "tls.crt")
    shutil.copy(pair.key, certs / "tls.key")
    loadaware = yaml.safe_load(VALUES.read_text())["scheduler"]["loadAware"]
    (folder / "loadaware.yaml").write_text(yaml.safe_dump(loadaware))
    (folder / "koord-scheduler.yaml").write_text(yaml.safe_dump(koord_scheduler_config()))
    cluster.spawn("koord-scheduler", binary=Path(sys.executable).parent / "koord-scheduler", args=[
        f"--kubeconfig={cluster.admin_kubeconfig}", f"--secure-port={EXTENDER_PORT}",
        "--bind-address=127.0.0.1", f"--cert-dir={certs}",
        "--metrics-addr={}:{}".format(*EXTENDER_PROBES),
        f"--load-aware-config={folder / 'loadaware.yaml'}",
        f"--config={folder / 'koord-scheduler.yaml'}",
    ])  # fmt: skip

    def ready() -> bool:
        conn = http.client.HTTPConnection(*EXTENDER_PROBES, timeout=5)
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except OSError:
            return False

    cluster.wait("koord-scheduler's /readyz", lambda: cluster.in_netns(ready), timeout)


# -- Koordinator's own koord-scheduler (run C) ------------------------------------------------

# NRT_CRD (benchmarks/peer_koordlet.py): NodeNUMAResource's informer lists NodeResourceTopology.
PEER_ROLE = "koord-scheduler-peer"
# What kube-scheduler's user (system:kube-scheduler) lacks to run their plugins' informers and
# writes: Koordinator's groups and the NodeResourceTopology stand-in, all verbs.
PEER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["config.koordinator.sh", "slo.koordinator.sh", "scheduling.koordinator.sh",
                   "topology.node.k8s.io", "scheduling.sigs.k8s.io", "quota.koordinator.sh"],
     "resources": ["*"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["configmaps", "namespaces"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["patch", "update"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
     "verbs": ["get", "list", "watch"]},
]  # fmt: skip


def prepare_peer(api: Api) -> None:
    """What their koord-scheduler lists at start and this control plane lacks."""
    install_crds(api, [NRT_CRD])
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    api.run(lambda: api.call("POST", f"{rbac}/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": PEER_ROLE}, "rules": PEER_RULES}))  # fmt: skip
    api.run(lambda: api.call("POST", f"{rbac}/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": PEER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": PEER_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "system:kube-scheduler"}]}))  # fmt: skip
    api.run(lambda: api.call("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": PEER_QUOTA_NAMESPACE}}))  # fmt: skip


def stop_components(cluster: Cluster, *names: str) -> None:
    for old in [p for p in cluster.processes if p.name in names]:
        old.stop()
        cluster.processes.remove(old)


def start_peer_scheduler(cluster: Cluster, binary: Path, folder: Path,
                         timeout: float = 120) -> None:  # fmt: skip
    """Their koord-scheduler with ``peer_scheduler_config``, on kube-scheduler's port and
    kubeconfig; back once /healthz answers ok, as ``Cluster.restart_scheduler`` waits for
    kube-scheduler (their build serves no /readyz: 404)."""
    kubeconfig = cluster.config_path("kube-scheduler")
    loadaware = yaml.safe_load(VALUES.read_text())["scheduler"]["loadAware"]
    config = folder / "peer-koord-scheduler.yaml"
    config.write_text(yaml.safe_dump(peer_scheduler_config(kubeconfig, loadaware)))
    cluster.spawn("peer-koord-scheduler", binary=binary, args=[
        f"--config={config}",
        f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", "--v=2",
    ])  # fmt: skip

    cluster.wait(
        "their koord-scheduler's /healthz", lambda: cluster.in_netns(scheduler_healthy), timeout
    )


def run_peer(api: Api, binary: Path, count: int, timeout: float) -> dict[str, Any]:
    """Run C: run B's pods gone, kube-scheduler and our koord-scheduler stopped, theirs the
    one scheduler; its figures, printed too."""
    cluster = api.cluster
    delete_pods(api, "bench-extender")
    stop_components(cluster, "kube-scheduler", "koord-scheduler")
    prepare_peer(api)
    start_peer_scheduler(cluster, binary, cluster.base)
    c = run(api, "Koordinator v1.8 koord-scheduler", "bench-peer", count, timeout)
    print(json.dumps(c), flush=True)
    return c


# -- main -------------------------------------------------------------------------------------


def options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=8, help="concurrent creating connections")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run may take")
    parser.add_argument("--logs", type=Path, help="copy the components' logs here at the end")
    parser.add_argument("--peer-scheduler", type=Path,
                        help="Koordinator's own koord-scheduler binary: run C with it")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = options(argv)
    cluster = Cluster.start(node=False)
    api: Api | None = None
    reporter: Reporter | None = None
    try:
        api = Api(cluster, opts.workers)
        install_crds(api)
        nodes = node_objects(opts.nodes, opts.seed)
        started = time.monotonic()
        create_nodes(api, nodes)
        print(f"{opts.nodes} nodes in {time.monotonic() - started:.0f} s", file=sys.stderr)
        reporter = Reporter(api, nodes).start()
        kubeconfig = cluster.config_path("kube-scheduler")
        alone = cluster.base / "kube-scheduler-alone.yaml"
        alone.write_text(yaml.safe_dump(scheduler_config(kubeconfig, None)))
        cluster.restart_scheduler(f"--config={alone}")
        a = run(api, "kube-scheduler alone", "bench-alone", opts.pods, opts.timeout)
        print(json.dumps(a), flush=True)
        delete_pods(api, "bench-alone")
        start_koord_scheduler(cluster, cluster.base)
        entry = extender_entry(f"https://127.0.0.1:{EXTENDER_PORT}/scheduler",
                               cluster.pki_dir / "ca.crt", "koord-scheduler")  # fmt: skip
        both = cluster.base / "kube-scheduler-extender.yaml"
        both.write_text(yaml.safe_dump(scheduler_config(kubeconfig, entry)))
        cluster.restart_scheduler(f"--config={both}")
        b = run(api, "kube-scheduler + koord-scheduler extender", "bench-extender", opts.pods,
                opts.timeout)  # fmt: skip
        print(json.dumps(b), flush=True)
        summary: dict[str, Any] = {
            "nodes": opts.nodes, "pods": opts.pods,
            "extender_throughput_ratio": ratio(b, a),
            "goal": ">= 0.8",
            "p99_ms": {"alone": a["p99_ms"], "extender": b["p99_ms"]},
        }  # fmt: skip
        if opts.peer_scheduler is not None:
            c = run_peer(api, opts.peer_scheduler.resolve(), opts.pods, opts.timeout)
            summary["peer_vs_kube_scheduler_extender"] = ratio(c, b)
            summary["peer_vs_kube_scheduler_alone"] = ratio(c, a)
            summary["p99_ms"]["peer"] = c["p99_ms"]
        print(json.dumps(summary), flush=True)
    finally:
        if reporter is not None:
            reporter.stop.set()
        if api is not None:
            api.close()
        if opts.logs is not None:
            shutil.copytree(cluster.base / "logs", opts.logs, dirs_exist_ok=True)
        problems = cluster.teardown()
        if problems:
            print(f"teardown left: {problems}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
