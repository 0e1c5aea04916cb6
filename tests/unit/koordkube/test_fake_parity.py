"""FakeKubeAPI answers tests/kubescenario.py's calls as the real API server did: the scenario's
observations on the fake equal those kept in tests/kubescenario.json from the cluster tier's run
(tests/cluster/test_fake_parity.py runs both and checks that file against the real server)."""

from __future__ import annotations

import asyncio

from tests import kubescenario


def test_the_fake_answers_the_scenario_as_the_real_api_server_did() -> None:
    real = kubescenario.real_observations()
    fake = kubescenario.observe_fake()
    assert len(real) > 60
    differences = kubescenario.differences(real, fake)
    assert not differences, "the fake differs from the real server:\n" + "\n".join(differences)


def test_the_scenario_leaves_nothing_behind_on_the_fake() -> None:
    fake = kubescenario.fake_server()

    async def run() -> None:
        await kubescenario.scenario(fake.kube_api())

    asyncio.run(run())
    kinds = ("Node", "NodeMetric", "NodeSLO", "PodMigrationJob", "Device", "Namespace")
    assert {kind: fake.objects(kind) for kind in kinds} == {kind: [] for kind in kinds}
    assert fake.objects("Event", "default") == []
