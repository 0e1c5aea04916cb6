"""``koordctl reservation``: the Reservations by node, and why a pod did or did not use one.

The cases take the shapes of Koordinator's pkg/scheduler/plugins/reservation plugin_test.go
(an owner fitting its reservation's remainder, a non-owner refused on held room, an
allocate-once reservation consumed, a reservation affinity) with other numbers.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

import koordctl as ctl
from koordctl import client as ctl_client
from koordctl import reservation as reservation_cmd
from koordctl.reservation import (
    render_rows,
    render_why,
    reservation_rows,
    why_report,
)

ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
UNSCHEDULABLE = "0/2 nodes are available: 2 Insufficient cpu."


def resv(
    name: str,
    *,
    phase: str = "Available",
    node: str = "",
    allocatable: dict[str, str] | None = None,
    allocated: dict[str, str] | None = None,
    owners: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    created: str = "2026-12-06T20:00:00Z",
) -> dict[str, Any]:
    st: dict[str, Any] = {"phase": phase, **(status or {})}
    if node:
        st["nodeName"] = node
    if allocatable is not None:
        st["allocatable"] = allocatable
    if allocated is not None:
        st["allocated"] = allocated
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": f"u-{name}", "creationTimestamp": created},
        "spec": {
            "template": {
                "metadata": {"namespace": "default"},
                "spec": {
                    "containers": [
                        {"name": "c", "resources": {"requests": {"cpu": "4", "memory": "6Gi"}}}
                    ]
                },
            },
            "owners": owners or [{"labelSelector": {"matchLabels": {"app": "web"}}}],
            **(spec or {}),
        },
        "status": st,
    }


def pod(
    key: str,
    cpu: str,
    memory: str,
    *,
    node: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    into: str = "",
    owner_refs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    namespace, name = key.split("/")
    notes = dict(annotations or {})
    if into:
        notes[ALLOCATED] = json.dumps({"name": into, "uid": f"u-{into}"})
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "annotations": notes,
            "ownerReferences": owner_refs or [],
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def node(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


NODES = [node("node-2", "7", "13Gi"), node("node-5", "5", "9Gi")]
RESERVATIONS = [
    # web's, kept after its first owner (allocateOnce false): 2500m/5Gi less web-0's 800m/2Gi
    resv(
        "r-web",
        node="node-2",
        allocatable={"cpu": "2500m", "memory": "5Gi"},
        spec={"allocateOnce": False, "expires": "2026-12-07T06:00:00Z"},
    ),
    # the etl Job's, no owner yet: holds all of its 3 cpu 4Gi; ttl 6h from 20:00
    resv(
        "r-batch",
        node="node-5",
        allocatable={"cpu": "3", "memory": "4Gi"},
        owners=[{"controller": {"kind": "Job", "name": "etl", "namespace": "batch"}}],
        spec={"ttl": "6h"},
    ),
    # allocated once (the default) to batch/loader: holds nothing; ttl 0 never expires
    resv(
        "r-once",
        node="node-5",
        allocatable={"cpu": "1", "memory": "1Gi"},
        owners=[{"labelSelector": {"matchLabels": {"app": "loader"}}}],
        spec={"ttl": "0s"},
    ),
    # not placed: kube-scheduler found no node for its reserve pod (cpu 4 mem 6Gi)
    resv(
        "r-gpu",
        phase="Pending",
        owners=[
            {
                "labelSelector": {
                    "matchLabels": {"team": "ml"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["train", "eval"]}
                    ],
                }
            }
        ],
        status={
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": UNSCHEDULABLE,
                }
            ]
        },
        created="2026-12-06T21:00:00Z",
    ),
    # expired 20h after 2026-12-05T08:00
    resv(
        "r-old",
        phase="Failed",
        node="node-2",
        allocatable={"cpu": "1"},
        allocated={"cpu": "1"},
        owners=[{"object": {"name": "web-9", "namespace": "teams"}}],
        spec={"ttl": "20h"},
        status={
            "currentOwners": [{"namespace": "teams", "name": "web-9"}],
            "conditions": [{"type": "Ready", "status": "False", "reason": "Expired"}],
        },
        created="2026-12-05T08:00:00Z",
    ),
]
PODS = [
    pod("teams/web-0", "800m", "2Gi", node="node-2", labels={"app": "web"}, into="r-web"),
    pod("batch/loader", "900m", "1Gi", node="node-5", labels={"app": "loader"}, into="r-once"),
    pod("other/filler", "3", "4Gi", node="node-2"),
]

LIST = """\
NODE    NAME     PHASE      HELD               ALLOCATED         OWNERS                          EXPIRES
node-2  r-old    Failed     -                  cpu 1             teams/web-9                     2026-12-06T04:00:00Z  ! Failed (Expired)
node-2  r-web    Available  cpu 1700m mem 3Gi  cpu 800m mem 2Gi  teams/web-0                     2026-12-07T06:00:00Z
node-5  r-batch  Available  cpu 3 mem 4Gi      -                 [Job batch/etl]                 2026-12-07T02:00:00Z
node-5  r-once   Available  none               cpu 900m mem 1Gi  batch/loader                    never                 ! allocated once: consumed
-       r-gpu    Pending    -                  -                 [team=ml,tier in (train,eval)]  2026-12-07T21:00:00Z  ! wants cpu 4 mem 6Gi; Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."""  # noqa: E501


def test_the_list_shows_what_each_reservation_holds_by_node() -> None:
    rows = reservation_rows(RESERVATIONS, PODS)

    assert [(row.node, row.name) for row in rows] == [
        ("node-2", "r-old"),
        ("node-2", "r-web"),
        ("node-5", "r-batch"),
        ("node-5", "r-once"),
        ("-", "r-gpu"),  # not placed: last
    ]
    (web,) = [row for row in rows if row.name == "r-web"]
    assert web.held == {"cpu": "1700m", "memory": "3Gi"}  # 2500m - 800m, 5Gi - 2Gi
    assert web.allocated == {"cpu": "800m", "memory": "2Gi"}
    assert web.owners == ["teams/web-0"]
    assert render_rows(rows).splitlines() == LIST.splitlines()


def test_the_list_marks_one_past_its_expiry_and_an_unreadable_one() -> None:
    broken = {"metadata": {"name": "r-bad"}, "spec": {"owners": []}, "status": {}}
    # 02:00:01 on the 7th: r-batch (20:00 + 6h) is past it, r-web (06:00) is not
    now = 1796608801.0  # 2026-12-07T02:00:01Z

    rows = {row.name: row for row in reservation_rows([*RESERVATIONS, broken], PODS, now=now)}

    assert rows["r-batch"].marks == ["past its expiry: koord-manager marks it Failed"]
    assert rows["r-web"].marks == []
    assert rows["r-old"].marks == ["Failed (Expired)"]  # ended: not marked again
    assert rows["r-bad"].node == "-" and rows["r-bad"].marks == [
        "unreadable: Reservation r-bad: the reservation misses the template spec"
    ]


def test_an_ended_finished_owner_is_not_counted_in_what_it_holds() -> None:
    done = pod("teams/web-1", "1100m", "1Gi", node="node-2", labels={"app": "web"}, into="r-web")
    done["status"]["phase"] = "Succeeded"

    (web,) = [r for r in reservation_rows(RESERVATIONS, [*PODS, done]) if r.name == "r-web"]

    assert web.held == {"cpu": "1700m", "memory": "3Gi"}
    assert web.owners == ["teams/web-0"]


def test_no_reservation_at_all() -> None:
    assert render_rows([]) == "no Reservation in the cluster"


# -- why -------------------------------------------------------------------------------------


def test_a_pod_in_a_reservation_names_it_and_its_node() -> None:
    report = why_report(PODS[0], RESERVATIONS, NODES, PODS)

    assert render_why(report).splitlines() == [
        "pod teams/web-0: phase Running, node node-2",
        "in Reservation r-web on node node-2",
    ]
    assert report["allocated"] == {"name": "r-web", "uid": "u-r-web", "node": "node-2"}


def test_an_owner_too_big_for_its_reservation_is_refused_on_held_room_elsewhere() -> None:
    # web-3 asks 3500m 1Gi. node-2: 7 cpu - 800m - 3 = 3200m free, r-web's 1700m among it:
    # too little even for its owner. node-5: 5 - 900m = 4100m free, so kube-scheduler lets it
    # on; but r-batch holds 3 of it for the etl Job: 1100m left for web-3.
    web3 = pod("teams/web-3", "3500m", "1Gi", labels={"app": "web"})
    events: list[dict[str, Any]] = [
        {"reason": "FailedScheduling", "message": UNSCHEDULABLE, "count": 4,
         "lastTimestamp": "2026-12-06T21:14:09Z"},
        {"reason": "Scheduled", "message": "no", "lastTimestamp": "2026-12-06T21:20:00Z"},
    ]  # fmt: skip

    report = why_report(web3, RESERVATIONS, NODES, PODS, events)

    assert render_why(report).splitlines() == [
        "pod teams/web-3: phase Pending, node -",
        "owner of 1 Reservation(s):",
        "  r-web (Available, node node-2): does not fit on node-2: Insufficient cpu by node",
        "refused where it fits only on room held for other pods:",
        "  node-5: r-batch [cpu 3 mem 4Gi]: Insufficient cpu",
        f"event 2026-12-06T21:14:09Z FailedScheduling x4: {UNSCHEDULABLE}",
        f"waiting because: {UNSCHEDULABLE}",
    ]
    json.dumps(report)  # --json prints it


def test_an_owner_that_fits_goes_into_its_reservation() -> None:
    # the etl Job's pod asks 2600m 3Gi: node-5 has 4100m 8Gi free, r-once holds nothing
    etl = pod("batch/etl-x7", "2600m", "3Gi", owner_refs=[
        {"kind": "Job", "name": "etl", "apiVersion": "batch/v1", "controller": True}
    ])  # fmt: skip

    report = why_report(etl, RESERVATIONS, NODES, PODS)

    assert report["owned"] == [
        {
            "reservation": "r-batch",
            "phase": "Available",
            "node": "node-5",
            "fits": True,
            "why": "fits: the extender puts the pod into it on node-5",
        }
    ]
    # node-2 has 3200m free, so kube-scheduler lets it on, but r-web holds 1700m of it
    assert report["heldAgainst"] == [
        {
            "node": "node-2",
            "held": [{"reservation": "r-web", "held": {"cpu": "1700m", "memory": "3Gi"}}],
            "refused": "Insufficient cpu",
        }
    ]
    assert report["verdict"] == ("fits into r-batch on node-5: the extender keeps it to that node")


def test_an_owner_of_a_consumed_reservation() -> None:
    # r-once went to batch/loader and is allocated once
    loader = pod("batch/loader-2", "300m", "256Mi", labels={"app": "loader"})

    (entry,) = why_report(loader, RESERVATIONS, NODES, PODS)["owned"]

    assert entry == {
        "reservation": "r-once",
        "phase": "Available",
        "node": "node-5",
        "fits": False,
        "why": "consumed: allocated once, to batch/loader",
    }


TAINTED = resv(
    "r-canary",
    node="node-2",
    allocatable={"cpu": "1300m", "memory": "2Gi"},
    spec={"taints": [{"key": "dedicated", "value": "canary", "effect": "NoSchedule"}]},
)
CLOSED = resv(
    "r-closed",
    node="node-5",
    allocatable={"cpu": "700m", "memory": "1Gi"},
    spec={"unschedulable": True},
)


@pytest.mark.parametrize(
    ("affinity", "whys"),
    [
        # no affinity: taints do not keep it out (Koordinator checks them against the
        # affinity's tolerations only); an unschedulable one does
        (None, ["fits: the extender puts the pod into it on node-2",
                "spec.unschedulable: it takes no new owner"]),
        # a selector: the taint must be tolerated, and the unschedulable one too
        (
            {"reservationSelector": {}},
            [
                "the pod's scheduling.koordinator.sh/reservation-affinity does not tolerate its "
                "taints (dedicated=canary:NoSchedule)",
                "spec.unschedulable: it takes no new owner (the pod's "
                "scheduling.koordinator.sh/reservation-affinity does not tolerate it)",
            ],
        ),
        # a name: that one only, unschedulable or not
        (
            {"name": "r-closed"},
            ["the pod's scheduling.koordinator.sh/reservation-affinity names r-closed",
             "fits: the extender puts the pod into it on node-5"],
        ),
    ],
)  # fmt: skip
def test_taints_unschedulable_and_affinity(
    affinity: dict[str, Any] | None, whys: list[str]
) -> None:
    # web-4 asks 200m 64Mi: room on either node, within either reservation
    notes = {AFFINITY: json.dumps(affinity)} if affinity is not None else {}
    web4 = pod("teams/web-4", "200m", "64Mi", labels={"app": "web"}, annotations=notes)

    owned = why_report(web4, [TAINTED, CLOSED], NODES, PODS)["owned"]

    assert [(entry["reservation"], entry["why"]) for entry in owned] == list(
        zip(["r-canary", "r-closed"], whys, strict=True)
    )


def test_an_owner_of_a_pending_and_of_an_expired_reservation() -> None:
    trainer = pod("ml/train-1", "1", "1Gi", labels={"team": "ml", "tier": "train"})
    web9 = pod("teams/web-9", "1", "1Gi")

    first = render_why(why_report(trainer, RESERVATIONS, NODES, PODS)).splitlines()
    second = why_report(web9, RESERVATIONS, NODES, PODS)

    assert first[1:] == [
        "owner of 1 Reservation(s):",
        f"  r-gpu (Pending, node -): not placed yet (Unschedulable: {UNSCHEDULABLE})",
        "phase Pending: no FailedScheduling event says why",
    ]
    assert [e["why"] for e in second["owned"]] == ["ended: Failed (Expired)"]


def test_a_pod_bound_outside_its_reservation() -> None:
    # web-5 landed on node-5 while r-web holds room on node-2
    web5 = pod("teams/web-5", "100m", "128Mi", node="node-5", labels={"app": "web"})

    report = why_report(web5, RESERVATIONS, NODES, [*PODS, web5])

    assert report["owned"][0]["why"] == ("the pod is bound to node-5, the reservation is on node-2")
    assert report["heldAgainst"] == [] and report["events"] == []
    assert report["verdict"] == "bound to node-5 outside any reservation"


def test_a_pod_ignoring_reservations_is_nobodys_owner() -> None:
    labels = {"app": "web", "scheduling.koordinator.sh/reservation-ignored": "true"}
    ignoring = pod("teams/web-6", "100m", "128Mi", labels=labels)

    text = render_why(why_report(ignoring, RESERVATIONS, NODES, PODS)).splitlines()

    assert text[1:3] == [
        "label scheduling.koordinator.sh/reservation-ignored=true: it uses reserved room as "
        "any pod and goes into none",
        "owner of 0 Reservation(s)",
    ]


# -- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["reservation"], {"reservation_command": None, "json": False, "kubeconfig": None}),
        (["reservation", "--json", "--kubeconfig", "/k"], {"json": True, "kubeconfig": "/k"}),
        (
            ["reservation", "why", "ns/p"],
            {"reservation_command": "why", "pod": "ns/p", "json": False},
        ),
        (
            ["reservation", "why", "ns/p", "--json", "--kubeconfig", "/j"],
            {"json": True, "kubeconfig": "/j"},
        ),
        (
            ["reservation", "--json", "--kubeconfig", "/k", "why", "ns/p"],
            {"json": True, "kubeconfig": "/k"},
        ),
    ],
)
def test_the_command_and_its_flags(argv: list[str], expected: dict[str, Any]) -> None:
    args = vars(ctl.build_parser().parse_args(argv))

    assert args["command"] == "reservation"
    assert {key: args[key] for key in expected} == expected


def test_run_prints_the_rows_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        ctl_client,
        "read_reservations",
        lambda kubeconfig: {"reservations": RESERVATIONS, "pods": PODS},
    )

    assert ctl.main(["reservation", "--json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == ["r-old", "r-web", "r-batch", "r-once", "r-gpu"]
    assert rows[1]["held"] == {"cpu": "1700m", "memory": "3Gi"}


def test_run_why_reads_the_scene_of_the_pod(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = []

    def scene(namespace: str, name: str, kubeconfig: str | None) -> dict[str, Any]:
        asked.append((namespace, name, kubeconfig))
        return {"pod": PODS[0], "reservations": RESERVATIONS, "nodes": NODES, "pods": PODS,
                "events": []}  # fmt: skip

    monkeypatch.setattr(ctl_client, "read_reservation_scene", scene)

    assert ctl.main(["reservation", "why", "teams/web-0", "--kubeconfig", "/k"]) == 0

    assert asked == [("teams", "web-0", "/k")]
    assert capsys.readouterr().out.splitlines()[-1] == "in Reservation r-web on node node-2"


def test_run_why_wants_namespace_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(command="reservation", reservation_command="why", pod="web-0",
                              kubeconfig=None, json=False)  # fmt: skip

    assert reservation_cmd.run(args) == 2
    assert "give the pod as NAMESPACE/NAME" in capsys.readouterr().err


def test_run_says_when_the_api_server_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(kubeconfig: str | None) -> dict[str, Any]:
        raise OSError("connection refused")

    monkeypatch.setattr(ctl_client, "read_reservations", refuse)

    assert ctl.main(["reservation"]) == 1
    assert capsys.readouterr().err.strip() == (
        "koordctl reservation: cannot list Reservations: connection refused"
    )


# -- what it reads from the API server -------------------------------------------------------


def test_read_pod_scene_reads_the_pod_reservations_nodes_pods_and_own_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from koordkube import client as kube_client  # noqa: PLC0415
    from tests.fakekube import FakeKubeAPI  # noqa: PLC0415

    api = FakeKubeAPI()
    web3 = pod("teams/web-3", "3500m", "1Gi", labels={"app": "web"})

    def typed(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
        return {"apiVersion": api_version, "kind": kind, **obj}

    def event(name: str, uid: str) -> dict[str, Any]:
        return typed(
            {
                "metadata": {"name": name, "namespace": "teams"},
                "involvedObject": {"kind": "Pod", "namespace": "teams", "name": "web-3",
                                   "uid": uid},
                "reason": "FailedScheduling",
                "message": name,
            },
            "v1",
            "Event",
        )  # fmt: skip

    api.seed(
        typed(web3, "v1", "Pod"),
        *(typed(p, "v1", "Pod") for p in PODS),
        *(typed(n, "v1", "Node") for n in NODES),
        *RESERVATIONS,
        event("mine", "uid-web-3"),
        event("an-earlier-pod-of-that-name", "uid-before"),
    )
    monkeypatch.setattr(kube_client, "build_client", lambda kubeconfig: api.client())

    scene = ctl_client.read_reservation_scene("teams", "web-3", "/k")
    listed = ctl_client.read_reservations("/k")

    assert scene["pod"]["metadata"]["uid"] == "uid-web-3"
    assert sorted(r["metadata"]["name"] for r in scene["reservations"]) == sorted(
        r["metadata"]["name"] for r in RESERVATIONS
    )
    assert sorted(n["metadata"]["name"] for n in scene["nodes"]) == ["node-2", "node-5"]
    assert len(scene["pods"]) == 4 and len(listed["pods"]) == 4
    assert [e["metadata"]["name"] for e in scene["events"]] == ["mine"]
    assert len(listed["reservations"]) == len(RESERVATIONS)


def test_an_owner_asking_more_than_a_restricted_reservation_has_left_fits_beside_it() -> None:
    # r-strict holds 1500m 2Gi on node-5 (5 cpu, loader's 900m taken: 4100m free). api-1 asks
    # 1800m: beyond r-strict's cpu, so not in it; beside it 4100m - 1500m = 2600m is enough.
    strict = resv(
        "r-strict",
        node="node-5",
        allocatable={"cpu": "1500m", "memory": "2Gi"},
        owners=[{"labelSelector": {"matchLabels": {"app": "api"}}}],
        spec={"allocatePolicy": "Restricted"},
    )
    api = pod("teams/api-1", "1800m", "512Mi", labels={"app": "api"})

    report = why_report(api, [strict], NODES, PODS)

    assert [e["why"] for e in report["owned"]] == [
        "the pod fits on node-5 beside it, not in it (Restricted: the pod asks more than it "
        "has left)"
    ]
    assert report["heldAgainst"] == []


def test_a_reserve_pod_a_gone_reservation_and_an_unreadable_affinity() -> None:
    reserve = pod("default/u-r-gpu", "4", "6Gi",
                  annotations={"scheduling.koordinator.sh/reserve-pod": "true"})  # fmt: skip
    gone = pod("teams/web-7", "100m", "64Mi", node="node-2", into="r-deleted")
    garbled = pod("teams/web-8", "100m", "64Mi", labels={"app": "web"},
                  annotations={AFFINITY: "{name: r-web"})  # fmt: skip

    assert why_report(reserve, RESERVATIONS, NODES, PODS)["verdict"] == (
        "a reserve pod: kube-scheduler places it for its Reservation"
    )
    assert render_why(why_report(gone, RESERVATIONS, NODES, PODS)).splitlines()[-1] == (
        "in Reservation r-deleted (uid u-r-deleted), no longer in the cluster"
    )
    text = render_why(why_report(garbled, RESERVATIONS, NODES, PODS)).splitlines()
    assert text[1] == (
        "reservation affinity: unreadable: annotation "
        "scheduling.koordinator.sh/reservation-affinity: not JSON"
    )
    # the extender refuses it on any node with reservations, for the same reason
    assert text[3] == (
        "  r-web (Available, node node-2): does not fit on node-2: Reservation(s) annotation "
        "scheduling.koordinator.sh/reservation-affinity: not JSON"
    )
