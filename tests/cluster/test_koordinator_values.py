"""The product installed as a Koordinator v1.8 user would install it, and with every optional
part on: the co-located workload runs the same under each (after test_upgrade_uninstall, which
leaves the cluster without the product).

- tests/data/koordinator-v1.8-values.yaml: every key of Koordinator v1.8's chart with its
  default. On top, only what this machine needs: the image (Koordinator's keys, pointed at
  ours: no registry answers here), the tier's own VALUES (koordlet's cgroup folder under the
  kubelet's cgroup root, small CPU requests: Koordinator's 500m for each of six control-plane
  replicas is more than the node's two cores), and koordlet.hostDirs under the cluster's own
  folder (the test touches only what it creates).
- tests/data/all-optional-values.yaml: every optional part of ours switched on.

Each install, with the workload, takes 1.5 to 3 minutes: the cluster tier (containerd
1.7) installs with Koordinator's values, cluster-containerd2 with every optional part, so that
both run in every CI run and neither tier grows by both.
"""

from __future__ import annotations

import calendar
import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster import audit, helm, workload
from tests.cluster.cluster import NODE_NAME, Cluster
from tests.cluster.conftest import keep_logs
from tests.cluster.helm import CHART, NAMESPACE
from tests.cluster.product import VALUES
from tests.e2e.harness import paths

DATA = Path(__file__).resolve().parents[1] / "data"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base`` as Helm merges values (maps by key)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def koordinator_values(cluster: Cluster) -> dict[str, Any]:
    image = {"repository": "koordinator-py/koordlet", "tag": APP_VERSION}
    host = cluster.base / "koordinator-host"
    machine = {
        "imageRepositoryHost": "docker.io",
        "koordlet": {
            "image": image,
            "hostDirs": {
                "kubeletConfigDir": str(host / "etc-kubernetes"),
                "kubeletLibDir": str(cluster.kubelet_dir),
                "koordProxyRegisterDir": str(host / "hookserver.d"),
                "koordletSockDir": str(host / "run-koordlet"),
                "predictionCheckpointDir": str(host / "run-koordlet" / "prediction-checkpoints"),
                "podResourcesProxyPath": str(host / "run-koordlet" / "pod-resources"),
            },
        },
        "manager": {"image": image},
        "scheduler": {"image": image},
        "descheduler": {"image": image},
    }
    koordinator = yaml.safe_load((DATA / "koordinator-v1.8-values.yaml").read_text())
    return merged(merged(koordinator, VALUES), machine)


def all_optional_values(cluster: Cluster) -> dict[str, Any]:
    return merged(yaml.safe_load((DATA / "all-optional-values.yaml").read_text()), VALUES)


def fresh_nodemetric(cluster: Cluster, since: float) -> dict[str, Any] | None:
    """The node's NodeMetric once a koordlet started after ``since`` has reported it."""
    metric: dict[str, Any] = cluster.get(
        f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE_NAME}"
    )
    updated = metric.get("status", {}).get("updateTime", "")
    stamp = calendar.timegm(time.strptime(updated, "%Y-%m-%dT%H:%M:%SZ")) if updated else 0
    return metric if stamp > since else None


BY_CONTAINERD = {"1.7": koordinator_values, "2.1": all_optional_values}


@pytest.mark.parametrize(
    "values", [BY_CONTAINERD[paths.CONTAINERD_VERSION]], ids=lambda values: values.__name__
)
def test_the_colocated_workload_runs_the_same(cluster: Cluster, values: Any) -> None:
    # the workload of test_chain outlives the previous uninstall
    workload.remove_colocated_workload(cluster)
    installed = time.time()
    release = helm.run(
        cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "install",
        values=values(cluster), timeout=300,
    )  # fmt: skip
    try:
        notes = release.get("info", {}).get("notes", "")
        assert "koordlet runs as DaemonSet" in notes
        # Koordinator's keys with no effect here are named after the install; ours never are
        named = "Values of Koordinator's chart that have no effect here" in notes
        assert named == (values is koordinator_values), notes
        assert ("- deviceDaemon: " in notes) == named, notes
        cluster.wait_for(
            "a NodeMetric from the new koordlet",
            lambda: fresh_nodemetric(cluster, installed),
            timeout=180,
        )
        pod = workload.run_colocated_workload(cluster)
        workload.assert_colocated(cluster, pod)
    finally:
        keep_logs(cluster)
        workload.remove_colocated_workload(cluster)
        with audit.expect_forbidden(None, None):
            helm.run(
                cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm",
                "uninstall", timeout=300,
            )  # fmt: skip
            cluster.wait_for(
                "the product's pods gone",
                lambda: not cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"],
                timeout=120,
            )
