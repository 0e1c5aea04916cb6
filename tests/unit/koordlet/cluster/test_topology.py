"""The CPU topology annotation koordlet keeps on its Node, read back as the scheduler reads it."""

from __future__ import annotations

import asyncio

from koordapi import keys
from koordlet.cluster.topology import TopologyPublisher, cpu_topology_annotation
from koordlet.states.topology import Processor, Topology
from scheduler.cputopology import parse_cpu_topology
from tests.fakekube import FakeKubeAPI

# 2 sockets x 2 cores x 2 threads: CPU c and c + 4 are siblings.
PROCESSORS = tuple(
    Processor(cpu, core=cpu % 2, socket=(cpu % 4) // 2, node=(cpu % 4) // 2) for cpu in range(8)
)
TOPOLOGY = Topology(cpus=frozenset(range(8)), processors=PROCESSORS)


def test_the_annotation_is_what_the_scheduler_parses() -> None:
    text = cpu_topology_annotation(TOPOLOGY)
    assert text is not None
    parsed = parse_cpu_topology(text)
    assert not isinstance(parsed, str)
    counts = (len(parsed.cpus), parsed.num_cores, parsed.num_nodes, parsed.num_sockets)
    assert counts == (8, 4, 2, 2)
    assert cpu_topology_annotation(Topology(cpus=frozenset({0}))) is None  # sysfs said nothing


def test_the_node_gets_the_annotation_and_a_failed_write_is_retried() -> None:
    async def scenario() -> None:
        fake = FakeKubeAPI()
        fake.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        api = fake.kube_api()
        from koordlet.cluster.nodeconfig import NodeConfigInformer  # noqa: PLC0415

        informer = NodeConfigInformer(api, "n1")
        watching = asyncio.create_task(informer.nodes.run())
        await informer.nodes.wait_synced()
        value = cpu_topology_annotation(TOPOLOGY)
        assert value is not None
        publisher = TopologyPublisher(api, "n1", value, informer.nodes)
        fake.fail("patch", r"/nodes/n1$", 500, times=1)
        assert not await publisher.publish_once()  # a failed write: tried again later
        assert await publisher.publish_once()
        node = fake.get("Node", "n1")
        assert node is not None
        assert node["metadata"]["annotations"][keys.ANNOTATION_CPU_TOPOLOGY] == value
        for _ in range(200):  # until the watch brings the annotated Node back
            seen = informer.nodes.get("n1") or {}
            if keys.ANNOTATION_CPU_TOPOLOGY in (seen.get("metadata") or {}).get("annotations", {}):
                break
            await asyncio.sleep(0.01)
        assert not await publisher.publish_once()  # nothing to change: no write
        assert publisher.writes == 1
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 20))
