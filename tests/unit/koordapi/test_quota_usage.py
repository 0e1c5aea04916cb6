"""koordapi.quota.usage: pods counted into their quotas from informer events (Koordinator's
GroupQuotaManager OnPodAdd/OnPodUpdate/OnPodDelete sums, its TestGroupQuotaManager_OnPod*
shapes with other numbers), and which quota events re-place the pods or rebuild the tree."""

from __future__ import annotations

import copy
import json
from typing import Any

from koordapi.quota import model
from koordapi.quota.usage import QuotaBook

GI = 1 << 30


def quota(name: str, min_cpu: str, max_cpu: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "quotas", "annotations": dict(annotations)},
        "spec": {"min": {"cpu": min_cpu}, "max": {"cpu": max_cpu, "memory": "40Gi"}},
    }


def pod(
    name: str,
    cpu: str,
    *,
    quota_name: str = "",
    namespace: str = "work",
    node: str = "",
    phase: str = "Running",
    preemptible: bool = True,
) -> dict[str, Any]:
    labels = {model.LABEL_QUOTA_NAME: quota_name} if quota_name else {}
    if not preemptible:
        labels[model.LABEL_PREEMPTIBLE] = "false"
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "3Gi"}}}],
        },
        "status": {"phase": phase},
    }


def book() -> QuotaBook:
    found = QuotaBook()
    found.on_node(
        "ADDED", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "9700m"}}}
    )
    found.on_quota("ADDED", quota("quota-x", "1300m", "6100m"))
    found.on_quota("ADDED", quota("quota-y", "2200m", "5"))
    return found


def test_requests_of_all_pods_used_of_the_assigned_and_non_preemptible_apart() -> None:
    quotas = book()
    quotas.on_pod("ADDED", pod("p1", "1100m", quota_name="quota-x", node="n1"), "work/p1")
    quotas.on_pod("ADDED", pod("p2", "700m", quota_name="quota-x"), "work/p2")
    quotas.on_pod(
        "ADDED", pod("p3", "450m", quota_name="quota-x", node="n1", preemptible=False), "work/p3"
    )
    tree = quotas.tree()
    assert tree is not None
    info = tree.info("quota-x")
    # request 1100m + 700m + 450m; used: the two on a node; memory 3Gi each
    assert info.request == {"cpu": 2250, "memory": 9 * GI}
    assert info.used == {"cpu": 1550, "memory": 6 * GI}
    assert info.non_preemptible_request == {"cpu": 450, "memory": 3 * GI}
    assert info.non_preemptible_used == {"cpu": 450, "memory": 3 * GI}
    # p2 is bound, p1 succeeds: p1 counts no more, p2 is used now
    quotas.on_pod("MODIFIED", pod("p2", "700m", quota_name="quota-x", node="n1"), "work/p2")
    quotas.on_pod(
        "MODIFIED", pod("p1", "1100m", quota_name="quota-x", phase="Succeeded"), "work/p1"
    )
    tree = quotas.tree()
    assert tree is not None
    assert tree.info("quota-x").request == {"cpu": 1150, "memory": 6 * GI}
    assert tree.info("quota-x").used == {"cpu": 1150, "memory": 6 * GI}
    quotas.on_pod("DELETED", pod("p3", "450m", quota_name="quota-x"), "work/p3")
    tree = quotas.tree()
    assert tree is not None
    assert tree.info("quota-x").non_preemptible_request == {"cpu": 0, "memory": 0}


def test_a_status_write_keeps_the_tree_and_a_new_min_rebuilds_it_with_the_pods_in_place() -> None:
    quotas = book()
    quotas.on_node(
        "MODIFIED", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "7900m"}}}
    )
    quotas.on_pod("ADDED", pod("p1", "4900m", quota_name="quota-x", node="n1"), "work/p1")
    first = quotas.tree()
    assert first is not None
    # quota-x asks 4900m: its min 1300m, then the 7900m - 1300m left by weight to it alone
    # (quota-y asks nothing), capped at its request
    assert first.runtime("quota-x")["cpu"] == 4900
    # the status annotations written onto the quota: same numbers, same tree
    written = quota("quota-x", "1300m", "6100m")
    written["metadata"]["annotations"][model.ANNOTATION_RUNTIME] = '{"cpu":"4900m"}'
    written["status"] = {"used": {"cpu": "4900m"}}
    quotas.on_quota("MODIFIED", written)
    assert quotas.tree() is first
    # quota-y asks 3600m. mins 1300m + 2200m, 4400m left by weight 6100:5000 (max as shared
    # weight): x 1300 + int(6100 * 4400 / 11100 + 0.5) = 1300 + 2418 = 3718 (under 4900),
    # y 2200 + int(5000 * 4400 / 11100 + 0.5) = 2200 + 1982 = 4182, capped at 3600: 582m
    # given back, all to x: 4300m
    quotas.on_pod("ADDED", pod("p2", "3600m", quota_name="quota-y"), "work/p2")
    second = quotas.tree()
    assert second is not None
    assert (second.runtime("quota-x")["cpu"], second.runtime("quota-y")["cpu"]) == (4300, 3600)
    # quota-x's min raised to 3100m: mins 3100m + 2200m, 2600m left:
    # x 3100 + int(6100 * 2600 / 11100 + 0.5) = 3100 + 1429 = 4529,
    # y 2200 + int(5000 * 2600 / 11100 + 0.5) = 2200 + 1171 = 3371, both under their requests
    raised = copy.deepcopy(written)
    raised["spec"]["min"]["cpu"] = "3100m"
    quotas.on_quota("MODIFIED", raised)
    third = quotas.tree()
    assert third is not None and third is not second
    assert (third.runtime("quota-x")["cpu"], third.runtime("quota-y")["cpu"]) == (4529, 3371)
    # the pods still counted where they were
    assert third.info("quota-x").used["cpu"] == 4900
    assert third.info("quota-y").request["cpu"] == 3600


def test_a_namespaces_annotation_moves_the_namespaces_pods() -> None:
    quotas = book()
    quotas.on_pod("ADDED", pod("p1", "800m", namespace="etl-3"), "etl-3/p1")
    tree = quotas.tree()
    assert tree is not None
    assert tree.info(model.DEFAULT_QUOTA).request.get("cpu") == 800
    bound = quota("quota-y", "2200m", "5", **{model.ANNOTATION_NAMESPACES: json.dumps(["etl-3"])})
    quotas.on_quota("MODIFIED", bound)
    tree = quotas.tree()
    assert tree is not None
    assert tree.info("quota-y").request == {"cpu": 800, "memory": 3 * GI}
    assert tree.info(model.DEFAULT_QUOTA).request.get("cpu", 0) == 0


def test_a_malformed_quota_is_rejected_with_why_and_its_pods_go_to_the_default_quota() -> None:
    quotas = book()
    quotas.on_pod("ADDED", pod("p1", "800m", quota_name="quota-y", node="n1"), "work/p1")
    quotas.on_quota("MODIFIED", quota("quota-y", "2200m", "five"))
    assert "five" in quotas.rejected["quota-y"]
    assert "quota-y" not in quotas.quotas
    tree = quotas.tree()
    assert tree is not None
    assert tree.info(model.DEFAULT_QUOTA).used.get("cpu") == 800
    quotas.on_quota("MODIFIED", quota("quota-y", "2200m", "5"))
    assert quotas.rejected == {}
    tree = quotas.tree()
    assert tree is not None
    assert tree.info("quota-y").used["cpu"] == 800
