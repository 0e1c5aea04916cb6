"""koordkube.events: Events about an object, deduplicated within ``quiet``, never raising."""

from __future__ import annotations

from koordkube.events import WARNING, EventRecorder
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import run

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u1"}}


def test_repeats_within_quiet_are_dropped_and_after_it_posted_again() -> None:
    api = FakeKubeAPI()
    now = [1000.0]
    recorder = EventRecorder(api.kube_api(), "koord-x", quiet=60, clock=lambda: now[0])

    async def scenario() -> None:
        await recorder.warn(NODE, "Bad", "broken")
        await recorder.warn(NODE, "Bad", "broken")  # within 60 s: dropped
        await recorder.warn(NODE, "Bad", "other")  # another message: posted
        now[0] += 61
        await recorder.warn(NODE, "Bad", "broken")

    run(scenario())
    events = api.objects("Event")  # in no particular order
    assert sorted(e["message"] for e in events) == ["broken", "broken", "other"]
    for event in events:
        assert event["metadata"]["namespace"] == "default"  # a cluster-scoped object's
        assert (event["type"], event["source"]["component"]) == (WARNING, "koord-x")
        assert event["involvedObject"]["uid"] == "u1"


def test_without_quiet_every_post_goes_and_a_refused_one_is_only_logged() -> None:
    api = FakeKubeAPI()
    recorder = EventRecorder(api.kube_api(), "koord-y")

    async def scenario() -> None:
        await recorder.post(POD, "Normal", "Moved", "x" * 2000, action="Migrating")
        await recorder.post(POD, "Normal", "Moved", "x" * 2000, action="Migrating")
        api.fail("create", r"/events$", 500)
        await recorder.post(POD, "Normal", "Moved", "lost")  # must not raise

    run(scenario())
    events = api.objects("Event")
    assert len(events) == 2
    assert events[0]["metadata"]["namespace"] == "shop" and events[0]["action"] == "Migrating"
    assert len(events[0]["message"]) == 1024
