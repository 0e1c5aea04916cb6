"""ElasticQuota admission in the extender's filter (scheduler.quota): the numbers Koordinator's
elastic-quota plugin keeps (request of every pod not finished, used of the assigned ones, the
cluster's allocatable) fed from informer events, and the refusal on every node."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from koordapi.quota import model
from scheduler import extender
from scheduler.quota import QuotaAdmission, pod_request
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.scheduler.objects import NOW, make_node, make_pod

GI = 1 << 30


def quota(
    name: str,
    min_cpu: str,
    max_cpu: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {"min": {"cpu": min_cpu}, "max": {"cpu": max_cpu}},
    }


def pod_of(quota_name: str, name: str, cpu: str, node: str | None = None) -> dict[str, Any]:
    labels = {model.LABEL_QUOTA_NAME: quota_name} if quota_name else {}
    return make_pod(name, requests={"cpu": cpu, "memory": "1Gi"}, labels=labels, node=node)


def admission(*events: tuple[str, dict[str, Any]]) -> QuotaAdmission:
    """Two teams' quotas (min 1, max 3 cores each) on one 4-core node, then ``events``."""
    found = QuotaAdmission()
    found.on_node("ADDED", make_node("node-1", cpu="4", memory="16Gi"))
    found.on_quota("ADDED", quota("team-a", "1", "3"))
    found.on_quota("ADDED", quota("team-b", "1", "3"))
    for kind, obj in events:
        found.on_pod(kind, obj, f"default/{obj['metadata']['name']}")
    return found


def test_a_team_borrows_the_idle_quota_of_the_other_up_to_its_max() -> None:
    running = pod_of("team-a", "a-1", "1500m", node="node-1")
    waiting = pod_of("team-a", "a-2", "1300m")
    quotas = admission(("ADDED", running), ("ADDED", waiting))
    # team-a asks 2800m, team-b nothing: team-a gets its min (1000m) and 1800m of the 3000m
    # left (team-b lends its whole min): runtime 2800m, used 1500m, room for the 1300m pod
    assert quotas.reason(waiting) is None
    tree = quotas.tree()
    assert tree is not None
    assert tree.runtime("team-a") == {"cpu": 2800}
    assert tree.used("team-a") == {"cpu": 1500}


def test_when_the_other_team_asks_the_borrowed_quota_shrinks_and_the_pod_waits_with_why() -> None:
    running = pod_of("team-a", "a-1", "1500m", node="node-1")
    waiting = pod_of("team-a", "a-2", "1300m")
    claim = pod_of("team-b", "b-1", "1700m")
    quotas = admission(("ADDED", running), ("ADDED", waiting), ("ADDED", claim))
    # mins first (1000m each), 2000m left shared by equal weights (max 3000m each): team-b
    # wants 700m more and takes it, team-a gets 1000m and then the 300m team-b left:
    # team-a 2300m, team-b 1700m. team-a's 1500m used + 1300m > 2300m.
    reason = quotas.reason(waiting)
    assert reason == (
        "Insufficient quotas, quotaName: team-a, runtime: cpu:2300m, used: cpu:1500m, "
        "pod's request: cpu:1300m, exceedDimensions: [cpu]"
    )
    assert quotas.reason(claim) is None
    # team-a's first pod ends: its 1500m are neither used nor asked any more
    quotas.on_pod("DELETED", running, "default/a-1")
    assert quotas.reason(waiting) is None


def test_a_finished_pod_counts_no_more_and_an_assumed_one_counts_as_used() -> None:
    done = pod_of("team-a", "a-1", "2500m", node="node-1")
    quotas = admission(("ADDED", done))
    small = pod_of("team-a", "a-2", "400m")
    quotas.on_pod("ADDED", small, "default/a-2")
    assert quotas.reason(small) is None  # 2500m used + 400m within the max of 3000m
    over = pod_of("team-a", "a-3", "800m")
    quotas.on_pod("ADDED", over, "default/a-3")
    assert "used: cpu:2500m" in (quotas.reason(over) or "")  # 2500m + 800m > 3000m
    quotas.on_pod("MODIFIED", {**done, "status": {"phase": "Succeeded"}}, "default/a-1")
    assert quotas.reason(over) is None  # nothing used; 1200m asked, all of it the runtime
    # the extender bound a-2 and a-3 (assumed, not yet seen bound): used 1200m; a pod of
    # 1900m makes 3100m asked, capped at the max: runtime 3000m < 1200m + 1900m
    quotas.on_pod("MODIFIED", small, "default/a-2", assumed=True)
    quotas.on_pod("MODIFIED", over, "default/a-3", assumed=True)
    tree = quotas.tree()
    assert tree is not None and tree.used("team-a") == {"cpu": 1200}
    big = pod_of("team-a", "a-4", "1900m")
    quotas.on_pod("ADDED", big, "default/a-4")
    assert quotas.reason(big) == (
        "Insufficient quotas, quotaName: team-a, runtime: cpu:3, used: cpu:1200m, "
        "pod's request: cpu:1900m, exceedDimensions: [cpu]"
    )


