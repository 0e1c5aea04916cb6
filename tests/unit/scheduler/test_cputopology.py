"""CPU topology parsing and the free CPUs of a node: malformed input comes back as a string."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordapi import keys
from scheduler.cputopology import (
    CPUCache,
    CPUTopology,
    NodeCPUs,
    node_cpus,
    parse_cpu_topology,
    pinned_cpus,
)
from tests.unit.scheduler.objects import ht_topology, lsr_pod, topology_node


def test_parses_a_two_socket_ht_topology() -> None:
    topology = parse_cpu_topology(ht_topology())
    assert isinstance(topology, CPUTopology)
    assert (len(topology.cpus), topology.num_cores, topology.num_nodes, topology.num_sockets) == (
        32,
        16,
        2,
        2,
    )
    assert (topology.cpus_per_core, topology.cpus_per_socket, topology.cpus_per_node) == (2, 16, 16)
    assert topology.cpus[0].core == topology.cpus[16].core  # siblings
    assert topology.cpus[8].socket == 1


def test_core_ids_repeating_across_sockets_stay_distinct() -> None:
    detail = [{"id": i, "core": i % 2, "socket": i // 2, "node": i // 2} for i in range(4)]
    topology = parse_cpu_topology(json.dumps({"detail": detail}))
    assert isinstance(topology, CPUTopology)
    assert topology.num_cores == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param("[]", "expected a JSON dict", id="not-an-object"),
        pytest.param("{}", "detail must be a non-empty list", id="no-detail"),
        pytest.param('{"detail": [5]}', "detail[0] must be an object", id="entry-not-object"),
        pytest.param(
            '{"detail": [{"id": 0, "socket": 0, "node": 0}]}',
            "detail[0].core must be an integer, got None",
            id="missing-core",
        ),
        pytest.param(
            '{"detail": [{"id": true, "core": 0, "socket": 0, "node": 0}]}',
            "detail[0].id must be an integer",
            id="boolean-id",
        ),
        pytest.param(
            '{"detail": [{"id": -1, "core": 0, "socket": 0, "node": 0}]}',
            "detail[0].id=-1 is outside",
            id="negative-id",
        ),
        pytest.param(
            '{"detail": [{"id": 99999999, "core": 0, "socket": 0, "node": 0}]}',
            "is outside",
            id="huge-id",
        ),
        pytest.param(
            json.dumps({"detail": [{"id": 0, "core": 0, "socket": 0, "node": 0}] * 2}),
            "cpu 0 listed twice",
            id="duplicate-id",
        ),
    ],
)
def test_malformed_topology_is_an_error_string(text: str, message: str) -> None:
    result = parse_cpu_topology(text)
    assert isinstance(result, str)
    assert keys.ANNOTATION_CPU_TOPOLOGY in result
    assert message in result


def test_node_without_topology_is_an_error_string() -> None:
    node = topology_node()
    del node["metadata"]["annotations"][keys.ANNOTATION_CPU_TOPOLOGY]
    assert node_cpus(node, []) == f"{keys.ANNOTATION_CPU_TOPOLOGY}: missing"


def test_free_cpus_leave_out_pinned_and_reserved_ones() -> None:
    reservation = json.dumps({"reservedCPUs": "0-1"})
    node = topology_node(annotations={keys.ANNOTATION_NODE_RESERVATION: reservation})
    pods = [lsr_pod("a", cpuset="2-3,18-19"), lsr_pod("b", cpuset="8")]
    result = node_cpus(node, pods)
    assert isinstance(result, NodeCPUs)
    assert result.free == frozenset(range(32)) - {0, 1, 2, 3, 18, 19, 8}
    assert result.taken_by == {"default/a": {2, 3, 18, 19}, "default/b": {8}}
    # whole free cores: 16 less 0, 1 (reserved threads), 2, 3 (pinned) and 8; 2 and 3 have none
    assert (result.full_free_cores, result.cores_with_free) == (11, 14)
    assert result.without("default/a").free == result.free | {2, 3, 18, 19}


def test_terminated_pods_and_unreadable_annotations_pin_nothing() -> None:
    done = lsr_pod("done", cpuset="0-3")
    done["status"]["phase"] = "Succeeded"
    broken = lsr_pod("broken")
    broken["metadata"]["annotations"][keys.ANNOTATION_RESOURCE_STATUS] = '{"cpuset": "0-x"}'
    taken, notes = pinned_cpus([done, broken])
    assert taken == {}
    assert len(notes) == 1
    assert notes[0].startswith("pod default/broken: ")


def test_unreadable_reservation_is_noted_and_ignored() -> None:
    node = topology_node(annotations={keys.ANNOTATION_NODE_RESERVATION: "{"})
    result = node_cpus(node, [])
    assert isinstance(result, NodeCPUs)
    assert len(result.free) == 32
    assert result.notes[0].startswith("reserved CPUs ignored: ")


def test_cache_follows_the_pod_list() -> None:
    cache = CPUCache()
    node = topology_node()
    pods: list[dict[str, Any]] = []
    first = cache.node_cpus("node-1", node, pods)
    assert cache.node_cpus("node-1", node, list(pods)) is first
    pods.append(lsr_pod("a", cpuset="0"))
    second = cache.node_cpus("node-1", node, pods)
    assert isinstance(second, NodeCPUs)
    assert 0 not in second.free
