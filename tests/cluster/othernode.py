"""A second Node without a kubelet, for tests that need two nodes (the descheduler's LowNodeLoad
needs a hot node and a low one to move pods to).

``OtherNode`` creates the Node through the API with its capacity, allocatable, labels and
taints, then keeps it alive from a thread the way a kubelet would: every ``PERIOD`` seconds it
renews the node's Lease in kube-node-lease and refreshes its Ready condition's heartbeat, so
the node lifecycle controller never marks it NotReady or taints it unreachable, and it writes
the node's NodeMetric status in the shape koordlet writes (koordlet/nodemetric.py:
updateTime, nodeMetric.nodeUsage and systemUsage, podsMetric), as an idle node's, so that
koord-manager, koord-scheduler and koord-descheduler read it as they read a real node's.

Nothing runs there: a pod bound to it stays Pending. ``stop()`` deletes what it made (pods
bound to it first, with no grace, as no kubelet will confirm their end), and returns once the
Node is gone.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.cluster.cluster import Cluster, ClusterError

log = logging.getLogger(__name__)

PERIOD = 10.0  # seconds between heartbeats; the node monitor's grace period is 50 s
LEASE_NAMESPACE = "kube-node-lease"
NODE_METRICS = "/apis/slo.koordinator.sh/v1alpha1/nodemetrics"
MERGE = "application/merge-patch+json"


def _now(micro: bool = False) -> str:
    moment = dt.datetime.now(dt.UTC)
    if micro:  # a Lease's MicroTime
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class OtherNode:
    """See the module docstring. ``usage`` is what its NodeMetric reports: (milli-cores,
    bytes), all of it system usage (no pod runs there); ``pods_metric`` its podsMetric."""

    cluster: Cluster
    name: str
    cpu: str = "64"
    memory: str = "256Gi"
    pods: str = "110"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    usage: tuple[int, int] = (50, 200 * 2**20)
    # podsMetric entries as koordlet writes them (namespace, name, podUsage, priority, qos)
    pods_metric: list[dict[str, Any]] = field(default_factory=list)
    beats: int = 0  # heartbeats sent so far
    _transition: str = ""  # the Ready condition's lastTransitionTime
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    # -- the objects ----------------------------------------------------------------------

    def _status(self) -> dict[str, Any]:
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": self.pods}
        now = _now()
        return {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [self._ready(now, now)],
            "nodeInfo": {"kubeletVersion": "v1.37.2", "operatingSystem": "linux"},
        }

    @staticmethod
    def _ready(heartbeat: str, transition: str) -> dict[str, str]:
        return {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kept Ready by the test harness (no kubelet)",
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": transition,
        }

    def _metric_status(self) -> dict[str, Any]:
        cpu, memory = self.usage
        usage = {"resources": {"cpu": f"{cpu}m", "memory": str(memory)}}
        return {
            "updateTime": _now(),
            "nodeMetric": {"nodeUsage": usage, "systemUsage": usage},
            "podsMetric": list(self.pods_metric),
        }

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> OtherNode:
        """Create the Node, its Lease and NodeMetric, and start the heartbeat thread."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, **self.labels},
            },
            "spec": {"taints": list(self.taints)},
            "status": self._status(),
        }
        created = self.cluster.api("POST", "/api/v1/nodes", node)
        self._transition = _now()
        self.cluster.api(
            "PATCH", f"/api/v1/nodes/{self.name}/status", {"status": self._status()}, MERGE
        )
        owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self.name,
            "uid": created["metadata"]["uid"],
        }
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [owner],
            },
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": 40,
                "renewTime": _now(micro=True),
            },
        }
        self.cluster.api(
            "POST", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases", lease
        )
        self._report()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.name}")
        self._thread.daemon = True
        self._thread.start()
        return self

    def _report(self) -> None:
        """The NodeMetric's status, as koordlet patches it (creating the object with an
        empty spec when koord-manager has not made it yet, as koordlet does)."""
        path = f"{NODE_METRICS}/{self.name}"
        body = {"status": self._metric_status()}
        try:
            self.cluster.api("PATCH", f"{path}/status", body, MERGE)
        except ClusterError as err:
            if ": 404 " not in str(err):
                raise
            metric = {
                "apiVersion": "slo.koordinator.sh/v1alpha1",
                "kind": "NodeMetric",
                "metadata": {"name": self.name},
                "spec": {},
            }
            try:
                self.cluster.api("POST", NODE_METRICS, metric)
            except ClusterError as created:
                if ": 409 " not in str(created):  # koord-manager made it meanwhile
                    raise
            self.cluster.api("PATCH", f"{path}/status", body, MERGE)

    def _beat(self) -> None:
        lease = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.name}"
        self.cluster.api("PATCH", lease, {"spec": {"renewTime": _now(micro=True)}}, MERGE)
        # conditions merge as a whole list: the Ready condition with a fresh heartbeat
        status = {"conditions": [self._ready(_now(), self._transition)]}
        self.cluster.api("PATCH", f"/api/v1/nodes/{self.name}/status", {"status": status}, MERGE)
        self._report()
        self.beats += 1

    def _run(self) -> None:
        while not self._stop.wait(PERIOD):
            try:
                self._beat()
            except Exception as err:  # the next beat tries again; the test sees a NotReady node
                log.warning("heartbeat of node %s failed: %s", self.name, err)

    def stop(self, timeout: float = 120) -> None:
        """Stop the heartbeat; delete the pods bound to the node (no grace: no kubelet will
        confirm their end), the node's Lease, NodeMetric and the Node; wait until it is gone."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        pods = self.cluster.get(f"/api/v1/pods?fieldSelector=spec.nodeName={self.name}")
        for pod in pods["items"]:
            meta = pod["metadata"]
            self.cluster.kubectl(
                "delete", "pod", "-n", meta["namespace"], meta["name"],
                "--grace-period=0", "--force", "--wait=false", check=False,
            )  # fmt: skip
        for path in (
            f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.name}",
            f"{NODE_METRICS}/{self.name}",
            f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{self.name}",
            f"/api/v1/nodes/{self.name}",
        ):
            self.cluster.delete(path)
        self.cluster.wait_for(f"node {self.name} gone", self._gone, timeout=timeout)

    def _gone(self) -> bool:
        try:
            self.cluster.get(f"/api/v1/nodes/{self.name}")
        except ClusterError as err:
            return ": 404 " in str(err)
        return False
