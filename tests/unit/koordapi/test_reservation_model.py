"""koordapi.reservation.model against cases shaped after Koordinator v1.8's
pkg/util/reservation/reservation_test.go (owner matching, IsReservationExpired, the
SetReservation* conditions) and the expiry of
pkg/scheduler/plugins/reservation/controller/controller_test.go, with other numbers (cpu in
milli-cores, memory in bytes; times are epoch seconds of an injected clock)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from koordapi.errors import ModelError
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    DEFAULT_TTL,
    LABEL_RESERVATION_IGNORED,
    LABEL_RESERVATION_ORDER,
    Affinity,
    Reservation,
    allocated_annotation,
    allocated_to,
    available_status,
    expired_status,
    ignores_reservations,
    reservation_affinity,
    succeeded_conditions,
    unschedulable_conditions,
)

MI = 1 << 20
GI = 1 << 30
# 2026-03-14T09:26:53Z, the creation time of every reservation here
T0 = datetime.datetime(2026, 3, 14, 9, 26, 53, tzinfo=datetime.UTC).timestamp()
T0_TEXT = "2026-03-14T09:26:53Z"


def raw(
    *,
    name: str = "rsv-web",
    owners: list[Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    template: Any = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "template": template
        if template is not None
        else {
            "metadata": {"namespace": "shop"},
            "spec": {
                "containers": [
                    {"name": "app", "resources": {"requests": {"cpu": "1700m", "memory": "3.5Gi"}}}
                ]
            },
        },
        "owners": owners if owners is not None else [{"object": {"name": "web-3"}}],
        "ttl": "1h30m",
    }
    body.update(spec or {})
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {
            "name": name,
            "uid": "4f1d-77",
            "creationTimestamp": T0_TEXT,
            "labels": labels or {},
        },
        "spec": body,
        "status": status or {},
    }


def rsv(**kw: Any) -> Reservation:
    return Reservation.from_dict(raw(**kw))


def pod(
    name: str = "web-3",
    namespace: str = "shop",
    *,
    uid: str = "pod-uid-7",
    labels: dict[str, str] | None = None,
    owner_refs: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    api_version: str = "v1",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid}
    meta["labels"] = labels or {}
    meta["annotations"] = annotations or {}
    if owner_refs is not None:
        meta["ownerReferences"] = owner_refs
    return {"apiVersion": api_version, "kind": "Pod", "metadata": meta, "spec": {}}


# -- reading the object (ValidateReservation, CRD defaults) ------------------------------------


def test_amounts_and_defaults_are_read_as_koordinator_and_the_crd_give_them() -> None:
    r = rsv(
        status={
            "phase": "Available",
            "nodeName": "node-7",
            "allocatable": {"cpu": "1700m", "memory": "3.5Gi", "pods": "7"},
            "allocated": {"cpu": "300m", "memory": "512Mi"},
        }
    )
    assert r.allocatable == {"cpu": 1700, "memory": 3584 * MI, "pods": 7}  # 3.5Gi = 3584Mi
    assert r.allocated == {"cpu": 300, "memory": 512 * MI}
    assert r.allocate_once is True  # +kubebuilder:default=true
    assert r.allocate_policy == ""  # the deprecated default policy
    assert r.ttl == 5400.0  # 1h30m
    assert r.created == T0
    assert r.node_name == "node-7"


def test_allocate_once_false_is_kept() -> None:
    assert rsv(spec={"allocateOnce": False}).allocate_once is False


def test_a_missing_phase_reads_as_pending() -> None:
    r = rsv()
    assert r.phase == "Pending"
    assert r.pending and not r.active and not r.available and not r.finished


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"template": None}, "misses the template spec"),
        ({"owners": []}, "misses the owner spec"),
        ({"allocatePolicy": "Spread"}, "is not Aligned or Restricted"),
        ({"ttl": "ninety minutes"}, "spec.ttl"),
        ({"expires": "next tuesday"}, "spec.expires is not an RFC 3339 time"),
    ],
)
def test_what_koordinator_refuses_is_a_model_error(changes: dict[str, Any], message: str) -> None:
    obj = raw()
    obj["spec"].update(changes)
    with pytest.raises(ModelError, match=message):
        Reservation.from_dict(obj)


def test_an_owner_with_no_field_is_refused_as_the_crd_does() -> None:
    # ReservationOwner is +kubebuilder:validation:MinProperties=1
    with pytest.raises(ModelError, match=r"spec.owners\[1\]"):
        rsv(owners=[{"object": {"name": "web-3"}}, {}])


def test_an_owner_with_a_malformed_selector_is_refused() -> None:
    bad = {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Above"}]}}
    with pytest.raises(ModelError, match="operator"):
        rsv(owners=[bad])


def test_a_malformed_status_amount_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="status"):
        rsv(status={"allocatable": {"cpu": "lots"}})


def test_no_ttl_and_no_expires_reads_the_crd_default_of_24h() -> None:
    obj = raw()
    del obj["spec"]["ttl"]
    r = Reservation.from_dict(obj)
    assert r.ttl == DEFAULT_TTL == 86400.0
    assert r.expiry() == T0 + 86400


# -- owners (TestMatchReservationOwners, MatchObjectRef, MatchReservationControllerReference) --


def test_object_ref_by_name_and_namespace() -> None:
    r = rsv(owners=[{"object": {"name": "web-3", "namespace": "shop"}}])
    assert r.is_owner(pod("web-3", "shop"))
    assert not r.is_owner(pod("web-3", "books"))
    assert not r.is_owner(pod("web-4", "shop"))


def test_object_ref_by_uid_and_api_version() -> None:
    r = rsv(owners=[{"object": {"uid": "pod-uid-7", "apiVersion": "v1"}}])
    assert r.is_owner(pod("anything", "anywhere", uid="pod-uid-7"))
    assert not r.is_owner(pod(uid="pod-uid-8"))
    assert not r.is_owner(pod(uid="pod-uid-7", api_version="v2"))


def test_an_object_ref_with_no_field_set_matches_every_pod() -> None:
    r = rsv(owners=[{"object": {}}])
    assert r.is_owner(pod("x", "y", uid="z"))


STS = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "name": "db",
    "uid": "sts-uid-3",
    "controller": True,
}


def test_controller_ref_with_namespace_extension() -> None:
    owner = {"controller": {"name": "db", "controller": True, "namespace": "shop"}}
    r = rsv(owners=[owner])
    assert r.is_owner(pod("db-0", "shop", owner_refs=[STS]))
    # the extended namespace field must match the pod's
    assert not r.is_owner(pod("db-0", "books", owner_refs=[STS]))
    assert not r.is_owner(pod("db-0", "shop", owner_refs=[]))
    assert not r.is_owner(pod("db-0", "shop"))


def test_controller_ref_kind_uid_and_api_version_must_match_when_set() -> None:
    r = rsv(owners=[{"controller": {"kind": "StatefulSet", "uid": "sts-uid-3"}}])
    assert r.is_owner(pod(owner_refs=[STS]))
    assert not r.is_owner(pod(owner_refs=[{**STS, "kind": "Deployment"}]))
    assert not r.is_owner(pod(owner_refs=[{**STS, "uid": "sts-uid-4"}]))
    r = rsv(owners=[{"controller": {"name": "db", "apiVersion": "apps/v1beta2"}}])
    assert not r.is_owner(pod(owner_refs=[STS]))


def test_controller_flag_compared_only_when_the_owner_sets_it() -> None:
    wants_controller = rsv(owners=[{"controller": {"name": "db", "controller": True}}])
    wants_plain = rsv(owners=[{"controller": {"name": "db", "controller": False}}])
    any_ref = rsv(owners=[{"controller": {"name": "db"}}])
    no_flag = {k: v for k, v in STS.items() if k != "controller"}
    assert wants_controller.is_owner(pod(owner_refs=[STS]))
    assert not wants_plain.is_owner(pod(owner_refs=[STS]))
    assert not wants_controller.is_owner(pod(owner_refs=[no_flag]))  # pod's flag unset
    assert not wants_plain.is_owner(pod(owner_refs=[no_flag]))
    assert any_ref.is_owner(pod(owner_refs=[no_flag]))
    assert wants_plain.is_owner(pod(owner_refs=[{**STS, "controller": False}]))


def test_any_of_several_owner_references_may_match() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "cm-1"}
    r = rsv(owners=[{"controller": {"name": "db", "kind": "StatefulSet"}}])
    assert r.is_owner(pod(owner_refs=[other, STS]))
    assert not r.is_owner(pod(owner_refs=[other]))


def test_label_selector_match_labels_and_expressions() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["gold", "silver"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "zone", "operator": "NotIn", "values": ["z9"]},
            {"key": "team", "operator": "Exists"},
        ],
    }
    r = rsv(owners=[{"labelSelector": selector}])
    good = {"app": "web", "tier": "silver", "team": "a", "extra": "1"}
    assert r.is_owner(pod(labels=good))
    assert r.is_owner(pod(labels={**good, "zone": "z3"}))
    assert not r.is_owner(pod(labels={**good, "zone": "z9"}))
    assert not r.is_owner(pod(labels={**good, "tier": "bronze"}))
    assert not r.is_owner(pod(labels={**good, "canary": "yes"}))
    assert not r.is_owner(pod(labels={k: v for k, v in good.items() if k != "team"}))
    assert not r.is_owner(pod(labels={**good, "app": "api"}))


def test_fields_of_one_owner_are_anded() -> None:
    # "fail on one term of owner spec": the labels match, the object name does not
    r = rsv(
        owners=[
            {
                "object": {"name": "web-8"},
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    )
    assert not r.is_owner(pod("web-3", labels={"app": "web"}))
    assert r.is_owner(pod("web-8", labels={"app": "web"}))
    assert not r.is_owner(pod("web-8", labels={"app": "api"}))


def test_owners_are_ored() -> None:
    # "match one of owner specs": the first owner names another pod, the second selects it
    r = rsv(
        owners=[
            {"object": {"name": "web-0", "namespace": "shop"}},
            {"labelSelector": {"matchLabels": {"app": "web"}}},
        ]
    )
    assert r.is_owner(pod("web-5", labels={"app": "web", "v": "2"}))
    assert r.is_owner(pod("web-0"))
    assert not r.is_owner(pod("web-5", labels={"app": "api"}))


# -- where it stands (IsReservationActive/Available/Expired) -----------------------------------


@pytest.mark.parametrize(
    ("phase", "node", "available", "active", "finished"),
    [
        ("Available", "node-7", True, True, False),
        ("Available", "", False, False, False),  # not scheduled yet
        ("Waiting", "node-7", False, True, False),
        ("Pending", "node-7", False, False, False),
        ("Succeeded", "node-7", False, False, True),
        ("Failed", "node-7", False, False, True),
    ],
)
def test_phases(phase: str, node: str, available: bool, active: bool, finished: bool) -> None:
    r = rsv(status={"phase": phase, "nodeName": node})
    assert (r.available, r.active, r.finished) == (available, active, finished)


def cond(kind: str, status: str, reason: str, at: str = T0_TEXT, **more: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "lastProbeTime": at,
        "lastTransitionTime": at,
        **more,
    }


UNSCHEDULABLE = cond("Scheduled", "False", "Unschedulable", message="0/7 nodes are available")
EXPIRED = cond("Ready", "False", "Expired")


@pytest.mark.parametrize(
    ("status", "expired"),
    [
        ({}, False),
        ({"phase": "Available", "nodeName": "node-7"}, False),
        ({"conditions": [UNSCHEDULABLE]}, False),  # "scheduled failed reservation"
        ({"phase": "Failed", "conditions": [UNSCHEDULABLE, EXPIRED]}, True),
        ({"phase": "Failed", "conditions": [UNSCHEDULABLE]}, False),
        ({"phase": "Failed", "conditions": [cond("Ready", "False", "Succeeded")]}, False),
        ({"phase": "Failed", "conditions": [cond("Ready", "True", "Expired")]}, False),
        ({"phase": "Succeeded", "conditions": [EXPIRED]}, False),
    ],
)
def test_is_reservation_expired(status: dict[str, Any], expired: bool) -> None:
    assert rsv(status=status).expired is expired


def test_unschedulable_message_and_scheduled() -> None:
    r = rsv(status={"conditions": [UNSCHEDULABLE]})
    assert r.unschedulable_message == "0/7 nodes are available"
    assert not r.scheduled
    placed = rsv(
        status={
            "phase": "Available",
            "nodeName": "node-7",
            "conditions": [cond("Scheduled", "True", "Scheduled")],
        }
    )
    assert placed.scheduled
    assert placed.unschedulable_message is None


@pytest.mark.parametrize(("label", "order"), [("3", 3), ("0", 0), ("soon", 0), (None, 0)])
def test_reservation_order_label(label: str | None, order: int) -> None:
    labels = {} if label is None else {LABEL_RESERVATION_ORDER: label}
    assert rsv(labels=labels).order == order


# -- expiry (the reservation controller's isReservationNeedExpiration) -------------------------


def test_ttl_counts_from_creation_and_expiry_is_strictly_after() -> None:
    r = rsv()  # ttl 1h30m
    assert r.expiry() == T0 + 5400
    assert not r.due_to_expire(T0 + 5400)  # time.Since(created) > ttl is strict
    assert r.due_to_expire(T0 + 5401)
    assert not r.due_to_expire(T0 + 60)


def test_a_pending_reservation_expires_too() -> None:
    # controller_test's pendingReservation: created 5m ago with a 1m ttl
    r = rsv(spec={"ttl": "1m"}, status={"phase": "Pending"})
    assert r.due_to_expire(T0 + 300)


def test_expires_alone() -> None:
    r = rsv(spec={"ttl": None, "expires": "2026-03-14T11:00:00Z"})
    # 09:26:53 to 11:00:00 is 1h33m07s = 5587 s
    assert r.expiry() == T0 + 5587
    assert not r.due_to_expire(T0 + 5587)
    assert r.due_to_expire(T0 + 5588)


def test_ttl_zero_never_expires() -> None:
    r = rsv(spec={"ttl": "0s"})
    assert r.expiry() is None
    assert not r.due_to_expire(T0 + 10 * 365 * 86400)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_reservations_do_not_expire(phase: str) -> None:
    assert not rsv(spec={"ttl": "1m"}, status={"phase": phase}).due_to_expire(T0 + 3600)


def test_ttl_zero_disables_expiry_even_with_expires() -> None:
    """isReservationNeedExpiration: a ttl of 0 returns false before expires is looked at."""
    r = rsv(spec={"ttl": "0s", "expires": "2026-03-14T11:00:00Z"})
    assert r.expiry() is None
    assert not r.due_to_expire(T0 + 86400)


def test_with_both_ttl_and_expires_the_earlier_one_expires_it() -> None:
    # ttl 1h30m ends at T0 + 5400; expires is a day later
    r = rsv(spec={"ttl": "1h30m", "expires": "2026-03-15T09:26:53Z"})
    assert r.due_to_expire(T0 + 5401)


# -- the reservation's requests (ReservationRequests) -------------------------------------------


def test_requests_come_from_the_template_until_available() -> None:
    template = {
        "spec": {
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2300m"}}}],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "700m", "memory": "1536Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}},
            ],
            "overhead": {"cpu": "50m"},
        }
    }
    # containers: 1700m and 3.5Gi; the init container's 2300m is larger; plus 50m overhead
    assert rsv(template=template).requests() == {"cpu": 2350, "memory": 3584 * MI}
    placed = rsv(
        template=template,
        status={"phase": "Available", "nodeName": "node-7", "allocatable": {"cpu": "1900m"}},
    )
    assert placed.requests() == {"cpu": 1900}


# -- the pod side ------------------------------------------------------------------------------


def test_allocated_annotation_round_trip() -> None:
    r = rsv(name="rsv-db")
    text = allocated_annotation(r)
    assert text == '{"name":"rsv-db","uid":"4f1d-77"}'
    assert allocated_to(pod(annotations={ANNOTATION_RESERVATION_ALLOCATED: text})) == (
        "rsv-db",
        "4f1d-77",
    )


@pytest.mark.parametrize("text", ["", "{not json", '["rsv-db"]', "7"])
def test_an_unreadable_allocated_annotation_is_none(text: str) -> None:
    assert allocated_to(pod(annotations={ANNOTATION_RESERVATION_ALLOCATED: text})) is None
    assert allocated_to(pod()) is None


def test_reservation_ignored_label() -> None:
    assert ignores_reservations(pod(labels={LABEL_RESERVATION_IGNORED: "true"}))
    assert not ignores_reservations(pod(labels={LABEL_RESERVATION_IGNORED: "yes"}))
    assert not ignores_reservations(pod())


def test_reservation_affinity_annotation() -> None:
    text = (
        '{"name": "rsv-db", "reservationSelector": {"pool": "gold"},'
        ' "tolerations": [{"key": "gpu", "operator": "Exists"}]}'
    )
    affinity = reservation_affinity(pod(annotations={ANNOTATION_RESERVATION_AFFINITY: text}))
    assert affinity == Affinity(
        name="rsv-db",
        selector={"pool": "gold"},
        tolerations=({"key": "gpu", "operator": "Exists"},),
    )
    assert reservation_affinity(pod()) is None
    # an empty object still asks for a reservation (any one)
    assert reservation_affinity(pod(annotations={ANNOTATION_RESERVATION_AFFINITY: "{}"})) == (
        Affinity()
    )


@pytest.mark.parametrize("text", ["{name: rsv}", '"rsv-db"'])
def test_a_malformed_reservation_affinity_is_a_model_error(text: str) -> None:
    with pytest.raises(ModelError, match="reservation-affinity"):
        reservation_affinity(pod(annotations={ANNOTATION_RESERVATION_AFFINITY: text}))


def test_affinity_matches_by_name_and_by_the_reservations_labels() -> None:
    gold = rsv(name="rsv-a", labels={"pool": "gold", "zone": "z3"})
    silver = rsv(name="rsv-b", labels={"pool": "silver"})
    assert Affinity(selector={"pool": "gold"}).matches(gold)
    assert not Affinity(selector={"pool": "gold"}).matches(silver)
    assert not Affinity(selector={"pool": "gold", "zone": "z4"}).matches(gold)
    assert Affinity(name="rsv-b").matches(silver)
    assert not Affinity(name="rsv-b").matches(gold)
    assert not Affinity(name="rsv-a", selector={"pool": "silver"}).matches(gold)
    assert Affinity().matches(gold)


# -- status as Koordinator writes it (SetReservation*) -----------------------------------------

T1 = T0 + 4000  # 2026-03-14T10:33:33Z
T1_TEXT = "2026-03-14T10:33:33Z"


def test_set_reservation_available() -> None:
    status = available_status("node-7", {"cpu": "1700m", "memory": "3584Mi"}, T1)
    assert status == {
        "phase": "Available",
        "nodeName": "node-7",
        "allocatable": {"cpu": "1700m", "memory": "3584Mi"},
        "conditions": [
            cond("Scheduled", "True", "Scheduled", T1_TEXT),
            cond("Ready", "True", "Available", T1_TEXT),
        ],
    }
    # and it reads back as placed, holding what it was given
    r = rsv(status=status)
    assert r.available and r.scheduled
    assert r.requests() == {"cpu": 1700, "memory": 3584 * MI}


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert len({c["type"] for c in conditions}) == len(conditions)  # never duplicated
    return {c["type"]: c for c in conditions}


def test_set_reservation_expired_from_ready() -> None:
    r = rsv(
        status={
            "phase": "Available",
            "nodeName": "node-7",
            "conditions": [
                cond("Scheduled", "True", "Scheduled"),
                cond("Ready", "True", "Available"),
            ],
        }
    )
    status = expired_status(r, T1)
    assert status["phase"] == "Failed"
    got = by_type(status["conditions"])
    assert got["Ready"] == cond("Ready", "False", "Expired", T1_TEXT)
    assert got["Scheduled"] == cond("Scheduled", "True", "Scheduled")  # left as it was
    assert rsv(status={**r_status(r), **status}).expired


def r_status(r: Reservation) -> dict[str, Any]:
    return {"nodeName": r.node_name, "phase": r.phase}


def test_set_reservation_expired_when_already_not_ready_keeps_the_transition_time() -> None:
    r = rsv(
        status={
            "phase": "Pending",
            "conditions": [UNSCHEDULABLE, cond("Ready", "False", "Waiting")],
        }
    )
    got = by_type(expired_status(r, T1)["conditions"])
    assert got["Ready"]["reason"] == "Expired"
    assert got["Ready"]["status"] == "False"
    assert got["Ready"]["lastProbeTime"] == T1_TEXT
    assert got["Ready"]["lastTransitionTime"] == T0_TEXT
    assert got["Scheduled"] == UNSCHEDULABLE


def test_set_reservation_expired_adds_ready_when_missing() -> None:
    # the controller's pendingReservation: no condition yet
    r = rsv(status={"phase": "Pending"})
    status = expired_status(r, T1)
    assert status == {"phase": "Failed", "conditions": [cond("Ready", "False", "Expired", T1_TEXT)]}


def test_set_reservation_succeeded() -> None:
    r = rsv(
        status={
            "phase": "Available",
            "nodeName": "node-7",
            "conditions": [cond("Ready", "True", "Available")],
        }
    )
    got = by_type(succeeded_conditions(r, T1))
    assert got["Ready"]["status"] == "False"
    assert got["Ready"]["reason"] == "Succeeded"
    assert got["Ready"]["lastProbeTime"] == T1_TEXT
    assert by_type(succeeded_conditions(rsv(), T1)) == {
        "Ready": cond("Ready", "False", "Succeeded", T1_TEXT)
    }


def test_set_reservation_succeeded_keeps_the_transition_time() -> None:
    r = rsv(
        status={
            "phase": "Available",
            "nodeName": "node-7",
            "conditions": [cond("Ready", "True", "Available")],
        }
    )
    assert by_type(succeeded_conditions(r, T1))["Ready"]["lastTransitionTime"] == T0_TEXT


def test_set_reservation_unschedulable_adds_the_condition() -> None:
    got = unschedulable_conditions(rsv(), "0/7 nodes are available: 7 Insufficient cpu.", T1)
    assert got == [
        cond(
            "Scheduled",
            "False",
            "Unschedulable",
            T1_TEXT,
            message="0/7 nodes are available: 7 Insufficient cpu.",
        )
    ]


def test_set_reservation_unschedulable_updates_the_message_and_keeps_the_transition() -> None:
    r = rsv(status={"conditions": [UNSCHEDULABLE]})
    got = by_type(unschedulable_conditions(r, "0/9 nodes are available", T1))
    assert got["Scheduled"]["message"] == "0/9 nodes are available"
    assert got["Scheduled"]["status"] == "False"
    assert got["Scheduled"]["lastProbeTime"] == T1_TEXT
    assert got["Scheduled"]["lastTransitionTime"] == T0_TEXT


def test_set_reservation_unschedulable_leaves_a_scheduled_reservation_scheduled() -> None:
    scheduled = cond("Scheduled", "True", "Scheduled")
    r = rsv(status={"phase": "Available", "nodeName": "node-7", "conditions": [scheduled]})
    got = by_type(unschedulable_conditions(r, "0/9 nodes are available", T1))
    assert got["Scheduled"]["status"] == "True"
    assert got["Scheduled"]["reason"] == "Scheduled"
    assert "message" not in got["Scheduled"]
