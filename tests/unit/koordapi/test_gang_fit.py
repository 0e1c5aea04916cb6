"""koordapi.gang.fit: the packing the gang controller lets a group go by, with kube-scheduler's
fit errors for the members left out."""

from __future__ import annotations

from typing import Any

from koordapi.gang.fit import copy_rooms, node_rooms, place


def node(name: str, cpu: str, pods: str = "110", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods}},
    }


def pod(
    name: str, cpu: str, node_name: str = "", phase: str = "Pending", **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        body["nodeName"] = node_name
    body.update(spec)
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": body, "status": {"phase": phase}}


def keyed(*pods: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"ns/{p['metadata']['name']}", p) for p in pods]


def test_bound_pods_take_room_and_finished_ones_do_not() -> None:
    rooms = node_rooms(
        [node("n1", "2350m")],
        [pod("a", "900m", "n1"), pod("done", "1", "n1", phase="Succeeded"), pod("p", "1")],
    )
    assert rooms["n1"].free["cpu"] == 1450
    assert rooms["n1"].free["pods"] == 109


def test_members_are_packed_first_fit_in_order_and_the_rest_get_the_fit_error() -> None:
    rooms = node_rooms([node("n1", "1700m"), node("n2", "1100m")], [])
    result = place(keyed(pod("m0", "1200m"), pod("m1", "1100m"), pod("m2", "600m")), rooms)
    assert result.nodes == {"ns/m0": "n1", "ns/m1": "n2"}
    # n1 has 500m left, n2 none
    assert result.unplaced == {"ns/m2": "0/2 nodes are available: 2 Insufficient cpu."}
    assert rooms["n1"].free["cpu"] == 500


def test_a_copy_is_tried_without_touching_the_original() -> None:
    rooms = node_rooms([node("n1", "1")], [])
    trial = copy_rooms(rooms)
    place(keyed(pod("m0", "700m")), trial)
    assert (rooms["n1"].free["cpu"], trial["n1"].free["cpu"]) == (1000, 300)


def test_the_pods_slots_count() -> None:
    rooms = node_rooms([node("n1", "8", pods="1")], [])
    result = place(keyed(pod("m0", "1"), pod("m1", "1")), rooms)
    assert result.unplaced == {"ns/m1": "0/1 nodes are available: 1 Insufficient pods."}


def test_selectors_affinity_taints_and_cordons_are_honoured() -> None:
    gpu = node("gpu", "8", labels={"pool": "gpu"}, taints=[{"key": "gpu", "effect": "NoSchedule"}])
    cordoned = node("off", "8", unschedulable=True)
    plain = node("plain", "8", labels={"pool": "cpu"})
    rooms = node_rooms([gpu, cordoned, plain], [])
    tolerant = pod(
        "t", "1", tolerations=[{"key": "gpu", "operator": "Exists"}], nodeSelector={"pool": "gpu"}
    )
    selector_only = pod("s", "1", nodeSelector={"pool": "gpu"})
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}
                ]
            }
        }
    }
    result = place(keyed(tolerant, selector_only, pod("a", "1", affinity=affinity)), rooms)
    assert result.nodes == {"ns/t": "gpu", "ns/a": "plain"}
    assert result.unplaced == {
        "ns/s": "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint, 1 node(s) were unschedulable."
    }


def test_a_malformed_amount_is_a_reason_not_a_crash() -> None:
    rooms = node_rooms([node("n1", "8"), node("bad", "eight")], [pod("x", "lots", "n1")])
    assert list(rooms) == ["n1"]  # the unreadable node is left out
    result = place(keyed(pod("m", "1.5.0")), rooms)
    assert result.unplaced["ns/m"].startswith("malformed resources")
