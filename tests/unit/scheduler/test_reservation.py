"""Reservations in the extender: the room a placed Reservation holds against other pods, owners
kept to it and bound into it (reservation-allocated), and a reserve pod's bind, which places
the Reservation instead of binding the pod.

Shapes from Koordinator's pkg/scheduler/plugins/reservation/plugin_test.go (TestFilterWith
Reservations, TestPreFilter's affinity cases), other numbers. The cluster: node-a and node-b,
7 cpu / 13Gi each, no NodeMetrics (LoadAware passes such nodes); on node-a a filler of
3 cpu / 4Gi and the Reservation r-web of 2300m / 3Gi for pods labelled app=web. So node-a has
4000m / 9Gi not taken by pods, of which 1700m / 6Gi are left to a pod that is not an owner.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest

from koordapi.gang.spec import format_time
from koordapi.reservation import holding
from koordapi.reservation.model import (
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_ALLOCATED,
    LABEL_RESERVATION_IGNORED,
    Reservation,
)
from koordapi.reservation.reservepod import reserve_pod
from koordkube.resources import object_key
from scheduler.extender import DecisionCache, StaticClusterView, bind_decision, filter
from scheduler.reservation import REASON_RESERVED_ELSEWHERE
from scheduler.server import ExtenderServer
from scheduler.state import InformerClusterView
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, run
from tests.unit.scheduler.objects import NOW, make_node, make_pod

R_UID = "uid-r-web"
NAMES = ["node-a", "node-b"]
WEB = {"app": "web"}


def reservation(
    name: str = "r-web",
    *,
    uid: str = R_UID,
    node: str = "node-a",
    phase: str = "Available",
    once: bool = False,
    policy: str = "",
) -> dict[str, Any]:
    """A Reservation of 2300m / 3Gi for pods labelled app=web, placed on ``node`` ("": not
    placed) in ``phase``."""
    requests = {"cpu": "2300m", "memory": "3Gi"}
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"namespace": "default"},
            "spec": {"containers": [{"name": "main", "resources": {"requests": requests}}]},
        },
        "owners": [{"labelSelector": {"matchLabels": WEB}}],
        "ttl": "1h",
        "allocateOnce": once,
    }
    if policy:
        spec["allocatePolicy"] = policy
    status: dict[str, Any] = {"phase": phase}
    if node:
        status.update(nodeName=node, allocatable=dict(requests))
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name, "uid": uid, "labels": {"pool": "web"}},
        "spec": spec,
        "status": status,
    }


class ReservedView(StaticClusterView):
    """A StaticClusterView that also keeps Reservations (scheduler.reservation.ReservationView)."""

    def __init__(self, reservations: Sequence[dict[str, Any]], **kw: Any) -> None:
        super().__init__(**kw)
        self.reservations = [Reservation.from_dict(r) for r in reservations]

    def reservation_nodes(self) -> Collection[str]:
        return {r.node_name for r in self.reservations if r.active}

    def reservations_on(self, name: str) -> Sequence[Reservation]:
        return [r for r in self.reservations if r.node_name == name]


def filler() -> dict[str, Any]:
    return make_pod("filler", requests={"cpu": "3", "memory": "4Gi"}, node="node-a")


def cluster(*reservations: dict[str, Any], pods: Sequence[dict[str, Any]] = ()) -> ReservedView:
    nodes = [make_node(n, cpu="7", memory="13Gi") for n in NAMES]
    return ReservedView(reservations, nodes=nodes, pods=[filler(), *pods])


def pod(
    name: str,
    cpu: str,
    memory: str,
    *,
    owner: bool = False,
    labels: dict[str, str] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    labels = {**(WEB if owner else {}), **(labels or {})}
    return make_pod(name, requests={"cpu": cpu, "memory": memory}, labels=labels, **kw)


def affinity(name: str = "", **selector: str) -> dict[str, str]:
    """A reservation-affinity annotation by name, or by the reservations' labels."""
    raw: dict[str, Any] = {"name": name} if name else {"reservationSelector": selector}
    return {ANNOTATION_RESERVATION_AFFINITY: json.dumps(raw)}


def allocated(name: str = "r-web", uid: str = R_UID) -> dict[str, str]:
    return {ANNOTATION_RESERVATION_ALLOCATED: json.dumps({"name": name, "uid": uid})}


