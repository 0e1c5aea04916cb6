"""The NodeSLO and Node watches as the node configuration source."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from koordlet.cluster import cancel_and_wait
from koordlet.cluster.nodeconfig import NodeConfigInformer
from tests.fakekube import FakeKubeAPI

NODE = "n1"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"


def node(annotations: dict[str, str] | None = None, cpu: str = "8") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "annotations": annotations or {}},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi"}},
    }


def nodeslo(threshold: object, name: str = NODE) -> dict[str, Any]:
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": name},
        "spec": {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressThresholdPercent": threshold,
            }
        },
    }


async def eventually(predicate: Callable[[], bool], seconds: float = 3.0) -> None:
    for _ in range(int(seconds * 100)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


def threshold(source: NodeConfigInformer) -> object:
    return source.current.spec.raw["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"]


def scenario(body: Callable[[FakeKubeAPI, NodeConfigInformer], Any]) -> None:
    async def run() -> None:
        fake = FakeKubeAPI()
        fake.seed(node(), nodeslo(60), nodeslo(10, name="other-node"))
        source = NodeConfigInformer(fake.kube_api(), NODE)
        task = asyncio.create_task(source.run())
        try:
            await asyncio.wait_for(source.wait_synced(), 2)
            await eventually(lambda: source.loads > 0)
            assert source.reload_if_changed()
            assert not source.reload_if_changed()
            await body(fake, source)
        finally:
            await cancel_and_wait(task)

    asyncio.run(asyncio.wait_for(run(), 10))


def test_the_first_config_comes_from_this_nodes_objects() -> None:
    async def body(fake: FakeKubeAPI, source: NodeConfigInformer) -> None:
        assert threshold(source) == 60
        assert source.current.allocatable == {"cpu": 8000, "memory": 16 << 30}
        assert source.error is None
        for path in ("/nodeslos", "/nodes"):
            for call in fake.calls("list", path) + fake.calls("watch", path):
                assert call.params["fieldSelector"] == "metadata.name=n1"

    scenario(body)


def test_a_nodeslo_change_gives_a_new_config() -> None:
    async def body(fake: FakeKubeAPI, source: NodeConfigInformer) -> None:
        fake.seed(nodeslo(70))
        await eventually(lambda: threshold(source) == 70)
        assert source.reload_if_changed()
        assert not source.reload_if_changed()

    scenario(body)


def test_an_invalid_nodeslo_keeps_the_last_good_config_with_an_error() -> None:
    async def body(fake: FakeKubeAPI, source: NodeConfigInformer) -> None:
        good = source.current
        fake.seed(nodeslo("abc"))
        await eventually(lambda: source.error is not None)
        assert "cpuSuppressThresholdPercent" in (source.error or "")
        assert source.current is good
        assert not source.reload_if_changed()
        fake.seed(nodeslo(55))  # fixed: in use again, the error gone
        await eventually(lambda: threshold(source) == 55)
        assert source.error is None

    scenario(body)


def test_a_node_annotation_change_updates_the_config() -> None:
    async def body(fake: FakeKubeAPI, source: NodeConfigInformer) -> None:
        assert source.current.parsed(RATIO) is None
        fake.seed(node({RATIO: "1.5"}, cpu="6"))
        await eventually(lambda: source.current.annotations.get(RATIO) == "1.5")
        assert source.current.parsed(RATIO) == 1.5
        assert source.current.allocatable["cpu"] == 6000
        assert threshold(source) == 60
        assert source.reload_if_changed()

    scenario(body)


def test_the_api_going_away_keeps_the_last_good_config() -> None:
    async def body(fake: FakeKubeAPI, source: NodeConfigInformer) -> None:
        good = source.current
        tried = len(fake.calls(path="/node"))
        fake.disconnect("list", "/node", times=50)
        fake.disconnect("watch", "/node", times=50)
        fake.close_watches(error=True)
        # both informers have tried the dead API again (after their backoff) and failed
        await eventually(lambda: len(fake.calls(path="/node")) >= tried + 2, seconds=10)
        assert source.current is good
        assert source.error is None
        assert not source.reload_if_changed()

    scenario(body)
