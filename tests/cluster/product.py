"""The product as the cluster tier and ``make cluster`` install it: the image side-loaded into
the node's containerd (no registry answers here) and the chart installed by Helm."""

from __future__ import annotations

from typing import Any

from tests.cluster import helm
from tests.cluster.cluster import CGROUP_ROOT, Cluster
from tests.e2e.harness import paths

KOORDLET_IMAGE = paths.IMAGES_DIR / "koordlet.tar"
# What the tier sets beyond the chart's defaults: koordlet must find the kubelet's QoS cgroups
# under its cgroup root; koord-manager is told the chart's kube-scheduler is the one running
# schedulerName koord-scheduler. LoadAware's CPU filter is off (a threshold of 0; memory's
# stays at 95 %): on this 2-core node the whole cluster is the node's load, and a busy machine
# (a build, a test run beside it) puts CPU usage past any threshold, so the batch Job would
# wait in kube-scheduler's queue ("cpu usage exceed threshold", seen here) for minutes.
# koordlet's NodeMetric report interval: Koordinator's floor, not the chart's 60 s, so that
# the tests that wait for reports wait half as long.
REPORT_INTERVAL = 30
# The control plane's replicas ask for 25m each instead of 100m: on the 2-core node, an LSR
# pod's whole CPU must fit beside them and the tests' own pods.
SMALL = {"requests": {"cpu": "25m"}}
VALUES: dict[str, Any] = {
    "koordlet": {"flags": {"cgroup-kube-dir": f"{CGROUP_ROOT}/kubepods/"}},
    "manager": {"knownSchedulers": ["koord-scheduler"], "resources": SMALL},
    "sloConfig": {"data": {"colocation-config": {"metricReportIntervalSeconds": REPORT_INTERVAL}}},
    "scheduler": {
        "loadAware": {"usageThresholds": {"cpu": 0, "memory": 95}},
        "resources": SMALL,
        "kubeScheduler": {"resources": SMALL},
    },
    "descheduler": {"resources": SMALL},
}


def install(cluster: Cluster, values: dict[str, object] | None = None) -> None:
    """Side-load the image (no registry answers here) and ``helm install`` the chart."""
    cluster.node_containerd.ctr("images", "import", str(KOORDLET_IMAGE))
    helm.run(
        cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "install",
        values=values if values is not None else VALUES, timeout=300,
    )  # fmt: skip