def filtered(
    incoming: dict[str, Any], view: StaticClusterView, names: Sequence[str] = NAMES
) -> dict[str, Any]:
    return filter({"Pod": incoming, "Nodes": None, "NodeNames": list(names)}, view, NOW)


# -- filter: the room held against other pods --------------------------------------------------


@pytest.mark.parametrize(
    ("cpu", "memory", "short"),
    [
        ("2", "1Gi", "cpu"),  # 2000m > the 1700m left beside the reservation
        ("1", "7Gi", "memory"),  # 7Gi > 9Gi - 3Gi
    ],
)
@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "full-nodes"])
def test_a_non_owner_is_refused_the_reserved_room_and_passes_elsewhere(
    cpu: str, memory: str, short: str, cache: bool
) -> None:
    view = cluster(reservation())
    incoming = pod("other", cpu, memory)
    if cache:
        result = filtered(incoming, view)
        assert result["NodeNames"] == ["node-b"]
    else:
        items = [view.node(n) for n in NAMES]
        args = {"Pod": incoming, "Nodes": {"metadata": {}, "items": items}, "NodeNames": None}
        result = filter(args, view, NOW)
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["node-b"]
    assert result["FailedNodes"] == {"node-a": f"Insufficient {short}"}
    assert result["FailedAndUnresolvableNodes"] == {}
    # the same pod on node-a without the reservation fits (4000m / 9Gi free)
    assert filtered(incoming, cluster())["NodeNames"] == NAMES


def test_a_non_owner_that_fits_beside_the_reservation_passes() -> None:
    # exactly the 1700m / 6Gi the reservation leaves
    result = filtered(pod("other", "1700m", "6Gi"), cluster(reservation()))
    assert result["NodeNames"] == NAMES
    assert result["FailedNodes"] == {}
    # one milli-core more does not
    result = filtered(pod("other", "1701m", "6Gi"), cluster(reservation()))
    assert result["FailedNodes"] == {"node-a": "Insufficient cpu"}


def test_a_pod_that_ignores_reservations_may_use_their_room() -> None:
    # reservation-ignored: Koordinator restores the reserved room for it (3500m of 4000m)
    ignoring = pod("batch", "3500m", "1Gi", labels={LABEL_RESERVATION_IGNORED: "true"})
    assert filtered(ignoring, cluster(reservation()))["NodeNames"] == NAMES
    assert filtered(pod("batch", "3500m", "1Gi"), cluster(reservation()))["NodeNames"] == ["node-b"]


def test_a_kept_decision_cache_sees_the_reservation_consumed_once_the_node_changes() -> None:
    # allocated once: the owner's bind ends the hold; the server keeps one DecisionCache, so
    # the node's holds are kept between calls until the view's ChangeFeed names the node
    view, cache = cluster(reservation(once=True)), DecisionCache()
    other = pod("other", "1800m", "1Gi")  # 100m more than the reservation leaves
    args = {"Pod": other, "Nodes": None, "NodeNames": NAMES}
    assert filter(args, view, NOW, cache=cache)["FailedNodes"] == {"node-a": "Insufficient cpu"}
    assert filter(args, view, NOW, cache=cache)["FailedNodes"] == {"node-a": "Insufficient cpu"}
    owner = pod("web-0", "1", "1Gi", owner=True)
    view.bind(owner, "node-a", NOW, annotations=bind_decision(owner, "node-a", view).annotations)
    # 4000m - 1000m = 3000m not taken by pods, nothing held: the 1800m pod fits
    assert filter(args, view, NOW, cache=cache)["NodeNames"] == NAMES


# -- owners ----------------------------------------------------------------------------------


