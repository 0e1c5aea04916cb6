"""koordapi.reservation.holding against cases shaped after Koordinator v1.8's
pkg/scheduler/plugins/reservation plugin_test.go (Filter: fitsNode and fitsReservation with
Aligned and Restricted, "Insufficient cpu by node", "Reservation(s) Insufficient cpu",
reservation affinity, allocateOnce), scoring_test.go and nominator_test.go (ScoreReservation,
the reservation-order preference), with other numbers worked out by hand in the comments. cpu
in milli-cores, memory in bytes; ``free`` is a node's allocatable less its real pods' requests
(owner pods in a reservation included), as the extender computes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi.reservation.holding import (
    REASON_AFFINITY,
    Held,
    check,
    held_total,
    holds_on_node,
    nominate,
    score,
)
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVE_POD,
    LABEL_RESERVATION_IGNORED,
    LABEL_RESERVATION_ORDER,
    Reservation,
)

MI = 1 << 20
GI = 1 << 30
WEB = {"app": "web"}


def reservation(
    name: str,
    *,
    cpu: str | None = "1700m",
    memory: str | None = "3.5Gi",
    owner: dict[str, str] | None = None,
    policy: str | None = None,
    once: bool | None = None,
    phase: str = "Available",
    node: str = "node-7",
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    more: dict[str, str] | None = None,
) -> Reservation:
    allocatable = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    allocatable.update(more or {})
    spec: dict[str, Any] = {
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": allocatable}}]}
        },
        "owners": [{"labelSelector": {"matchLabels": owner or WEB}}],
        "ttl": "0s",
        "unschedulable": unschedulable,
        "taints": taints or [],
    }
    if policy is not None:
        spec["allocatePolicy"] = policy
    if once is not None:
        spec["allocateOnce"] = once
    return Reservation.from_dict(
        {
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {}},
            "spec": spec,
            "status": {"phase": phase, "nodeName": node, "allocatable": allocatable},
        }
    )


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    *,
    labels: dict[str, str] | None = None,
    into: Reservation | None = None,
    phase: str = "Running",
    affinity: dict[str, Any] | str | None = None,
    more: dict[str, str] | None = None,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(more or {})
    annotations: dict[str, str] = {}
    if into is not None:
        annotations[ANNOTATION_RESERVATION_ALLOCATED] = json.dumps(
            {"name": into.name, "uid": into.uid}
        )
    if affinity is not None:
        annotations[ANNOTATION_RESERVATION_AFFINITY] = (
            affinity if isinstance(affinity, str) else json.dumps(affinity)
        )
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": WEB if labels is None else labels,
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": phase},
    }


def holds(*rs: Reservation, pods: list[dict[str, Any]] | None = None) -> list[Held]:
    return holds_on_node(rs, pods or [])


def only(held: list[Held]) -> Held:
    assert len(held) == 1
    return held[0]


# -- what a reservation holds: its allocatable less what its owners took -----------------------


def test_remaining_after_partial_allocation() -> None:
    r = reservation("rsv-a", cpu="3500m", memory="7Gi", once=False)
    owners = [pod("web-1", "1200m", "2.5Gi", into=r), pod("web-2", "700m", "1Gi", into=r)]
    h = only(holds(r, pods=owners))
    assert h.allocated == {"cpu": 1900, "memory": 3584 * MI}  # 1200m + 700m, 2.5Gi + 1Gi
    assert h.remaining == {"cpu": 1600, "memory": 3584 * MI}  # 3500m - 1900m, 7Gi - 3.5Gi
    assert h.owners == ("shop/web-1", "shop/web-2")
    assert not h.consumed


def test_an_owner_takes_only_what_the_reservation_holds() -> None:
    # quotav1.Mask: the owner's ephemeral-storage is not the reservation's to give
    r = reservation("rsv-a", cpu="2100m", memory=None, once=False)
    owner = pod("web-1", "900m", "1Gi", into=r, more={"ephemeral-storage": "5Gi"})
    h = only(holds(r, pods=[owner]))
    assert h.allocated == {"cpu": 900}
    assert h.remaining == {"cpu": 1200}


def test_an_owner_taking_more_than_held_leaves_nothing_not_less() -> None:
    r = reservation("rsv-a", cpu="1700m", memory="3.5Gi", once=False)
    h = only(holds(r, pods=[pod("web-1", "2300m", "1Gi", into=r)]))
    assert h.remaining == {"cpu": 0, "memory": 2560 * MI}  # 3.5Gi - 1Gi


def test_finished_pods_and_pods_of_other_reservations_take_nothing() -> None:
    r = reservation("rsv-a", cpu="2900m", memory="6Gi", once=False)
    gone = reservation("rsv-gone", phase="Succeeded")
    pods = [
        pod("web-1", "1100m", "1Gi", into=r),
        pod("web-2", "800m", "2Gi", into=r, phase="Succeeded"),
        pod("web-3", "600m", "1Gi", into=r, phase="Failed"),
        pod("web-4", "500m", "1Gi", into=gone),
        pod("web-5", "400m", "1Gi"),
    ]
    h = only(holds(r, gone, pods=pods))
    assert h.remaining == {"cpu": 1800, "memory": 5 * GI}  # only web-1 counts
    assert h.owners == ("shop/web-1",)


def test_only_active_reservations_hold() -> None:
    rs = [
        reservation("rsv-avail"),
        reservation("rsv-waiting", phase="Waiting"),
        reservation("rsv-pending", phase="Pending"),
        reservation("rsv-unplaced", node=""),
        reservation("rsv-failed", phase="Failed"),
        reservation("rsv-done", phase="Succeeded"),
    ]
    assert [h.reservation.name for h in holds(*rs)] == ["rsv-avail", "rsv-waiting"]


def test_allocate_once_holds_nothing_after_its_first_owner() -> None:
    r = reservation("rsv-a", cpu="3500m", memory="7Gi")  # allocateOnce defaults to true
    h = only(holds(r, pods=[pod("web-1", "300m", "256Mi", into=r)]))
    assert h.consumed
    assert h.remaining == {}
    assert h.allocated == {"cpu": 300, "memory": 256 * MI}


def test_the_pods_count_is_not_held() -> None:
    r = reservation("rsv-a", more={"pods": "7"})
    assert only(holds(r)).remaining == {"cpu": 1700, "memory": 3584 * MI}


def test_held_total_leaves_one_out() -> None:
    a = reservation("rsv-a", cpu="1700m", memory="3.5Gi")
    b = reservation("rsv-b", cpu="1300m", memory=None, more={"nvidia.com/gpu": "1"})
    both = holds(a, b)
    assert held_total(both) == {"cpu": 3000, "memory": 3584 * MI, "nvidia.com/gpu": 1}
    assert held_total(both, but=b.uid) == {"cpu": 1700, "memory": 3584 * MI}


# -- Filter: pods that are not owners ----------------------------------------------------------


def test_no_reservation_no_check() -> None:
    assert check(pod("api-1", "64", labels={}), {"cpu": 100}, []).reason == ""


def test_a_non_owner_cannot_take_the_held_room() -> None:
    h = holds(reservation("rsv-a", cpu="1700m", memory="3.5Gi"))
    free = {"cpu": 4000, "memory": 8 * GI}
    # 4000m - 1700m = 2300m left to others
    assert check(pod("api-1", "2300m", labels={}), free, h).reason == ""
    v = check(pod("api-2", "2301m", labels={}), free, h)
    assert v.reason == "Insufficient cpu"
    assert not v.final and v.into is None
    # 8Gi - 3.5Gi = 4.5Gi; both short, in name order
    v = check(pod("api-3", "2400m", "4.6Gi", labels={}), free, h)
    assert v.reason == "Insufficient cpu, Insufficient memory"


def test_a_non_owner_sees_the_remainder_after_partial_allocation() -> None:
    r = reservation("rsv-a", cpu="3500m", memory="7Gi", once=False)
    h = holds(r, pods=[pod("web-1", "1200m", "2.5Gi", into=r), pod("web-2", "700m", "1Gi", into=r)])
    # remaining 1600m: of a free 5000m, 3400m is left to others
    free = {"cpu": 5000, "memory": 16 * GI}
    assert check(pod("api-1", "3400m", labels={}), free, h).reason == ""
    assert check(pod("api-1", "3401m", labels={}), free, h).reason == "Insufficient cpu"


def test_a_consumed_allocate_once_reservation_holds_nothing_against_others() -> None:
    r = reservation("rsv-a", cpu="3500m", memory="7Gi")
    h = holds(r, pods=[pod("web-1", "300m", into=r)])
    assert check(pod("api-1", "4900m", labels={}), {"cpu": 4900}, h).reason == ""


def test_a_waiting_reservation_holds_but_takes_no_owner() -> None:
    h = holds(reservation("rsv-w", cpu="1700m", memory=None, phase="Waiting"))
    free = {"cpu": 2500}
    # the owner cannot use it, so it sees 2500m - 1700m = 800m like any other pod
    assert check(pod("web-1", "800m"), free, h).reason == ""
    v = check(pod("web-1", "900m"), free, h)
    assert v.reason == "Insufficient cpu"
    assert v.into is None


def test_a_reservation_ignored_pod_is_left_to_node_resources_fit() -> None:
    h = holds(reservation("rsv-a", cpu="1700m", memory=None))
    ignoring = pod("api-1", "2500m", labels={LABEL_RESERVATION_IGNORED: "true"})
    v = check(ignoring, {"cpu": 2500}, h)
    assert v.reason == "" and v.into is None


def test_a_reserve_pod_sees_every_reservation_held() -> None:
    # a second reservation placed by kube-scheduler must not take the first one's room, even
    # when it has the same owners
    h = holds(reservation("rsv-a", cpu="1700m", memory=None))
    reserve = pod("uid-rsv-b", "900m")
    reserve["metadata"]["annotations"][ANNOTATION_RESERVE_POD] = "true"
    assert check(reserve, {"cpu": 2600}, h).reason == ""  # 2600m - 1700m = 900m
    v = check(reserve, {"cpu": 2599}, h)
    assert v.reason == "Insufficient cpu"
    assert v.into is None


# -- Filter: owners, Aligned (and the deprecated default read as Aligned) -----------------------


@pytest.mark.parametrize("policy", [None, "Aligned"])
def test_aligned_owner_goes_into_its_reservation_with_the_nodes_room(policy: str | None) -> None:
    # "filter aligned reservation with nodeInfo": Aligned needs only the node to fit, the
    # reservation's remainder counting as free room
    r = reservation("rsv-a", cpu="1700m", memory="3.5Gi", policy=policy)
    v = check(pod("web-1", "2000m", "4Gi"), {"cpu": 2300, "memory": 5 * GI}, holds(r))
    assert v.reason == ""
    assert v.into is not None and v.into.reservation.name == "rsv-a"


def test_aligned_owner_short_by_node() -> None:
    # "failed to filter aligned reservation with nodeInfo": free 1900m < 2000m
    r = reservation("rsv-a", cpu="1700m", memory="3.5Gi", policy="Aligned")
    v = check(pod("web-1", "2000m", "1Gi"), {"cpu": 1900, "memory": 5 * GI}, holds(r))
    assert v.reason == "Insufficient cpu by node"
    assert not v.final


def test_aligned_owner_with_affinity_short_by_node() -> None:
    r = reservation("rsv-a", cpu="1700m", memory="3.5Gi", policy="Aligned")
    v = check(
        pod("web-1", "2000m", "6Gi", affinity={"name": "rsv-a"}),
        {"cpu": 1900, "memory": 5 * GI},
        holds(r),
    )
    assert v.reason == "Insufficient cpu by node, Insufficient memory by node"


# -- Filter: owners, Restricted ----------------------------------------------------------------


def test_restricted_owner_within_the_remainder() -> None:
    # "filter restricted reservation with nodeInfo"
    r = reservation("rsv-r", cpu="1700m", memory="3.5Gi", policy="Restricted")
    v = check(pod("web-1", "1700m", "2Gi"), {"cpu": 2300, "memory": 5 * GI}, holds(r))
    assert v.reason == ""
    assert v.into is not None and v.into.reservation.name == "rsv-r"


def test_restricted_owner_with_affinity_beyond_the_reservation() -> None:
    # "failed to filter restricted reservation with nodeInfo": the node has the room
    # (2300m >= 2000m) but the reservation holds 1700m < 2000m
    r = reservation("rsv-r", cpu="1700m", memory="3.5Gi", policy="Restricted")
    v = check(
        pod("web-1", "2000m", "2Gi", affinity={}),
        {"cpu": 2300, "memory": 5 * GI},
        holds(r),
    )
    assert v.reason == "Reservation(s) Insufficient cpu"
    assert not v.final and v.into is None


def test_restricted_owner_without_affinity_tries_the_node_alone() -> None:
    # not required to use it: the pod may run beside the reservation if the node's own room
    # (free less what the reservation holds) fits it, and then it is not in the reservation
    r = reservation("rsv-r", cpu="1700m", memory="3.5Gi", policy="Restricted")
    h = holds(r)
    owner = pod("web-1", "2000m", "1Gi")
    v = check(owner, {"cpu": 3700, "memory": 5 * GI}, h)  # 3700m - 1700m = 2000m
    assert v.reason == "" and v.into is None
    v = check(owner, {"cpu": 3699, "memory": 5 * GI}, h)
    assert v.reason == "Insufficient cpu by node"


def test_restricted_after_partial_allocation() -> None:
    r = reservation("rsv-r", cpu="3500m", memory="7Gi", policy="Restricted", once=False)
    h = holds(r, pods=[pod("web-1", "1200m", "2.5Gi", into=r), pod("web-2", "700m", "1Gi", into=r)])
    free = {"cpu": 5000, "memory": 16 * GI}
    # remaining 1600m and 3.5Gi: exactly that fits (requested <= remained)
    fits = check(pod("web-3", "1600m", "3.5Gi", affinity={}), free, h)
    assert fits.reason == "" and fits.into is not None
    v = check(pod("web-3", "1601m", "3.6Gi", affinity={}), free, h)
    assert v.reason == "Reservation(s) Insufficient cpu, Reservation(s) Insufficient memory"


def test_restricted_named_by_the_affinity_gives_the_amounts() -> None:
    # fitsReservation with isDetailed (the pod names the reservation): "Reservation(s)
    # Insufficient cpu, requested: 6000, used: 1000, capacity: 6000" in Koordinator's case;
    # here 3500m held, 1200m of it taken, 2400m asked; memory in bytes
    r = reservation("rsv-r", cpu="3500m", memory="7Gi", policy="Restricted", once=False)
    h = holds(r, pods=[pod("web-1", "1200m", "6Gi", into=r)])
    named = pod("web-2", "2400m", "1.5Gi", affinity={"name": "rsv-r"})
    v = check(named, {"cpu": 9000, "memory": 16 * GI}, h)
    assert v.reason == (
        "Reservation(s) Insufficient cpu, requested: 2400, used: 1200, capacity: 3500, "
        "Reservation(s) Insufficient memory, requested: 1610612736, used: 6442450944, "
        "capacity: 7516192768"
    )
    # a selector rather than the name: the short form
    unnamed = pod("web-2", "2400m", affinity={})
    assert check(unnamed, {"cpu": 9000}, h).reason == "Reservation(s) Insufficient cpu"


def test_restricted_checks_only_what_it_holds_and_the_node_the_rest() -> None:
    # "failed to filter restricted reservation since unmatched resources are insufficient":
    # batch-cpu is not held, so it is the node that lacks it
    r = reservation("rsv-r", cpu="1700m", memory=None, policy="Restricted")
    batch = {"kubernetes.io/batch-cpu": "6100", "kubernetes.io/batch-memory": "2Gi"}
    owner = pod("web-1", more=batch, affinity={})
    free = {"cpu": 9000, "kubernetes.io/batch-cpu": 6000, "kubernetes.io/batch-memory": 7 * GI}
    assert check(owner, free, holds(r)).reason == "Insufficient kubernetes.io/batch-cpu by node"
    free["kubernetes.io/batch-cpu"] = 6100
    assert check(owner, free, holds(r)).reason == ""


# -- Filter: reservation affinity --------------------------------------------------------------


def test_affinity_with_no_reservation_it_may_use_is_final() -> None:
    # "normal pod has reservation affinity but no matched reservation"
    r = reservation("rsv-a", owner={"app": "db"})
    v = check(pod("web-1", "100m", affinity={}), {"cpu": 9000}, holds(r))
    assert v.reason == REASON_AFFINITY == "node(s) no reservations match reservation affinity"
    assert v.final


def test_affinity_picks_by_name_and_by_labels() -> None:
    a = reservation("rsv-a", labels={"pool": "gold"})
    b = reservation("rsv-b", labels={"pool": "silver"})
    free = {"cpu": 9000, "memory": 16 * GI}
    by_name = check(pod("web-1", "100m", affinity={"name": "rsv-b"}), free, holds(a, b))
    assert by_name.into is not None and by_name.into.reservation.name == "rsv-b"
    by_label = check(
        pod("web-1", "100m", affinity={"reservationSelector": {"pool": "gold"}}), free, holds(a, b)
    )
    assert by_label.into is not None and by_label.into.reservation.name == "rsv-a"
    none = check(pod("web-1", "100m", affinity={"name": "rsv-c"}), free, holds(a, b))
    assert none.reason == REASON_AFFINITY


def test_a_malformed_affinity_is_final() -> None:
    v = check(pod("web-1", "100m", affinity="{name"), {"cpu": 9000}, holds(reservation("rsv-a")))
    assert v.reason.startswith("Reservation(s) ")
    assert "reservation-affinity" in v.reason
    assert v.final


def test_unschedulable_reservation_takes_no_owner() -> None:
    h = holds(reservation("rsv-a", cpu="1700m", memory=None, unschedulable=True))
    v = check(pod("web-1", "500m", affinity={"reservationSelector": {}}), {"cpu": 9000}, h)
    assert v.reason == REASON_AFFINITY
    # and still holds its room against the owner as against anyone: 2200m - 1700m = 500m
    assert check(pod("web-1", "500m"), {"cpu": 2200}, h).into is None
    assert check(pod("web-1", "501m"), {"cpu": 2200}, h).reason == "Insufficient cpu"


GPU_TAINT = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}


def test_taints_need_the_affinitys_tolerations() -> None:
    h = holds(reservation("rsv-a", taints=[GPU_TAINT]))
    free = {"cpu": 9000, "memory": 16 * GI}
    exact = {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    exists = {"key": "gpu", "operator": "Exists"}
    wrong = {"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}
    for ok in (exact, exists, {"operator": "Exists"}):
        v = check(pod("web-1", "100m", affinity={"tolerations": [ok]}), free, h)
        assert v.into is not None, ok
    v = check(pod("web-1", "100m", affinity={"tolerations": [wrong]}), free, h)
    assert v.reason == REASON_AFFINITY
    v = check(
        pod("web-1", "100m", affinity={"tolerations": [{**exact, "effect": "NoExecute"}]}), free, h
    )
    assert v.reason == REASON_AFFINITY


def test_prefer_no_schedule_taints_do_not_keep_owners_out() -> None:
    soft = {**GPU_TAINT, "effect": "PreferNoSchedule"}
    h = holds(reservation("rsv-a", taints=[soft]))
    v = check(pod("web-1", "100m", affinity={}), {"cpu": 9000, "memory": 16 * GI}, h)
    assert v.into is not None


# -- Filter: allocateOnce and several reservations on one node ----------------------------------


def test_allocate_once_takes_no_second_owner() -> None:
    # "failed with allocateOnce and allocated reservation"
    r = reservation("rsv-a", cpu="3500m", memory="7Gi")
    h = holds(r, pods=[pod("web-1", "300m", into=r)])
    v = check(pod("web-2", "200m", affinity={"name": "rsv-a"}), {"cpu": 9000}, h)
    assert v.reason == REASON_AFFINITY
    plain = check(pod("web-2", "200m"), {"cpu": 9000}, h)
    assert plain.reason == "" and plain.into is None


def test_not_allocate_once_takes_a_second_owner_in_the_remainder() -> None:
    r = reservation("rsv-a", cpu="3500m", memory="7Gi", once=False, policy="Restricted")
    h = holds(r, pods=[pod("web-1", "1300m", "3Gi", into=r)])
    v = check(pod("web-2", "2200m", "4Gi", affinity={}), {"cpu": 9000, "memory": 16 * GI}, h)
    assert v.into is not None and v.into.reservation.name == "rsv-a"  # 3500m - 1300m = 2200m


def test_an_owner_of_one_reservation_does_not_take_another_ones_room() -> None:
    mine = reservation("rsv-a", cpu="1700m", memory=None)
    theirs = reservation("rsv-b", cpu="1200m", memory=None, owner={"app": "db"})
    h = holds(mine, theirs)
    free = {"cpu": 4000}
    # into rsv-a: 4000m less rsv-b's 1200m = 2800m
    v = check(pod("web-1", "2800m"), free, h)
    assert v.into is not None and v.into.reservation.name == "rsv-a"
    assert check(pod("web-1", "2801m"), free, h).reason == "Insufficient cpu by node"
    # a pod owning neither: 4000m - 2900m = 1100m
    assert check(pod("api-1", "1100m", labels={}), free, h).reason == ""
    assert check(pod("api-1", "1101m", labels={}), free, h).reason == "Insufficient cpu"


def test_an_owner_of_two_reservations_goes_into_the_one_it_fits() -> None:
    small = reservation("rsv-small", cpu="900m", memory=None, policy="Restricted")
    big = reservation("rsv-big", cpu="2700m", memory=None, policy="Restricted")
    v = check(pod("web-1", "1500m", affinity={}), {"cpu": 3600}, holds(small, big))
    assert v.into is not None and v.into.reservation.name == "rsv-big"
    v = check(pod("web-1", "2800m", affinity={}), {"cpu": 9000}, holds(small, big))
    assert v.reason == "Reservation(s) Insufficient cpu, Reservation(s) Insufficient cpu"


# -- ScoreReservation (MostAllocated) and the nomination ----------------------------------------


def test_score_most_allocated_over_what_it_holds() -> None:
    r = reservation("rsv-a", cpu="2500m", memory="6Gi", once=False)
    h = only(holds(r, pods=[pod("web-1", "1000m", "1.5Gi", into=r)]))
    # cpu (700m + 1000m) / 2500m = 68%; memory (3Gi + 1.5Gi) / 6Gi = 75%; (68 + 75) / 2 = 71
    assert score({"cpu": 700, "memory": 3 * GI, "pods": 1}, h) == 71
    # what is not held does not count: 7 GPUs change nothing
    assert score({"cpu": 700, "memory": 3 * GI, "nvidia.com/gpu": 7}, h) == 71


def test_score_a_resource_over_capacity_gives_nothing() -> None:
    h = only(holds(reservation("rsv-a", cpu="1700m", memory="3.5Gi")))
    # cpu 1800m > 1700m gives 0; memory 1Gi / 3.5Gi = 28.57 -> 28; 28 / 2 = 14
    assert score({"cpu": 1800, "memory": GI}, h) == 14


def test_score_rounds_down_per_resource() -> None:
    h = only(holds(reservation("rsv-a", cpu="3", memory=None)))
    assert score({"cpu": 1000}, h) == 33  # 100 * 1000 / 3000 = 33.3


def test_nominate_prefers_the_smallest_non_zero_order() -> None:
    a = reservation("rsv-a", labels={LABEL_RESERVATION_ORDER: "5"})
    b = reservation("rsv-b", labels={LABEL_RESERVATION_ORDER: "2"})
    c = reservation("rsv-c", labels={LABEL_RESERVATION_ORDER: "0"})
    d = reservation("rsv-d")
    assert nominate({"cpu": 100}, holds(a, b, c, d)).reservation.name == "rsv-b"


def test_nominate_by_score_without_order() -> None:
    # 1200m fills 1500m to 80% and 4000m to 30%: the tighter one is preferred
    small = reservation("rsv-z-small", cpu="1500m", memory=None)
    big = reservation("rsv-a-big", cpu="4", memory=None)
    assert nominate({"cpu": 1200}, holds(small, big)).reservation.name == "rsv-z-small"
    # equal scores: by name
    twin = reservation("rsv-twin", cpu="1500m", memory=None)
    assert nominate({"cpu": 1200}, holds(small, twin)).reservation.name == "rsv-twin"


def test_check_nominates_by_order_among_those_that_fit() -> None:
    # rsv-first has the preferred order but is too small for a Restricted fit
    first = reservation(
        "rsv-first",
        cpu="500m",
        memory=None,
        policy="Restricted",
        labels={LABEL_RESERVATION_ORDER: "1"},
    )
    second = reservation(
        "rsv-second",
        cpu="4",
        memory=None,
        policy="Restricted",
        labels={LABEL_RESERVATION_ORDER: "3"},
    )
    third = reservation("rsv-third", cpu="1200m", memory=None, policy="Restricted")
    v = check(pod("web-1", "1100m"), {"cpu": 9000}, holds(first, second, third))
    assert v.into is not None and v.into.reservation.name == "rsv-second"


def test_score_counts_a_held_pods_count_as_unused() -> None:
    r = reservation("rsv-a", cpu="2500m", memory="6Gi", once=False, more={"pods": "7"})
    h = only(holds(r, pods=[pod("web-1", "1000m", "1.5Gi", into=r)]))
    # (68 + 75 + 0) / 3 = 47
    assert score({"cpu": 700, "memory": 3 * GI}, h) == 47


# -- the finer points of checkReservationMatchedOrIgnored and ScoreReservation ----------------


def test_an_owner_requesting_nothing_it_holds_is_not_put_into_it() -> None:
    """filterWithReservations skips a reservation whose resource names do not intersect the
    pod's (without affinity), and FilterNominateReservation then refuses it ("no
    intersection resource names"): the pod fits the node alone and is not allocated there,
    so an allocateOnce reservation is not used up by it."""
    r = reservation("rsv-a", cpu="1700m", memory="3.5Gi", more={"pods": "7"})
    owner = pod("web-1", more={"ephemeral-storage": "2Gi"})
    free = {"cpu": 9000, "memory": 16 * GI, "ephemeral-storage": 20 * GI}
    v = check(owner, free, holds(r))
    assert v.reason == "" and v.into is None
    # short of it, the node is what lacks it (it is still an owner here)
    v = check(owner, {**free, "ephemeral-storage": GI}, holds(r))
    assert v.reason == "Insufficient ephemeral-storage by node"
    # with an affinity it goes into the reservation all the same
    v = check(pod("web-1", affinity={}, more={"ephemeral-storage": "2Gi"}), free, holds(r))
    assert v.into is not None and v.into.reservation.name == "rsv-a"


def test_an_affinity_naming_the_reservation_skips_unschedulable_and_taints() -> None:
    r = reservation("rsv-a", unschedulable=True, taints=[GPU_TAINT])
    v = check(
        pod("web-1", "100m", affinity={"name": "rsv-a"}), {"cpu": 9000, "memory": 16 * GI}, holds(r)
    )
    assert v.into is not None


def test_an_affinity_tolerating_unschedulable_uses_an_unschedulable_reservation() -> None:
    r = reservation("rsv-a", unschedulable=True, labels={"pool": "gold"})
    tolerate = {
        "key": "node.kubernetes.io/unschedulable",
        "operator": "Exists",
        "effect": "NoSchedule",
    }
    owner = pod(
        "web-1",
        "100m",
        affinity={"reservationSelector": {"pool": "gold"}, "tolerations": [tolerate]},
    )
    assert check(owner, {"cpu": 9000, "memory": 16 * GI}, holds(r)).into is not None


def test_taints_do_not_keep_out_an_owner_without_affinity() -> None:
    r = reservation("rsv-a", taints=[GPU_TAINT])
    assert check(pod("web-1", "100m"), {"cpu": 9000, "memory": 16 * GI}, holds(r)).into is not None