def test_a_pod_without_the_label_counts_in_the_quota_that_binds_its_namespace() -> None:
    quotas = admission()
    binding = quota(
        "etl", "0", "900m", annotations={model.ANNOTATION_NAMESPACES: json.dumps(["batch-17"])}
    )
    quotas.on_quota("ADDED", binding)
    pod = pod_of("", "crunch", "1")
    pod["metadata"]["namespace"] = "batch-17"
    quotas.on_pod("ADDED", pod, "batch-17/crunch")
    assert "quotaName: etl" in (quotas.reason(pod) or "")
    # the quota goes: the pod falls back to the default quota, which refuses nothing
    quotas.on_quota("DELETED", binding)
    assert quotas.reason(pod) is None


def test_pods_of_the_default_quota_and_clusters_without_quotas_are_never_refused() -> None:
    quotas = QuotaAdmission()
    quotas.on_node("ADDED", make_node("node-1", cpu="1"))
    pod = pod_of("", "huge", "64")
    quotas.on_pod("ADDED", pod, "default/huge")
    assert quotas.reason(pod) is None
    assert admission(("ADDED", pod)).reason(pod) is None


def test_a_tree_that_cannot_be_built_checks_nothing_and_says_why_once(caplog: Any) -> None:
    quotas = admission()
    orphan = quota("orphan", "0", "100m", labels={model.LABEL_PARENT: "nowhere"})
    quotas.on_quota("ADDED", orphan)
    pod = pod_of("orphan", "o-1", "1")
    quotas.on_pod("ADDED", pod, "default/o-1")
    assert quotas.reason(pod) is None
    assert quotas.reason(pod) is None
    assert "nowhere" in quotas.broken
    assert sum("cannot be built" in r.message for r in caplog.records) == 1
    quotas.on_quota("DELETED", orphan)
    assert quotas.tree() is not None and quotas.broken == ""


def test_a_malformed_quota_is_left_out_and_logged(caplog: Any) -> None:
    quotas = admission()
    bad = quota("bad", "1", "lots")
    quotas.on_quota("ADDED", bad)
    assert "ElasticQuota bad ignored" in caplog.text
    pod = pod_of("bad", "b-1", "1")
    quotas.on_pod("ADDED", pod, "default/b-1")
    assert quotas.reason(pod) is None  # its pods are the default quota's


def test_the_request_counts_init_containers_and_overhead_as_kubernetes_does() -> None:
    pod = make_pod("p", requests={"cpu": "300m", "memory": "1Gi", "nvidia.com/gpu": "1"})
    pod["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "1700m"}}}]
    pod["spec"]["overhead"] = {"cpu": "70m"}
    # the larger of the init container (1700m) and the containers (300m), plus the overhead
    assert pod_request(pod) == {"cpu": 1770, "memory": GI, "nvidia.com/gpu": 1}


class QuotaStaticView(extender.StaticClusterView):
    def __init__(self, quotas: QuotaAdmission, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.quotas = quotas

    def quota_reason(self, pod: Any) -> str | None:
        return self.quotas.reason(pod)


def test_the_filter_refuses_a_pod_over_its_quota_on_every_node_unresolvably() -> None:
    running = pod_of("team-a", "a-1", "2500m", node="node-1")
    waiting = pod_of("team-a", "a-2", "700m")
    quotas = admission(("ADDED", running), ("ADDED", waiting))
    nodes = [make_node("node-1", cpu="4"), make_node("node-2", cpu="4")]
    view = QuotaStaticView(quotas, nodes=nodes)
    names = {"Pod": waiting, "NodeNames": ["node-1", "node-2"]}
    reply = extender.filter(names, view, NOW)
    assert reply["NodeNames"] == []
    assert set(reply["FailedAndUnresolvableNodes"]) == {"node-1", "node-2"}
    assert reply["FailedAndUnresolvableNodes"]["node-2"].startswith(
        "Insufficient quotas, quotaName: team-a"
    )
    sent = {"Pod": waiting, "Nodes": {"metadata": {}, "items": nodes}}
    assert extender.filter(sent, view, NOW)["Nodes"]["items"] == []
    # within the quota, the other filters decide as before
    fits = pod_of("team-a", "a-3", "400m")
    quotas.on_pod("ADDED", fits, "default/a-3")
    quotas.on_pod("DELETED", waiting, "default/a-2")
    assert extender.filter({**names, "Pod": fits}, view, NOW)["NodeNames"] == ["node-1", "node-2"]


def test_the_informer_view_counts_quotas_pods_and_its_own_binds() -> None:
    async def scenario() -> None:
        api = FakeKubeAPI()
        api.seed({"apiVersion": "v1", "kind": "Node", **make_node("node-1", cpu="4")})
        api.seed(quota("team-a", "1", "2"))
        running = pod_of("team-a", "a-1", "1200m", node="node-1")
        api.seed({"apiVersion": "v1", "kind": "Pod", **running})
        view = InformerClusterView(api.kube_api())
        tasks = [asyncio.create_task(i.run()) for i in view.informers]
        try:
            await eventually(lambda: view.elastic_quotas.synced.is_set() and view.synced())
            incoming = pod_of("team-a", "a-2", "700m")
            api.seed({"apiVersion": "v1", "kind": "Pod", **incoming})
            await eventually(lambda: view.pod("default", "a-2") is not None)
            assert view.quota_reason(incoming) is None  # 1200m + 700m within 2000m
            view.assume(incoming, "node-1", {})
            third = pod_of("team-a", "a-3", "200m")
            # used 1900m once a-2 is assumed: 200m more exceeds the max of 2000m
            assert "used: cpu:1900m" in (view.quota_reason(third) or "")
            view.forget(incoming)
            assert view.quota_reason(third) is None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    run(scenario())