def test_an_owner_is_kept_to_its_reservation_and_bound_into_it() -> None:
    view = cluster(reservation())
    owner = pod("web-0", "2", "2Gi", owner=True)  # more than a non-owner gets on node-a
    result = filtered(owner, view)
    assert result["NodeNames"] == ["node-a"]
    assert result["FailedNodes"] == {"node-b": REASON_RESERVED_ELSEWHERE}
    plan = bind_decision(owner, "node-a", view)
    assert plan.error == ""
    assert json.loads(plan.annotations[ANNOTATION_RESERVATION_ALLOCATED]) == {
        "name": "r-web",
        "uid": R_UID,
    }
    # on a node without its reservation it is bound as any pod
    assert dict(bind_decision(owner, "node-b", view).annotations) == {}
    # once bound into it, the owner's 2000m / 2Gi come out of the reservation: node-a has
    # 2000m / 7Gi not taken by pods, the reservation 300m / 1Gi left, so 1700m / 6Gi for the
    # others (had the owner not been counted in it: 2000m - 2300m, nothing)
    view.bind(owner, "node-a", NOW, annotations=plan.annotations)
    result = filtered(pod("other", "1700m", "6Gi"), view)
    assert result["NodeNames"] == NAMES
    result = filtered(pod("other", "1800m", "1Gi"), view)
    assert result["FailedNodes"] == {"node-a": "Insufficient cpu"}


def test_an_allocate_once_reservation_with_its_owner_holds_nothing_more() -> None:
    first = pod("web-0", "1", "1Gi", owner=True, node="node-a", annotations=allocated())
    view = cluster(reservation(once=True), pods=[first])
    # node-a: 7000m - 3000m - 1000m = 3000m free, none held any more (held: 3000m - 1300m)
    result = filtered(pod("other", "2500m", "1Gi"), view)
    assert result["NodeNames"] == NAMES
    assert result["FailedNodes"] == {}
    second = pod("web-1", "2", "2Gi", owner=True)
    result = filtered(second, view)
    assert result["NodeNames"] == NAMES  # not kept to node-a: nothing there takes it
    assert result["FailedNodes"] == {}
    assert ANNOTATION_RESERVATION_ALLOCATED not in bind_decision(second, "node-a", view).annotations
    # the same reservation allocated many times takes the second owner
    again = cluster(reservation(once=False), pods=[first])
    assert filtered(second, again)["NodeNames"] == ["node-a"]
    assert ANNOTATION_RESERVATION_ALLOCATED in bind_decision(second, "node-a", again).annotations


@pytest.mark.parametrize(
    ("policy", "failed"),
    [
        # 2500m of a 2300m reservation: Restricted keeps an owner within what it holds
        ("Restricted", {"node-a": "Reservation(s) Insufficient cpu"}),
        ("Aligned", {}),  # the node's own 1700m make up the rest
    ],
)
def test_the_allocate_policy_decides_whether_an_owner_may_go_beyond_the_reservation(
    policy: str, failed: dict[str, str]
) -> None:
    view = cluster(reservation(policy=policy))
    # required to use a reservation (by its labels: one named gets the amounts in the reason)
    owner = pod("web-0", "2500m", "1Gi", owner=True, annotations=affinity(pool="web"))
    result = filtered(owner, view, ["node-a"])
    assert result["FailedNodes"] == failed
    assert result["NodeNames"] == ([] if failed else ["node-a"])
    assert result["FailedAndUnresolvableNodes"] == {}


def test_a_restricted_owner_without_affinity_is_refused_by_the_node() -> None:
    # not required to use a reservation: Koordinator then asks the node alone, which has
    # 1700m beside the reservation for 2500m
    owner = pod("web-0", "2500m", "1Gi", owner=True)
    result = filtered(owner, cluster(reservation(policy="Restricted")))
    assert result["FailedNodes"] == {"node-a": "Insufficient cpu by node"}
    assert result["NodeNames"] == ["node-b"]


def test_affinity_to_a_missing_reservation_is_unresolvable_on_every_node() -> None:
    # Koordinator's PreFilter: a pod with reservation affinity goes only to nodes with a
    # reservation it matches; none matches, so no node, and preempting cannot help
    lost = pod("web-0", "1", "1Gi", owner=True, annotations=affinity("r-gone"))
    for view in (cluster(reservation()), cluster()):
        result = filtered(lost, view)
        assert result["NodeNames"] == []
        assert result["FailedNodes"] == {}
        assert result["FailedAndUnresolvableNodes"] == dict.fromkeys(NAMES, holding.REASON_AFFINITY)


def test_a_bind_that_no_longer_fits_beside_the_reservation_is_an_error() -> None:
    plan = bind_decision(pod("other", "2", "1Gi"), "node-a", cluster(reservation()))
    assert plan.error == "node node-a: Insufficient cpu"
    assert dict(plan.annotations) == {}


