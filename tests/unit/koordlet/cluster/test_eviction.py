"""Evictions through the Eviction API, from a strategy's worker thread, on the fake API."""

from __future__ import annotations

import asyncio

from koordlet.cluster.eviction import KubeApiEviction
from koordlet.executor.kubeapi import EvictionResult
from manager.testing import FakeKubeAPI


def pod(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "jobs"}}


def test_eviction_outcomes_started_blocked_and_gone() -> None:
    async def scenario() -> list[tuple[EvictionResult, str]]:
        fake = FakeKubeAPI()
        fake.seed(pod("a"), pod("b"), pod("c"))
        uids = {n: fake.get("Pod", n, "jobs")["metadata"]["uid"] for n in "abc"}  # type: ignore[index]
        fake.blocked_evictions.add("jobs/b")
        eviction = KubeApiEviction(fake.kube_api())
        eviction.bind(asyncio.get_running_loop())
        # The QoS manager calls from a worker thread while the loop serves the client.
        results = [
            await asyncio.to_thread(eviction.evict, "jobs", "a", uids["a"]),
            await asyncio.to_thread(eviction.evict, "jobs", "b", uids["b"]),
            await asyncio.to_thread(eviction.evict, "jobs", "c", "another-pods-uid"),
            await asyncio.to_thread(eviction.evict, "jobs", "gone", "x"),
        ]
        assert fake.get("Pod", "a", "jobs") is None  # evicted
        assert fake.get("Pod", "b", "jobs") is not None  # the budget held it
        assert fake.get("Pod", "c", "jobs") is not None  # a different pod by that name
        return results

    results = asyncio.run(scenario())
    assert [r for r, _ in results] == [
        EvictionResult.STARTED,
        EvictionResult.BLOCKED,
        EvictionResult.GONE,
        EvictionResult.GONE,
    ]
    assert "disruption budget" in results[1][1]


def test_without_a_running_client_an_eviction_fails_cleanly() -> None:
    eviction = KubeApiEviction(FakeKubeAPI().kube_api())
    result, why = eviction.evict("jobs", "a", "u")
    assert result is EvictionResult.FAILED and "not running" in why
