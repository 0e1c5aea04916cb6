"""``helm upgrade`` and ``helm uninstall`` of the installed release (last in the tier but for
the audit: the uninstall removes the product)."""

from __future__ import annotations

from tests.cluster import audit, helm
from tests.cluster.cluster import Cluster
from tests.cluster.conftest import keep_logs
from tests.cluster.helm import NAMESPACE
from tests.cluster.product import VALUES

CRDS = (
    "clustercolocationprofiles.config.koordinator.sh",
    "nodemetrics.slo.koordinator.sh",
    "nodeslos.slo.koordinator.sh",
    "podmigrationjobs.scheduling.koordinator.sh",
    "devices.scheduling.koordinator.sh",
)


def test_an_upgrade_rolls_koordlet_and_an_uninstall_keeps_the_crds(cluster: Cluster) -> None:
    apps = f"/apis/apps/v1/namespaces/{NAMESPACE}"
    before = cluster.get(f"{apps}/daemonsets/koordlet")
    koordlet = {
        **VALUES["koordlet"],
        "flags": {**VALUES["koordlet"]["flags"], "log-level": "debug"},
    }
    helm.run(
        cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "upgrade",
        values={**VALUES, "koordlet": koordlet}, timeout=300,
    )  # fmt: skip
    after = cluster.get(f"{apps}/daemonsets/koordlet")
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    args = after["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--log-level=debug" in args
    # helm's wait: the new koordlet pod runs and is ready
    assert after["status"]["updatedNumberScheduled"] == after["status"]["numberReady"] == 1

    keep_logs(cluster)  # the product's pods' logs go with them
    # Helm deletes the Roles while the pods are still stopping: their last requests (a
    # lease's release, a watch) are refused, whatever the component.
    with audit.expect_forbidden(None, None):
        helm.run(
            cluster.netns_path, cluster.admin_kubeconfig, cluster.base / "helm", "uninstall",
            timeout=300,
        )  # fmt: skip
        # Helm waits for the objects, not for their pods to stop.
        cluster.wait_for(
            "the product's pods gone",
            lambda: not cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"],
            timeout=120,
        )
    left = cluster.kubectl("get", "deployments,daemonsets", "-n", NAMESPACE, "-o", "name")
    assert left.strip() == ""
    crds = cluster.kubectl("get", "crds", "-o", "name")
    for crd in CRDS:
        assert f"customresourcedefinition.apiextensions.k8s.io/{crd}" in crds
