"""The informer keeps its cache in step with the fake API through lists, watches and failures."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from lightkube.resources.core_v1 import Node, Pod

from koordkube.informer import Informer
from tests.fakekube import FakeKubeAPI
from tests.unit.koordkube.fakes import eventually, node, pod, run, settle


class Recorder:
    """A handler that logs (event, name) and what the cache held when it ran."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.events: list[tuple[str, str]] = []
        self.cached_at_call: list[bool] = []
        informer.add_handler(self)

    def __call__(self, event: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        self.events.append((event, name))
        self.cached_at_call.append((self.informer.get(name) is not None) == (event != "DELETED"))


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 2)
        yield informer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def test_the_first_list_fills_the_cache_and_reports_added() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"), node("n2"))
        informer = Informer(fake.kube_api(), Node)
        seen = Recorder(informer)
        assert not informer.synced.is_set()
        async with running(informer):
            assert sorted(informer.keys()) == ["n1", "n2"]
            assert informer.get("n1")["kind"] == "Node"  # type: ignore[index]
            assert informer.resource_version == "2"
            assert seen.events == [("ADDED", "n1"), ("ADDED", "n2")]
            assert fake.calls("watch")[0].params["resourceVersion"] == "2"
            assert fake.calls("watch")[0].params["allowWatchBookmarks"] == "true"

    run(scenario())


def test_watch_events_update_the_cache_before_handlers_run() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        informer = Informer(fake.kube_api(), Node)
        seen = Recorder(informer)
        async with running(informer):
            await eventually(lambda: fake.watch_count == 1)
            fake.seed(node("n1", {"a": "1"}))
            fake.seed(node("n1", {"a": "2"}))
            fake.seed(node("n2"))
            fake.remove("Node", "n2")
            await eventually(lambda: len(seen.events) == 4)
            assert seen.events == [
                ("ADDED", "n1"),
                ("MODIFIED", "n1"),
                ("ADDED", "n2"),
                ("DELETED", "n2"),
            ]
            assert all(seen.cached_at_call)
            assert informer.keys() == ["n1"]
            assert informer.get("n1")["metadata"]["labels"] == {"a": "2"}  # type: ignore[index]
            assert informer.resource_version == str(fake.resource_version)

    run(scenario())


def test_namespaced_objects_are_keyed_by_namespace_and_name_and_selectors_apply() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(pod("a", "x", node_name="n1"), pod("b", "y", node_name="n2"))
        informer = Informer(fake.kube_api(), Pod, fields="spec.nodeName=n1")
        seen = Recorder(informer)
        async with running(informer):
            assert informer.keys() == ["x/a"]
            await eventually(lambda: fake.watch_count == 1)
            moved = pod("a", "x", node_name="n1")
            moved["metadata"]["labels"] = {"moved": "yes"}
            fake.seed(moved)
            fake.seed(pod("c", "x", node_name="n1"))
            await eventually(lambda: len(seen.events) == 3)
            assert seen.events[1:] == [("MODIFIED", "a"), ("ADDED", "c")]
            assert sorted(informer.keys()) == ["x/a", "x/c"]
            assert fake.calls("watch")[0].params["fieldSelector"] == "spec.nodeName=n1"

    run(scenario())


def test_an_expired_watch_relists_and_reports_what_changed_meanwhile() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("keep"), node("change"), node("gone"))
        informer = Informer(fake.kube_api(), Node)
        seen = Recorder(informer)
        async with running(informer):
            await eventually(lambda: fake.watch_count == 1)
            fake.close_watches()  # the watch ends; what happens next is missed...
            fake.seed(node("change", {"v": "2"}), node("new"))
            fake.remove("Node", "gone")
            fake.compact()  # ...and the history is compacted away: 410 on re-watch
            await eventually(lambda: informer.lists == 2)
            await eventually(lambda: len(seen.events) == 6)
            assert sorted(seen.events[3:]) == [
                ("ADDED", "new"),
                ("DELETED", "gone"),
                ("MODIFIED", "change"),
            ]
            assert sorted(informer.keys()) == ["change", "keep", "new"]
            # The informer watches again from the fresh list's version.
            await eventually(lambda: fake.watch_count == 1)
            fake.seed(node("after"))
            await eventually(lambda: informer.get("after") is not None)

    run(scenario())


