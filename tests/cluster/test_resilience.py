"""Leases and watches on the real API server: koord-manager's leader killed, the other replica
takes the Lease and carries on with no write of two leaders interleaved; the API server
restarted after etcd compacted its history, every component's informers re-list and the
co-location chain works on."""

from __future__ import annotations

import datetime as dt

from tests.cluster import audit, product, sloconfig, workload
from tests.cluster.cluster import CGROUP_ROOT, NODE_NAME, Cluster
from tests.cluster.helm import NAMESPACE

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/koord-manager"
NODE_SLO = f"/apis/slo.koordinator.sh/v1alpha1/nodeslos/{NODE_NAME}"
BE_QUOTA = workload.CGROUP / "cpu" / CGROUP_ROOT / "kubepods" / "besteffort" / "cpu.cfs_quota_us"
# What only the leader writes: the controllers' objects (each replica keeps the webhook
# certificate and the caBundle, and posts Events, whether it leads or not).
LEADER_ONLY = {"nodeslos", "nodes", "nodemetrics", "devices"}
POD_NAME = "authentication.kubernetes.io/pod-name"


def holder(cluster: Cluster) -> str:
    return str(cluster.get(LEASE)["spec"].get("holderIdentity") or "")


def pod_of(identity: str) -> str:
    return identity.partition("_")[0]  # <hostname>_<uuid>; a pod's hostname is its name


def leader_writes(cluster: Cluster) -> list[tuple[dt.datetime, str]]:
    """(when, pod) of each write of koord-manager's controllers, in order."""
    writes = []
    for event in audit.read(cluster.audit_log):
        if not event["user"]["username"].endswith(":koord-manager"):
            continue
        if event["verb"] not in ("create", "update", "patch", "delete"):
            continue
        if event.get("objectRef", {}).get("resource") not in LEADER_ONLY:
            continue
        (pod,) = event["user"].get("extra", {}).get(POD_NAME, ["?"])
        when = dt.datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00"))
        writes.append((when, pod))
    return sorted(writes)


def change_suppress_policy(cluster: Cluster, policy: str) -> None:
    sloconfig.change(
        cluster, "resource-threshold-config", {"cpuSuppressPolicy": policy}, cluster_strategy=True
    )
    cluster.wait_for(
        f"koord-manager's NodeSLO with cpuSuppressPolicy {policy}",
        lambda: (
            cluster.get(NODE_SLO)["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressPolicy"]
            == policy
        ),
    )


def test_a_killed_leader_is_replaced_within_the_lease_and_no_two_leaders_write(
    cluster: Cluster,
) -> None:
    first = cluster.wait_for("koord-manager's leader", lambda: holder(cluster))
    lease = cluster.get(LEASE)["spec"]
    duration = int(lease["leaseDurationSeconds"])
    leader = pod_of(first)
    pods = cluster.get(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    assert leader in {p["metadata"]["name"] for p in pods}, (first, "is not a pod's name")
    # Killed: no grace period, so it cannot release the Lease.
    cluster.api(
        "DELETE",
        f"/api/v1/namespaces/{NAMESPACE}/pods/{leader}",
        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
    )
    killed = dt.datetime.now(dt.UTC)

    def successor() -> str | None:
        found = holder(cluster)
        return found if found and pod_of(found) != leader else None

    second = cluster.wait_for("another replica holding the Lease", successor, 3 * duration + 30)
    acquired = dt.datetime.fromisoformat(
        cluster.get(LEASE)["spec"]["acquireTime"].replace("Z", "+00:00")
    )
    # Taken once the dead leader's Lease ran out (plus a retry period), not before.
    assert killed < acquired
    assert (acquired - killed).total_seconds() <= duration + 15, (killed, acquired)

    # The new leader works: a slo-controller-config change reaches the NodeSLO.
    with sloconfig.kept(cluster):
        change_suppress_policy(cluster, "cfsQuota")
    change_suppress_policy(cluster, "cpuset")
    writes = leader_writes(cluster)
    new_leader = pod_of(second)
    assert any(pod == new_leader for _, pod in writes), writes[-5:]
    # One leader at a time: the old leader's writes all before the new one's first.
    by_new = [when for when, pod in writes if pod == new_leader]
    by_others = [when for when, pod in writes if pod != new_leader and when >= killed]
    assert not by_others, by_others
    assert min(by_new) >= acquired - dt.timedelta(seconds=1)


def relisted(cluster: Cluster, selector: str) -> list[str]:
    logs = cluster.kubectl(
        "logs", "-n", NAMESPACE, "-l", selector, "--tail=-1", "--prefix=true", check=False
    )
    return [line for line in logs.splitlines() if "re-listing" in line]


def test_after_an_api_server_restart_on_a_compacted_etcd_every_component_carries_on(
    cluster: Cluster,
) -> None:
    components = {
        c: f"app.kubernetes.io/component={c}" for c in ("koordlet", "manager", "scheduler")
    }
    before = {c: len(relisted(cluster, s)) for c, s in components.items()}
    cluster.compact_etcd()
    product.restart_apiserver(cluster)

    # Each component's informers find their resourceVersion compacted away and list again.
    def newest() -> dict[str, str] | None:
        lines = {c: relisted(cluster, s) for c, s in components.items()}
        if all(len(lines[c]) > before[c] for c in components):
            return {c: found[-1] for c, found in lines.items()}
        return None

    found = cluster.wait_for("every component re-listing", newest, timeout=120)
    assert all("Expired" in line or "410" in line or "too old" in line for line in found.values())

    # And nothing was lost: a config change travels ConfigMap → NodeSLO → cgroup again...
    with sloconfig.kept(cluster):
        change_suppress_policy(cluster, "cfsQuota")
        cluster.wait_for("the besteffort quota set", lambda: int(BE_QUOTA.read_text()) > 0, 60)
    change_suppress_policy(cluster, "cpuset")
    cluster.wait_for("the besteffort quota unlimited", lambda: int(BE_QUOTA.read_text()) == -1, 60)
    # ...and a BE pod is admitted, placed through the extender and given its batch values.
    pod = workload.start_be_pod(cluster, "after-restart")
    assert workload.be_cgroup_values(pod) == workload.BE_VALUES
    workload.delete_be_pod(cluster, "after-restart")
