"""koordlet as the chart's DaemonSet in cluster mode on the real cluster: its NodeMetric on the
interval koord-manager sets, a change of the slo-controller-config ConfigMap carried by
koord-manager's NodeSLO to the node's cgroups, BE pods evicted through the Eviction API when
memory eviction triggers, and a permission taken away from it: a clear error, the rest of its
work goes on."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.cluster import audit, sloconfig, workload
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE
from tests.cluster.product import REPORT_INTERVAL

NODE_METRIC = f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{NODE_NAME}"
NODE_SLO = f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{NODE_NAME}"
KOORDLET_PODS = "app.kubernetes.io/component%3Dkoordlet"
BE_QUOTA = workload.CGROUP / "cpu" / CGROUP_ROOT / "kubepods" / "besteffort" / "cpu.cfs_quota_us"


def update_time(cluster: Cluster) -> dt.datetime | None:
    text = cluster.get(NODE_METRIC).get("status", {}).get("updateTime")
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def next_update(cluster: Cluster, after: dt.datetime | None) -> dt.datetime:
    def newer() -> dt.datetime | None:
        found = update_time(cluster)
        return found if found and (after is None or found > after) else None

    return cluster.wait_for("koordlet's next NodeMetric report", newer, 3 * REPORT_INTERVAL)


def koordlet_log(cluster: Cluster) -> str:
    return cluster.kubectl("logs", "-n", NAMESPACE, "daemonset/koordlet", "--tail=-1")


def koordlet_restarts(cluster: Cluster) -> int:
    pods = cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={KOORDLET_PODS}")
    return sum(s["restartCount"] for p in pods["items"] for s in p["status"]["containerStatuses"])


def test_koordlet_rewrites_the_nodemetric_on_the_interval_koord_manager_sets(
    cluster: Cluster,
) -> None:
    # From a report made during this test: the module before may have restarted the API
    # server, and a report due while it was down is missed (seen: 61 s from the one before).
    first = next_update(cluster, update_time(cluster))
    second = next_update(cluster, first)
    # updateTime has whole seconds; a report waits for its interval after the one before
    # (and for its worker thread), never half of it.
    gap = (second - first).total_seconds()
    assert REPORT_INTERVAL - 1 <= gap <= 2 * REPORT_INTERVAL, (first, second)


def test_koordlet_lists_pods_on_the_kubelets_authenticated_port(cluster: Cluster) -> None:
    """Koordinator's default: HTTPS on the kubelet's port with koordlet's token, which the
    kubelet checks with the API server (webhook authorization): a SubjectAccessReview per
    decision it has not cached."""
    reviews = cluster.wait_for(
        "the kubelet's authorization review of koordlet",
        lambda: audit.kubelet_reviews(audit.read(cluster.audit_log), "koordlet"),
        timeout=60,
    )
    allowed = [e for e in reviews if e["responseObject"]["status"].get("allowed")]
    assert allowed, reviews[:2]
    attributes = allowed[0]["requestObject"]["spec"]["resourceAttributes"]
    # /pods is the kubelet's "pods" subresource of the node (its "proxy" before fine-grained
    # kubelet authorization)
    assert attributes["resource"] == "nodes" and attributes["name"] == NODE_NAME, attributes
    assert attributes.get("subresource") in ("pods", "proxy"), attributes


@pytest.fixture
def threshold_config(cluster: Cluster) -> Iterator[Callable[..., None]]:
    """Change the cluster strategy of resource-threshold-config and wait for koord-manager's
    NodeSLO to carry it; afterwards the ConfigMap and the NodeSLO are as the chart made them."""
    key = "resource-threshold-config"
    original = sloconfig.document(cluster, key)["clusterStrategy"]

    def in_node_slo(strategy: dict[str, Any]) -> bool:
        found = cluster.get(NODE_SLO)["spec"]["resourceUsedThresholdWithBE"]
        return all(found.get(k) == v for k, v in strategy.items())

    def change(**strategy: Any) -> None:
        sloconfig.change(cluster, key, strategy, cluster_strategy=True)
        cluster.wait_for(f"koord-manager's NodeSLO with {strategy}", lambda: in_node_slo(strategy))

    with sloconfig.kept(cluster):
        yield change
    wanted = {k: original[k] for k in ("cpuSuppressPolicy", "memoryEvictThresholdPercent")}
    cluster.wait_for("the NodeSLO as the chart made it", lambda: in_node_slo(wanted))


def be_quota() -> int:
    return int(BE_QUOTA.read_text())


def test_a_slo_controller_config_change_reaches_the_besteffort_cgroup(
    cluster: Cluster, threshold_config: Callable[..., None]
) -> None:
    # The chart's policy is cpuset: the besteffort directory's quota is left unlimited.
    assert be_quota() == -1
    threshold_config(cpuSuppressPolicy="cfsQuota")
    quota = cluster.wait_for(
        "koordlet's CPU suppression by quota on the besteffort cgroup",
        lambda: (q := be_quota()) > 0 and q,
        timeout=60,
    )
    # suppress x 100 ms: at least 2000 µs, at most the node's 2 cores' worth.
    assert 2000 <= quota <= 2 * 100_000
    threshold_config(cpuSuppressPolicy="cpuset")
    cluster.wait_for("the besteffort quota unlimited again", lambda: be_quota() == -1, 60)


def evictions_by_koordlet(cluster: Cluster, pod: str) -> list[dict[str, Any]]:
    return [
        e
        for e in audit.read(cluster.audit_log)
        if e["user"]["username"].endswith(":koordlet")
        and e.get("objectRef", {}).get("subresource") == "eviction"
        and e["objectRef"].get("name") == pod
        and e.get("responseStatus", {}).get("code") == 201
    ]


def test_memory_eviction_evicts_be_pods_through_the_eviction_api(
    cluster: Cluster, threshold_config: Callable[..., None]
) -> None:
    pod = workload.start_be_pod(cluster, "memhog")
    uid = pod["metadata"]["uid"]
    assert pod["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    # This machine's memory in use is a few percent of it: 1 % puts the node past the
    # threshold, and BE pods are evicted until it is back under 1 - 2 %, that is all of them.
    threshold_config(memoryEvictThresholdPercent=1)
    cluster.wait_for(
        "koordlet's eviction of the BE pod through the Eviction API",
        lambda: evictions_by_koordlet(cluster, "memhog"),
        timeout=60,
    )
    cluster.wait_for(
        "the evicted pod gone",
        lambda: all(
            p["metadata"]["uid"] != uid
            for p in cluster.get(f"/api/v1/namespaces/{workload.BATCH_NAMESPACE}/pods")["items"]
        ),
        timeout=120,
    )
    assert "memhog" in koordlet_log(cluster)


def test_koordlet_without_the_right_to_write_its_nodemetric_says_so_and_keeps_applying_qos(
    cluster: Cluster,
) -> None:
    roles = cluster.get("/apis/rbac.authorization.k8s.io/v1/clusterroles")["items"]
    (role,) = [
        r
        for r in roles
        if any("nodemetrics/status" in rule.get("resources", []) for rule in r.get("rules", []))
        and "koordlet" in r["metadata"]["name"]
    ]
    path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}"
    restarts = koordlet_restarts(cluster)
    reduced = json.loads(json.dumps(role))
    for rule in reduced["rules"]:
        rule["resources"] = [r for r in rule.get("resources", []) if r != "nodemetrics/status"]
    with audit.expect_forbidden("koordlet", "nodemetrics"):
        cluster.api("PUT", path, reduced)
        try:
            line = cluster.wait_for(
                "koordlet's error about its NodeMetric",
                lambda: [
                    line
                    for line in koordlet_log(cluster).splitlines()
                    if f"NodeMetric {NODE_NAME} status not written" in line and "403" in line
                ],
                timeout=3 * REPORT_INTERVAL,
            )
            assert "WARNING" in line[0], line
            written = update_time(cluster)  # the last report that got through
            # Its other work goes on: a new BE pod gets its batch values through NRI.
            pod = workload.start_be_pod(cluster, "still-served")
            assert workload.be_cgroup_values(pod) == workload.BE_VALUES
            assert update_time(cluster) == written
        finally:
            current = cluster.get(path)
            cluster.api("PUT", path, {**role, "metadata": current["metadata"]})
    next_update(cluster, written)
    assert f"NodeMetric {NODE_NAME} status written again" in koordlet_log(cluster)
    assert koordlet_restarts(cluster) == restarts
    workload.delete_be_pod(cluster, "still-served")