# -- the informer view -----------------------------------------------------------------------


def test_the_view_holds_a_placed_reservation_until_the_informer_shows_where_it_went() -> None:
    api = FakeKubeAPI()
    pending = api.seed(reservation(node="", phase="Pending"))[0]

    async def scenario() -> None:
        view = InformerClusterView(api.kube_api())
        task = asyncio.create_task(view.reservations.run())

        def seen(version: str) -> bool:
            obj = view.reservations.get("r-web")
            return obj is not None and obj["metadata"]["resourceVersion"] == version

        try:
            await eventually(lambda: seen(pending["metadata"]["resourceVersion"]))
            assert list(view.reservation_nodes()) == []
            placed = Reservation.from_dict(reservation())
            view.place(placed)
            assert list(view.reservation_nodes()) == ["node-a"]
            assert view.reservations_on("node-a") == [placed]
            # the informer, behind, shows it Pending again: still held where it was placed
            again = api.seed({**pending, "metadata": {**pending["metadata"], "labels": {}}})[0]
            await eventually(lambda: seen(again["metadata"]["resourceVersion"]))
            assert list(view.reservation_nodes()) == ["node-a"]
            assert view.reservations_on("node-a") == [placed]
            # it shows it on node-b (as written): the informer's copy is held from now on
            moved = api.seed(reservation(node="node-b"))[0]
            await eventually(lambda: seen(moved["metadata"]["resourceVersion"]))
            assert list(view.reservation_nodes()) == ["node-b"]
            assert view.reservations_on("node-a") == []
            # expired (Failed): nothing held
            failed = api.seed(reservation(node="node-b", phase="Failed"))[0]
            await eventually(lambda: seen(failed["metadata"]["resourceVersion"]))
            assert list(view.reservation_nodes()) == []
            # unreadable (no owners): nothing held, nothing crashes
            broken = reservation(node="node-b")
            broken["spec"]["owners"] = []
            version = api.seed(broken)[0]["metadata"]["resourceVersion"]
            await eventually(lambda: seen(version))
            assert list(view.reservation_nodes()) == []
            assert view.reservation("r-web") is None
            api.seed(reservation(node="node-b"))
            await eventually(lambda: list(view.reservation_nodes()) == ["node-b"])
            api.remove("Reservation", "r-web")
            await eventually(lambda: view.reservations.get("r-web") is None)
            assert list(view.reservation_nodes()) == []
            assert view.reservation("r-web") is None
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    run(scenario())


# -- a reserve pod's bind through the server ---------------------------------------------------

PLACED_AT = NOW + 4321.0  # the server's clock


def api_cluster(phase: str = "Pending") -> FakeKubeAPI:
    """The cluster on the fake API: a Pending r-web and its reserve pod (default/uid-r-web)."""
    api = FakeKubeAPI()
    for name in NAMES:
        api.seed({"apiVersion": "v1", "kind": "Node", **make_node(name, cpu="7", memory="13Gi")})
    api.seed({"apiVersion": "v1", "kind": "Pod", **filler()})
    obj = reservation(node="" if phase == "Pending" else "node-a", phase=phase)
    api.seed(obj)
    api.seed(reserve_pod(obj))
    return api


@asynccontextmanager
async def serving(
    api: FakeKubeAPI, *, freeze_reservations: bool = False
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, Any]]:
    """The extender over plain HTTP with the clock at PLACED_AT; (session, base URL, view),
    once the view holds every pod and Reservation of the fake. ``freeze_reservations``: the
    Reservation informer stops there, so the view knows of a placement only from the bind."""
    view = InformerClusterView(api.kube_api())
    tasks = [asyncio.create_task(i.run()) for i in view.informers]
    server = ExtenderServer(api.kube_api(), view, host="127.0.0.1", port=0, clock=lambda: PLACED_AT)
    await server.start()

    def caught_up() -> bool:
        for informer, kind in ((view.pods, "Pod"), (view.reservations, "Reservation")):
            want = {object_key(o) for o in api.objects(kind)}
            if want != {object_key(o) for o in informer.list()}:
                return False
        return view.synced()

    try:
        await eventually(caught_up)
        if freeze_reservations:
            tasks[view.informers.index(view.reservations)].cancel()
        async with aiohttp.ClientSession() as session:
            yield session, f"http://127.0.0.1:{server.port}/scheduler", view
    finally:
        await server.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def post(session: aiohttp.ClientSession, url: str, body: Any) -> Any:
    async with session.post(url, json=body) as reply:
        assert reply.status == 200
        return await reply.json()