def test_a_dropped_watch_reconnects_with_backoff_from_the_last_version() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        sleeps = Sleeps()
        informer = Informer(fake.kube_api(), Node, sleep=sleeps, rand=lambda: 0.5)
        seen = Recorder(informer)
        async with running(informer):
            await eventually(lambda: fake.watch_count == 1)
            fake.disconnect("watch", r"/nodes$", times=3)
            fake.close_watches(error=True)
            fake.seed(node("n2"))  # happens while disconnected
            await eventually(lambda: ("ADDED", "n2") in seen.events)
            # 0.8 s doubling, plus half of itself as jitter (rand = 0.5, jitter factor 1.0).
            assert sleeps.delays == pytest.approx([1.2, 2.4, 4.8, 9.6])
            assert informer.lists == 1  # the watch resumed from its version: no re-list
            watches = fake.calls("watch")
            assert [w.params["resourceVersion"] for w in watches] == ["1"] * 5
            # After events flow again the backoff starts over.
            fake.close_watches(error=True)
            fake.seed(node("n3"))
            await eventually(lambda: ("ADDED", "n3") in seen.events)
            assert sleeps.delays[-1] == pytest.approx(1.2)

    run(scenario())


def test_a_failing_first_list_is_retried() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        fake.fail("list", r"/nodes$", 500, times=2)
        sleeps = Sleeps()
        informer = Informer(fake.kube_api(), Node, sleep=sleeps, rand=lambda: 0.0)
        async with running(informer):
            assert informer.keys() == ["n1"]
            assert sleeps.delays == pytest.approx([0.8, 1.6])

    run(scenario())


def test_bookmarks_move_the_resume_version_without_events() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        informer = Informer(fake.kube_api(), Node)
        seen = Recorder(informer)
        async with running(informer):
            await eventually(lambda: fake.watch_count == 1)
            for i in range(3):  # other kinds move the global version on
                fake.seed(pod(f"p{i}"))
            fake.bookmark()
            await eventually(lambda: informer.resource_version == "4")
            fake.compact()
            fake.close_watches()
            await eventually(lambda: len(fake.calls("watch")) == 2)
            await settle()
            assert fake.calls("watch")[1].params["resourceVersion"] == "4"
            assert informer.lists == 1  # thanks to the bookmark, no 410 and no re-list
            assert seen.events == [("ADDED", "n1")]

    run(scenario())


def test_a_watch_that_times_out_is_reopened_at_once() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        sleeps = Sleeps()
        informer = Informer(
            fake.kube_api(), Node, watch_timeout=0.5, rand=lambda: 0.0, sleep=sleeps
        )
        async with running(informer):
            await eventually(lambda: len(fake.calls("watch")) == 2, timeout=3)
            assert fake.calls("watch")[0].params["timeoutSeconds"] == "1"
            assert sleeps.delays == []

    run(scenario())


def test_resync_replays_the_cache_and_a_failing_handler_does_not_stop_the_others() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed(node("n1"))
        informer = Informer(fake.kube_api(), Node, resync_period=0.05)

        def broken(event: str, obj: dict[str, Any]) -> None:
            raise RuntimeError("handler bug")

        informer.add_handler(broken)
        seen = Recorder(informer)
        async with running(informer):
            await eventually(lambda: seen.events.count(("RESYNC", "n1")) >= 2)
            fake.seed(node("n2"))
            await eventually(lambda: ("ADDED", "n2") in seen.events)

    run(scenario())