def bind_args(api: FakeKubeAPI) -> dict[str, str]:
    reserve = api.get("Pod", R_UID, "default")
    assert reserve is not None
    uid = reserve["metadata"]["uid"]
    return {"PodName": R_UID, "PodNamespace": "default", "PodUID": uid, "Node": "node-a"}


def test_a_reserve_pods_bind_places_its_reservation_and_deletes_the_pod() -> None:
    api = api_cluster()
    seeded = api.get("Reservation", "r-web")
    assert seeded is not None

    async def scenario() -> None:
        async with serving(api, freeze_reservations=True) as (session, base, view):
            assert list(view.reservation_nodes()) == []
            reply = await post(session, f"{base}/bind", bind_args(api))
            assert reply == {"Error": ""}
            # held at once, before any informer event: a pod that is not an owner no longer
            # gets the reserved room
            assert list(view.reservation_nodes()) == ["node-a"]
            args = {"Pod": pod("other", "2", "1Gi"), "Nodes": None, "NodeNames": NAMES}
            result = await post(session, f"{base}/filter", args)
            assert result["NodeNames"] == ["node-b"]
            assert result["FailedNodes"] == {"node-a": "Insufficient cpu"}

    run(scenario())
    placed = api.get("Reservation", "r-web")
    assert placed is not None
    status = placed["status"]
    assert status["phase"] == "Available"
    assert status["nodeName"] == "node-a"
    assert status["allocatable"] == {"cpu": "2300m", "memory": "3Gi"}
    stamp = format_time(PLACED_AT)
    assert [
        (c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in status["conditions"]
    ] == [("Scheduled", "True", "Scheduled", stamp), ("Ready", "True", "Available", stamp)]
    # written to the status subresource, conditional on the version read
    (patch,) = api.calls("patch", r"/reservations/r-web/status$")
    assert patch.body["metadata"]["resourceVersion"] == seeded["metadata"]["resourceVersion"]
    assert api.get("Pod", R_UID, "default") is None
    assert api.calls("delete", rf"/namespaces/default/pods/{R_UID}$")
    assert api.calls("create", r"/binding$") == []
    assert api.calls("update", r"/pods/") == []


@pytest.mark.parametrize(
    ("phase", "gone", "error"),
    [
        ("Pending", True, "its Reservation r-web is gone"),
        ("Available", False, "Reservation r-web is Available"),
        ("Failed", False, "Reservation r-web is Failed"),
    ],
)
def test_a_reserve_pod_without_a_pending_reservation_is_not_bound(
    phase: str, gone: bool, error: str
) -> None:
    api = api_cluster(phase)
    args = bind_args(api)
    if gone:
        api.remove("Reservation", "r-web")
    before = api.get("Reservation", "r-web")

    async def scenario() -> None:
        async with serving(api) as (session, base, _view):
            reply = await post(session, f"{base}/bind", args)
            assert reply["Error"] == f"reserve pod default/{R_UID}: {error}"

    run(scenario())
    assert api.get("Reservation", "r-web") == before
    assert api.get("Pod", R_UID, "default") is not None
    assert api.calls("patch") == []
    assert api.calls("delete") == []
    assert api.calls("create", r"/binding$") == []


def test_a_conflicting_placement_is_an_error_and_the_pod_stays() -> None:
    api = api_cluster()
    api.fail("patch", r"/reservations/r-web/status$", 409)

    async def scenario() -> None:
        async with serving(api) as (session, base, view):
            reply = await post(session, f"{base}/bind", bind_args(api))
            assert reply["Error"].startswith("placing Reservation r-web on node-a: ")
            assert list(view.reservation_nodes()) == []

    run(scenario())
    placed = api.get("Reservation", "r-web")
    assert placed is not None and placed["status"]["phase"] == "Pending"
    assert api.get("Pod", R_UID, "default") is not None
